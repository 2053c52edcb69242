"""Vector search: single-query latency (p50/p99) and recall@10 against store size.

Data: ``d``-dimensional (512) float32 unit vectors with structure (cluster centers, one per
1000 vectors, plus a rank-32 component and isotropic noise; see ``make_data``), so an ANN index
has something to find and its recall is not trivially 1; queries are perturbed database
vectors (cos ~ 0.96 to their source).
Ground truth is an exact float32 matmul over the whole set.

Rows, measured on the same data in one run:

- ``python loop (reference)``: the reference implementation's search: a Python loop computing
  the cosine with each stored vector one at a time (only up to ``--loop-max`` vectors);
- ``numpy matmul+argpartition``: the vectorized brute force (the baseline for speedups);
- ``faiss IndexFlatIP+IDMap2``: faiss's exact index;
- ``VectorSpace flat``: our exact search (numpy body; ``torch-cpu`` body up to ``--torch-max``);
- ``VectorSpace ivf nprobe=..``, ``VectorSpace hnsw ef=..``: the ANN indexes, sweeping nprobe /
  efSearch up to the first value reaching ``--target-recall`` (and the engine's default);
- ``... +allowed N%``: filtered searches (allowed = a random N% of the ids), recall against
  the exact search over that subset.

``GB/s`` for exact rows is the bytes of vectors scanned per query over the p50 latency, next to
the measured memory copy bandwidth (bytes read + written per second: the physical limit).

Usage (from the repository root, with the package importable):

    python benchmarks/bench_search.py                     # 1e3, 1e4, 1e5: about 2-3 min on 2 cores
    python benchmarks/bench_search.py --max-size 1000000  # full run, adds 1e6 (~10 min, ~8 GB RAM)
    python benchmarks/bench_search.py --quick             # 1e3, 1e4, few queries (smoke run)
    python benchmarks/bench_search.py --sizes 1000000 --json bench_search_1e6   # the 1e6 rows only

Prints one table and writes benchmarks/results/bench_search.json.
"""
from __future__ import annotations

import argparse
import heapq
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import print_table, write_json  # noqa: E402

from vam_engine.config import VectorConfig  # noqa: E402
from vam_engine.memory import vectors as V  # noqa: E402


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def make_data(n: int, d: int, nq: int, seed: int):
    """Unit vectors = cluster center (one per 1000 vectors) + a rank-32 component shared by all
    clusters + isotropic noise (weights 1, 1, 0.3, then normalized), like scene clusters with
    continuous variation inside; queries = database vectors + noise (cos ~ 0.96)."""
    rng = np.random.default_rng(seed)
    nc = max(1, n // 1000)
    c = _unit(rng.standard_normal((nc, d), dtype=np.float32))
    basis = rng.standard_normal((32, d), dtype=np.float32)
    x = np.empty((n, d), np.float32)
    step = 65536
    for a in range(0, n, step):
        b = min(n, a + step)
        low = _unit(rng.standard_normal((b - a, 32), dtype=np.float32) @ basis)
        noise = _unit(rng.standard_normal((b - a, d), dtype=np.float32))
        x[a:b] = _unit(c[rng.integers(0, nc, b - a)] + low + 0.3 * noise)
    src = rng.integers(0, n, nq)
    q = _unit(x[src] + 0.3 * _unit(rng.standard_normal((nq, d), dtype=np.float32)))
    ids = np.arange(n, dtype=np.int64) * 3 + 7  # ids are not row numbers
    return x, ids, q.astype(np.float32)


def numpy_topk(x: np.ndarray, q: np.ndarray, k: int, rows: np.ndarray | None = None) -> np.ndarray:
    """Exact top-k row indices (the vectorized baseline; also the ground truth)."""
    if rows is not None:
        return rows[numpy_topk(x[rows], q, k)]
    out = np.empty((len(q), k), np.int64)
    for a in range(0, len(q), 64):
        s = q[a:a + 64] @ x.T
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(s, part, 1), axis=1)
        out[a:a + 64] = np.take_along_axis(part, order, 1)
    return out


