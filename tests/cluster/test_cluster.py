"""Camera shards on a local Ray cluster (vam_engine/cluster): two shards behind the router give
what one engine holding the same frames gives (search, moments, as_of, camera scope), alerts
from both shards arrive on one stream, a killed shard is restarted by Ray with its data, and a
query while a shard is down names the cameras it cannot see.

One Ray (2 CPUs, loopback) and one pair of shards for the module; the plain engine gets the
very same pushed frames. Frames: a seeded random pattern per camera that changes every few
seconds (so the gates keep several moments per camera), plus a bright square in the top-left
corner during the alert test's event span (the scripted judge of tests/support/monitors.py).
"""
import json
import os
import re
import signal
import sys
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the cluster tests need ray (pip install vam-engine[cluster])")

import support.scripted  # noqa: E402
from support.scripted import images, scripted_llm, texts, verdict  # noqa: E402
from support.waiting import wait_for  # noqa: E402
from vam_engine import Engine  # noqa: E402
from vam_engine.cluster import ShardDown, connect, split_id  # noqa: E402
from vam_engine.errors import VamError  # noqa: E402

H, W = 48, 64
CFG = {"ingest": {"fps": 1.0}, "writer": {"enabled": False}, "retention": {"enabled": False}}
CAMS = ["cam-a", "cam-b", "cam-c", "cam-d"]  # placed alternately: a, c on shard-0; b, d on shard-1
T_END = 12.0


