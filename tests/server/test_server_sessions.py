"""Sessions through a real server (uvicorn on a loopback port): sessions namespaced per token (one
token never sees, streams or writes another's: 404), each session its own turns and dialogue;
"tell me when a red square appears" posted as a turn is acknowledged at once and the session's
SSE stream (resumable with Last-Event-ID) and WebSocket carry the model's reply within TimeOK
of the square's appearance; "stop watching for that" ends a request; a read token may ask but
not watch (403); bounds answer 429; POST /api/ask keeps working."""
import asyncio
import json

import httpx
import pytest
import websockets

from support.server import ServerThread, SSEReader
from support.sessions import CFG, dialogue_shown, push, session_model
from vam_engine.engine import Engine
from vam_engine.llm import ScriptedLLM
from vam_engine.server import ServeOptions, TokenStore, create_app

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 240
APPEARS = 9.0


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("sessions")
    llm = ScriptedLLM(session_model())
    eng = Engine(root / "store", CFG, device="cpu", llm=llm)
    for cam in ("front", "yard"):
        push(eng, cam, 0.0, 2.0)
    ts = TokenStore(root / "store")
    tokens = {name: ts.create(scope, cams)[1] for name, scope, cams in (
        ("alice", "write", None), ("bob", "write", None), ("reader", "read", None), ("front", "write", ["front"]))}
    app = create_app(eng, ServeOptions(keepalive_s=1.0, max_sessions_per_token=3, max_session_streams=2))
    try:
        with ServerThread(app) as srv:
            yield eng, llm, srv, tokens
    finally:
        eng.close()


def auth(token):
    return {"Authorization": f"Bearer {token}"}


def _turn(c, name, text, token, **kw):
    return c.post(f"/api/sessions/{name}/turns", json={"text": text, **kw}, headers=auth(token))


def test_sessions_are_namespaced_per_token_with_their_own_turns_and_dialogue(served):
    eng, llm, srv, tok = served
    with httpx.Client(base_url=srv.url, timeout=30) as c:
        for who in ("alice", "bob"):
            r = c.post("/api/sessions", json={"id": "chat"}, headers=auth(tok[who]))
            assert r.status_code == 201 and r.json()["id"] == "chat" and r.json()["cameras"] is None
        made = c.post("/api/sessions", json={}, headers=auth(tok["alice"])).json()["id"]  # a name made up
        assert made.startswith("s_")
        assert c.post("/api/sessions", json={"id": "chat"}, headers=auth(tok["alice"])).status_code == 409
        asked = {("alice", "chat"): ["what colour is the wall?", "and the floor?"],
                 ("bob", "chat"): ["is anyone at the door?", "and the window?"],
                 ("alice", made): ["how many cars?", "and bikes?"]}
        for k in range(2):
            for (who, name), qs in asked.items():
                r = _turn(c, name, qs[k], tok[who])
                assert r.status_code == 200, r.text
                assert r.json()["kind"] == "answer" and r.json()["answer"]["text"] == f"answer to: {qs[k]}"
        for (who, name), qs in asked.items():  # each session's turns, and each follow-up saw only its own
            got = c.get(f"/api/sessions/{name}", headers=auth(tok[who])).json()
            assert [t["text"] for t in got["turns"] if t["role"] == "user"] == qs
            follow_up = [r for r in llm.sent if r.tag == "two_phase_coarse" and qs[1] in r.messages[-1].content[-1]]
            assert [dialogue_shown(r) for r in follow_up] == [[qs[0]]]
        assert [s["id"] for s in c.get("/api/sessions", headers=auth(tok["alice"])).json()["sessions"]] == ["chat", made]
        assert [s["id"] for s in c.get("/api/sessions", headers=auth(tok["bob"])).json()["sessions"]] == ["chat"]
        # another token's session does not exist for this one: reading, writing, streaming, ending
        bob = auth(tok["bob"])
        assert c.get(f"/api/sessions/{made}", headers=bob).status_code == 404
        assert _turn(c, made, "what now?", tok["bob"]).status_code == 404
        assert c.get(f"/api/sessions/{made}/stream", headers=bob).status_code == 404
        assert c.delete(f"/api/sessions/{made}", headers=bob).status_code == 404
        assert c.get("/api/sessions/nonexistent", headers=bob).status_code == 404
        assert c.get("/api/sessions/a%0Ab", headers=bob).status_code == 404
        assert c.delete("/api/sessions/chat", headers=bob).json() == {"ended": "chat", "was_open": True}
        assert c.get("/api/sessions", headers=bob).json()["sessions"] == []
        assert _turn(c, "chat", "still there?", tok["bob"]).status_code == 409  # ended
        assert len(c.get("/api/sessions/chat", headers=auth(tok["alice"])).json()["turns"]) == 4  # alice's is open


