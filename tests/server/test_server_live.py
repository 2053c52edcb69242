"""Monitors and alerts through a real server (uvicorn on a loopback port): monitors created and
removed over HTTP, alerts listed, their frames served by alert id, the SSE stream resumed with
Last-Event-ID, the WebSocket delivering an alert, camera-limited tokens, and no token or image
bytes in the server's logs."""
import asyncio
import json
import logging
import time

import httpx
import pytest
import websockets

from support.server import Door, ServerThread, SSEReader, build_engine
from vam_engine.server import ServeOptions, TokenStore, create_app

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 240


class Logs(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("live")
    eng = build_engine(root / "store", n=12)
    ts = TokenStore(root / "store")
    tokens = {"write": ts.create("write")[1], "admin": ts.create("admin")[1], "front": ts.create("read", ["front"])[1]}
    logs = Logs()
    for name in ("uvicorn", "uvicorn.access", "uvicorn.error", "vam_engine", ""):
        logging.getLogger(name).addHandler(logs)
    app = create_app(eng, ServeOptions(keepalive_s=1.0, status_poll_s=0.2))
    try:
        with ServerThread(app) as srv:
            yield eng, srv, tokens, logs
    finally:
        for name in ("uvicorn", "uvicorn.access", "uvicorn.error", "vam_engine", ""):
            logging.getLogger(name).removeHandler(logs)
        eng.close()


def auth(token):
    return {"Authorization": f"Bearer {token}"}


def test_monitors_alerts_sse_resume_and_websocket(served):
    eng, srv, tokens, logs = served
    h = auth(tokens["write"])
    with httpx.Client(base_url=srv.url, headers=h, timeout=30) as c:
        assert c.post("/api/monitors", json={"condition": "a white flash"}, headers=auth(tokens["front"])
                      ).status_code == 403  # read scope
        r = c.post("/api/monitors", json={"condition": "a white flash", "cameras": ["door"], "mode": "repeat",
                                         "every_s": 1.0, "frames": 1, "repeat_gap_s": 1.0})
        assert r.status_code == 201, r.text
        mid = r.json()["monitor_id"]
        assert [m["monitor_id"] for m in c.get("/api/monitors").json()["monitors"]] == [mid]
        door = Door(eng)
        door.flash()
        door.flash()
        alerts = c.get("/api/alerts", params={"monitor": mid}).json()["alerts"]
        assert len(alerts) == 2 and alerts[0]["alert_id"] < alerts[1]["alert_id"]
        first, second = alerts[0]["alert_id"], alerts[1]["alert_id"]
        assert "frame_paths" not in alerts[0] and alerts[0]["frames"] == [f"/api/alerts/{first}/frames/0"]
        img = c.get(alerts[0]["frames"][0])
        assert img.status_code == 200 and img.headers["content-type"] == "image/jpeg"
        assert c.get(f"/api/alerts/{first}/frames/7").status_code == 404
        assert c.get("/api/alerts", params={"since": first}).json()["alerts"][0]["alert_id"] == second

        # resume after the first alert: the second comes from the store, the third live
        sse = SSEReader(f"{srv.url}/api/alerts/stream", {**h, "Last-Event-ID": str(first)}, want=2)
        fresh = SSEReader(f"{srv.url}/api/alerts/stream", h, want=1)  # no Last-Event-ID: only new ones
        sse.start()
        fresh.start()
        assert sse.ready.wait(10) and fresh.ready.wait(10) and sse.error is None and fresh.error is None

        async def ws_alert():
            async with websockets.connect(srv.url.replace("http", "ws") + "/api/ws") as ws:
                await ws.send(json.dumps({"type": "auth", "token": tokens["write"]}))
                hello = json.loads(await ws.recv())
                assert hello["type"] == "hello" and hello["scope"] == "write" and hello["alerts"]
                await asyncio.get_running_loop().run_in_executor(None, door.flash)
                while True:
                    m = json.loads(await asyncio.wait_for(ws.recv(), 20))
                    if m["type"] == "alert":
                        return m["alert"]
        live = asyncio.run(ws_alert())
        sse.join(20)
        fresh.join(20)
        assert sse.error is None and fresh.error is None
        assert [int(i) for i, _ in sse.events] == [second, live["alert_id"]]
        assert [int(i) for i, _ in fresh.events] == [live["alert_id"]]
        assert live["monitor_id"] == mid and live["camera_id"] == "door" and live["observed"] == "a white flash"
        assert sse.events[1][1] == live

        # a camera-limited token sees no alert of another camera, anywhere
        front = auth(tokens["front"])
        assert c.get("/api/alerts", headers=front).json()["alerts"] == []
        assert c.get("/api/monitors", headers=front).json()["monitors"] == []
        assert c.get(f"/api/alerts/{first}/frames/0", headers=front).status_code == 403
        assert c.get("/api/alerts", params={"camera": "door"}, headers=front).status_code == 403

        assert c.delete(f"/api/monitors/{mid}").status_code == 200
        assert c.get("/api/monitors").json()["monitors"] == []
        assert c.delete(f"/api/monitors/{mid}").status_code == 404
        assert c.get("/api/alerts/stream", headers={**h, "Last-Event-ID": "soon"}).status_code == 422

    # the logs hold requests, never a token or image bytes
    text = "\n".join(logs.lines)
    assert "/api/alerts/stream" in text or "/api/monitors" in text
    for t in tokens.values():
        assert t not in text and t.split("_", 2)[-1] not in text
    assert max(len(x) for x in logs.lines) < 2000


def test_a_revoked_token_ends_its_open_alert_stream(served, tmp_path):
    eng, srv, _, _ = served
    ts = TokenStore(eng.store.root)
    info, token = ts.create("read", label="soon revoked")
    with httpx.Client(timeout=httpx.Timeout(30.0)) as c, c.stream(
            "GET", f"{srv.url}/api/alerts/stream", headers=auth(token)) as r:
        assert r.status_code == 200
        ts.revoke(info.token_id)
        t0 = time.monotonic()
        for _ in r.iter_lines():  # ends within a keepalive (1 s here) of the revocation
            assert time.monotonic() - t0 < 10
        assert time.monotonic() - t0 < 10
    assert httpx.get(f"{srv.url}/api/alerts", headers=auth(token)).status_code == 401


def test_the_websocket_refuses_a_missing_or_wrong_token(served):
    _, srv, _, _ = served

    async def attempt(first):
        async with websockets.connect(srv.url.replace("http", "ws") + "/api/ws") as ws:
            await ws.send(first)
            m = json.loads(await asyncio.wait_for(ws.recv(), 10))
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            return m
    for first in (json.dumps({"type": "auth", "token": "vam_00000000_" + "x" * 43}), json.dumps({"hello": 1}), "{"):
        m = asyncio.run(attempt(first))
        assert m["type"] == "error" and m["status"] == 401


def test_cameras_endpoints_without_live_sources_say_so(served):
    eng, srv, tokens, _ = served
    with httpx.Client(base_url=srv.url, headers=auth(tokens["write"]), timeout=30) as c:
        cams = {x["camera_id"]: x for x in c.get("/api/cameras").json()["cameras"]}
        assert {"front", "yard"} <= set(cams) and cams["front"]["moments"] == len(eng.moments("front"))
        if not hasattr(eng, "add_camera"):
            r = c.post("/api/cameras", json={"camera_id": "cam9", "url": "rtsp://127.0.0.1:1/x"})
            assert r.status_code == 501 and "live cameras" in r.json()["detail"]
        r = c.post("/api/cameras", json={"camera_id": "cam9"})
        assert r.status_code == 422 and "url" in r.json()["detail"]


def test_live_cameras_added_watched_and_removed_over_http(served, tmp_path):
    eng, srv, tokens, _ = served
    from support.clips import changing_clip

    clip = changing_clip(tmp_path / "lobby.mp4", 20.0)
    with httpx.Client(base_url=srv.url, headers=auth(tokens["write"]), timeout=30) as c:
        r = c.post("/api/cameras", json={"camera_id": "lobby", "url": str(clip), "realtime": True})
        assert r.status_code == 403 and "admin" in r.json()["detail"]  # a file on the server: admin only
    h = auth(tokens["admin"])  # the clip is a file on the server's disk
    with httpx.Client(base_url=srv.url, headers=h, timeout=30) as c:

        async def watch_status():
            async with websockets.connect(srv.url.replace("http", "ws") + "/api/ws") as ws:
                await ws.send(json.dumps({"type": "auth", "token": tokens["write"]}))
                assert json.loads(await ws.recv())["type"] == "hello"
                r = await asyncio.get_running_loop().run_in_executor(None, lambda: c.post(
                    "/api/cameras", json={"camera_id": "lobby", "url": str(clip), "realtime": True, "fps": 2.0}))
                assert r.status_code == 201, r.text
                assert r.json()["camera_id"] == "lobby" and r.json()["state"] in ("connecting", "online")
                states = []
                while "online" not in states:
                    m = json.loads(await asyncio.wait_for(ws.recv(), 20))
                    if m["type"] == "camera_status" and m["camera"]["camera_id"] == "lobby":
                        states.append(m["camera"]["state"])
                return states
        assert "online" in asyncio.run(watch_status())
        st = c.get("/api/cameras/lobby/status").json()
        assert st["state"] == "online" and st["url"] == str(clip)
        listed = {x["camera_id"]: x for x in c.get("/api/cameras").json()["cameras"]}
        assert listed["lobby"]["status"]["state"] == "online"
        deadline = time.monotonic() + 20
        while not c.get("/api/moments", params={"camera": "lobby"}).json()["items"]:
            assert time.monotonic() < deadline, "no moment from the live camera"
            time.sleep(0.2)
        metrics = c.get("/metrics").text
        assert 'vam_camera_state{camera="lobby",state="online"} 1' in metrics
        assert 'vam_camera_frames_decoded_total{camera="lobby"}' in metrics
        assert c.post("/api/cameras", json={"camera_id": "lobby2", "url": "rtsp://127.0.0.1:1/x", "fps": -1}
                      ).status_code == 422
        assert c.delete("/api/cameras/lobby").status_code == 200
        assert c.get("/api/cameras/lobby/status").status_code == 404
        assert c.delete("/api/cameras/lobby").status_code == 404
        front = auth(tokens["front"])
        assert c.post("/api/cameras", json={"camera_id": "x", "url": str(clip)}, headers=front).status_code == 403