def frame(cam: str, t: float, event: bool = False) -> np.ndarray:
    seed = (CAMS.index(cam) if cam in CAMS else 9) * 1000 + int(t // 3)  # a new view every 3 s
    f = np.random.default_rng(seed).integers(0, 255, (H, W, 3), dtype=np.uint8)
    if event:
        f[4:20, 4:24] = 250
    return f


def _monitor_verdict(req) -> str:
    match = bool(images(req)[-1].array()[4:20, 4:24].mean() > 240)  # the bright square
    return verdict(match, 0.9, "a bright square" if match else "an empty scene", "the top-left corner")


def make_llm():
    """The shards' model: a monitor judge (made on each shard from this function)."""
    return scripted_llm({"monitor": _monitor_verdict}, default="{}")


def _inspect(req) -> str:
    times = [t for t in texts(req) if t.startswith("t=")]
    return "NOTE " + " ".join(f"{t}:{img.array().mean():.3f}" for t, img in zip(times, images(req))) + " END"


def _plan(req) -> str:
    notes = [t[t.index("NOTE "):t.index(" END")] for t in texts(req) if "NOTE " in t and " END" in t]
    if not notes:
        return json.dumps({"action": "inspect", "prompt": "what is there", "max_frames": 16,
                           "time_range": {"start": 0.0, "end": 12.0}, "thought": "look"})
    return json.dumps({"action": "answer", "response": notes[0], "thought": "done"})


def _asker():
    """The agentic loop, scripted: route to the planner, inspect the first 12 s of every camera in
    view, answer with what the inspector saw (each frame's time and mean level: equal answers
    mean equal frames were shown)."""
    return scripted_llm({"router": {"type": "tool", "name": "retrieve", "args": {"question": "what is there"}},
                         "inspector": _inspect, "planner": _plan}, default="{}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the shards unpickle make_llm
    ray.cloudpickle.register_pickle_by_value(support.scripted)  # and what it uses from tests/support
    ray.init(num_cpus=2, include_dashboard=False, namespace="vam_engine", object_store_memory=80 << 20,
             log_to_driver=False, _node_ip_address="127.0.0.1")
    root = tmp_path_factory.mktemp("cluster")
    plain = Engine(tmp_path_factory.mktemp("plain"), CFG, device="cpu")
    router = connect(None, root=root, shards=2, config=CFG, llm_factory=make_llm, device="cpu",
                     llm=_asker())
    for cam in CAMS:
        for k in range(int(T_END * 2)):
            t = k / 2
            f, pose = frame(cam, t), (t, float(CAMS.index(cam)), 0.0, 0.0)  # camera i drives along y = i
            plain.push(cam, f, t, pose=pose)
            router.push(cam, f, t, pose=pose)
        plain.end_push(cam)
        router.end_push(cam)
    yield router, plain, root
    router.close()
    plain.close()
    router.shutdown_shards()
    ray.shutdown()


def key(ev):
    return (ev.camera_id, ev.t_start, ev.t_end, ev.source, len(ev.moment_ids))


def assert_same(got, want):
    assert [key(e) for e in got.evidence] == [key(e) for e in want.evidence]
    for g, w in zip(got.evidence, want.evidence):
        assert g.score == pytest.approx(w.score, abs=1e-12)
        assert g.similarity == pytest.approx(w.similarity, abs=1e-6)
        assert (g.relevance is None) == (w.relevance is None)
        if w.relevance is not None:
            assert g.relevance == pytest.approx(w.relevance, abs=1e-6)


def test_cameras_are_placed_on_the_least_loaded_shard(cluster):
    router, _, root = cluster
    placed = router.catalogue.cameras()
    assert placed == {"cam-a": "shard-0", "cam-b": "shard-1", "cam-c": "shard-0", "cam-d": "shard-1"}
    # durable: a second router over the same root (a restart) finds the same placement and shards
    again = connect(None, root=root, config=CFG, llm_factory=make_llm, device="cpu")
    assert again.catalogue.cameras() == placed and again.shard_names() == ["shard-0", "shard-1"]
    assert [m.moment_id for m in again.moments()] == [m.moment_id for m in router.moments()]  # the same shards
    again.close()
    info = router.info()
    assert [s.alive for s in info.shards] == [True, True]
    assert {c for s in info.shards for c in s.status.cameras} == set(CAMS)


def test_search_and_moments_equal_one_engine(cluster):
    router, plain, _ = cluster
    want_m = plain.moments()
    got_m = router.moments()
    assert len(want_m) > 8 and not got_m.missing_cameras
    assert [(m.camera_id, m.t_rel, m.frame_path is not None) for m in got_m] == \
        [(m.camera_id, m.t_rel, True) for m in want_m]
    assert {router.locate(m.moment_id)[0] for m in got_m} == {"shard-0", "shard-1"}
    for cam, t in (("cam-b", 4.0), ("cam-c", 7.0)):
        q = frame(cam, t)
        want = plain.search(image=q, top_k=6)
        got = router.search(image=q, top_k=6)
        assert_same(got, want)
        assert got.evidence[0].camera_id == cam and not got.missing_cameras
    # every source, the labels filter and the place filters, as on one engine
    q = frame("cam-b", 4.0)
    every = ("frame", "event", "summary", "ocr", "object", "speech")
    assert_same(router.search(image=q, top_k=6, sources=every), plain.search(image=q, top_k=6, sources=every))
    assert_same(router.search(image=q, top_k=6, labels=["cat"]), plain.search(image=q, top_k=6, labels=["cat"]))
    there = dict(region=(0.0, 2.5, 20.0, 3.5))  # cam-d's road only
    got = router.search(image=q, top_k=6, **there)
    assert_same(got, plain.search(image=q, top_k=6, **there))
    assert got.evidence and {e.camera_id for e in got.evidence} == {"cam-d"}
    # the frame of a hit comes back by its cluster id, from its shard
    hit = router.search(image=frame("cam-d", 1.0), top_k=1).evidence[0]
    jpeg = router.frame(hit.moment_ids[0])
    assert jpeg[:2] == b"\xff\xd8"


def test_as_of_and_camera_scope_hold_across_shards(cluster):
    router, plain, _ = cluster
    q = frame("cam-a", 10.0)
    for kw in ({"as_of": 5.0}, {"cameras": ["cam-b", "cam-c"]}, {"cameras": ["cam-d"], "as_of": 8.0},
               {"time_range": (2.0, 9.0), "cameras": ["cam-a", "cam-b"]}):
        got, want = router.search(image=q, top_k=5, **kw), plain.search(image=q, top_k=5, **kw)
        assert_same(got, want)
        if "as_of" in kw:
            assert all(e.t_end <= kw["as_of"] for e in got.evidence)
        if "cameras" in kw:
            allowed = {kw["cameras"]} if isinstance(kw["cameras"], str) else set(kw["cameras"])
            assert {e.camera_id for e in got.evidence} <= allowed and got.evidence
    got = router.moments("cam-b", 2.0, 8.0)
    assert [(m.camera_id, m.t_rel) for m in got] == [(m.camera_id, m.t_rel) for m in plain.moments("cam-b", 2.0, 8.0)]


def test_ask_through_the_router_equals_one_engine(cluster, tmp_path):
    router, plain, _ = cluster
    with Engine(plain.store.root, CFG, device="cpu", llm=_asker()) as asker:  # a reader of it
        for kw in ({}, {"as_of": 5.0}, {"camera": ["cam-b", "cam-c"]}):
            want = asker.ask("what is there?", mode="agentic", **kw)
            got = router.ask("what is there?", mode="agentic", **kw)
            assert got.text == want.text and got.text.startswith("NOTE t=") and got.found == want.found
            assert len(got.text.split()) > 6, got.text  # frames of several cameras, from both shards
            assert [key(e) for e in got.evidence] == [key(e) for e in want.evidence]
            assert got.missing_cameras == ()
            if "as_of" in kw:
                assert max(float(x.split(":")[0][2:-1]) for x in got.text[5:].split()) <= 5.0
        # as if each shard's store sat on its node's own disk: every frame the model sees is fetched
        router.frame_cache.always_fetch = True
        try:
            want = asker.ask("what is there?", mode="agentic", camera=["cam-a", "cam-b"])
            got = router.ask("what is there?", mode="agentic", camera=["cam-a", "cam-b"])
        finally:
            router.frame_cache.always_fetch = False
        assert got.text == want.text and len(got.text.split()) > 6
        fetched = list(router.frame_cache.dir.glob("*.jpg"))
        assert {router.locate(int(p.stem))[0] for p in fetched} == {"shard-0", "shard-1"}
        assert router.wait_for_answers(30) and asker.wait_for_answers(30)
    # the router keeps its own QA history, per scope: a follow-up sees the earlier questions of its cameras
    assert len(router.router_store.qa.records()) == 4  # (asked before the present's test)
    assert len(router.router_store.qa.recent(10)) == 2  # the two about every camera
    assert len(router.router_store.qa.recent(10, cameras=["cam-a", "cam-b"])) == 1


def test_ask_at_the_router_sees_each_cameras_present_on_its_shard(cluster):
    from vam_engine.cluster.present import FanoutPresent

    router, plain, _ = cluster
    present = FanoutPresent(router)
    for cam in ("cam-a", "cam-b"):  # one on each shard
        assert present.latest(cam) == plain.working.latest(cam) == T_END - 0.5
        now = T_END - 0.5
        assert present.covers(cam, now) == plain.working.covers(cam, now) is True
        for got, want in zip(present.window(cam, now), plain.working.window(cam, now)):
            assert [t for _, t in got] == [t for _, t in want] and len(got) > 2
            assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(got, want))
    ans = router.ask("what is there?", mode="two_phase", camera=["cam-a", "cam-b"])
    shown = [e.to_dict() for e in ans.trace]
    frames = next(e["detail"]["frames"] for e in shown if "frames" in e.get("detail", {}))
    assert {c: f["from"] for c, f in frames.items()} == {"cam-a": "buffer", "cam-b": "buffer"}
    assert router.wait_for_answers(30)


def _session_asker():
    """A session's questions, scripted: the turn classifier says question; the planner looks the
    question up on the web first, then inspects the first 12 s of every camera in view, then
    answers with a digest of what the inspector saw (equal answers: equal frames shown) and the
    earlier questions of the dialogue it was shown, citing the inspection and the web result."""
    def plan(req):
        state = req.messages[1].content[0]
        notes = [t[t.index("NOTE "):t.index(" END")] for t in texts(req) if "NOTE " in t and " END" in t]
        if notes:
            earlier = "; ".join(re.findall(r"^- at [0-9.]+s: (.*)$", state, re.MULTILINE)) or "nothing"
            return json.dumps({"action": "answer", "response": f"saw {_digest(notes[0])}; earlier: {earlier}",
                               "best_ref": {"turn_idx": 2, "result_idx": 0},
                               "tool_refs": [{"turn_idx": 1, "result_idx": 0}], "thought": "done"})
        if 'title "Scene guide"' in state:
            return _plan(req)
        return json.dumps({"action": "web_search", "query": "what do the cameras show", "thought": "look it up"})

    return scripted_llm({"turn_classifier": {"kind": "question", "condition": "", "target": None, "repeat": False},
                         "router": {"type": "tool", "name": "retrieve", "args": {"question": "what is there"}},
                         "inspector": _inspect, "planner": plan}, default="{}")


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode()).hexdigest()[:12]


