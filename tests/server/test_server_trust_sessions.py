"""What one token's sessions, standing requests, revocation and pools let it do to another, over
HTTP: a session's "tell me when ..." is its token's alone (other tokens neither list it, nor see
its alerts, nor end it); revoking a token stops what it started at once; every pool the server
holds for all tokens has a per-token share (429 naming it); ended sessions are kept by a
retention rule."""
import asyncio
import contextlib
import json
import threading
import time

import httpx
import pytest
import websockets

from support.server import ServerThread, SSEReader
from support.sessions import CFG, push, session_model
from vam_engine.engine import Engine
from vam_engine.llm import ScriptedLLM
from vam_engine.server import TokenStore

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 240


def auth(token):
    return {"Authorization": f"Bearer {token}"}


def _engine(path, **cfg):
    eng = Engine(path, {**CFG, **cfg}, device="cpu", llm=ScriptedLLM(session_model()))
    for cam in ("front", "yard"):
        push(eng, cam, 0.0, 2.0)
    return eng


def _tokens(path, *specs):
    ts = TokenStore(path)
    out = {}
    for name, scope, cams in specs:
        info, token = ts.create(scope, cams)
        out[name] = (info.token_id, token)
    return ts, out


def _turn(c, name, text, token, **kw):
    return c.post(f"/api/sessions/{name}/turns", json={"text": text, **kw}, headers=auth(token))


def test_a_sessions_standing_request_belongs_to_its_token(tmp_path, client_for):
    eng = _engine(tmp_path / "store")
    try:
        _, tok = _tokens(tmp_path / "tokens", ("alice", "write", None), ("bob", "write", None),
                         ("admin", "admin", None), ("yard", "write", ["yard"]))
        alice, bob, admin = (auth(tok[k][1]) for k in ("alice", "bob", "admin"))
        c = client_for(eng, keepalive_s=1.0)
        assert c.post("/api/sessions", json={"id": "w", "cameras": ["yard"]}, headers=alice).status_code == 201
        ack = _turn(c, "w", "Tell me when a red square appears.", tok["alice"][1]).json()
        watch_id = ack["monitor"]["monitor_id"]
        plain = c.post("/api/monitors", json={"condition": "a red square", "cameras": ["yard"]}, headers=bob).json()
        plain_id = plain["monitor_id"]
        listed = {k: [m["monitor_id"] for m in c.get("/api/monitors", headers=h).json()["monitors"]]
                  for k, h in (("alice", alice), ("bob", bob), ("admin", admin), ("yard", auth(tok["yard"][1])))}
        assert sorted(listed["alice"]) == sorted([watch_id, plain_id])
        assert listed["bob"] == listed["admin"] == listed["yard"] == [plain_id]
        for h in (bob, admin, auth(tok["yard"][1])):  # as if it did not exist
            r = c.delete(f"/api/monitors/{watch_id}", headers=h)
            assert r.status_code == 404 and watch_id in r.json()["detail"]
        push(eng, "yard", 2.0, 8.0, 4.0)
        mine = c.get("/api/alerts", headers=alice).json()["alerts"]
        assert sorted(a["monitor_id"] for a in mine) == sorted([watch_id, plain_id])
        theirs = c.get("/api/alerts", headers=bob).json()
        assert [a["monitor_id"] for a in theirs["alerts"]] == [plain_id]
        assert theirs["next_since"] == max(a["alert_id"] for a in mine)  # paging goes past what it hides
        hidden = next(a for a in mine if a["monitor_id"] == watch_id)
        assert c.get(hidden["frames"][0], headers=alice).status_code == 200
        assert c.get(hidden["frames"][0], headers=bob).status_code == 404
        # the reply reached that session only
        turns = c.get("/api/sessions/w", headers=alice).json()["turns"]
        assert [t["kind"] for t in turns if t["role"] == "engine"] == ["watch", "reply"]
        assert turns[-1]["alert_id"] == hidden["alert_id"]
        # the owner ends it
        assert c.delete(f"/api/monitors/{watch_id}", headers=alice).status_code in (200, 404)  # a once watch ended
    finally:
        eng.close()


