"""bench_reason part 4, two-tier scheduling: frontend answer latency with an idle backend and
with the writer saturated, through ``vam_engine.llm.scheduler``.

One ``ScriptedLLM`` with a fixed latency per call (``--tier-latency-ms``, default 20 ms: one
batch, or one HTTP request). An answer is what the two-phase answerer sends to the model: a
coarse request, then a fine one (frontend), timed from the first submit to the second reply.
``--tier-answers`` answers one after another per row. Saturated: 4 writer threads each keep a
call of 100 event-document requests (backend) queued, so about 400 backend requests wait at
the model for the whole row. Rows:

- http: ``schedule_http`` over 4 connections (the backend on at most 3), one request per call;
- local: ``schedule_local``, one batch of at most 8 in flight (a frontend request waits at most
  for the batch in flight, up to one model latency per request);
- no tiers: the local adapter with the answer's requests forced into the backend queue (one
  FIFO queue, what an unscheduled body does), fewer answers (each waits for the backlog).

Target: saturated p50/p99 within 1.2x of idle. Backend req/s is what the writer got meanwhile
(it is never starved).
"""
from __future__ import annotations

import threading
import time

from _common import percentiles, print_table

from vam_engine.llm import LLMError, LLMRequest, Message, ScriptedLLM
from vam_engine.llm.base import BACKEND
from vam_engine.llm.scheduler import schedule_http, schedule_local

WRITERS = 4          # writer threads in the saturated rows
WRITER_CALL = 100    # event-document requests per writer call


def _request(tag: str, priority=None) -> LLMRequest:
    return LLMRequest([Message("system", [f"you are the {tag}"]), Message("user", ["the payload"])],
                      tag=tag, priority=priority)


def _answers(llm, n: int, priority) -> list:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        llm.generate([_request("two_phase_coarse", priority)])
        llm.generate([_request("two_phase_fine", priority)])
        out.append(time.perf_counter() - t0)
    return out


def _row(make, n: int, saturated: bool, *, priority=None) -> dict:
    llm = make()
    stop = threading.Event()

    def writer():
        while not stop.is_set():
            try:
                llm.generate([_request("event_writer") for _ in range(WRITER_CALL)])
            except LLMError:  # closed at the end of the row
                return

    threads = [threading.Thread(target=writer, daemon=True) for _ in range(WRITERS if saturated else 0)]
    for t in threads:
        t.start()
    if saturated:  # the backlog is in place before the first answer
        while llm.stats().queued[BACKEND] < WRITERS * WRITER_CALL // 2:
            time.sleep(0.005)
    done0, t0 = llm.stats().completed[BACKEND], time.perf_counter()
    lat = _answers(llm, n, priority)
    wall = time.perf_counter() - t0
    backend = llm.stats().completed[BACKEND] - done0
    queued = llm.stats().queued[BACKEND]
    stop.set()
    llm.close()  # fails the queued writer calls; their threads see an LLMError and stop
    for t in threads:
        t.join()
    p50, p99 = percentiles(lat, 50, 99, scale=1e3)
    return {"p50_ms": p50, "p99_ms": p99, "answers": n, "backend_req_per_s": backend / wall,
            "backend_queued_at_end": queued}


def part_two_tier(args) -> dict:
    lat_s = args.tier_latency_ms / 1e3
    n = args.tier_answers

    def body():
        return ScriptedLLM(lambda r: "ok", delay_s=lat_s)

    http = lambda: schedule_http(body(), concurrency=4)  # noqa: E731
    local = lambda: schedule_local(body(), max_batch=8)  # noqa: E731
    rows, out = [], {}
    for name, make in (("http (4 conn, backend <= 3)", http), ("local (1 batch of <= 8 in flight)", local)):
        idle, sat = _row(make, n, False), _row(make, n, True)
        r50, r99 = sat["p50_ms"] / idle["p50_ms"], sat["p99_ms"] / idle["p99_ms"]
        out[name] = {"idle": idle, "saturated": sat, "ratio_p50": r50, "ratio_p99": r99,
                     "target_met": r50 <= 1.2 and r99 <= 1.2}
        rows.append([name, idle["p50_ms"], idle["p99_ms"], sat["p50_ms"], sat["p99_ms"], r50, r99,
                     sat["backend_req_per_s"], "yes" if out[name]["target_met"] else "no"])
    fifo = _row(local, max(2, n // 10), True, priority=BACKEND)
    base = out["local (1 batch of <= 8 in flight)"]["idle"]
    out["no tiers (local, one FIFO queue)"] = {"saturated": fifo}
    rows.append(["no tiers (local, one FIFO queue)", base["p50_ms"], base["p99_ms"], fifo["p50_ms"], fifo["p99_ms"],
                 fifo["p50_ms"] / base["p50_ms"], fifo["p99_ms"] / base["p99_ms"], fifo["backend_req_per_s"], "no"])
    print(f"\nTwo-tier scheduling: answer latency (coarse + fine request), ms; scripted model "
          f"{args.tier_latency_ms:g} ms per call; {n} answers per row; saturated = ~{WRITERS * WRITER_CALL} "
          f"event-document requests queued")
    table = print_table(["adapter", "idle p50", "idle p99", "saturated p50", "saturated p99", "x p50", "x p99",
                         "backend req/s", "<= 1.2x"], rows)
    out["table"] = table
    out["latency_ms"] = args.tier_latency_ms
    return out