def test_one_answering_body_gives_the_same_session_through_the_engine_the_service_and_the_router(cluster):
    """The same session questions through Engine.turn, the service's session turns and the
    router's ask in a session: the same answers, evidence, outside-tool citations and history,
    each follow-up shown the same earlier exchange within the dialogue budget (30 estimated
    tokens: the newest pair only). The router answers with the config's tools and budget."""
    import httpx

    from support.server import ServerThread
    from support.tool_server import ToolServer, results
    from vam_engine.server import create_app

    router, plain, root = cluster
    questions = ["what is there?", "and before that?", "anything else?"]
    with ToolServer() as srv:
        srv.web = lambda q: results(("Scene guide", "https://example.org/scene", f"{q}: patterns, every 3 s"))
        cfg = {**CFG, "tools": {"web_search": {"url": srv.url}}, "sessions": {"dialogue_tokens": 30}}
        with Engine(plain.store.root, cfg, device="cpu", llm=_session_asker()) as eng, \
                ServerThread(create_app(eng)) as web, httpx.Client(base_url=web.url, timeout=60) as c:
            at_router = connect(None, root=root, config=cfg, llm_factory=make_llm, device="cpu", llm=_session_asker())
            try:
                assert c.post("/api/sessions", json={"id": "web"}).status_code == 201
                got = {"engine": [], "http": [], "router": []}
                for q in questions:
                    a = eng.turn(q, session="direct", mode="agentic").answer
                    got["engine"].append((a.text, [key(e) for e in a.evidence], [x.url for x in a.tool_citations]))
                    r = c.post("/api/sessions/web/turns", json={"text": q, "mode": "agentic"})
                    assert r.status_code == 200, r.text
                    a = r.json()["answer"]
                    got["http"].append((a["text"], [_json_key(e) for e in a["evidence"]],
                                        [x["url"] for x in a["tool_citations"]]))
                    a = at_router.ask(q, mode="agentic", session="chat")
                    got["router"].append((a.text, [key(e) for e in a.evidence], [x.url for x in a.tool_citations]))
                assert got["http"] == got["engine"] and got["router"] == got["engine"]
                texts_ = [t for t, _, _ in got["engine"]]
                seen = texts_[0].split(";")[0]  # "saw <digest of the frames shown>": each question saw the same
                assert texts_ == [f"{seen}; earlier: nothing", f"{seen}; earlier: what is there?",
                                  f"{seen}; earlier: and before that?"]  # the budget kept the newest pair
                assert all(ev and cites == ["https://example.org/scene"] for _, ev, cites in got["engine"])
                # the session's history: the engine's turns, the service's, the router's question history
                turns = [(t.role, t.kind, t.text, [key(e) for e in t.evidence]) for t in eng.session("direct").turns]
                served = [(t["role"], t["kind"], t["text"], [_json_key(e) for e in t["evidence"]])
                          for t in c.get("/api/sessions/web").json()["turns"]]
                assert served == turns
                asked = [(k, x) for q, t in zip(questions, texts_) for k, x in (("question", q), ("answer", t))]
                assert [(k, x) for _, k, x, _ in turns] == asked
                pairs = [(r.question, r.answer) for r in at_router.router_store.qa.recent(10, session="chat")]
                assert pairs == [(r.question, r.answer) for r in eng.store.qa.recent(10, session="direct")]
                assert pairs == list(zip(questions, texts_))
                assert at_router.wait_for_answers(30) and eng.wait_for_answers(30)
            finally:
                at_router.close()


