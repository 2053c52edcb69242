"""bench_reason part 5: ``ask`` while ingest is busy.

An engine whose image embedder takes ``--busy-embed-ms`` per frame (a slow GPU, a big model)
while a robot loop pushes frames at ``--busy-fps`` as fast as ``push`` accepts them: ingest runs
a backlog of queued frames behind the embedder the whole time (``ingest.queue_frames`` 64, plus
what the gate and commit stages hold). Meanwhile questions are asked (two-phase, a scripted model
answering the coarse stage at once after ``--tier-latency-ms``):

- default: ``ask`` answers from what is committed now (issue 9: answers never wait for ingest);
- ``wait_for_ingest=True``: the opt-in that first waits for every queued frame (the old
  behaviour, for evaluation that pauses the stream clock).

Reported: response latency p50/p99 (``Answer.timings['response_s']``) and the frames queued
when each question was asked.
"""
from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from _common import percentiles, print_table

from vam_engine import Engine
from vam_engine.llm.scripted import ScriptedLLM


class _SlowEmbedder:
    def __init__(self, inner, per_frame_s: float):
        self.inner = inner
        self.per_frame_s = per_frame_s

    def embed_images(self, frames, *a, **kw):
        time.sleep(self.per_frame_s * len(frames))
        return self.inner.embed_images(frames, *a, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _reply(req) -> str:
    if req.tag == "qa_summarizer":
        return "the robot saw a textured scene"
    return '{"answer": "a textured scene", "sufficient": true}'


def _frame(i: int) -> np.ndarray:
    rng = np.random.default_rng(i)  # every frame different: the gates keep them all
    return rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)


def part_ask_busy(args) -> dict:
    lat = args.tier_latency_ms / 1e3
    cfg = {"ingest": {"fps": args.busy_fps}, "writer": {"enabled": False}, "retention": {"enabled": False}}
    rows, out = [], {}
    with tempfile.TemporaryDirectory() as d:
        eng = Engine(Path(d) / "s", cfg, device="cpu", llm=ScriptedLLM(_reply, delay_s=lat))
        try:
            eng.embedder = _SlowEmbedder(eng.embedder, args.busy_embed_ms / 1e3)  # before the pipeline
            for i in range(8):
                eng.push("robot", _frame(i), i / args.busy_fps)
            eng.flush()
            pushed = [8]
            stop = threading.Event()

            def robot():
                while not stop.is_set():
                    i = pushed[0]
                    eng.push("robot", _frame(i), i / args.busy_fps)
                    pushed[0] += 1
            th = threading.Thread(target=robot, daemon=True)
            th.start()
            time.sleep(1.0)  # the backlog builds up

            def queued() -> int:  # pushed but not committed yet (random frames: the gates keep all)
                return pushed[0] - len(eng.moments("robot"))

            for name, wait, n in (("ask (answers from what is committed)", False, args.busy_asks),
                                  ("ask(wait_for_ingest=True)", True, max(2, args.busy_asks // 10))):
                lat_s, backlog = [], []
                for _ in range(n):
                    backlog.append(queued())
                    ans = eng.ask("what does the robot see?", mode="two_phase", wait_for_ingest=wait)
                    lat_s.append(ans.timings["response_s"])
                    time.sleep(0.05)
                p50, p99 = percentiles(lat_s, 50, 99, scale=1e3)
                out[name] = {"asks": n, "p50_ms": p50, "p99_ms": p99, "queued_frames_median": float(np.median(backlog))}
                rows.append([name, n, p50, p99, float(np.median(backlog))])
            stop.set()
            th.join(30)
        finally:
            eng.close()
    ratio = out["ask(wait_for_ingest=True)"]["p50_ms"] / out["ask (answers from what is committed)"]["p50_ms"]
    out["wait_over_now_p50"] = ratio
    print(f"\nask while ingest is busy: embedder {args.busy_embed_ms:g} ms/frame, frames pushed at "
          f"{args.busy_fps:g} fps as fast as accepted, model {args.tier_latency_ms:g} ms per call")
    out["table"] = print_table(["call", "asks", "p50 ms", "p99 ms", "frames queued (median)"], rows)
    return out