def test_alert_streams_of_other_tokens_never_carry_a_sessions_alerts(tmp_path):
    from vam_engine.server import ServeOptions, create_app

    eng = _engine(tmp_path / "store")
    try:
        _, tok = _tokens(tmp_path / "store", ("alice", "write", None), ("bob", "write", None))
        alice, bob = auth(tok["alice"][1]), auth(tok["bob"][1])
        app = create_app(eng, ServeOptions(keepalive_s=0.5))
        with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
            assert c.post("/api/sessions", json={"id": "w", "cameras": ["yard"]}, headers=alice).status_code == 201
            watch_id = _turn(c, "w", "tell me when a red square appears", tok["alice"][1]).json()["monitor"]["monitor_id"]
            # on another camera, fired later: the two alerts reach the hub one after the other
            plain_id = c.post("/api/monitors", json={"condition": "red", "cameras": ["front"], "mode": "once"},
                              headers=bob).json()["monitor_id"]
            live = {k: SSEReader(f"{srv.url}/api/alerts/stream", h, want=2) for k, h in (("alice", alice), ("bob", bob))}
            for r in live.values():
                r.start()
                assert r.ready.wait(10) and r.error is None
            push(eng, "yard", 2.0, 8.0, 4.0)
            push(eng, "front", 2.0, 8.0, 4.0)
            live["alice"].join(20)
            live["bob"].join(3)  # a second alert never comes
            assert sorted(e["monitor_id"] for _, e in live["alice"].events) == sorted([watch_id, plain_id])
            assert [e["monitor_id"] for _, e in live["bob"].events] == [plain_id]
            # and a stream that rereads the store from the start hides it too
            again = SSEReader(f"{srv.url}/api/alerts/stream?since=0", bob, want=2)
            again.start()
            again.join(3)
            assert [e["monitor_id"] for _, e in again.events] == [plain_id]
    finally:
        eng.close()


class _HeldAsks:
    """The engine, but a question containing "hold" waits until ``go`` is set (so questions
    stay in flight while the test counts them)."""

    def __init__(self, eng):
        self._eng = eng
        self.go = threading.Event()
        self.inside = threading.Semaphore(0)

    def __getattr__(self, name):
        return getattr(self._eng, name)

    def ask(self, question, **kw):
        if "hold" in question:
            self.inside.release()
            assert self.go.wait(60)
        return self._eng.ask(question, **kw)


