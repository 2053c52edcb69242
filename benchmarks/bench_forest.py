"""Event Forest: insert cost, depth and retrieval latency against the number of events.

Data: ``--dim`` (384) float32 event embeddings that drift between scenes (a new scene center
every ~20 events, plus noise), one camera, events 8 s long every 10 s with 4 keyframes each.

Rows, per N (1e2, 1e3, 1e4; ``--full`` adds 1e5), measured in one process on the same data:

- insert µs/event: ``EventForest(ForestNodeRepository(store.db))`` (every insert one SQLite transaction in a fresh
  Store) and ``EventForest(None)`` (in memory only: the joins and bookkeeping alone);
- stale/ins: internal nodes made stale per insert (summaries the writer owes: 1 per merge under
  the seed's new-parent policy, the balanced join changes the nodes on the path it walks);
- depth: the forest's largest height, against 1.45 log2(N + 2) (the AVL bound), 2 log2 N, and the
  depth the seed's policy reaches on the same embeddings (``reference_policy_depth``: a new
  parent over the best-scoring adjacent pair, simulated in this process, up to ``--ref-max``);
- retrieve p50/p99 (k=2, all nodes of the camera, greedy lineage pruning) against a numpy
  brute force top-k over the same node embeddings (BLAS matmul + argpartition, no pruning: the
  cost floor of scoring every node), timed query by query in alternation with it. The forest
  scores small cameras (<= 4M multiply-adds, ~1e4 nodes at d=384) with single-threaded einsum
  instead of BLAS, slower on an idle machine but free of the ~8 ms BLAS thread wake-ups on a
  busy one (see vam_engine/vectors/bodies.py), so at N <= 1e3 it trails the baseline by design;
- reopen: constructing a new EventForest on the store (loads every node);
- the device index (``--body``, default "torch-cpu": the torch body on CPU tensors; "cuda" on a
  GPU): an in-memory ``EventForest(None, device=...)`` fed the same events (insert µs/event),
  its first retrieval (which uploads every row), then retrieve p50/p99 timed in the same
  alternation as the numpy forest's and the brute force's, its ratio to the numpy forest's p50,
  and the share of queries where it returned exactly the numpy forest's nodes (k=2). On the CPU
  the torch body pays torch's per-op overhead (~10 small ops per pick) for the same arithmetic:
  it exists to be checked against numpy without a GPU, not to be fast there. Its CPU ops run
  on ``--torch-threads`` (1) threads, as the numpy forest's small scans do.

Usage (from the repository root, with the package importable):

    python benchmarks/bench_forest.py            # 1e2, 1e3, 1e4 (~1 min on 2 cores)
    python benchmarks/bench_forest.py --full     # adds 1e5 (~10 min)
    python benchmarks/bench_forest.py --max-n 1000 --queries 200   # smoke run
    python benchmarks/bench_forest.py --body cuda   # the device rows on a GPU

Prints one table and writes benchmarks/results/bench_forest.json.
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import percentiles, print_table, write_json

from vam_engine.config import ForestConfig
from vam_engine.memory import Store
from vam_engine.memory.forest import EventForest, ForestNodeRepository, reference_policy_depth
from vam_engine.vectors import VectorError, resolve_rows_device


def make_events(n: int, d: int, seed: int):
    """Scene-drifting unit embeddings (new center every ~20 events, cos ~0.9 within a scene)."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, d), np.float32)
    center = None
    for i in range(n):
        if center is None or rng.random() < 1 / 20:
            center = rng.standard_normal(d).astype(np.float32)
            center /= np.linalg.norm(center)
        e = center + 0.35 * rng.standard_normal(d).astype(np.float32) / math.sqrt(d)
        out[i] = e / np.linalg.norm(e)
    return out


def feed(forest: EventForest, embs: np.ndarray) -> tuple[float, int]:
    """Insert every event; returns (seconds, stale nodes reported)."""
    stale = 0
    t0 = time.perf_counter()
    for i, e in enumerate(embs):
        ts = 10.0 * i
        kf = [(4 * i + j, ts + 2.0 * j) for j in range(4)]
        stale += len(forest.insert_event("cam", i, ts, ts + 8.0, kf, f"event {i}", e))
    return time.perf_counter() - t0, stale


def numpy_topk(x: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    s = x @ q
    part = np.argpartition(-s, k - 1)[:k]
    return part[np.argsort(-s[part])]


def interleaved_latencies(fns: dict, queries) -> dict:
    """Seconds per single-query call of each function, alternating the functions query by query
    so a burst of load from elsewhere on the machine hits them alike."""
    for fn in fns.values():
        fn(queries[0])
        fn(queries[1])
    out = {name: [] for name in fns}
    for q in queries:
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn(q)
            out[name].append(time.perf_counter() - t0)
    return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-n", type=float, default=1e4, help="largest N (default 1e4)")
    ap.add_argument("--full", action="store_true", help="up to 1e5 events")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--ref-max", type=float, default=1e5, help="largest N for the reference policy simulation")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--body", default="torch-cpu",
                    help="the device index's rows: torch-cpu (default), cuda, cuda:N; none: no device rows")
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="--body torch-cpu: torch's CPU threads (default 1: as the numpy forest's small scans, "
                         "free of thread wake-ups on a busy machine; 0 leaves torch's default)")
    ap.add_argument("--json", default="bench_forest", help="results/<name>.json")
    return ap.parse_args(argv)


