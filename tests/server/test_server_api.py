"""The HTTP API over a small real store (two cameras of pushed frames, events documented by a
scripted model): every memory endpoint, tokens and scopes, camera limits, frames by id only,
body limits, malformed bodies, SSE answers and metrics."""
import io
import json
import sqlite3
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from support.server import all_pages, build_engine, texture
from vam_engine.server import ServeOptions, TokenStore, create_app

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 240


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = build_engine(tmp_path_factory.mktemp("api") / "store", n=48)
    yield eng
    eng.close()


@pytest.fixture
def make_client(engine, client_for):
    return lambda **opts: client_for(engine, **opts)


@pytest.fixture
def tokens(tmp_path):
    ts = TokenStore(tmp_path / "tokens")

    def make(scope, cameras=None):
        return {"Authorization": f"Bearer {ts.create(scope, cameras)[1]}"}
    return make


def test_without_tokens_loopback_reads_and_health_says_so(make_client, engine):
    c = make_client()
    assert c.get("/api/health").json()["auth"] is False
    items, _ = all_pages(c, "/api/moments")
    assert len(items) == len(engine.moments()) > 10
    assert {m["camera_id"] for m in items} == {"front", "yard"}


def test_without_tokens_a_request_for_another_host_name_is_refused(make_client):
    c = make_client()
    assert c.get("/api/moments").status_code == 200
    # a page on evil.example whose DNS name was rebound to 127.0.0.1 sends its own Host / Origin
    assert c.get("/api/moments", headers={"Host": "evil.example"}).status_code == 403
    r = c.get("/api/moments", headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and "token create" in r.json()["detail"]
    assert c.get("/api/moments", headers={"Host": "localhost:8000", "Origin": "http://localhost:8000"}
                 ).status_code == 200


def test_once_a_token_exists_every_request_but_health_needs_one(make_client, tokens):
    c = make_client()
    good = tokens("read")
    for path in ("/api/moments", "/api/events", "/api/cameras", "/metrics", "/api/frames/1", "/api/alerts"):
        r = c.get(path)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", path
        assert "vam-engine token create" in r.json()["detail"]
        assert c.get(path, headers={"Authorization": "Bearer vam_00000000_" + "x" * 43}).status_code == 401
        assert c.get(path, headers=good).status_code == 200, path
    assert c.post("/api/search", json={"text": "a scene"}).status_code == 401
    assert c.get("/api/health").status_code == 200 and c.get("/api/health").json()["auth"] is True


def test_require_tokens_admits_nobody_without_a_token_file(make_client):
    c = make_client(require_tokens=True)
    assert c.get("/api/moments").status_code == 401 and c.get("/api/health").status_code == 200


def test_scopes(make_client, tokens, engine):
    c = make_client()
    read, write = tokens("read"), tokens("write")
    assert c.post("/api/delete", json={"cameras": ["front"]}, headers=read).status_code == 403
    assert c.post("/api/delete", json={"cameras": ["front"]}, headers=write).status_code == 403
    assert "needs 'admin'" in c.post("/api/delete", json={"cameras": ["front"]}, headers=write).json()["detail"]
    body = {"t0": 0, "t1": 10, "granularity_s": 10, "prompt": "what happened"}
    assert c.post("/api/summarize", json=body, headers=read).status_code == 403
    assert c.post("/api/monitors", json={"condition": "x"}, headers=read).status_code == 403
    assert c.post("/api/cameras", json={"camera_id": "x", "url": "rtsp://h/x"}, headers=read).status_code == 403
    r = c.post("/api/summarize", json=body, headers=write)
    assert r.status_code == 200, r.text
    assert {s["camera_id"] for s in r.json()["summaries"]} == {"front", "yard"}
    assert len(engine.moments()) > 10  # nothing was deleted


def test_a_camera_limited_token_sees_nothing_else(make_client, tokens, engine):
    c = make_client()
    front = tokens("admin", ["front"])
    items, _ = all_pages(c, "/api/moments", headers=front)
    assert items and {m["camera_id"] for m in items} == {"front"}
    evs, _ = all_pages(c, "/api/events", headers=front)
    assert evs and {e["camera_id"] for e in evs} == {"front"}
    assert c.get("/api/moments", params={"camera": "yard"}, headers=front).status_code == 403
    assert [x["camera_id"] for x in c.get("/api/cameras", headers=front).json()["cameras"]] == ["front"]
    yard_moment = next(m for m in engine.moments() if m.camera_id == "yard")
    assert c.get(f"/api/frames/{yard_moment.moment_id}", headers=front).status_code == 403
    r = c.post("/api/search", json={"text": "green textured scene seen by the yard camera", "top_k": 20},
               headers=front)
    assert r.status_code == 200 and r.json()["evidence"]
    assert {e["camera_id"] for e in r.json()["evidence"]} == {"front"}
    assert c.post("/api/search", json={"text": "x", "cameras": ["yard"]}, headers=front).status_code == 403
    r = c.post("/api/ask", json={"question": "what did you see?"}, headers=front)
    assert r.status_code == 200 and {e["camera_id"] for e in r.json()["evidence"]} <= {"front"}
    assert c.post("/api/ask", json={"question": "q", "cameras": "yard"}, headers=front).status_code == 403
    assert c.post("/api/delete", json={"cameras": ["yard"]}, headers=front).status_code == 403
    # an empty camera list is not "every camera" (downstream it would read as no filter)
    for path, body in (("/api/delete", {"cameras": []}), ("/api/ask", {"question": "q", "cameras": []}),
                       ("/api/search", {"text": "x", "cameras": []})):
        r = c.post(path, json=body, headers=front)
        assert r.status_code in (400, 422) and "at least one camera" in r.text, (path, r.text)
    assert engine.moments("yard")  # nothing was deleted
    assert c.get("/metrics", headers=front).status_code == 403  # metrics name every camera


def test_moments_and_events_pages_and_filters(make_client, engine):
    c = make_client()
    everything, _ = all_pages(c, "/api/moments")
    paged, pages = all_pages(c, "/api/moments", limit=3)
    assert [m["moment_id"] for m in paged] == [m["moment_id"] for m in everything] and pages >= 4
    assert len({m["moment_id"] for m in paged}) == len(paged)
    sub, _ = all_pages(c, "/api/moments", camera="yard", t0=3.0, t1=12.0)
    assert sub and all(m["camera_id"] == "yard" and 3.0 <= m["t"] <= 12.0 for m in sub)
    expected = [m.moment_id for m in engine.moments("yard") if 3.0 <= m.t <= 12.0]
    assert [m["moment_id"] for m in sub] == expected
    early, _ = all_pages(c, "/api/moments", as_of=6.0)
    assert early and max(m["t"] for m in early) <= 6.0 and len(early) < len(everything)
    evs, _ = all_pages(c, "/api/events", camera="front", limit=2)
    assert len(evs) == len(engine.store.events.list("front")) and all(e["doc"] for e in evs if e["closed"])
    assert all(e["frames"] == [f"/api/frames/{k}" for k in e["keyframes"]] for e in evs)
    for bad in ({"cursor": "garbage"}, {"cursor": "WzEsMl0"}, {"t0": 5, "t1": 1}, {"limit": 0}, {"limit": 10 ** 6},
                {"t0": "soon"}):
        r = c.get("/api/moments", params=bad)
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["detail"]


def test_thumbnails_are_kept_within_the_configured_bound(make_client, engine):
    """A thumbnail is made once and kept in the server's cache; the cache never holds more than
    service.thumbnail_cache_mb (least recently used go first); 0 keeps none."""
    from vam_engine.config import ServiceConfig
    from vam_engine.server import ServeOptions

    assert ServeOptions.shares(ServiceConfig(thumbnail_cache_mb=3))["thumbnail_cache_bytes"] == 3 << 20
    ids = [m.moment_id for m in engine.moments("front")[:4]]
    assert len(ids) >= 3
    c = make_client(thumbnail_cache_bytes=10 << 20)
    cache = c.app.state.thumbnails
    first = c.get(f"/api/frames/{ids[0]}", params={"w": 96}).content
    assert len(cache) == 1 and cache.bytes == len(first)
    assert c.get(f"/api/frames/{ids[0]}", params={"w": 96}).content == first and len(cache) == 1
    sizes = [len(c.get(f"/api/frames/{i}", params={"w": 96}).content) for i in ids[1:]]
    assert len(cache) == len(ids) and cache.bytes == len(first) + sum(sizes)
    # a bound of two thumbnails' bytes: the oldest go first, what is held stays within it
    tight = make_client(thumbnail_cache_bytes=len(first) + sizes[0])
    for i in ids:
        assert tight.get(f"/api/frames/{i}", params={"w": 96}).status_code == 200
        assert tight.app.state.thumbnails.bytes <= len(first) + sizes[0]
    assert 1 <= len(tight.app.state.thumbnails) <= 2
    none = make_client(thumbnail_cache_bytes=0)
    assert none.get(f"/api/frames/{ids[0]}", params={"w": 96}).content == first
    assert len(none.app.state.thumbnails) == 0
    with pytest.raises(ValueError, match="thumbnail_cache_bytes"):
        ServeOptions(thumbnail_cache_bytes=-1)


def test_frames_are_served_by_id_and_never_by_path(make_client, engine):
    c = make_client()
    m = engine.moments("front")[0]
    r = c.get(f"/api/frames/{m.moment_id}")
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    img = np.asarray(Image.open(io.BytesIO(r.content)))
    assert img.shape == (m.height, m.width, 3)
    small = Image.open(io.BytesIO(c.get(f"/api/frames/{m.moment_id}", params={"w": 64}).content))
    assert small.width == 64
    for path in ("/api/frames/..%2F..%2Fstore.sqlite", "/api/frames/../store.sqlite", "/api/frames/%2Fetc%2Fpasswd",
                 "/api/frames/999999", "/api/frames/-1", "/api/frames/1.5"):
        r = c.get(path)
        assert r.status_code in (404, 422), (path, r.status_code)
        assert b"SQLite" not in r.content and b"root:" not in r.content
    # a row whose file reference points outside the frames directory is never followed
    victim = engine.moments("yard")[-1]
    db = sqlite3.connect(engine.store.root / "store.sqlite")
    old = db.execute("SELECT frame_ref FROM moments WHERE moment_id=?", (victim.moment_id,)).fetchone()[0]
    try:
        for ref in ("store.sqlite", "../" * 6 + "etc/passwd", "frames/../store.sqlite"):
            with db:
                db.execute("UPDATE moments SET frame_ref=? WHERE moment_id=?", (ref, victim.moment_id))
            r = c.get(f"/api/frames/{victim.moment_id}")
            assert r.status_code == 404 and b"SQLite" not in r.content, ref
    finally:
        with db:
            db.execute("UPDATE moments SET frame_ref=? WHERE moment_id=?", (old, victim.moment_id))
        db.close()
    assert c.get(f"/api/frames/{victim.moment_id}").status_code == 200


def test_search_by_text_and_by_uploaded_image(make_client, engine):
    c = make_client()
    r = c.post("/api/search", json={"text": "green textured scene seen by the yard camera", "top_k": 5})
    assert r.status_code == 200, r.text
    ev = r.json()["evidence"]
    assert ev[0]["camera_id"] == "yard" and ev[0]["text"] and ev[0]["frames"][0].startswith("/api/frames/")
    assert str(engine.store.root) not in r.text  # no path on disk leaves the server
    buf = io.BytesIO()
    Image.fromarray(texture(20, "yard")).save(buf, format="PNG")
    r = c.post("/api/search", files={"image": ("q.png", buf.getvalue(), "image/png")},
               data={"top_k": "3", "sources": "frame"})
    assert r.status_code == 200, r.text
    top = r.json()["evidence"][0]
    assert top["camera_id"] == "yard" and top["source"] == "frame"
    r = c.post("/api/search", files={"image": ("q.png", b"not an image", "image/png")})
    assert r.status_code == 422 and "image" in r.json()["detail"]


def test_oversized_uploads_get_413(make_client):
    c = make_client(max_upload_bytes=256 * 1024)
    big = b"\xff" * (300 * 1024)
    r = c.post("/api/search", files={"image": ("big.jpg", big, "image/jpeg")})
    assert r.status_code == 413 and "limit" in r.json()["detail"]

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(10):
            yield b"x" * (64 * 1024)
    r = c.post("/api/ask", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert make_client().post("/api/search", content=b"{}" + b" " * (11 << 20),
                              headers={"Content-Type": "application/json"}).status_code == 413  # 10 MB default


def test_malformed_bodies_get_a_422_naming_the_problem(make_client):
    c = make_client()
    r = c.post("/api/ask", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"]
    r = c.post("/api/ask", json={"question": "q", "colour": "red"})
    assert r.status_code == 422 and "colour" in r.json()["detail"]
    r = c.post("/api/ask", json={"question": ""})
    assert r.status_code == 422 and "question" in r.json()["detail"]
    r = c.post("/api/search", json={"top_k": 5})
    assert r.status_code == 422 and "text" in r.json()["detail"]
    r = c.post("/api/search", json={"text": "x", "top_k": 0})
    assert r.status_code == 422 and "top_k" in r.json()["detail"]
    r = c.post("/api/search", content=b"[1, 2]", headers={"Content-Type": "application/json"})
    assert r.status_code == 422
    r = c.post("/api/delete", json={"t0": 5, "t1": 1})
    assert r.status_code == 422 and "t0" in r.json()["detail"]


def test_ask_as_json_and_as_server_sent_events(make_client):
    c = make_client()
    r = c.post("/api/ask", json={"question": "what did the front camera see?"})
    assert r.status_code == 200, r.text
    a = r.json()
    assert a["found"] and a["text"] == "a red textured scene" and a["evidence"]
    assert all(set(e) >= {"camera_id", "t_start", "t_end", "frames"} for e in a["evidence"])
    t0 = time.perf_counter()
    with c.stream("POST", "/api/ask", json={"question": "what now?"}, headers={"Accept": "text/event-stream"}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        text = "".join(r.iter_text())
    wall = time.perf_counter() - t0
    events = [(b.split("\n")[0][len("event: "):], json.loads(b.split("data: ", 1)[1]))
              for b in text.strip().split("\n\n")]
    kinds = [k for k, _ in events]
    assert kinds[-1] == "answer" and kinds.count("answer") == 1
    stages = [d for k, d in events if k == "stage"]
    assert any(d.get("kind") == "model_call" and "two_phase_coarse" in d["tags"] for d in stages)
    replies = [d for d in stages if d.get("kind") == "model_reply"]
    assert replies and all(0 < d["seconds"] <= wall for d in replies)  # each model call timed, within the request
    assert events[-1][1]["text"] == "a red textured scene"


def test_questions_beyond_max_asks_get_429(make_client):
    c = make_client(max_asks=1)
    slots = c.app.state.asks
    assert slots.acquire(blocking=False)  # one question in flight
    try:
        r = c.post("/api/ask", json={"question": "what did you see?"})
        assert r.status_code == 429 and r.headers["retry-after"] == "1"
    finally:
        slots.release()
    assert c.post("/api/ask", json={"question": "what did you see?"}).status_code == 200
    r = c.post("/api/ask", json={"question": "and now?"}, headers={"Accept": "text/event-stream"})
    assert r.status_code == 200 and "event: answer" in r.text
    assert slots.acquire(blocking=False)  # both answers gave their slot back
    slots.release()


def test_metrics(make_client, tokens):
    c = make_client()
    c.post("/api/search", json={"text": "scene"})
    c.post("/api/ask", json={"question": "what?"})
    r = c.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = r.text.splitlines()

    def value(prefix):
        got = [float(x.rsplit(" ", 1)[1]) for x in lines if x.startswith(prefix)]
        assert got, prefix
        return got[0]
    assert value('vam_camera_moments{camera="front"}') > 0
    assert value('vam_samples_total{camera="yard",outcome="kept"}') > 0
    assert value("vam_search_latency_seconds_count") >= 1
    assert value('vam_model_latency_seconds_count{priority="frontend"}') >= 1
    assert value('vam_store_bytes{part="frames"}') > 0
    assert 'vam_http_requests_total{route="/api/search",method="POST",status="200"}' in r.text
    assert value('vam_stage_items_total{stage="gate"}') == 48 * 2  # every pushed sample of both cameras
    assert value('vam_stage_busy_seconds_total{stage="embed"}') > 0
    assert value('vam_stage_queue_depth{stage="commit"}') == 0
    for line in lines:  # every sample line parses: name{labels} value
        if line and not line.startswith("#"):
            float(line.rsplit(" ", 1)[1])
    tokens("read")
    assert c.get("/metrics").status_code == 401


def test_stages_as_json_for_tokens_that_see_every_camera(make_client, tokens):
    c = make_client()
    got = {s["name"]: s for s in c.get("/api/stages").json()["stages"]}
    assert list(got) == ["decode", "gate", "embed", "encode", "commit"]
    assert got["gate"]["items"] == 48 * 2 and got["encode"]["items"] > 0
    assert set(got["embed"]) == {"name", "workers", "busy_s", "items", "queue_depth", "queue_capacity", "dropped"}
    limited = tokens("read", ["yard"])
    assert c.get("/api/stages", headers=limited).status_code == 403  # the stages cover every camera
    assert c.get("/api/stages", headers=tokens("read")).status_code == 200


def test_delete_needs_admin_and_removes_what_it_says(tmp_path, tokens):
    eng = build_engine(tmp_path / "del", n=24)
    try:
        with TestClient(create_app(eng, ServeOptions(tokens_dir=str(tmp_path / "tokens"))),
                        base_url="http://127.0.0.1:8000") as c:
            admin = tokens("admin")
            before = len(eng.moments("yard"))
            assert c.post("/api/delete", json={}, headers=admin).status_code == 400  # never everything implicitly
            r = c.post("/api/delete", json={"cameras": ["yard"], "t0": 0.0, "t1": 5.0}, headers=admin)
            assert r.status_code == 200, r.text
            gone = r.json()["moments"]
            assert gone > 0 and len(eng.moments("yard")) == before - gone
            assert all(m.t > 5.0 for m in eng.moments("yard")) and eng.moments("front")
    finally:
        eng.close()


def test_openapi_lists_every_endpoint_and_cors_is_off_unless_configured(make_client, tokens):
    c = make_client()
    tokens("read")  # the API description and the page carry no data: public even with tokens
    paths = c.get("/openapi.json").json()["paths"]
    for p, methods in {"/api/health": {"get"}, "/metrics": {"get"}, "/api/cameras": {"get", "post"},
                       "/api/cameras/{camera_id}": {"delete"}, "/api/cameras/{camera_id}/status": {"get"},
                       "/api/moments": {"get"}, "/api/events": {"get"}, "/api/frames/{moment_id}": {"get"},
                       "/api/search": {"post"}, "/api/ask": {"post"}, "/api/summarize": {"post"},
                       "/api/monitors": {"get", "post"}, "/api/monitors/{monitor_id}": {"delete"},
                       "/api/alerts": {"get"}, "/api/alerts/stream": {"get"}, "/api/delete": {"post"}}.items():
        assert methods <= set(paths.get(p, {})), p
    assert "multipart/form-data" in paths["/api/search"]["post"]["requestBody"]["content"]
    assert c.get("/docs").status_code == 200 and c.get("/").status_code == 200
    assert c.get("/static/app.js").status_code == 200
    origin = {"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"}
    r = c.options("/api/moments", headers=origin)
    assert "access-control-allow-origin" not in r.headers
    assert "access-control-allow-origin" not in c.get("/api/health", headers=origin).headers
    c2 = make_client(cors_origins=("https://ops.example",))
    r = c2.options("/api/moments", headers={**origin, "Origin": "https://ops.example"})
    assert r.headers.get("access-control-allow-origin") == "https://ops.example"
    r = c2.options("/api/moments", headers=origin)
    assert r.headers.get("access-control-allow-origin") != "https://evil.example"