def test_every_pool_has_a_per_token_share_and_answers_429_naming_it(tmp_path):
    from vam_engine.server import ServeOptions, create_app

    eng = _engine(tmp_path / "store", monitors={"max_active": 4})
    held = _HeldAsks(eng)
    try:
        _, tok = _tokens(tmp_path / "store", ("a", "write", None), ("b", "write", None), ("c", "write", None))
        a, b, cc = (auth(tok[k][1]) for k in ("a", "b", "c"))
        opts = ServeOptions(keepalive_s=1.0, max_monitors_per_token=2, max_session_streams=4,
                            max_session_streams_per_token=2, max_asks=4, max_asks_per_token=2,
                            max_streams_per_token=2)
        with ServerThread(create_app(held, opts)) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
            # monitors: a token's own and its sessions' standing requests share one allowance
            assert c.post("/api/monitors", json={"condition": "a cat"}, headers=a).status_code == 201
            assert c.post("/api/sessions", json={"id": "s"}, headers=a).status_code == 201
            assert _turn(c, "s", "tell me when a dog appears", tok["a"][1]).json()["kind"] == "watch"
            r = _turn(c, "s", "tell me when a bird appears", tok["a"][1])
            assert r.status_code == 429 and "at most 2 per token (service.monitors_per_token)" in r.json()["detail"]
            r = c.post("/api/monitors", json={"condition": "a fox"}, headers=a)
            assert r.status_code == 429 and "service.monitors_per_token" in r.json()["detail"]
            for cond in ("a cow", "a hen"):  # another token has its own share
                assert c.post("/api/monitors", json={"condition": cond}, headers=b).status_code == 201
            r = c.post("/api/monitors", json={"condition": "a pig"}, headers=cc)  # the engine's pool is full
            assert r.status_code == 429 and "monitors.max_active" in r.json()["detail"]
            # session streams
            assert c.post("/api/sessions", json={"id": "t"}, headers=b).status_code == 201
            with c.stream("GET", "/api/sessions/s/stream", headers=a) as s1, \
                    c.stream("GET", "/api/sessions/s/stream", headers=a) as s2:
                assert s1.status_code == s2.status_code == 200
                r = c.get("/api/sessions/s/stream", headers=a)
                assert r.status_code == 429 and "service.session_streams_per_token" in r.json()["detail"]
                with c.stream("GET", "/api/sessions/t/stream", headers=b) as s3:
                    assert s3.status_code == 200
            # alert streams and WebSockets: one share of open connections together
            with c.stream("GET", "/api/alerts/stream", headers=a) as s1:
                assert s1.status_code == 200

                async def sockets():
                    url = srv.url.replace("http", "ws") + "/api/ws"
                    async with websockets.connect(url, additional_headers=a) as second:
                        assert json.loads(await second.recv())["type"] == "hello"
                        async with websockets.connect(url, additional_headers=a) as third:
                            refused = json.loads(await third.recv())
                        sse = await asyncio.get_running_loop().run_in_executor(
                            None, lambda: c.get("/api/alerts/stream", headers=a))
                        async with websockets.connect(url, additional_headers=b) as other:
                            return refused, sse, json.loads(await other.recv())["type"]

                refused, sse, other = asyncio.run(sockets())
                assert refused["status"] == 429 and "service.streams_per_token" in refused["detail"]
                assert sse.status_code == 429 and "service.streams_per_token" in sse.json()["detail"]
                assert other == "hello"  # another token's share
            # questions answered at once
            codes = []

            def ask(h, q):
                codes.append(c.post("/api/ask", json={"question": q, "mode": "two_phase"}, headers=h).status_code)

            waiting = [threading.Thread(target=ask, args=(a, f"hold {k}?")) for k in range(2)]
            for t in waiting:
                t.start()
            for _ in waiting:
                assert held.inside.acquire(timeout=30)
            r = c.post("/api/ask", json={"question": "one more?", "mode": "two_phase"}, headers=a)
            assert r.status_code == 429 and "service.asks_per_token" in r.json()["detail"]
            r = c.post("/api/ask", json={"question": "what is here?", "mode": "two_phase"}, headers=b)
            assert r.status_code == 200  # the server's pool has room for another token
            held.go.set()
            for t in waiting:
                t.join(30)
            assert codes == [200, 200]
            assert c.post("/api/ask", json={"question": "now?", "mode": "two_phase"}, headers=a).status_code == 200
    finally:
        held.go.set()
        eng.close()