def insert_figures(forest: EventForest, store, embs: np.ndarray, cfg) -> dict:
    """Insert cost into the SQLite-backed forest and an in-memory one, stale nodes, reopen time."""
    n = len(embs)
    sql_s, stale = feed(forest, embs)
    forest.check()
    t0 = time.perf_counter()
    reopened = EventForest(ForestNodeRepository(store.db), cfg)
    reopen_s = time.perf_counter() - t0
    assert len(reopened) == len(forest)
    mem_s, _ = feed(EventForest(None, cfg), embs)
    return {"nodes": len(forest), "insert_us_sqlite": sql_s / n * 1e6, "insert_us_memory": mem_s / n * 1e6,
            "stale_per_insert": stale / n, "reopen_s": reopen_s}


def depth_figures(forest: EventForest, embs: np.ndarray, cfg, ref_max: float) -> dict:
    """The forest's height against the AVL bound, 2 log2 N, and the seed's policy's depth."""
    n = len(embs)
    depth = max(r.height for r in forest.roots("cam"))
    ref_depth, ref_s = None, None
    if n <= ref_max:
        t0 = time.perf_counter()
        ref_depth = reference_policy_depth(embs, root_cap=cfg.root_cap, lam=cfg.merge_lambda)[-1]
        ref_s = time.perf_counter() - t0
    return {"depth": depth, "avl_bound": 1.45 * math.log2(n + 2), "two_log2_n": 2 * math.log2(n),
            "ref_depth": ref_depth, "ref_depth_over_n": None if ref_depth is None else ref_depth / n,
            "ref_sim_s": ref_s}


def device_forest(a, embs: np.ndarray, cfg) -> tuple[EventForest | None, dict]:
    """An in-memory forest on ``--body`` fed the same events, and its insert and first-retrieval
    (every row uploaded) cost."""
    if a.body == "none":
        return None, {}
    warm = EventForest(None, cfg, device=a.body)   # imports torch and warms its allocator, untimed
    feed(warm, embs[:8])
    forest = EventForest(None, cfg, device=a.body)
    dev_s, _ = feed(forest, embs)
    t0 = time.perf_counter()
    forest.retrieve(embs[0], k=a.k)
    first_s = time.perf_counter() - t0
    return forest, {"device_index": forest.index_device, "insert_us_device": dev_s / len(embs) * 1e6,
                    "device_first_retrieve_ms": first_s * 1e3}


def picks(forest: EventForest, q, k: int) -> list[int]:
    return [n.node_id for n, _ in forest.retrieve(q, k=k)]


def retrieval_figures(forest: EventForest, dev: EventForest | None, embs: np.ndarray, a) -> dict:
    """retrieve p50/p99 against a numpy brute-force top-k over the same node embeddings (and the
    device forest's), queries near random events' embeddings, timed in alternation; whether their
    best picks agree; the device forest's picks against the numpy forest's."""
    n = len(embs)
    rng = np.random.default_rng(a.seed + 1)
    src = rng.integers(0, n, a.queries)
    qs = embs[src] + 0.5 * rng.standard_normal((a.queries, a.dim)).astype(np.float32) / math.sqrt(a.dim)
    qs = (qs / np.linalg.norm(qs, axis=1, keepdims=True)).astype(np.float32)
    ids, x = forest.node_embeddings("cam")
    x = np.ascontiguousarray(x)
    fns = {"retrieve": lambda q: forest.retrieve(q, k=a.k), "numpy": lambda q: numpy_topk(x, q, a.k)}
    if dev is not None:
        fns["device"] = lambda q: dev.retrieve(q, k=a.k)
    lats = interleaved_latencies(fns, qs)
    # sanity: the greedy's first pick is the brute force's best node
    agree = np.mean([forest.retrieve(q, k=1)[0][0].node_id == int(ids[numpy_topk(x, q, 1)[0]]) for q in qs[:200]])
    p50, p99 = percentiles(lats["retrieve"], 50, 99, scale=1e3)
    b50, b99 = percentiles(lats["numpy"], 50, 99, scale=1e3)
    out = {"retrieve_p50_ms": p50, "retrieve_p99_ms": p99, "numpy_topk_p50_ms": b50, "numpy_topk_p99_ms": b99,
           "retrieve_over_numpy": p50 / b50, "top1_agrees_with_brute_force": float(agree)}
    if dev is not None:
        d50, d99 = percentiles(lats["device"], 50, 99, scale=1e3)
        same = np.mean([picks(forest, q, a.k) == picks(dev, q, a.k) for q in qs[:500]])
        out.update(device_retrieve_p50_ms=d50, device_retrieve_p99_ms=d99, device_over_numpy_forest=d50 / p50,
                   device_picks_equal=float(same))
    return out


