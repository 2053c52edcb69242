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
from dataclasses import dataclass, field

import numpy as np

from _common import (add_device_args, fmt, free_memory, host_timed, percentiles, print_table, require_cuda,
                     run_part, write_json)

from vam_engine.config import VectorConfig
from vam_engine.vectors import bodies as vector_bodies, index as vector_index, space as V


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


def recall(found: np.ndarray, truth: np.ndarray, k: int | None = None) -> float:
    """Mean share of each query's true top-k (truth's first k columns) among its first k found
    (padding ids < 0 do not count)."""
    k = k or truth.shape[1]
    return float(np.mean([len(set(f[:k][f[:k] >= 0].tolist()) & set(t[:k].tolist())) / k
                          for f, t in zip(found, truth)]))


def latencies(fn, q: np.ndarray, budget_s: float | None = None, min_n: int = 5, warmup: int = 2) -> list[float]:
    """Seconds per single-query call over the queries, after ``warmup`` untimed calls on the first
    ones; with ``budget_s``, stopping once that is spent (after at least ``min_n`` calls)."""
    for i in range(warmup):
        fn(q[i:i + 1] if i < len(q) else q[:1])
    out = []
    end = None if budget_s is None else time.perf_counter() + budget_s
    for i in range(len(q)):
        t0 = time.perf_counter()
        fn(q[i:i + 1])
        out.append(time.perf_counter() - t0)
        if end is not None and len(out) >= min_n and time.perf_counter() > end:
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



# -- --device cuda rows ----------------------------------------------------------------------------------
def _unit_rows(torch, n: int, dim: int, device, seed: int, store_dtype, *, truth_q=None, k: int = 10,
               host: np.ndarray | None = None, chunk: int = 1 << 18):
    """n random unit rows (Gaussian, normalized in float32) made on ``device`` a chunk at a time
    and stored as ``store_dtype``. With ``truth_q`` (M x dim float32 on device): the exact
    float32 top-k of those queries over the float32 rows, merged across chunks, returned as
    (scores, rows) numpy arrays. With ``host`` (n x dim float32): the float32 rows copied there."""
    t = torch.empty((n, dim), dtype=store_dtype, device=device)
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    best_s = best_i = None
    for r0 in range(0, n, chunk):
        r1 = min(n, r0 + chunk)
        x = torch.randn((r1 - r0, dim), generator=g, device=device, dtype=torch.float32)
        x /= torch.linalg.vector_norm(x, dim=1, keepdim=True)
        t[r0:r1] = x
        if host is not None:
            host[r0:r1] = x.cpu().numpy()
        if truth_q is not None:
            s, i = torch.topk(truth_q @ x.T, min(k, r1 - r0), dim=1)
            i = i + r0
            if best_s is not None:
                s, i = torch.cat([best_s, s], 1), torch.cat([best_i, i], 1)
                s, j = torch.topk(s, min(k, s.shape[1]), dim=1)
                i = torch.gather(i, 1, j)
            best_s, best_i = s, i
        del x
    truth = None if best_s is None else (best_s.cpu().numpy(), best_i.cpu().numpy().astype(np.int64))
    return t, truth