def test_a_session_at_the_router_keeps_its_turns_and_standing_requests_across_a_restart(cluster, tmp_path):
    """Sessions are the router's: a question turn, a standing request over cameras of both
    shards whose alerts come back as reply turns (the reply's model shown the alert's frames),
    the same session over HTTP, and all of it still there after the router restarts."""
    import httpx

    from support.server import ServerThread
    from vam_engine.cluster import create_cluster_app

    router, _, root = cluster
    shown = []

    def reply(req):
        shown.append(len(images(req)))
        return "the bright square is back"

    def at_router():
        return connect(None, root=root, config=CFG, llm_factory=make_llm, device="cpu",
                       llm=scripted_llm({"turn_classifier": {"kind": "question", "condition": "", "target": None,
                                                             "repeat": False},
                                         "router": {"type": "tool", "name": "retrieve",
                                                    "args": {"question": "what is there"}},
                                         "inspector": _inspect, "planner": _plan, "watch_reply": reply},
                                        default="{}"))

    r1 = at_router()
    try:
        asked = r1.turn("what is there?", session="patrol", mode="agentic")
        assert asked.kind == "answer" and asked.answer.text.startswith("NOTE t=")
        watched = r1.turn("tell me when a bright square shows", session="patrol", camera=["ses-x", "ses-y"],
                          intent="watch", condition="a bright square in the top-left corner", every_s=1.0)
        assert watched.kind == "watch" and watched.monitor is not None
        assert {r1.catalogue.cameras()[c] for c in ("ses-x", "ses-y")} == {"shard-0", "shard-1"}
        for k in range(12):
            t = k / 2
            for cam in ("ses-x", "ses-y"):
                r1.push(cam, frame(cam, t, event=t >= 3.0), t)
            assert r1.wait_for_monitors(10)
        wait_for("a reply turn", lambda: any(t.kind == "reply" for t in r1.session("patrol").turns), timeout=20)
        assert r1.wait_for_replies(20)
        turns = [(t.role, t.kind) for t in r1.session("patrol").turns]
        assert turns[:4] == [("user", "question"), ("engine", "answer"), ("user", "watch"), ("engine", "watch")]
        assert ("engine", "reply") in turns[4:] and shown and all(n > 0 for n in shown)
        with ServerThread(create_cluster_app(r1)) as web, httpx.Client(base_url=web.url, timeout=60) as c:
            listed = c.get("/api/sessions")
            assert listed.status_code == 200, listed.text  # was 501: the router kept no sessions
            created = c.post("/api/sessions", json={"id": "web"})
            assert created.status_code == 201, created.text
            r = c.post("/api/sessions/web/turns", json={"text": "what is there?", "mode": "agentic"})
            assert r.status_code == 200 and r.json()["answer"]["text"].startswith("NOTE t=")
    finally:
        r1.close()
    r2 = at_router()  # a restart: the router's store holds every session and turn
    try:
        assert [(t.role, t.kind) for t in r2.session("patrol").turns] == turns
        repo = r2.answering.sessions.repo
        fired = repo.watches("patrol", include_ended=True)  # a "once" request ends at its alert
        assert [(w.monitor_id, w.active) for w in fired] == [(watched.monitor.monitor_id, False)]
        again = r2.turn("tell me when it shows again", session="patrol", camera=["ses-x", "ses-y"], intent="watch",
                        condition="a bright square in the top-left corner", every_s=1.0)
        assert [w.monitor_id for w in repo.watches("patrol")] == [again.monitor.monitor_id]
        assert r2.end_session("patrol") and not repo.watches("patrol")  # ends its standing requests
        assert not any(m.monitor_id == again.monitor.monitor_id for m in r2.monitors())  # on the shards too
    finally:
        r2.close()


def _json_key(e: dict):
    return (e["camera_id"], e["t_start"], e["t_end"], e["source"], len(e["moment_ids"]))


def test_alerts_from_both_shards_arrive_on_one_stream(cluster):
    router, _, _ = cluster
    sub = router.subscribe_alerts(poll_s=0.1)
    try:
        mon = router.watch("a bright square in the top-left corner", ["mon-x", "mon-y"], every_s=1.0, frames=1)
        shards = {router.catalogue.cameras()[c] for c in ("mon-x", "mon-y")}
        assert shards == {"shard-0", "shard-1"}
        for k in range(16):
            t = k / 2
            for cam in ("mon-x", "mon-y"):
                router.push(cam, frame(cam, t, event=t >= 4.0), t)
            assert router.wait_for_monitors(10)
        got, deadline = [], time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:
            a = sub.get(0.5)
            if a is not None:
                got.append(a)
    finally:
        sub.close()
    assert sorted(a.camera_id for a in got) == ["mon-x", "mon-y"]
    assert all(a.monitor_id == mon.monitor_id and a.t >= 4.0 for a in got)
    listed = router.alerts(monitor_id=mon.monitor_id)
    assert sorted(a.alert_id for a in listed) == sorted(a.alert_id for a in got)
    assert {router.locate(a.alert_id)[0] for a in listed} == {"shard-0", "shard-1"}
    assert list(router.alerts(listed.cursor)) == []  # the cursor moves past what was read


