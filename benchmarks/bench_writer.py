"""Memory writer: documents per second and queue lag against the rate events arrive.

Events of one camera are committed to a real store at a fixed offered rate (each event: two
moments with 160x120 JPEG frames and 64-d frame vectors, the second moment's commit closing the
previous event), while the ``MemoryWriter`` runs as it does in the engine: durable queue in
SQLite, batched model calls (``--batch`` 8), MiniLM document embeddings, the event forest with
its merges. Bodies:

- ``scripted``: a model that replies at once with a fixed 60-word document: what is left is our
  own overhead (queue reads, request building, embedding, transactions, forest).
- ``tiny-qwen``: a random-weight 2-layer Qwen2-VL (vam_engine/synthetic/tiny_qwen.py) on this CPU with the
  writer's real prompts and 8 frames per event, ``--max-tokens`` per reply (a random model never
  stops by itself, so every reply is that long).

For each offered rate over ``--seconds`` of arrivals: documents/s achieved while events arrive
and until the queue drains, the lag from an event's close to its stored document (p50, p95,
max), and the backlog when arrivals stop. Baseline, same process, same documents: MiniLM
embedding alone in batches of ``--batch`` (the writer can never beat the embedder it must
call), reported as the share of that ceiling the writer reaches counting every text it embeds
(event documents and forest merge summaries).

    python benchmarks/bench_writer.py                 # scripted at 2..500 events/s, tiny-qwen at 0.5..8
    python benchmarks/bench_writer.py --bodies scripted --rates 10 100 1000
"""
from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from _common import machine_info, percentiles, print_table, write_json

from vam_engine.config import EngineConfig
from vam_engine.embed.text import SentenceTransformerEmbedder
from vam_engine.llm import ScriptedLLM
from vam_engine.memory.forest import EventForest, ForestNodeRepository
from vam_engine.memory.records import GateRecord
from vam_engine.memory.commit import CommitBatch
from vam_engine.memory.records import PendingMoment
from vam_engine.memory.store import Store
from vam_engine.memory.vector_memory import VectorMemory
from vam_engine.reason.writer import MemoryWriter, WriterMemory

DOC = " ".join(f"word{i % 37}" for i in range(60))
GATE = GateRecord(100.0, 40.0, 0.2, float("nan"), None)


def _frame(rng) -> np.ndarray:
    small = rng.integers(30, 226, (6, 8, 3), dtype=np.uint8)
    return np.repeat(np.repeat(small, 20, 0), 20, 1)


