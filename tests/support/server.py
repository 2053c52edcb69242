"""A small store for the service's tests: two cameras of pushed textured frames, events
documented by a scripted model (so text search finds them), and the model answering questions."""
from __future__ import annotations

import json
import threading

import numpy as np

from support.scripted import TagScript, images, texts, verdict
from vam_engine.engine import Engine
from vam_engine.llm import ScriptedLLM

CAMERAS = ("front", "yard")
COLOURS = {"front": "red", "yard": "green"}


def texture(i: int, cam: str) -> np.ndarray:
    """Scene i // 6 of a camera: a blocky texture tinted by the camera's colour."""
    rng = np.random.default_rng(1000 * (CAMERAS.index(cam) + 1) + i // 6)
    img = np.repeat(np.repeat(rng.integers(30, 226, (6, 8, 3), dtype=np.uint8), 24, 0), 24, 1)
    img[..., 0 if cam == "front" else 1] = np.maximum(img[..., 0 if cam == "front" else 1], 200)
    return img


def _event_document(req) -> str:
    text = " ".join(texts(req))
    cam = next((c for c in CAMERAS if c in text), "front")
    return f"a {COLOURS[cam]} textured scene seen by the {cam} camera"


def monitor_verdict(req) -> str:
    """The monitor's verdict: a match when the latest frame shown is mostly white (the test's event)."""
    shown = images(req)
    bright = bool(shown) and float(shown[-1].array().mean()) > 200
    return verdict(bright, 0.9 if bright else 0.1, "a white flash" if bright else "the usual scene", "brightness")


def model() -> TagScript:
    """Documents each event by its camera's colour; answers the coarse stage directly."""
    return TagScript({"event_writer": _event_document, "node_merger": "merged textured scenes",
                      "two_phase_coarse": {"answer": "a red textured scene"},
                      "two_phase_fine": {"answer": "seen", "sufficient": True},
                      "qa_summarizer": "asked about the scene", "monitor": monitor_verdict}, default="ok")


def config() -> dict:
    return {"ingest": {"fps": 2.0}, "embed": {"text_model": "minilm"}, "commit": {"max_event_s": 3.0},
            "writer": {"retry_base_s": 0.05}}


def build_engine(path, n: int = 36, cameras=CAMERAS) -> Engine:
    """An engine over a fresh store holding ``n`` pushed frames per camera, documents written."""
    eng = Engine(path, config(), device="cpu", llm=ScriptedLLM(model()))
    for cam in cameras:
        for i in range(n):
            eng.push(cam, texture(i, cam), i * 0.5)
        eng.end_push(cam)
    assert eng.wait_for_documents(timeout=120)
    return eng


class ServerThread:
    """uvicorn serving an app on a free loopback port, in a daemon thread, configured as
    ``vam-engine serve`` configures it (server/http.py: connection and header bounds)."""

    def __init__(self, app, log_config=None):
        import socket

        import uvicorn

        from vam_engine.server.http import server_config

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(server_config(app, "127.0.0.1", self.port, app.state.options,
                                                   log_config=log_config))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self):
        import time

        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()


class SSEReader(threading.Thread):
    """Reads an SSE stream on a thread until ``want`` events of kind ``event`` (alert, turn)
    arrived: ``events`` holds (id as sent, the event's JSON)."""

    def __init__(self, url, headers, want, event="alert"):
        super().__init__(daemon=True)
        self.url, self.headers, self.want, self.event = url, headers, want, event
        self.events, self.ready, self.error = [], threading.Event(), None

    def run(self):
        import httpx

        try:
            with httpx.Client(timeout=httpx.Timeout(30.0)) as c, c.stream("GET", self.url, headers=self.headers) as r:
                assert r.status_code == 200, r.read()
                self.ready.set()
                block = {}
                for line in r.iter_lines():
                    if line == "":
                        if block.get("event") == self.event:
                            self.events.append((block["id"], json.loads(block["data"])))
                            if len(self.events) >= self.want:
                                return
                        block = {}
                    elif not line.startswith(":") and ":" in line:
                        k, v = line.split(":", 1)
                        block[k] = v.strip()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e
            self.ready.set()


WHITE = np.full((144, 192, 3), 255, np.uint8)


class Door:
    """Pushes the 'door' camera: each ``flash()`` is 2 s of ordinary scenes then 1 s of white
    frames, which fires the test monitor exactly once (repeat mode, 1 s checks)."""

    def __init__(self, eng):
        self.eng, self.t, self.k = eng, 0.0, 0

    def push(self, frame):
        self.eng.push("door", frame, self.t)
        self.t += 0.5
        assert self.eng.wait_for_monitors(10)

    def flash(self):
        for i in range(4):
            self.push(texture(i + 10 * self.k, "front"))
        self.k += 1
        for _ in range(2):
            self.push(WHITE)


def all_pages(c, path, headers=None, **params):
    """Every item of a keyset-paged endpoint (``next_cursor`` followed) and how many pages it took."""
    items, cursor, pages = [], None, 0
    while True:
        r = c.get(path, params={**params, **({"cursor": cursor} if cursor else {})}, headers=headers)
        assert r.status_code == 200, r.text
        body = r.json()
        items += body["items"]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            return items, pages