@pytest.fixture(scope="module")
def served(cluster):
    """The single engine's app over the plain engine and the router's app over the cluster."""
    pytest.importorskip("fastapi", reason="the service needs fastapi (pip install vam-engine[server])")
    from support.server import ServerThread
    from vam_engine.cluster import create_cluster_app
    from vam_engine.server import create_app

    router, plain, _ = cluster
    with ServerThread(create_app(plain)) as one, ServerThread(create_cluster_app(router)) as many:
        yield one.url, many.url


def _pages(c, path, limit, **params):
    """Every item of a paged listing, walking next_cursor; and the pages' sizes."""
    items, sizes, cursor = [], [], None
    while True:
        r = c.get(path, params={**params, "limit": limit, **({"cursor": cursor} if cursor else {})})
        assert r.status_code == 200, r.text
        body = r.json()
        items += body["items"]
        sizes.append(len(body["items"]))
        cursor = body["next_cursor"]
        if cursor is None:
            return items, sizes, body


def test_the_router_serves_the_single_engines_http_api(cluster, served):
    """Paged moments and events, cameras, image search, frames and thumbnails, /metrics: the
    same replies as the single engine's app over the same frames (ids aside)."""
    import httpx

    router, plain, _ = cluster
    one, many = served
    with httpx.Client(base_url=one, timeout=30) as a, httpx.Client(base_url=many, timeout=30) as b:
        info = b.get("/api/cluster").json()
        assert [(s["name"], s["alive"]) for s in info["shards"]] == [("shard-0", True), ("shard-1", True)]
        for path, key in (("/api/moments", lambda m: (m["camera_id"], m["t"], m["width"])),
                          ("/api/events", lambda e: (e["camera_id"], e["t_start"], e["t_end"], len(e["keyframes"])))):
            want, want_sizes, _ = _pages(a, path, 3, camera=CAMS)
            got, got_sizes, last = _pages(b, path, 3, camera=CAMS)
            assert want and [key(x) for x in got] == [key(x) for x in want]
            assert got_sizes == want_sizes and last["missing_cameras"] == [] and last["missing_shards"] == []
        moments = _pages(b, "/api/moments", 50, camera=CAMS)[0]
        assert {router.locate(m["moment_id"])[0] for m in moments} == {"shard-0", "shard-1"}
        # paged with as_of and a time range as well
        q = {"camera": ["cam-b", "cam-c"], "t0": 2.0, "t1": 9.0, "as_of": 8.0}
        assert [(m["camera_id"], m["t"]) for m in _pages(b, "/api/moments", 2, **q)[0]] == \
            [(m["camera_id"], m["t"]) for m in _pages(a, "/api/moments", 2, **q)[0]]

        cams = {c["camera_id"]: c for c in b.get("/api/cameras").json()["cameras"]}
        for c in a.get("/api/cameras").json()["cameras"]:
            assert {k: cams[c["camera_id"]][k] for k in ("moments", "t_first", "t_last", "events")} == \
                {k: c[k] for k in ("moments", "t_first", "t_last", "events")}

        import io

        from PIL import Image
        buf = io.BytesIO()
        Image.fromarray(frame("cam-c", 7.0)).save(buf, format="PNG")
        files = {"image": ("q.png", buf.getvalue(), "image/png")}
        ra = a.post("/api/search", files=files, data={"top_k": "5", "cameras": ",".join(CAMS)}).json()
        rb = b.post("/api/search", files=files, data={"top_k": "5", "cameras": ",".join(CAMS)}).json()
        ev = lambda e: (e["camera_id"], e["t_start"], e["t_end"], e["source"], len(e["frames"]))  # noqa: E731
        assert ra["evidence"] and [ev(e) for e in rb["evidence"]] == [ev(e) for e in ra["evidence"]]
        assert [e["score"] for e in rb["evidence"]] == pytest.approx([e["score"] for e in ra["evidence"]])
        assert rb["missing_cameras"] == []
        for body in ({"text": "cat", "labels": ["cat"]}, {"text": "a scene", "near": [4.0, 1.0], "radius": 1.5}):
            got, want = b.post("/api/search", json=body), a.post("/api/search", json=body)
            assert got.status_code == want.status_code == 200
            assert [ev(e) for e in got.json()["evidence"]] == [ev(e) for e in want.json()["evidence"]]
        road = dict(region="0,0.5,20,1.5")  # cam-b's road
        pa, pb = _pages(a, "/api/moments", 1000, **road)[0], _pages(b, "/api/moments", 1000, **road)[0]
        assert pa and [(m["camera_id"], m["t"]) for m in pb] == [(m["camera_id"], m["t"]) for m in pa]
        assert {m["camera_id"] for m in pb} == {"cam-b"}
        # entities are read through the router too (these shards run no detector: there are none)
        for path in ("/api/entities", "/api/last_seen?q=cat"):
            got, want = b.get(path), a.get(path)
            assert got.status_code == want.status_code and got.status_code in (200, 404), got.text
        assert b.get("/api/entities").json()["items"] == [] and router.last_seen("cat") is None

        m_a = _pages(a, "/api/moments", 1000, camera="cam-d")[0][0]
        m_b = _pages(b, "/api/moments", 1000, camera="cam-d")[0][0]
        assert b.get(m_b["frame"]).content == a.get(m_a["frame"]).content  # the same JPEG, from the shard
        thumb = b.get(m_b["frame"], params={"w": 32})
        assert thumb.status_code == 200 and Image.open(io.BytesIO(thumb.content)).width == 32
        assert b.get("/api/frames/%d" % ((77 << 40) | 1)).status_code == 404  # names no shard
        clip_a = a.get("/api/clips", params={"camera": "cam-d", "t0": 1.0, "t1": 5.0})
        clip_b = b.get("/api/clips", params={"camera": "cam-d", "t0": 1.0, "t1": 5.0})
        assert clip_a.status_code == clip_b.status_code == 200, clip_b.text
        assert clip_b.headers["content-type"] == "video/mp4" and clip_b.content[4:8] == b"ftyp"
        assert clip_b.headers["x-clip-made-from"] == clip_a.headers["x-clip-made-from"] == "frames"
        assert b.get("/api/clips", params={"camera": "no-such", "t0": 0, "t1": 1}).status_code == 404
        seen_a = a.get(f"/api/moments/{m_a['moment_id']}/detections")
        seen_b = b.get(f"/api/moments/{m_b['moment_id']}/detections")
        assert seen_a.status_code == seen_b.status_code == 200, seen_b.text
        assert {k: v for k, v in seen_b.json().items() if "id" not in k and k != "frame"} == \
            {k: v for k, v in seen_a.json().items() if "id" not in k and k != "frame"}

        metrics = b.get("/metrics").text
        n_a = next(c["moments"] for c in a.get("/api/cameras").json()["cameras"] if c["camera_id"] == "cam-a")
        assert f'vam_camera_moments{{camera="cam-a"}} {n_a}' in metrics
        assert 'vam_shard_up{shard="shard-0"} 1' in metrics and 'vam_shard_up{shard="shard-1"} 1' in metrics
        assert b.get("/").status_code == 200 and "<html" in b.get("/").text.lower()  # the web page

        ans = b.post("/api/ask", json={"question": "what is there?", "mode": "agentic", "as_of": 5.0}).json()
        assert ans["text"].startswith("NOTE t=") and ans["missing_cameras"] == []