def python_loop_topk(x: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    """The reference implementation's way: one cosine per stored vector, in Python."""
    qn = float(np.linalg.norm(q))
    scores = []
    for i in range(len(x)):
        v = x[i]
        scores.append((float(np.dot(q, v)) / (qn * float(np.linalg.norm(v)) + 1e-12), i))
    return [i for _, i in heapq.nlargest(k, scores)]


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    k = truth.shape[1]
    return float(np.mean([len(set(f[f >= 0].tolist()) & set(t.tolist())) / k for f, t in zip(found, truth)]))


def latencies(fn, q: np.ndarray, budget_s: float, min_n: int = 5) -> list[float]:
    """Seconds per single-query call over the queries, stopping after ``budget_s`` (at least
    ``min_n`` calls), after two untimed warm-up calls."""
    fn(q[:1])
    fn(q[1:2] if len(q) > 1 else q[:1])
    out = []
    end = time.perf_counter() + budget_s
    for i in range(len(q)):
        t0 = time.perf_counter()
        fn(q[i:i + 1])
        out.append(time.perf_counter() - t0)
        if len(out) >= min_n and time.perf_counter() > end:
            break
    return out


def copy_bandwidth_gbs() -> float:
    """Bytes read + written per second by a 256 MiB copy (best of 5)."""
    a = np.ones(64 << 20, np.float32)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return 2 * a.nbytes / best / 1e9


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-size", type=float, default=1e5, help="largest store size (1e6 for the full run)")
    ap.add_argument("--sizes", default=None, help="comma-separated sizes instead of 1e3, 1e4, ... up to --max-size")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--queries", type=int, default=200, help="queries for recall (and latency)")
    ap.add_argument("--budget", type=float, default=1.5, help="seconds of single-query timing per row")
    ap.add_argument("--target-recall", type=float, default=0.95)
    ap.add_argument("--loop-max", type=int, default=10_000, help="largest size for the Python loop")
    ap.add_argument("--torch-max", type=int, default=100_000, help="largest size for the torch-cpu body")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="smoke run: sizes 1e3 and 1e4, 50 queries")
    ap.add_argument("--json", default="bench_search", help="results/<name>.json")
    a = ap.parse_args(argv)
    if a.quick:
        a.max_size, a.queries, a.budget = min(a.max_size, 1e4), min(a.queries, 50), 0.3
    sizes = [n for n in (1_000, 10_000, 100_000, 1_000_000) if n <= int(a.max_size)]
    if a.sizes:
        sizes = [int(float(v)) for v in a.sizes.split(",")]
    k, d = a.k, a.dim
    faiss = V._faiss()
    bw = copy_bandwidth_gbs()
    print(f"vector search: d={d}, k={k}, sizes={sizes}, {a.queries} queries, faiss threads "
          f"{faiss.omp_get_max_threads()}, memory copy bandwidth {bw:.1f} GB/s (read + write)", flush=True)
    rows, summary = [], []
    t_start = time.perf_counter()

    for n in sizes:
        x, ids, q = make_data(n, d, a.queries, a.seed)
        truth_rows = numpy_topk(x, q, k)
        truth = ids[truth_rows]
        base = {}

        def row(method, param, lat, rec, build_s=None, scanned=None):
            p50, p99 = float(np.percentile(lat, 50)), float(np.percentile(lat, 99))
            r = {"n": n, "method": method, "param": param, "build_s": build_s, "p50_ms": p50 * 1e3,
                 "p99_ms": p99 * 1e3, "recall@10": rec, "calls": len(lat),
                 "gb_s": None if scanned is None else scanned / p50 / 1e9}
            if "numpy" in base:
                r["speedup_vs_numpy"] = base["numpy"] / p50
            rows.append(r)
            print(f"  n={n:>8,} {method:<34} {str(param):<12} p50 {p50 * 1e3:9.3f} ms  p99 "
                  f"{p99 * 1e3:9.3f} ms  recall {rec:.3f}", flush=True)
            return r

        nbytes = n * d * 4
        # baselines
        if n <= a.loop_max:
            found = []

            def loop(qq):
                found.append(python_loop_topk(x, qq[0], k))
            lat = latencies(loop, q, a.budget, min_n=3)
            nq = len(found) - 2
            got = ids[np.array(found[2:2 + nq])]
            row("python loop (reference)", "-", lat, recall(got, truth[:nq]))
        lat = latencies(lambda qq: numpy_topk(x, qq, k), q, a.budget)
        base["numpy"] = float(np.percentile(lat, 50))
        row("numpy matmul+argpartition", "-", lat, recall(ids[numpy_topk(x, q, k)], truth), scanned=nbytes)
        t0 = time.perf_counter()
        fi = faiss.IndexIDMap2(faiss.IndexFlatIP(d))
        fi.add_with_ids(x, ids)
        bs = time.perf_counter() - t0
        lat = latencies(lambda qq: fi.search(qq, k), q, a.budget)
        row("faiss IndexFlatIP+IDMap2", "-", lat, recall(fi.search(q, k)[1], truth), bs, scanned=nbytes)
        del fi

        # ours, exact
        bodies = ["cpu"] + (["torch-cpu"] if n <= a.torch_max else [])
        for dev in bodies:
            t0 = time.perf_counter()
            sp = V.VectorSpace("bench", d, VectorConfig(index="flat"), device=dev)
            sp.add(ids, x)
            bs = time.perf_counter() - t0
            lat = latencies(lambda qq: sp.search(qq, k), q, a.budget)
            row(f"VectorSpace flat ({dev})", "-", lat, recall(sp.search(q, k)[1], truth), bs, scanned=nbytes)
            if dev == "cpu":
                for frac in (0.01, 0.2):
                    allowed = np.sort(np.random.default_rng(1).choice(n, max(k, int(frac * n)), replace=False))
                    tr = ids[numpy_topk(x, q, k, rows=allowed)]
                    al = ids[allowed]
                    lat = latencies(lambda qq: sp.search(qq, k, allowed=al), q, a.budget)
                    row("VectorSpace flat +allowed", f"{frac:.0%}", lat, recall(sp.search(q, k, allowed=al)[1], tr))
            del sp

        # ours, ANN
        for kind in ("ivf", "hnsw"):
            cfg = VectorConfig(index=kind, ann_min_size=1)
            t0 = time.perf_counter()
            sp = V.VectorSpace("bench", d, cfg, background_build=False)
            sp.add(ids, x)
            bs = time.perf_counter() - t0
            if kind == "ivf":
                nlist = sp.stats()["nlist"]
                default = V.ivf_nprobe(nlist)
                sweep = sorted({p for p in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if p <= nlist} | {default})
                attr, label = "nprobe", "nprobe"
            else:
                default = V.HNSW_EF_SEARCH
                sweep = sorted({16, 32, 64, 128, 256, 512, default})
                attr, label = "ef_search", "ef"
            reached = None
            for p in sweep:
                setattr(sp, attr, p)
                rec = recall(sp.search(q, k)[1], truth)
                if p != default and reached is not None and p > reached:
                    continue
                lat = latencies(lambda qq: sp.search(qq, k), q, a.budget)
                r = row(f"VectorSpace {kind}" + (" (default)" if p == default else ""), f"{label}={p}", lat, rec,
                        bs if p == sweep[0] else None)
                if reached is None and rec >= a.target_recall:
                    reached = p
                    summary.append({"n": n, "kind": kind, "param": f"{label}={p}", "p50_ms": r["p50_ms"],
                                    "p99_ms": r["p99_ms"], "recall@10": rec, "build_s": bs,
                                    "speedup_vs_numpy": r.get("speedup_vs_numpy")})
            setattr(sp, attr, default)
            if kind == "hnsw":
                for frac in (0.01, 0.2):
                    allowed = np.sort(np.random.default_rng(1).choice(n, max(k, int(frac * n)), replace=False))
                    tr = ids[numpy_topk(x, q, k, rows=allowed)]
                    al = ids[allowed]
                    lat = latencies(lambda qq: sp.search(qq, k, allowed=al), q, a.budget)
                    row("VectorSpace hnsw +allowed", f"{frac:.0%}", lat, recall(sp.search(q, k, allowed=al)[1], tr))
            sp.close()
            del sp
        del x
        print(f"  [{time.perf_counter() - t_start:.0f} s]", flush=True)

    print()
    headers = ["n", "method", "param", "build s", "p50 ms", "p99 ms", "recall@10", "x numpy", "GB/s"]
    table = print_table(headers, [[r["n"], r["method"], r["param"], r["build_s"], r["p50_ms"], r["p99_ms"],
                                   f"{r['recall@10']:.3f}", r.get("speedup_vs_numpy"), r["gb_s"]] for r in rows])
    print(f"\nmemory copy bandwidth {bw:.1f} GB/s (read + write; the GB/s column is vectors read per "
          f"second by one exact query)\n")
    print(f"first ANN setting reaching recall@10 >= {a.target_recall}:")
    stable = print_table(["n", "index", "param", "build s", "p50 ms", "p99 ms", "recall@10", "x numpy"],
                         [[s["n"], s["kind"], s["param"], s["build_s"], s["p50_ms"], s["p99_ms"],
                           f"{s['recall@10']:.3f}", s["speedup_vs_numpy"]] for s in summary])
    path = write_json(a.json, {"args": vars(a), "memory_copy_gb_s": bw, "rows": rows, "target": summary,
                               "table": table, "target_table": stable,
                               "defaults": {"hnsw_M": V.HNSW_M, "hnsw_ef_construction": V.HNSW_EF_CONSTRUCTION,
                                            "hnsw_ef_search": V.HNSW_EF_SEARCH,
                                            "ivf_nprobe": "max(16, nlist/64)"},
                               "wall_s": time.perf_counter() - t_start})
    print(f"\nwrote {path} ({time.perf_counter() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