def size_row(a, n: int, cfg) -> dict:
    """Every figure at N events, on a fresh store."""
    embs = make_events(n, a.dim, a.seed)
    tmp = Path(tempfile.mkdtemp(prefix="bench_forest_"))
    try:
        store = Store(tmp / "store")
        forest = EventForest(ForestNodeRepository(store.db), cfg)
        dev, dev_figures = device_forest(a, embs, cfg)
        r = {"n": n, **insert_figures(forest, store, embs, cfg), **depth_figures(forest, embs, cfg, a.ref_max),
             **dev_figures, **retrieval_figures(forest, dev, embs, a)}
        store.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    order = ("n", "nodes", "insert_us_sqlite", "insert_us_memory", "stale_per_insert", "depth", "avl_bound",
             "two_log2_n", "ref_depth", "ref_depth_over_n", "ref_sim_s", "retrieve_p50_ms", "retrieve_p99_ms",
             "numpy_topk_p50_ms", "numpy_topk_p99_ms", "retrieve_over_numpy", "top1_agrees_with_brute_force",
             "reopen_s", *DEVICE_KEYS)
    return {**{k: r[k] for k in order if k in r}, "loadavg_1min": os.getloadavg()[0]}


DEVICE_KEYS = ("device_index", "insert_us_device", "device_first_retrieve_ms", "device_retrieve_p50_ms",
               "device_retrieve_p99_ms", "device_over_numpy_forest", "device_picks_equal")


def device_table(rows: list[dict]) -> str:
    """The device index's rows against the numpy forest's."""
    headers = ["N", "nodes", "body", "ins us", "1st ret ms", "ret p50 ms", "ret p99 ms", "numpy ret p50",
               "x numpy forest", "picks equal"]
    keys = ("n", "nodes", "device_index", "insert_us_device", "device_first_retrieve_ms", "device_retrieve_p50_ms",
            "device_retrieve_p99_ms", "retrieve_p50_ms", "device_over_numpy_forest", "device_picks_equal")
    return print_table(headers, [[r[k] for k in keys] for r in rows])


def main(argv=None) -> int:
    a = parse_args(argv)
    top = int(1e5 if a.full else a.max_n)
    sizes = [n for n in (100, 1_000, 10_000, 100_000) if n <= top]
    cfg = ForestConfig()
    if a.body != "none":
        try:
            resolve_rows_device(a.body)
        except VectorError as e:
            print(f"bench_forest.py: --body {a.body}: {e}", file=sys.stderr)
            return 2
    if a.body == "torch-cpu" and a.torch_threads > 0:
        import torch  # noqa: PLC0415

        torch.set_num_threads(a.torch_threads)
    print(f"event forest: d={a.dim}, k={a.k}, root_cap={cfg.root_cap}, lambda={cfg.merge_lambda}, "
          f"keyframes={cfg.keyframes}, N={sizes}, {a.queries} queries", flush=True)
    rows = []
    t_start = time.perf_counter()
    for n in sizes:
        r = size_row(a, n, cfg)
        rows.append(r)
        print(f"  N={n:>7,}: {r['nodes']:,} nodes, insert {r['insert_us_sqlite']:.0f} us (sqlite) / "
              f"{r['insert_us_memory']:.0f} us (memory), depth {r['depth']} (ref {r['ref_depth']}), retrieve p50 "
              f"{r['retrieve_p50_ms']:.3f} ms [{time.perf_counter() - t_start:.0f} s]", flush=True)
    print()
    headers = ["N", "nodes", "ins us sqlite", "ins us mem", "stale/ins", "depth", "1.45log2(N+2)", "2log2N",
               "ref depth", "ref/N", "ret p50 ms", "ret p99 ms", "np top-k p50", "np top-k p99", "x numpy",
               "top1 agree", "reopen s", "load"]
    keys = ("n", "nodes", "insert_us_sqlite", "insert_us_memory", "stale_per_insert", "depth", "avl_bound",
            "two_log2_n", "ref_depth", "ref_depth_over_n", "retrieve_p50_ms", "retrieve_p99_ms", "numpy_topk_p50_ms",
            "numpy_topk_p99_ms", "retrieve_over_numpy", "top1_agrees_with_brute_force", "reopen_s", "loadavg_1min")
    table = print_table(headers, [[r[k] for k in keys] for r in rows])
    print(f"\nload: 1-minute load average after each row ({os.cpu_count()} CPUs); above ~1 on 2 CPUs, "
          f"BLAS scans stall ~8 ms waking a thread (both retrieve above 1e4 nodes and the baseline)")
    if a.body != "none":
        print(f"\nthe device index (--body {a.body}) against the numpy forest, same events and queries:")
        table += "\n\n" + device_table(rows)
    skipped = [r["n"] for r in rows if r["ref_depth"] is None]
    if skipped:
        print(f"\nreference policy not simulated for N in {skipped} (--ref-max {a.ref_max:g})")
    path = write_json(a.json, {"args": vars(a), "config": cfg.model_dump(), "rows": rows, "table": table,
                               "wall_s": time.perf_counter() - t_start})
    print(f"\nwrote {path} ({time.perf_counter() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
