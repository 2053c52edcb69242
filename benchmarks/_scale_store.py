"""Shared by benchmarks/bench_scale.py and its test: a generated store of many cameras with one
planted scene, and a loopback OpenAI-compatible model server that counts what each request
carries.

The store: each camera is pushed a few small frames (``Engine.push``, no video), its events
documented by a scripted writer: every camera shows "an empty grey corridor" except the planted
one, whose events show "a person with a red umbrella at the bus stop". The server answers each
two-phase role in its protocol (the coarse stage asks to retrieve, the fine stage answers) and
records, per request, its stage, its images (image parts received) and its estimated tokens
(images x ``image_tokens`` + text characters / 4, the budget's own estimate).
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

from vam_engine.engine import Engine
from vam_engine.llm import ScriptedLLM, prompts

PLANTED_DOC = "a person with a red umbrella waits at the bus stop"
OTHER_DOC = "an empty grey corridor with a closed door"
QUESTION = "Where did you see the red umbrella?"
FRAME_HW = (48, 64)
STORE_CONFIG = {"ingest": {"fps": 2.0}, "embed": {"text_model": "minilm"}, "commit": {"max_event_s": 2.0},
                "retention": {"enabled": False}}


def camera_ids(n: int) -> list[str]:
    return [f"cam{i:02d}" for i in range(n)]


def planted_camera(n: int) -> str:
    """The camera the planted scene is on: one in the middle, never the first or the last id."""
    return camera_ids(n)[n // 2]


def _writer(planted: str):
    def reply(req) -> str:
        if req.tag == "event_writer":
            cam = json.loads(req.messages[1].content[0])["camera"]
            return f"{PLANTED_DOC} (camera {cam})" if cam == planted else f"{OTHER_DOC} (camera {cam})"
        if req.tag == "node_merger":
            return "merged: " + " | ".join(p["summary"][:60] for p in json.loads(req.messages[1].content[0])["parts"])
        return "ok"
    return reply


def frames_of(camera: int, k: int) -> np.ndarray:
    """The k-th frame pushed to a camera: flat noise of its own seed (every frame new to the gates)."""
    rng = np.random.default_rng(camera * 1000 + k)
    return rng.integers(0, 256, (*FRAME_HW, 3), dtype=np.uint8)


def push_cameras(eng: Engine, n: int, seconds: float, fps: float) -> None:
    """Push every camera ``seconds`` of frames at ``fps``, interleaved, then end the pushes."""
    steps = int(round(seconds * fps))
    for k in range(steps):
        for i, cam in enumerate(camera_ids(n)):
            eng.push(cam, frames_of(i, k), k / fps)
    for cam in camera_ids(n):
        eng.end_push(cam)


def build_store(root: Path, n: int, *, seconds: float = 4.0, fps: float = 2.0) -> Path:
    """A store of ``n`` cameras under ``root`` (documented, forest built); returns its path."""
    path = Path(root) / f"store_{n}"
    eng = Engine(path, STORE_CONFIG, device="cpu", llm=ScriptedLLM(_writer(planted_camera(n))))
    try:
        push_cameras(eng, n, seconds, fps)
        if not eng.flush(timeout=600) or not eng.wait_for_documents(timeout=600):
            raise RuntimeError(f"the {n}-camera store did not settle")
    finally:
        eng.close()
    return path


# -- the counting model server -------------------------------------------------------------------
@dataclass(frozen=True)
class Received:
    """One request as the server received it."""
    stage: str
    images: int
    tokens: int
    text: str


def _stage(body: dict) -> str:
    msgs = body.get("messages", [])

    def text_of(m) -> str:
        c = m.get("content")
        return c if isinstance(c, str) else " ".join(p.get("text", "") for p in c if p.get("type") == "text")
    first, last = (text_of(msgs[0]), text_of(msgs[-1])) if msgs else ("", "")
    if first.startswith(prompts.TWO_PHASE_SYSTEM[:40]):
        if last.endswith(prompts.TWO_PHASE_FINE[-40:]):
            return "fine"
        if last.endswith(prompts.TWO_PHASE_INTENT[-40:]):
            return "intent"
        return "coarse" if msgs[-1].get("role") == "user" and len(msgs) == 4 else "coarse_repair"
    if first.startswith(prompts.QA_SUMMARIZER[:40]):
        return "qa_summary"
    return "other"


class CountingServer:
    """A loopback OpenAI-compatible chat server (``url``) that records every request
    (``received``) and answers two-phase's roles: the coarse stage retrieves ``intent``, the
    fine stage answers as sufficient."""

    def __init__(self, image_tokens: int = 256, intent: str = "a red umbrella"):
        self.image_tokens = image_tokens
        self.intent = intent
        self.received: list[Received] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer._record(body)
                payload = json.dumps({"id": "x", "object": "chat.completion", "choices": [{
                    "index": 0, "message": {"role": "assistant", "content": outer._reply(body)},
                    "finish_reason": "stop"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    def _record(self, body: dict) -> None:
        images, chars, texts = 0, 0, []
        for m in body.get("messages", []):
            c = m.get("content")
            for p in ([{"type": "text", "text": c}] if isinstance(c, str) else c or []):
                if p.get("type") == "image_url":
                    images += 1
                elif p.get("type") == "text":
                    chars += len(p.get("text", ""))
                    texts.append(p.get("text", ""))
        tokens = images * self.image_tokens + -(-chars // prompts.CHARS_PER_TOKEN)
        with self._lock:
            self.received.append(Received(_stage(body), images, tokens, "\n".join(texts)))

    def _reply(self, body: dict) -> str:
        stage = _stage(body)
        if stage.startswith("coarse") or stage == "intent":
            return json.dumps({"retrieve": self.intent})
        if stage == "fine":
            return json.dumps({"answer": "seen on the planted camera", "sufficient": True})
        return "asked about the red umbrella"

    def of(self, stage: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.stage == stage]

    def __enter__(self) -> "CountingServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