def test_tell_me_when_over_http_replies_on_the_stream_and_the_websocket(served):
    eng, llm, srv, tok = served
    h = auth(tok["alice"])
    with httpx.Client(base_url=srv.url, timeout=30) as c:
        assert c.post("/api/sessions", json={"id": "watcher", "cameras": ["yard"]}, headers=h).status_code == 201
        live = SSEReader(f"{srv.url}/api/sessions/watcher/stream", h, want=3, event="turn")
        live.start()
        assert live.ready.wait(10) and live.error is None
        r = _turn(c, "watcher", "Tell me when a red square appears.", tok["alice"])
        assert r.status_code == 200, r.text
        ack = r.json()
        assert ack["kind"] == "watch" and ack["intent"] == {"kind": "watch", "by": "model", "repeat": False,
                                                            "condition": "a red square appears", "note": None}
        assert ack["monitor"]["cameras"] == ["yard"] and "a red square appears" in ack["text"]
        assert [(t["role"], t["kind"]) for t in ack["turns"]] == [("user", "watch"), ("engine", "watch")]
        assert c.get("/api/alerts", headers=h).json()["alerts"] == []  # an acknowledgement is not an alert
        got = c.get("/api/sessions/watcher", headers=h).json()
        assert [w["condition"] for w in got["watches"]] == ["a red square appears"]
        assert _turn(c, "watcher", "what is on the front camera?", tok["alice"], cameras=["front"]).status_code == 409

        async def on_socket():
            async with websockets.connect(srv.url.replace("http", "ws") + "/api/ws") as ws:
                await ws.send(json.dumps({"type": "auth", "token": tok["alice"]}))
                assert json.loads(await ws.recv())["type"] == "hello"
                await ws.send(json.dumps({"type": "subscribe_session", "session": "nope"}))
                await ws.send(json.dumps({"type": "subscribe_session", "session": "watcher"}))
                msgs = []
                while not msgs or msgs[-1].get("type") != "session_subscribed":
                    m = json.loads(await asyncio.wait_for(ws.recv(), 20))
                    if m["type"] != "ping":
                        msgs.append(m)
                assert msgs[0] == {"type": "error", "status": 404, "detail": "no session 'nope'"}
                await asyncio.get_running_loop().run_in_executor(None, push, eng, "yard", 2.0, 14.0, APPEARS)
                while True:
                    m = json.loads(await asyncio.wait_for(ws.recv(), 20))
                    if m["type"] == "session_turn":
                        return m
        sent = asyncio.run(on_socket())
        live.join(20)
        assert live.error is None
        assert sent["session"] == "watcher" and sent["turn"]["kind"] == "reply"
        kinds = [(e["role"], e["kind"]) for _, e in live.events]
        assert kinds == [("user", "watch"), ("engine", "watch"), ("engine", "reply")]
        reply = live.events[-1][1]
        assert reply == sent["turn"] and int(live.events[-1][0]) == reply["turn_id"]
        assert -0.5 <= reply["t"] - APPEARS <= 2.0 and reply["text"].startswith("As you asked (Tell me when")
        (alert,) = c.get("/api/alerts", headers=h).json()["alerts"]
        assert reply["alert_id"] == alert["alert_id"] and reply["alert_frames"] == alert["frames"]
        assert c.get(reply["alert_frames"][-1], headers=h).headers["content-type"] == "image/jpeg"
        # a stream resumed after the acknowledgement gets the reply from the store
        again = SSEReader(f"{srv.url}/api/sessions/watcher/stream", {**h, "Last-Event-ID": str(ack["turns"][1]["turn_id"])},
                          want=1, event="turn")
        again.start()
        again.join(20)
        assert again.error is None and [e["turn_id"] for _, e in again.events] == [reply["turn_id"]]
        # ask again, then stop watching: no more replies
        assert _turn(c, "watcher", "let me know when a red square appears", tok["alice"]).json()["kind"] == "watch"
        stop = _turn(c, "watcher", "stop watching for that", tok["alice"]).json()
        assert stop["kind"] == "cancel" and len(stop["ended"]) == 1 and stop["text"].startswith("OK, I stopped")
        push(eng, "yard", 14.0, 20.0, 14.0)
        turns = c.get("/api/sessions/watcher", headers=h).json()["turns"]
        assert [t["kind"] for t in turns if t["role"] == "engine"] == ["watch", "reply", "watch", "cancel"]
        assert len(c.get("/api/alerts", headers=h).json()["alerts"]) == 1