def test_camera_limited_tokens_hold_across_shards_over_http(cluster, served):
    import httpx

    from vam_engine.server import TokenStore

    router, _, root = cluster
    _, many = served
    tokens = TokenStore(root)
    info, secret = tokens.create("read", cameras=["cam-a", "cam-b"])  # one camera on each shard
    try:
        h = {"Authorization": f"Bearer {secret}"}
        with httpx.Client(base_url=many, timeout=30, headers=h) as c:
            got = _pages(c, "/api/moments", 4)[0]
            assert {m["camera_id"] for m in got} == {"cam-a", "cam-b"}
            assert {x["camera_id"] for x in c.get("/api/cameras").json()["cameras"]} == {"cam-a", "cam-b"}
            other = router.moments("cam-c")[0].moment_id
            assert c.get(f"/api/frames/{other}").status_code == 403
            assert c.get("/api/moments", params={"camera": "cam-c"}).status_code == 403
            assert c.get("/metrics").status_code == 403  # it names every camera
        assert httpx.get(many + "/api/moments", timeout=30).status_code == 401  # tokens exist now
    finally:
        tokens.revoke(info.token_id)
        tokens.reset()  # the other tests use the router's loopback without a token


@pytest.mark.browser
def test_the_web_page_over_the_router(cluster, served):
    """The single engine's page, served by the router: the timeline of cameras on both shards
    with their thumbnails (fetched from the shards), and the live WebSocket."""
    from selenium.webdriver.common.by import By

    from support.browser import chrome, until

    d = chrome()
    try:
        d.get(served[1] + "/")
        until(d, lambda: set(CAMS) <= {e.text for e in d.find_elements(By.CSS_SELECTOR, ".cam .label .name")},
              "the cameras of both shards")
        until(d, lambda: d.execute_script(
            "return [...document.querySelectorAll('.track .mt img')].filter(i => i.src.startsWith('blob:') && "
            "i.complete && i.naturalWidth > 0).length") >= 8, "timeline thumbnails")
        until(d, lambda: "live" in d.find_element(By.ID, "conn").text, "the WebSocket")
    finally:
        d.quit()