def run_rate(body: str, rate: float, seconds: float, batch: int, llm, texts) -> dict:
    cfg = EngineConfig()
    with tempfile.TemporaryDirectory() as d:
        store = Store(d)
        vectors = VectorMemory(store.vector_table, store.root / "vectors", cfg.vectors)
        forest = EventForest(ForestNodeRepository(store.db), cfg.forest)
        memory = WriterMemory(store.doc_queue, store.events, store.moments, store.summaries)
        writer = MemoryWriter(memory, texts, llm, forest, cfg.writer.model_copy(update={"queue_events": 10**9}),
                              max_batch=batch).start()
        src = store.sources.open("cam", "bench", "bench", "bench").source_id
        rng = np.random.default_rng(0)
        n = max(2, int(rate * seconds))
        t_start = time.perf_counter()
        for i in range(n):
            due = t_start + i / rate
            now = time.perf_counter()
            if due > now:
                time.sleep(due - now)
            batch_rows = CommitBatch()
            for j in range(2):
                t = i * 2.0 + j
                ref = store.frames.ref("cam", src, t)
                store.frames.write(ref, _frame(rng), 80)
                v = rng.standard_normal(64).astype(np.float32)
                batch_rows.moments.append(PendingMoment("cam", src, t, None, None, ref, 160, 120, GATE,
                                                        embedding=v / np.linalg.norm(v), event_start=j == 0))
            store.commit(batch_rows)
            writer.notify()
        arrivals_s = time.perf_counter() - t_start
        backlog = store.doc_queue.backlog().pending
        close = CommitBatch()
        close.close_events.add("cam")
        store.commit(close)
        writer.notify()
        writer.wait_idle()
        total_s = time.perf_counter() - t_start
        s = writer.stats()
        writer.close()
        lags = np.array(writer.lags) if writer.lags else np.array([np.nan])
        forest.check()
        depth = max((r.height for r in forest.roots("cam")), default=0)
        vectors.close()
        store.close()
    return {"body": body, "rate": rate, "events": n, "docs_per_s": s.documents / total_s,
            "texts_per_s": (s.documents + s.merges) / total_s,
            "arrivals_s": arrivals_s, "drain_s": total_s - arrivals_s, "backlog_at_end": backlog,
            "lag_p50_s": percentiles(lags, 50)[0], "lag_p95_s": percentiles(lags, 95)[0],
            "lag_max_s": float(np.nanmax(lags)), "model_s": s.model_s, "merges": s.merges, "forest_depth": depth,
            "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens}


def embed_ceiling(texts, batch: int, n: int = 512) -> float:
    docs = [f"{DOC} {i}" for i in range(n)]
    texts.embed_texts(docs[:batch])
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        texts.embed_texts(docs[i:i + batch])
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bodies", nargs="+", default=["scripted", "tiny-qwen"], choices=["scripted", "tiny-qwen"])
    ap.add_argument("--rates", type=float, nargs="+", help="events/s (default: per body)")
    ap.add_argument("--seconds", type=float, default=5.0, help="seconds of arrivals per rate")
    ap.add_argument("--batch", type=int, default=8, help="requests per model call")
    ap.add_argument("--max-tokens", type=int, default=64, help="tiny-qwen: tokens per reply")
    ap.add_argument("--json", default="bench_writer")
    a = ap.parse_args()

    texts = SentenceTransformerEmbedder("minilm")
    ceiling = embed_ceiling(texts, a.batch)
    rows = []
    for body in a.bodies:
        if body == "scripted":
            llm = ScriptedLLM(lambda req: DOC)
            rates = a.rates or [2, 20, 100, 500]
        else:
            from vam_engine.synthetic.tiny_qwen import build_tiny_qwen2_vl
            from vam_engine.llm import prompts
            from vam_engine.llm.local_qwen import LocalQwenVL

            for role in prompts.SAMPLING.values():
                role.max_tokens = a.max_tokens
            path = build_tiny_qwen2_vl(tempfile.mkdtemp())
            llm = LocalQwenVL(path, max_batch=a.batch)
            rates = a.rates or [0.5, 2, 8]
        for rate in rates:
            r = run_rate(body, rate, a.seconds, a.batch, llm, texts)
            r["vs_embed_ceiling"] = r["texts_per_s"] / ceiling
            rows.append(r)
            print(f"  {body} @ {rate}/s: {r['docs_per_s']:.1f} docs/s, lag p50 {r['lag_p50_s']:.3f} s", flush=True)
        llm.close()
    headers = ["body", "events/s", "events", "docs/s", "docs+merges/s", "x embed-only", "backlog", "lag p50 s",
               "lag p95 s", "lag max s", "drain s", "merges", "depth"]
    table = print_table(headers, [[r["body"], r["rate"], r["events"], r["docs_per_s"], r["texts_per_s"],
                                   r["vs_embed_ceiling"],
                                   r["backlog_at_end"], r["lag_p50_s"], r["lag_p95_s"], r["lag_max_s"],
                                   r["drain_s"], r["merges"], r["forest_depth"]] for r in rows])
    print(f"embed-only ceiling (MiniLM, batches of {a.batch}): {ceiling:.0f} docs/s")
    path = write_json(a.json, {"args": vars(a), "embed_ceiling_docs_per_s": ceiling, "rows": rows,
                               "table": table, "machine": machine_info()})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