def _until(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def test_revoking_a_token_ends_its_monitors_standing_requests_and_streams_at_once(tmp_path):
    from vam_engine.server import ServeOptions, create_app

    eng = _engine(tmp_path / "store")
    try:
        ts, tok = _tokens(tmp_path / "store", ("alice", "write", None), ("admin", "admin", None))
        (alice_id, alice_token), admin = tok["alice"], auth(tok["admin"][1])
        alice = auth(alice_token)
        # keepalives far apart: a stream that ends now ended because of the revocation
        app = create_app(eng, ServeOptions(keepalive_s=60.0, token_poll_s=0.2))
        with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
            assert c.post("/api/sessions", json={"id": "w", "cameras": ["yard"]}, headers=alice).status_code == 201
            watch = _turn(c, "w", "tell me when a red square appears", alice_token).json()["monitor"]["monitor_id"]
            plain = c.post("/api/monitors", json={"condition": "red", "cameras": ["yard"], "mode": "repeat"},
                           headers=alice).json()["monitor_id"]
            streams = [SSEReader(f"{srv.url}/api/sessions/w/stream", alice, want=1, event="turn"),
                       SSEReader(f"{srv.url}/api/alerts/stream", alice, want=1)]
            for r in streams:
                r.start()
                assert r.ready.wait(10) and r.error is None

            async def socket_closes():
                async with websockets.connect(srv.url.replace("http", "ws") + "/api/ws") as ws:
                    await ws.send(json.dumps({"type": "auth", "token": alice_token}))
                    assert json.loads(await ws.recv())["type"] == "hello"
                    revoked = time.monotonic()
                    assert ts.revoke(alice_id)  # as `vam-engine token revoke` does, beside the running server
                    msgs = []
                    with contextlib.suppress(websockets.ConnectionClosed):
                        while True:
                            msgs.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
                    return time.monotonic() - revoked, msgs

            took, msgs = asyncio.run(socket_closes())
            assert took < 5 and msgs[-1] == {"type": "error", "status": 401, "detail": "this token was revoked"}
            for r in streams:  # the streams end too, long before a keepalive
                r.join(5)
                assert not r.is_alive() and r.events == []
            _until(lambda: not eng.monitors())
            ended = {m["monitor_id"]: m["active"] for m in
                     c.get("/api/monitors", params={"include_ended": True}, headers=admin).json()["monitors"]}
            assert ended.get(plain) is False and watch not in ended  # (the session's is nobody else's)
            assert eng.monitors(include_ended=True) and not any(m.active for m in eng.monitors(include_ended=True))
            push(eng, "yard", 2.0, 8.0, 4.0)  # the red square: nothing is written for the revoked token
            assert c.get("/api/alerts", headers=admin).json()["alerts"] == []
            assert eng.alerts() == []
            sess = eng.session(f"{alice_id}/w")
            assert not sess.open and [t.kind for t in sess.turns if t.role == "engine"] == ["watch"]
            assert c.get("/api/sessions/w", headers=alice).status_code == 401
    finally:
        eng.close()


def test_ended_sessions_are_deleted_with_their_turns_by_count_per_token_and_by_age(tmp_path, client_for):
    eng = _engine(tmp_path / "store", sessions={"ended_per_owner": 2, "ended_max_age_s": 3600.0})
    try:
        _, tok = _tokens(tmp_path / "tokens", ("a", "read", None), ("b", "read", None))
        (a_id, a_token), (b_id, b_token) = tok["a"], tok["b"]
        a, b = auth(a_token), auth(b_token)
        c = client_for(eng)
        assert c.post("/api/sessions", json={"id": "b0"}, headers=b).status_code == 201
        assert _turn(c, "b0", "what is here?", b_token).status_code == 200
        assert c.delete("/api/sessions/b0", headers=b).status_code == 200
        for k in range(5):
            assert c.post("/api/sessions", json={"id": f"s{k}"}, headers=a).status_code == 201
            assert _turn(c, f"s{k}", f"what is here, {k}?", a_token).status_code == 200
            assert eng.wait_for_answers(30)  # its question history is written before it ends
            assert c.delete(f"/api/sessions/s{k}", headers=a).status_code == 200
        listed = c.get("/api/sessions", params={"include_ended": True}, headers=a).json()["sessions"]
        assert [s["id"] for s in listed] == ["s3", "s4"]  # the newest two ended ones
        assert [s["id"] for s in c.get("/api/sessions", params={"include_ended": True},
                                       headers=b).json()["sessions"]] == ["b0"]  # another token's share
        for k in range(3):  # gone with their turns and their question history
            assert c.get(f"/api/sessions/s{k}", headers=a).status_code == 404
            assert eng.store.sessions.turns(f"{a_id}/s{k}") == []
        assert len(eng.store.sessions.turns(f"{a_id}/s4")) == 2
        rows = eng.store.db.conn().execute("SELECT session FROM qa_history").fetchall()
        assert not any(r[0].startswith(f"{a_id}/s") and r[0][-1] in "012" for r in rows)
        assert any(r[0] == f"{a_id}/s4" for r in rows)
    finally:
        eng.close()
    old = _engine(tmp_path / "aged", sessions={"ended_max_age_s": 0.5})
    try:
        _, tok = _tokens(tmp_path / "tokens2", ("a", "read", None))
        a = auth(tok["a"][1])
        c = client_for(old, tokens_dir=str(tmp_path / "tokens2"))
        assert c.post("/api/sessions", json={"id": "first"}, headers=a).status_code == 201
        assert c.delete("/api/sessions/first", headers=a).status_code == 200
        time.sleep(0.6)
        assert c.post("/api/sessions", json={"id": "second"}, headers=a).status_code == 201
        listed = c.get("/api/sessions", params={"include_ended": True}, headers=a).json()["sessions"]
        assert [s["id"] for s in listed] == ["second"]
    finally:
        old.close()


def test_a_token_has_a_share_of_each_handler_lane(tmp_path):
    from vam_engine.server import ServeOptions, create_app
    from vam_engine.server.backend import LocalBackend

    class HeldPages(LocalBackend):
        """Pages of camera "front" wait until ``go`` is set (requests held in the lane)."""
        go, inside = threading.Event(), threading.Semaphore(0)

        def page(self, kind, **kw):
            if kw.get("cameras") == ["front"]:
                self.inside.release()
                assert self.go.wait(60)
            return super().page(kind, **kw)

    eng = _engine(tmp_path / "store")
    backend = HeldPages(eng)
    try:
        _, tok = _tokens(tmp_path / "store", ("a", "read", None), ("b", "read", None))
        a, b = auth(tok["a"][1]), auth(tok["b"][1])
        opts = ServeOptions(max_lane_requests_per_token=2)
        with ServerThread(create_app(eng, opts, backend=backend)) as srv, \
                httpx.Client(base_url=srv.url, timeout=30) as c:
            codes = []

            def page(h, cam):
                codes.append(c.get("/api/moments", params={"camera": cam}, headers=h).status_code)

            held = [threading.Thread(target=page, args=(a, "front")) for _ in range(2)]
            for t in held:
                t.start()
            for _ in held:
                assert backend.inside.acquire(timeout=30)
            r = c.get("/api/moments", params={"camera": "yard"}, headers=a)
            assert r.status_code == 429 and "service.lane_requests_per_token" in r.json()["detail"]
            other = threading.Thread(target=page, args=(b, "yard"))  # waits its turn, is not refused
            other.start()
            backend.go.set()
            for t in held + [other]:
                t.join(30)
            assert codes == [200, 200, 200]
    finally:
        HeldPages.go.set()
        eng.close()


def test_a_token_revoked_while_no_server_ran_is_ended_when_one_starts(tmp_path, client_for):
    eng = _engine(tmp_path / "store")
    try:
        ts, tok = _tokens(tmp_path / "tokens", ("alice", "write", None), ("bob", "write", None))
        (alice_id, alice_token), bob = tok["alice"], auth(tok["bob"][1])
        alice = auth(alice_token)
        c = client_for(eng)
        assert c.post("/api/sessions", json={"id": "w"}, headers=alice).status_code == 201
        watch = _turn(c, "w", "tell me when a red square appears", alice_token).json()["monitor"]["monitor_id"]
        plain = c.post("/api/monitors", json={"condition": "red", "mode": "repeat"}, headers=alice).json()["monitor_id"]
        kept = c.post("/api/monitors", json={"condition": "blue", "mode": "repeat"}, headers=bob).json()["monitor_id"]
        c.__exit__(None, None, None)  # the server stops; the token is revoked while none runs
        assert ts.revoke(alice_id)
        again = client_for(eng, token_poll_s=0.2)
        _until(lambda: {m.monitor_id for m in eng.monitors()} == {kept})
        assert not eng.session(f"{alice_id}/w").open
        assert [m["monitor_id"] for m in again.get("/api/monitors", headers=bob).json()["monitors"]] == [kept]
        assert {watch, plain} <= {m.monitor_id for m in eng.monitors(include_ended=True)}
    finally:
        eng.close()


def test_over_mcp_too_a_sessions_standing_request_is_its_tokens_alone(tmp_path):
    pytest.importorskip("mcp")
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from vam_engine.server import ServeOptions, create_app

    eng = _engine(tmp_path / "store")
    try:
        _, tok = _tokens(tmp_path / "store", ("alice", "write", None), ("bob", "write", None))
        with ServerThread(create_app(eng, ServeOptions(mcp=True, max_monitors_per_token=2))) as srv, \
                httpx.Client(base_url=srv.url, timeout=30) as c:
            alice_token = tok["alice"][1]
            assert c.post("/api/sessions", json={"id": "w"}, headers=auth(alice_token)).status_code == 201
            watch = _turn(c, "w", "tell me when a red square appears", alice_token).json()["monitor"]["monitor_id"]

            async def tools(token, calls):
                async with httpx2.AsyncClient(headers=auth(token), timeout=60) as http, \
                        Client(streamable_http_client(srv.url + "/mcp", http_client=http)) as client:
                    return [await client.call_tool(name, args) for name, args in calls]

            listed, ended = asyncio.run(tools(tok["bob"][1], [("monitors", {}), ("unwatch", {"monitor_id": watch})]))
            assert json.loads(listed.content[0].text)["monitors"] == []
            assert ended.is_error and "no monitor" in ended.content[0].text
            mine, second, third = asyncio.run(tools(alice_token, [("monitors", {}), ("watch", {"condition": "a cat"}),
                                                                  ("watch", {"condition": "a dog"})]))
            assert [m["monitor_id"] for m in json.loads(mine.content[0].text)["monitors"]] == [watch]
            assert not second.is_error  # the session's watch and this one: the token's share of 2
            assert third.is_error and "service.monitors_per_token" in third.content[0].text
            assert any(m.monitor_id == watch and m.active for m in eng.monitors())
    finally:
        eng.close()


class _HeldClips:
    """The engine, but a clip waits until ``go`` is set (encodes in flight while the test counts)."""

    def __init__(self, eng):
        self._eng = eng
        self.go, self.inside = threading.Event(), threading.Semaphore(0)

    def __getattr__(self, name):
        return getattr(self._eng, name)

    def clip(self, camera, t0, t1):
        self.inside.release()
        assert self.go.wait(60)
        return self._eng.clip(camera, t0, t1)


def test_a_token_has_a_share_of_the_clip_encodes(tmp_path):
    from vam_engine.server import ServeOptions, create_app

    eng = _engine(tmp_path / "store")
    held = _HeldClips(eng)
    try:
        _, tok = _tokens(tmp_path / "store", ("a", "read", None), ("b", "read", None))
        a, b = auth(tok["a"][1]), auth(tok["b"][1])
        with ServerThread(create_app(held, ServeOptions(max_clips_per_token=1))) as srv, \
                httpx.Client(base_url=srv.url, timeout=30) as c:
            codes = []

            def clip(h):
                codes.append(c.get("/api/clips", params={"camera": "front", "t0": 0, "t1": 1.5}, headers=h).status_code)

            first = threading.Thread(target=clip, args=(a,))
            first.start()
            assert held.inside.acquire(timeout=30)
            r = c.get("/api/clips", params={"camera": "front", "t0": 0, "t1": 1.5}, headers=a)
            assert r.status_code == 429 and "service.clips_per_token" in r.json()["detail"]
            other = threading.Thread(target=clip, args=(b,))  # another token's share
            other.start()
            assert held.inside.acquire(timeout=30)
            held.go.set()
            for t in (first, other):
                t.join(60)
            assert len(codes) == 2 and 429 not in codes  # both encoded (whatever the store has to cut)
    finally:
        held.go.set()
        eng.close()