def test_alert_streams_monitors_and_summaries_through_the_router(cluster, served):
    """Alerts of cameras on both shards arrive on one SSE stream and one WebSocket; a stream
    resumed from an event's id gets what came after it; monitors list, end; summaries from both
    shards."""
    import asyncio

    import httpx
    import websockets

    from support.server import SSEReader

    router, _, _ = cluster
    _, many = served
    with httpx.Client(base_url=many, timeout=30) as c:
        for cam in ("mon-p", "mon-q"):
            router.place(cam)
        assert {router.catalogue.cameras()[x] for x in ("mon-p", "mon-q")} == {"shard-0", "shard-1"}
        sse = SSEReader(f"{many}/api/alerts/stream", {}, want=2)
        sse.start()
        assert sse.ready.wait(10) and sse.error is None
        ws_got = []

        async def ws_read():
            async with websockets.connect(many.replace("http", "ws") + "/api/ws") as ws:
                assert json.loads(await ws.recv())["type"] == "hello"
                ws_ready.set()
                while len(ws_got) < 2:
                    m = json.loads(await asyncio.wait_for(ws.recv(), 30))
                    if m["type"] == "alert":
                        ws_got.append(m)

        import threading
        ws_ready = threading.Event()
        ws_thread = threading.Thread(target=lambda: asyncio.run(ws_read()), daemon=True)
        ws_thread.start()
        assert ws_ready.wait(10)
        r = c.post("/api/monitors", json={"condition": "a bright square in the top-left corner",
                                         "cameras": ["mon-p", "mon-q"], "every_s": 1.0, "frames": 1})
        assert r.status_code == 201, r.text
        mid = r.json()["monitor_id"]
        listed = c.get("/api/monitors").json()["monitors"]
        assert [(m["monitor_id"], m["cameras"]) for m in listed if m["monitor_id"] == mid] == \
            [(mid, ["mon-p", "mon-q"])]
        for k in range(16):
            t = k / 2
            for cam in ("mon-p", "mon-q"):
                router.push(cam, frame(cam, t, event=t >= 4.0), t)
            assert router.wait_for_monitors(10)
        sse.join(20)
        ws_thread.join(20)
        assert sse.error is None and sorted(a["camera_id"] for _, a in sse.events) == ["mon-p", "mon-q"]
        assert sorted(m["alert"]["camera_id"] for m in ws_got) == ["mon-p", "mon-q"]
        assert all(a["monitor_id"] == mid for _, a in sse.events)
        (first_id, first), (_, second) = sse.events
        resumed = SSEReader(f"{many}/api/alerts/stream", {"Last-Event-ID": first_id}, want=1)
        resumed.start()
        resumed.join(20)
        assert [a["alert_id"] for _, a in resumed.events] == [second["alert_id"]]
        page = c.get("/api/alerts", params={"monitor": mid}).json()
        assert [a["alert_id"] for a in page["alerts"]] == [first["alert_id"], second["alert_id"]]
        assert c.get("/api/alerts", params={"since": page["next_since"], "monitor": mid}).json()["alerts"] == []
        assert c.get("/api/alerts", params={"since": first_id, "monitor": mid}).json()["alerts"] == [second]
        assert c.get("/api/alerts", params={"since": "9-9"}).status_code == 422
        img = c.get(first["frames"][0])
        assert img.status_code == 200 and img.content[:2] == b"\xff\xd8"
        # a "once" monitor ends at its first alert on each shard
        assert mid not in [m["monitor_id"] for m in c.get("/api/monitors").json()["monitors"]]
        ended = [m for m in c.get("/api/monitors", params={"include_ended": True}).json()["monitors"]
                 if m["monitor_id"] == mid]
        assert len(ended) == 1 and ended[0]["active"] is False

        # the shards' own refusal, as one engine words it (without Ray's remote traceback)
        r = c.post("/api/summarize", json={"t0": 0.0, "t1": 6.0, "granularity_s": 6.0, "prompt": "what happened",
                                           "cameras": ["cam-a", "cam-b"]})
        assert r.status_code == 400 and r.json()["detail"].startswith("summarize needs an LLM"), r.text