def test_a_read_token_may_ask_but_not_watch_and_bounds_answer_429(served):
    eng, llm, srv, tok = served
    read = auth(tok["reader"])
    with httpx.Client(base_url=srv.url, timeout=30) as c:
        assert c.post("/api/sessions", json={"id": "r"}, headers=read).status_code == 201
        assert _turn(c, "r", "what is here?", tok["reader"]).json()["kind"] == "answer"
        r = _turn(c, "r", "tell me when a red square appears", tok["reader"])
        assert r.status_code == 403 and "needs a write token" in r.json()["detail"]
        assert c.get("/api/sessions/r", headers=read).json()["watches"] == []
        # a camera-limited token: its sessions are bound within its cameras
        front = auth(tok["front"])
        assert c.post("/api/sessions", json={"id": "f", "cameras": ["yard"]}, headers=front).status_code == 403
        s = c.post("/api/sessions", json={"id": "f"}, headers=front).json()
        assert s["cameras"] == ["front"]
        w = _turn(c, "f", "tell me when a red square appears", tok["front"]).json()
        assert w["monitor"]["cameras"] == ["front"]
        # bounds: open sessions per token, session streams at once, standing requests per session
        for k in range(2):
            assert c.post("/api/sessions", json={"id": f"x{k}"}, headers=read).status_code == 201
        r = c.post("/api/sessions", json={"id": "x9"}, headers=read)
        assert r.status_code == 429 and "at most 3 per token" in r.json()["detail"]
        assert c.delete("/api/sessions/x0", headers=read).status_code == 200
        assert c.post("/api/sessions", json={"id": "x9"}, headers=read).status_code == 201  # an ended one frees
        with c.stream("GET", "/api/sessions/r/stream", headers=read) as s1, \
                c.stream("GET", "/api/sessions/x1/stream", headers=read) as s2:
            assert s1.status_code == s2.status_code == 200
            r = c.get("/api/sessions/x9/stream", headers=read)
            assert r.status_code == 429 and "session streams" in r.json()["detail"]
        for k in range(3):
            _turn(c, "f", f"tell me when thing {k} appears", tok["front"])
        r = _turn(c, "f", "tell me when a dog appears", tok["front"])
        assert r.status_code == 429 and "at most 4" in r.json()["detail"]


def test_post_ask_keeps_working_beside_sessions(served):
    eng, llm, srv, tok = served
    with httpx.Client(base_url=srv.url, timeout=30) as c:
        r = c.post("/api/ask", json={"question": "what is here now?"}, headers=auth(tok["bob"]))
        assert r.status_code == 200 and r.json()["text"] == "answer to: what is here now?"
        # the token's own question history is not one of its listed sessions
        assert all(s["id"] for s in c.get("/api/sessions", headers=auth(tok["bob"])).json()["sessions"])