def _mirror_topk(torch, t, n: int):
    """VectorSpace's device body over ``t``: vam_engine.vectors.bodies.TorchRows.topk when it
    exists (query chunks of 2^26 / n rows, fp16 matmul + torch.topk, results to the host), else
    the same computation written out here. Returns fn(q numpy M x dim, k) -> (scores, rows)."""
    try:
        from vam_engine.vectors.bodies import TorchRows

        body = TorchRows(t.shape[1], str(t.device), t.dtype)
        body.t = t
        return (lambda q, k: body.topk(q, None, n, k)), "vectors.TorchRows.topk"
    except (ImportError, AttributeError, TypeError):
        pass

    def fn(q, k):
        with torch.no_grad():
            qt = torch.from_numpy(q).to(t.device, t.dtype)
            step = max(1, (1 << 26) // max(n, 1))
            ss, ii = [], []
            for q0 in range(0, len(qt), step):
                s, i = torch.topk(qt[q0:q0 + step] @ t[:n].T, min(k, n), dim=1)
                ss.append(s.float())
                ii.append(i)
            return torch.cat(ss).cpu().numpy(), torch.cat(ii).cpu().numpy().astype(np.int64)

    return fn, "local mirror of TorchRows.topk"


def _blocked_topk(torch, t, n: int, budget: int = 1 << 26):
    """An alternative tiling for batches: blocks of rows (budget / M rows, so one block's scores
    are at most 2^26 values), each scanned by all M queries at once (the tensor is read once
    per call instead of once per chunk of 2^26 / n queries), top-k per block, then merged."""
    def fn(q, k):
        with torch.no_grad():
            qt = torch.from_numpy(q).to(t.device, t.dtype)
            rows = max(k, budget // max(len(qt), 1))
            ss, ii = [], []
            for r0 in range(0, n, rows):
                r1 = min(n, r0 + rows)
                s, i = torch.topk(qt @ t[r0:r1].T, min(k, r1 - r0), dim=1)
                ss.append(s.float())
                ii.append(i + r0)
            s, i = torch.cat(ss, 1), torch.cat(ii, 1)
            s, j = torch.topk(s, min(k, s.shape[1]), dim=1)
            return s.cpu().numpy(), torch.gather(i, 1, j).cpu().numpy().astype(np.int64)

    return fn


def latency_ms(fn, qs: np.ndarray, warmup: int = 10) -> dict:
    """Milliseconds of fn(one query) per query, host to host: p50, p99, mean."""
    lat = latencies(fn, qs, warmup=min(warmup, len(qs)))
    p50, p99 = percentiles(lat, 50, 99, scale=1e3)
    return {"n": len(lat), "p50_ms": p50, "p99_ms": p99, "mean_ms": float(np.mean(lat)) * 1e3}


class VectorBench:
    """The --device cuda rows: per size, n random unit rows resident on the device, searched by
    VectorSpace itself (up to --vec-space-max), its device body and a row-blocked tiling. One
    method per measured configuration; ``vector_rows`` calls them."""

    DIM, K = 512, 10

    def __init__(self, run, st):
        import torch

        a = run.args
        self.run, self.st, self.torch, self.gpu = run, st, torch, run.cuda
        if self.gpu:
            self.dev, self.space_dev, self.dtype = "cuda", "cuda", torch.float16
            self.sizes = [int(float(s)) for s in a.vec_sizes.split(",")]
            self.batches = [int(b) for b in a.vec_batches.split(",")]
            self.n_single, self.n_truth = 200, 100
        else:
            st.skip("cuda", "no CUDA: 1e4 vectors on the CPU through the same code (plumbing only)")
            # fp16 on the CPU: the re-scoring path runs
            self.dev, self.space_dev, self.dtype = "cpu", "torch-cpu", torch.float16
            self.sizes, self.batches, self.n_single, self.n_truth = [10_000], [64], 30, 20
        rng = np.random.default_rng([run.seed, 42])
        self.Q = rng.standard_normal((max(max(self.batches), self.n_single, self.n_truth), self.DIM)).astype(np.float32)
        self.Q /= np.linalg.norm(self.Q, axis=1, keepdims=True)
        st.data.update(dim=self.DIM, k=self.K, store_dtype=str(self.dtype).replace("torch.", ""), device=self.dev,
                       queries="random unit vectors, independent of the rows (the smallest score gaps: the "
                               "hardest case for fp16 scores)",
                       truth="exact float32 top-10 over the float32 rows (computed while the rows are made)")
        self.rows, self.parts = [], []

    def space(self, n: int, host: np.ndarray, rec: dict):
        """VectorSpace(device=...) over the same rows (a host float32 copy): the engine's path."""
        from vam_engine.vectors import VectorSpace

        t0 = time.perf_counter()
        sp = VectorSpace("frame", self.DIM, VectorConfig(index="flat"), device=self.space_dev, torch_dtype=self.dtype,
                         background_build=False)
        sp.add(np.arange(n, dtype=np.int64), host)
        if self.gpu:
            self.torch.cuda.synchronize()
        rec["space_build_s"] = time.perf_counter() - t0
        rec["space_stats"] = {kk: v for kk, v in sp.stats().items() if kk in ("n", "device", "exact_body", "index")}
        return sp

    def measure(self, n: int, name: str, fn, single: bool, truth) -> dict:
        """recall@10 against the float32 truth, one query's latency (``single``), batched queries/s."""
        k, Q = self.K, self.Q
        r = {"n": n, "body": name, "recall@10": recall(fn(Q[:self.n_truth], k)[1], truth[1], k)}
        if single:
            r["single"] = latency_ms(lambda q: fn(q, k), Q[:self.n_single])
            r["scan_GBps"] = n * self.DIM * 2 / (r["single"]["p50_ms"] / 1e3) / 1e9
        for b in self.batches:
            if self.run.left() < 3:
                self.st.skip(f"n={n}: {name} b{b}", "out of time")
                continue
            sec = host_timed(lambda: fn(Q[:b], k), None, warmup=1, repeats=3)
            r[f"b{b}_ms"] = sec * 1e3
            r[f"b{b}_qps"] = b / sec
        return r

    def record(self, n: int, label: str, name: str, r: dict) -> None:
        st, last = self.st, self.batches[-1]
        st.data.setdefault("runs", []).append(r)
        sg = r.get("single", {})
        bq = r.get(f"b{last}_qps")
        self.rows.append([label, name, sg.get("p50_ms"), sg.get("p99_ms"), r.get("scan_GBps")]
                         + [r.get(f"b{b}_qps") for b in self.batches] + [r["recall@10"]])
        if name.startswith("VectorSpace"):
            st.check(f"n={n}: VectorSpace recall@10", r["recall@10"] >= 0.99, f"{r['recall@10']:.4f} < 0.99")
            self.parts.append(f"{label} VectorSpace p50 {fmt(sg.get('p50_ms'))} ms p99 {fmt(sg.get('p99_ms'))} ms, "
                              f"b{last} {fmt(bq)} q/s, recall {r['recall@10']:.3f}")
        elif name.startswith("device body"):
            st.check(f"n={n}: fp16 recall@10 without re-score", r["recall@10"] >= 0.95,
                     f"{r['recall@10']:.4f} < 0.95", soft=True)
            self.parts.append(f"{label} device body p50 {fmt(sg.get('p50_ms'))} ms ({fmt(r.get('scan_GBps'))} GB/s), "
                              f"b{last} {fmt(bq)} q/s, fp16 recall {r['recall@10']:.3f}")
        else:
            self.parts.append(f"{label} row-blocked b{last} {fmt(bq)} q/s")

    def one_size(self, n: int) -> None:
        torch, st = self.torch, self.st
        with_space = n <= self.run.args.vec_space_max
        rec = {"n": n, "tensor_GB": n * self.DIM * 2 / 1e9}
        st.data.setdefault("sizes", []).append(rec)
        label = f"{n:.0e}".replace("+0", "").replace("+", "")
        t0 = time.perf_counter()
        host = np.empty((n, self.DIM), np.float32) if with_space else None
        tq = torch.from_numpy(self.Q[:self.n_truth]).to(self.dev)
        t, truth = _unit_rows(torch, n, self.DIM, self.dev, self.run.seed + n, self.dtype, truth_q=tq, k=self.K,
                              host=host)
        if self.gpu:
            torch.cuda.synchronize()
        rec["make_s"] = time.perf_counter() - t0
        mirror, rec["device_body"] = _mirror_topk(torch, t, n)
        bodies = [("device body (fp16, no re-score)", mirror, True),
                  ("row-blocked (alternative)", _blocked_topk(torch, t, n), False)]
        if with_space:
            space = st.guard(f"n={n}: VectorSpace.add", self.space, n, host, rec)
            del host  # the space holds its own float32 copy
            if space is not None:
                body = rec["space_stats"].get("exact_body", "")
                st.check(f"n={n}: VectorSpace on the device", body.startswith(f"torch-{self.dev}"),
                         f"exact body {body!r}, expected torch-{self.dev}-...")
                bodies.insert(0, ("VectorSpace.search (fp16 + fp32 re-score)", lambda q, kk: space.search(q, kk), True))
        for name, fn, single in bodies:
            if self.run.left() < 5:
                st.skip(f"n={n}: {name}", "out of time")
                continue
            r = st.guard(f"n={n}: {name}", self.measure, n, name, fn, single, truth)
            if r is not None:
                self.record(n, label, name, r)
        if self.gpu:
            rec["max_mem_GiB"] = torch.cuda.max_memory_allocated() / 2 ** 30

    def all_sizes(self) -> None:
        torch, st = self.torch, self.st
        prev_prec = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")  # the float32 truth without TF32
        try:
            for n in self.sizes:
                if self.run.left() < (40 if n >= 5_000_000 else 15):
                    st.skip(f"n={n}", f"out of time ({self.run.left():.0f} s left of the step's budget)")
                    continue
                if self.gpu:
                    free = torch.cuda.mem_get_info()[0]
                    if free < n * self.DIM * 2 * 1.3 + (2 << 30):
                        st.skip(f"n={n}", f"not enough free GPU memory ({free / 2 ** 30:.1f} GiB)")
                        continue
                st.guard(f"n={n}", self.one_size, n)
                free_memory(torch, self.gpu)  # the size's tensors, space and closures go with one_size's frame
        finally:
            torch.set_float32_matmul_precision(prev_prec)

    def report(self) -> None:
        if self.rows:
            print(f"  top-{self.K} over n x {self.DIM} {self.st.data['store_dtype']} on {self.dev}; latency: one "
                  f"query, host to host; recall@10 against exact float32")
            print_table(["n", "body", "p50 ms", "p99 ms", "scan GB/s"] + [f"b{b} q/s" for b in self.batches]
                        + ["recall@10"], self.rows)
        self.st.headline = "; ".join(self.parts) + ("" if self.gpu else " (CPU plumbing run, no CUDA)")


def vector_rows(run, st) -> None:
    bench = VectorBench(run, st)
    bench.all_sizes()
    bench.report()


def cuda_main(args) -> int:
    """Brute-force top-10 over 1e6 and 1e7 random unit rows x 512 resident in fp16 on the GPU
    (the exact float32 top-10 of 100 queries kept as the truth): VectorSpace(device="cuda")
    itself up to --vec-space-max rows, its device body and a row-blocked tiling; p50/p99 latency
    of one query (host to host), queries/s batched, recall@10. --plumbing: 1e4 rows on the CPU."""
    return run_part("bench_search", "vector_search", vector_rows, args)


def parse_args(argv=None):
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
    ap.add_argument("--vec-sizes", default="1e6,1e7", help="--device cuda: rows of the resident fp16 tensor")
    ap.add_argument("--vec-batches", default="64,1024", help="--device cuda: query batch sizes")
    ap.add_argument("--vec-space-max", type=float, default=1e6,
                    help="--device cuda: sizes up to this also go through VectorSpace itself (host float32 copy)")
    add_device_args(ap, default_budget=90.0)
    a = ap.parse_args(argv)
    if a.device == "cpu" and a.quick:
        a.max_size, a.queries, a.budget = min(a.max_size, 1e4), min(a.queries, 50), 0.3
    return a


# -- the CPU table: rows per store size -----------------------------------------------------------------
@dataclass
class SizeRun:
    """One store size: its data and exact ground truth, and the rows measured on them."""
    a: argparse.Namespace
    n: int
    x: np.ndarray
    ids: np.ndarray
    q: np.ndarray
    truth: np.ndarray
    rows: list = field(default_factory=list)
    numpy_p50: float | None = None  # the baseline's p50 (s), once measured

    @classmethod
    def make(cls, a, n: int) -> "SizeRun":
        x, ids, q = make_data(n, a.dim, a.queries, a.seed)
        return cls(a, n, x, ids, q, ids[numpy_topk(x, q, a.k)])

    def lat(self, fn) -> list[float]:
        return latencies(fn, self.q, self.a.budget)

    def row(self, method: str, param, lat: list, rec: float, build_s=None, scanned=None) -> dict:
        p50, p99 = percentiles(lat, 50, 99)
        r = {"n": self.n, "method": method, "param": param, "build_s": build_s, "p50_ms": p50 * 1e3,
             "p99_ms": p99 * 1e3, "recall@10": rec, "calls": len(lat),
             "gb_s": None if scanned is None else scanned / p50 / 1e9}
        if self.numpy_p50 is not None:
            r["speedup_vs_numpy"] = self.numpy_p50 / p50
        self.rows.append(r)
        print(f"  n={self.n:>8,} {method:<34} {str(param):<12} p50 {p50 * 1e3:9.3f} ms  p99 "
              f"{p99 * 1e3:9.3f} ms  recall {rec:.3f}", flush=True)
        return r


def baseline_rows(sr: SizeRun) -> None:
    """The reference's Python loop (up to --loop-max), numpy's matmul (the speedups' baseline) and
    faiss's exact index."""
    a, x, ids, q, k, n = sr.a, sr.x, sr.ids, sr.q, sr.a.k, sr.n
    nbytes = n * a.dim * 4
    if n <= a.loop_max:
        found = []
        lat = latencies(lambda qq: found.append(python_loop_topk(x, qq[0], k)), q, a.budget, min_n=3)
        nq = len(found) - 2
        sr.row("python loop (reference)", "-", lat, recall(ids[np.array(found[2:2 + nq])], sr.truth[:nq]))
    lat = sr.lat(lambda qq: numpy_topk(x, qq, k))
    sr.numpy_p50 = percentiles(lat, 50)[0]
    sr.row("numpy matmul+argpartition", "-", lat, recall(ids[numpy_topk(x, q, k)], sr.truth), scanned=nbytes)
    faiss = vector_bodies.faiss_module()
    t0 = time.perf_counter()
    fi = faiss.IndexIDMap2(faiss.IndexFlatIP(a.dim))
    fi.add_with_ids(x, ids)
    bs = time.perf_counter() - t0
    lat = sr.lat(lambda qq: fi.search(qq, k))
    sr.row("faiss IndexFlatIP+IDMap2", "-", lat, recall(fi.search(q, k)[1], sr.truth), bs, scanned=nbytes)


def allowed_rows(sr: SizeRun, sp, method: str) -> None:
    """Filtered searches (allowed = a random 1% and 20% of the ids), recall against the exact
    search over that subset."""
    k = sr.a.k
    for frac in (0.01, 0.2):
        allowed = np.sort(np.random.default_rng(1).choice(sr.n, max(k, int(frac * sr.n)), replace=False))
        tr = sr.ids[numpy_topk(sr.x, sr.q, k, rows=allowed)]
        al = sr.ids[allowed]
        lat = sr.lat(lambda qq: sp.search(qq, k, allowed=al))
        sr.row(method, f"{frac:.0%}", lat, recall(sp.search(sr.q, k, allowed=al)[1], tr))


def exact_rows(sr: SizeRun) -> None:
    """Our exact search: the numpy body (and its filtered searches) and torch-cpu up to --torch-max."""
    a, k = sr.a, sr.a.k
    for dev in ["cpu"] + (["torch-cpu"] if sr.n <= a.torch_max else []):
        t0 = time.perf_counter()
        sp = V.VectorSpace("bench", a.dim, VectorConfig(index="flat"), device=dev)
        sp.add(sr.ids, sr.x)
        bs = time.perf_counter() - t0
        lat = sr.lat(lambda qq: sp.search(qq, k))
        sr.row(f"VectorSpace flat ({dev})", "-", lat, recall(sp.search(sr.q, k)[1], sr.truth), bs,
               scanned=sr.n * a.dim * 4)
        if dev == "cpu":
            allowed_rows(sr, sp, "VectorSpace flat +allowed")


def ann_rows(sr: SizeRun, kind: str) -> dict | None:
    """An ANN index swept over nprobe / efSearch up to the first value reaching --target-recall
    (and the engine's default); hnsw also filtered. Returns the first setting reaching it."""
    a, k = sr.a, sr.a.k
    t0 = time.perf_counter()
    sp = V.VectorSpace("bench", a.dim, VectorConfig(index=kind, ann_min_size=1), background_build=False)
    sp.add(sr.ids, sr.x)
    bs = time.perf_counter() - t0
    if kind == "ivf":
        nlist = sp.stats()["nlist"]
        default = vector_index.ivf_nprobe(nlist)
        sweep = sorted({p for p in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if p <= nlist} | {default})
        attr, label = "nprobe", "nprobe"
    else:
        default = V.HNSW_EF_SEARCH
        sweep = sorted({16, 32, 64, 128, 256, 512, default})
        attr, label = "ef_search", "ef"
    reached, summary = None, None
    for p in sweep:
        setattr(sp, attr, p)
        rec = recall(sp.search(sr.q, k)[1], sr.truth)
        if p != default and reached is not None and p > reached:
            continue
        r = sr.row(f"VectorSpace {kind}" + (" (default)" if p == default else ""), f"{label}={p}",
                   sr.lat(lambda qq: sp.search(qq, k)), rec, bs if p == sweep[0] else None)
        if reached is None and rec >= a.target_recall:
            reached = p
            summary = {"n": sr.n, "kind": kind, "param": f"{label}={p}", "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"],
                       "recall@10": rec, "build_s": bs, "speedup_vs_numpy": r.get("speedup_vs_numpy")}
    setattr(sp, attr, default)
    if kind == "hnsw":
        allowed_rows(sr, sp, "VectorSpace hnsw +allowed")
    sp.close()
    return summary


def print_tables(a, rows: list, summary: list, bw: float) -> tuple[str, str]:
    print()
    table = print_table(["n", "method", "param", "build s", "p50 ms", "p99 ms", "recall@10", "x numpy", "GB/s"],
                        [[r["n"], r["method"], r["param"], r["build_s"], r["p50_ms"], r["p99_ms"],
                          f"{r['recall@10']:.3f}", r.get("speedup_vs_numpy"), r["gb_s"]] for r in rows])
    print(f"\nmemory copy bandwidth {bw:.1f} GB/s (read + write; the GB/s column is vectors read per "
          f"second by one exact query)\n")
    print(f"first ANN setting reaching recall@10 >= {a.target_recall}:")
    target = print_table(["n", "index", "param", "build s", "p50 ms", "p99 ms", "recall@10", "x numpy"],
                         [[s["n"], s["kind"], s["param"], s["build_s"], s["p50_ms"], s["p99_ms"],
                           f"{s['recall@10']:.3f}", s["speedup_vs_numpy"]] for s in summary])
    return table, target


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.device == "cuda":
        require_cuda("bench_search.py", a)
        return cuda_main(a)
    sizes = [n for n in (1_000, 10_000, 100_000, 1_000_000) if n <= int(a.max_size)]
    if a.sizes:
        sizes = [int(float(v)) for v in a.sizes.split(",")]
    bw = copy_bandwidth_gbs()
    print(f"vector search: d={a.dim}, k={a.k}, sizes={sizes}, {a.queries} queries, faiss threads "
          f"{vector_bodies.faiss_module().omp_get_max_threads()}, memory copy bandwidth {bw:.1f} GB/s (read + write)",
          flush=True)
    rows, summary = [], []
    t_start = time.perf_counter()
    for n in sizes:
        sr = SizeRun.make(a, n)
        baseline_rows(sr)
        exact_rows(sr)
        summary += [s for s in (ann_rows(sr, kind) for kind in ("ivf", "hnsw")) if s is not None]
        rows += sr.rows
        del sr
        print(f"  [{time.perf_counter() - t_start:.0f} s]", flush=True)
    table, target = print_tables(a, rows, summary, bw)
    path = write_json(a.json, {"args": vars(a), "memory_copy_gb_s": bw, "rows": rows, "target": summary,
                               "table": table, "target_table": target,
                               "defaults": {"hnsw_M": vector_index.HNSW_M,
                                            "hnsw_ef_construction": vector_index.HNSW_EF_CONSTRUCTION,
                                            "hnsw_ef_search": V.HNSW_EF_SEARCH, "ivf_nprobe": "max(16, nlist/64)"},
                               "wall_s": time.perf_counter() - t_start})
    print(f"\nwrote {path} ({time.perf_counter() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