def test_delete_reaches_every_shard_holding_the_range(cluster):
    router, plain, _ = cluster
    ts = sorted({m.t_rel for m in plain.moments()})
    rng = (ts[len(ts) // 2] - 0.25, ts[len(ts) // 2] + 0.25)  # a kept time of every camera (views change together)
    want = plain.delete(CAMS, time_range=rng)
    got = router.delete(CAMS, time_range=rng)  # on both shards
    assert got.moments == want.moments > 0 and set(got.cameras) == set(CAMS)
    assert [(m.camera_id, m.t_rel) for m in router.moments() if m.camera_id in CAMS] == \
        [(m.camera_id, m.t_rel) for m in plain.moments()]
    q = frame("cam-b", rng[0])
    assert_same(router.search(image=q, top_k=5, cameras=CAMS), plain.search(image=q, top_k=5, cameras=CAMS))


def _wait_alive(router, name, timeout=60):
    """The shard's status once Ray has it alive."""
    return wait_for(f"{name} to come back", lambda: (st := {s.name: s for s in router.info().shards}[name]).alive
                    and st, timeout, every=0.5).status


def test_kill_9_during_ingest_ray_restarts_the_shard_and_the_store_equals_an_uninterrupted_run(cluster):
    router, plain, _ = cluster
    cam = "cam-e"
    shard = router.place(cam)
    before = [(m.camera_id, m.t_rel, m.moment_id) for m in router.moments("cam-a" if shard == "shard-0" else "cam-b")]
    old = _wait_alive(router, shard)
    times = [k / 2 for k in range(40)]
    for t in times:
        plain.push(cam, frame(cam, t), t)
    plain.end_push(cam)
    restarts, k = 0, 0
    while k < len(times):
        if k == 17 and restarts == 0:
            os.kill(old.pid, signal.SIGKILL)  # mid-stream: what it had not committed dies with it
            restarts = 1
        t = times[k]
        try:
            router.push(cam, frame(cam, t), t)
            k += 1
        except ShardDown:
            _wait_alive(router, shard)
            done = router.push_progress(cam)  # continue after what the shard committed
            k = next((i for i, x in enumerate(times) if done is None or x > done), len(times))
    router.end_push(cam)
    st = _wait_alive(router, shard)
    assert st.pid != old.pid and st.restarted
    assert [(m.t_rel, m.gate) for m in router.moments(cam)] == [(m.t_rel, m.gate) for m in plain.moments(cam)]
    other = "cam-a" if shard == "shard-0" else "cam-b"
    assert [(m.camera_id, m.t_rel, m.moment_id) for m in router.moments(other)] == before
    q = frame(cam, 12.0)
    assert_same(router.search(image=q, top_k=5, cameras=[cam]), plain.search(image=q, top_k=5, cameras=[cam]))


def test_a_query_while_a_shard_is_down_names_the_missing_cameras(cluster, served):
    import httpx

    router, plain, _ = cluster
    on_shard_1 = router.moments("cam-d")[0].moment_id
    ray.kill(router._handles["shard-1"], no_restart=True)  # down for good until revived
    with httpx.Client(base_url=served[1], timeout=60) as c:
        page = c.get("/api/moments", params={"camera": ["cam-c", "cam-d"]}).json()
        assert page["missing_cameras"] == ["cam-d"] and page["missing_shards"] == ["shard-1"]
        assert {m["camera_id"] for m in page["items"]} == {"cam-c"}
        assert c.get(f"/api/frames/{on_shard_1}").status_code == 503
        assert c.get("/api/cameras").json()["missing_shards"] == ["shard-1"]
        assert 'vam_shard_up{shard="shard-1"} 0' in c.get("/metrics").text
    q = frame("cam-a", 1.0)
    got = router.search(image=q, top_k=5)
    assert got.missing_shards == ("shard-1",)
    assert set(got.missing_cameras) >= {"cam-b", "cam-d"}
    assert got.evidence and {e.camera_id for e in got.evidence} <= {"cam-a", "cam-c", "cam-e", "mon-x"}
    assert any("shard-1" in n for n in got.notes)
    scoped = router.moments("cam-c")
    assert scoped.missing_cameras == () and len(scoped) == len(plain.moments("cam-c"))
    assert router.moments("cam-d").missing_cameras == ("cam-d",)
    with pytest.raises(ShardDown, match="nothing was changed"):
        router.delete(["cam-a", "cam-b"])
    assert len(router.moments("cam-a")) == len(plain.moments("cam-a"))
    stale = router.alert_cursor_now()  # a reader starting "from now" while shard-1 is down
    assert stale.of("shard-1") is None and stale.time_of("shard-1") is not None
    from vam_engine.cluster.backend import ClusterBackend
    b = ClusterBackend(router)
    assert b.parse_alert_position(b.alert_position_text(stale)) == stale
    router.revive()  # a new actor reopens the shard's store
    _wait_alive(router, "shard-1")
    assert {router.locate(a.alert_id)[0] for a in router.alerts()} == {"shard-0", "shard-1"}
    assert list(router.alerts(stale)) == []  # shard-1's earlier alerts are not new to that reader
    cams = [*CAMS, "cam-e"]  # the plain engine did not get the alert test's cameras
    assert_same(router.search(image=q, top_k=5, cameras=cams), plain.search(image=q, top_k=5, cameras=cams))


def test_cluster_ids_name_their_shard(cluster):
    router, _, _ = cluster
    m = router.moments("cam-c")[0]
    no, local = split_id(m.moment_id)
    assert router.locate(m.moment_id) == ("shard-0", local) and no == 0
    with pytest.raises(Exception, match="no shard number"):
        router.locate((77 << 40) | 1)


def test_a_monitor_of_every_camera_reaches_a_shard_added_later(cluster):
    """(Last in this module: it adds a third shard.)"""
    router, _, root = cluster
    mon = router.watch("a bright square in the top-left corner", None, mode="repeat", every_s=1.0, frames=1)
    grown = connect(None, root=root, shards=["shard-0", "shard-1", "shard-2"], config=CFG, llm_factory=make_llm,
                    device="cpu")
    try:
        assert set(grown.catalogue.monitor(mon.monitor_id).parts) == {"shard-0", "shard-1", "shard-2"}
        assert grown.place("late-cam") == "shard-2"  # the new, empty shard
        for k in range(12):
            t = k / 2
            grown.push("late-cam", frame("late-cam", t, event=t >= 3.0), t)
            assert grown.wait_for_monitors(10)
        got = grown.alerts(monitor_id=mon.monitor_id, camera="late-cam")
        assert got and {grown.locate(a.alert_id)[0] for a in got} == {"shard-2"}
        assert got[0].monitor_id == mon.monitor_id
        assert grown.unwatch(mon.monitor_id)
    finally:
        grown.close()
        grown.call_many({"shard-2": ("close", (), {})})
        ray.kill(grown._handles["shard-2"], no_restart=True)


def test_an_unreachable_cluster_address_is_an_error_in_seconds():
    from support.net import free_port
    from vam_engine.cluster.router import _check_reachable

    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(VamError, match=f"127.0.0.1:{port}.*no Ray head answers"):
        _check_reachable(f"127.0.0.1:{port}")
    assert time.monotonic() - t0 < 10
    with pytest.raises(VamError, match="expected HOST:PORT"):
        _check_reachable("nonsense")
    _check_reachable("auto")  # left to Ray: it looks for a local cluster itself
