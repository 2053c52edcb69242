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

from _common import (DeviceRun, add_device_args, fmt, host_timed, print_table, require_cuda,  # noqa: E402
                     write_json)

from vam_engine.config import VectorConfig  # noqa: E402
from vam_engine.memory import vector_bodies, vector_index, vectors as V  # noqa: E402


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
    """VectorSpace's device body over ``t``: vam_engine.memory.vector_bodies.TorchRows.topk when it
    exists (query chunks of 2^26 / n rows, fp16 matmul + torch.topk, results to the host), else
    the same computation written out here. Returns fn(q numpy M x dim, k) -> (scores, rows)."""
    try:
        from vam_engine.memory.vector_bodies import TorchRows

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


def _recall(got: np.ndarray, truth: np.ndarray, k: int) -> float:
    return float(np.mean([len(set(g[:k].tolist()) & set(t[:k].tolist())) / k for g, t in zip(got, truth)]))


def _latencies(fn, qs: np.ndarray, warmup: int = 10) -> dict:
    """Seconds of fn(one query) per query, host to host: p50, p99, mean."""
    for i in range(min(warmup, len(qs))):
        fn(qs[i:i + 1])
    ts = []
    for i in range(len(qs)):
        t = time.perf_counter()
        fn(qs[i:i + 1])
        ts.append(time.perf_counter() - t)
    a = np.array(ts)
    return {"n": len(a), "p50_ms": float(np.percentile(a, 50) * 1e3), "p99_ms": float(np.percentile(a, 99) * 1e3),
            "mean_ms": float(a.mean() * 1e3)}


def vector_rows(run, st) -> None:
    import gc

    import torch

    from vam_engine.config import VectorConfig
    from vam_engine.memory.vectors import VectorSpace

    a = run.args
    dim, k = 512, 10
    gpu = run.cuda
    left = run.left

    if gpu:
        dev, space_dev, dtype = "cuda", "cuda", torch.float16
        sizes = [int(float(s)) for s in a.vec_sizes.split(",")]
        batches = [int(b) for b in a.vec_batches.split(",")]
        n_single, n_truth = 200, 100
    else:
        st.skip("cuda", "no CUDA: 1e4 vectors on the CPU through the same code (plumbing only)")
        dev, space_dev, dtype = "cpu", "torch-cpu", torch.float16  # fp16 on the CPU: the re-scoring path runs
        sizes, batches, n_single, n_truth = [10_000], [64], 30, 20
    rng = np.random.default_rng([run.seed, 42])
    Q = rng.standard_normal((max(max(batches), n_single, n_truth), dim)).astype(np.float32)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    st.data.update(dim=dim, k=k, store_dtype=str(dtype).replace("torch.", ""), device=dev,
                   queries="random unit vectors, independent of the rows (the smallest score gaps: the "
                           "hardest case for fp16 scores)",
                   truth="exact float32 top-10 over the float32 rows (computed while the rows are made)")
    rows, parts = [], []

    def one_size(n: int) -> None:
        with_space = n <= a.vec_space_max
        rec = {"n": n, "tensor_GB": n * dim * 2 / 1e9}
        st.data.setdefault("sizes", []).append(rec)
        label = f"{n:.0e}".replace("+0", "").replace("+", "")
        t0 = time.perf_counter()
        host = np.empty((n, dim), np.float32) if with_space else None
        tq = torch.from_numpy(Q[:n_truth]).to(dev)
        t, truth = _unit_rows(torch, n, dim, dev, run.seed + n, dtype, truth_q=tq, k=k, host=host)
        if gpu:
            torch.cuda.synchronize()
        rec["make_s"] = time.perf_counter() - t0
        mirror, rec["device_body"] = _mirror_topk(torch, t, n)
        bodies = [("device body (fp16, no re-score)", mirror, True),
                  ("row-blocked (alternative)", _blocked_topk(torch, t, n), False)]
        if with_space:
            def build():
                t0 = time.perf_counter()
                sp = VectorSpace("frame", dim, VectorConfig(index="flat"), device=space_dev, torch_dtype=dtype,
                                 background_build=False)
                sp.add(np.arange(n, dtype=np.int64), host)
                if gpu:
                    torch.cuda.synchronize()
                rec["space_build_s"] = time.perf_counter() - t0
                rec["space_stats"] = {kk: v for kk, v in sp.stats().items()
                                      if kk in ("n", "device", "exact_body", "index")}
                return sp

            space = st.guard(f"n={n}: VectorSpace.add", build)
            del host  # the space holds its own float32 copy
            if space is not None:
                body = rec["space_stats"].get("exact_body", "")
                st.check(f"n={n}: VectorSpace on the device", body.startswith(f"torch-{dev}"),
                         f"exact body {body!r}, expected torch-{dev}-...")
                bodies.insert(0, ("VectorSpace.search (fp16 + fp32 re-score)",
                                  lambda q, kk: space.search(q, kk), True))
        for name, fn, single in bodies:
            if left() < 5:
                st.skip(f"n={n}: {name}", "out of time")
                continue

            def measure():
                r = {"n": n, "body": name}
                r["recall@10"] = _recall(fn(Q[:n_truth], k)[1], truth[1], k)
                if single:
                    r["single"] = _latencies(lambda q: fn(q, k), Q[:n_single])
                    r["scan_GBps"] = n * dim * 2 / (r["single"]["p50_ms"] / 1e3) / 1e9
                for b in batches:
                    if left() < 3:
                        st.skip(f"n={n}: {name} b{b}", "out of time")
                        continue
                    s = host_timed(lambda: fn(Q[:b], k), None, warmup=1, repeats=3)
                    r[f"b{b}_ms"] = s * 1e3
                    r[f"b{b}_qps"] = b / s
                return r

            r = st.guard(f"n={n}: {name}", measure)
            if r is None:
                continue
            st.data.setdefault("runs", []).append(r)
            sg = r.get("single", {})
            bq = r.get(f"b{batches[-1]}_qps")
            rows.append([label, name, sg.get("p50_ms"), sg.get("p99_ms"), r.get("scan_GBps")]
                        + [r.get(f"b{b}_qps") for b in batches] + [r["recall@10"]])
            if name.startswith("VectorSpace"):
                st.check(f"n={n}: VectorSpace recall@10", r["recall@10"] >= 0.99, f"{r['recall@10']:.4f} < 0.99")
                parts.append(f"{label} VectorSpace p50 {fmt(sg.get('p50_ms'))} ms p99 {fmt(sg.get('p99_ms'))} ms, "
                             f"b{batches[-1]} {fmt(bq)} q/s, recall {r['recall@10']:.3f}")
            elif name.startswith("device body"):
                st.check(f"n={n}: fp16 recall@10 without re-score", r["recall@10"] >= 0.95,
                         f"{r['recall@10']:.4f} < 0.95", soft=True)
                parts.append(f"{label} device body p50 {fmt(sg.get('p50_ms'))} ms ({fmt(r.get('scan_GBps'))} GB/s), "
                             f"b{batches[-1]} {fmt(bq)} q/s, fp16 recall {r['recall@10']:.3f}")
            else:
                parts.append(f"{label} row-blocked b{batches[-1]} {fmt(bq)} q/s")
        if gpu:
            rec["max_mem_GiB"] = torch.cuda.max_memory_allocated() / 2 ** 30

    prev_prec = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # the float32 truth without TF32
    try:
        for n in sizes:
            if left() < (40 if n >= 5_000_000 else 15):
                st.skip(f"n={n}", f"out of time ({left():.0f} s left of the step's budget)")
                continue
            if gpu:
                free = torch.cuda.mem_get_info()[0]
                if free < n * dim * 2 * 1.3 + (2 << 30):
                    st.skip(f"n={n}", f"not enough free GPU memory ({free / 2 ** 30:.1f} GiB)")
                    continue
            st.guard(f"n={n}", one_size, n)
            gc.collect()  # the size's tensors, space and closures go with one_size's frame
            if gpu:
                torch.cuda.empty_cache()
    finally:
        torch.set_float32_matmul_precision(prev_prec)
    if rows:
        print(f"  top-{k} over n x {dim} {st.data['store_dtype']} on {dev}; latency: one query, host to host; "
              f"recall@10 against exact float32")
        print_table(["n", "body", "p50 ms", "p99 ms", "scan GB/s"] + [f"b{b} q/s" for b in batches] + ["recall@10"], rows)
    st.headline = "; ".join(parts) + ("" if gpu else " (CPU plumbing run, no CUDA)")


def cuda_main(args) -> int:
    """Brute-force top-10 over 1e6 and 1e7 random unit rows x 512 resident in fp16 on the GPU
    (the exact float32 top-10 of 100 queries kept as the truth): VectorSpace(device="cuda")
    itself up to --vec-space-max rows, its device body and a row-blocked tiling; p50/p99 latency
    of one query (host to host), queries/s batched, recall@10. --plumbing: 1e4 rows on the CPU."""
    run = DeviceRun("bench_search", args)
    st = run.part("vector_search")
    st.guard("vector_search", vector_rows, run, st)
    return run.finish()


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
    ap.add_argument("--vec-sizes", default="1e6,1e7", help="--device cuda: rows of the resident fp16 tensor")
    ap.add_argument("--vec-batches", default="64,1024", help="--device cuda: query batch sizes")
    ap.add_argument("--vec-space-max", type=float, default=1e6,
                    help="--device cuda: sizes up to this also go through VectorSpace itself (host float32 copy)")
    add_device_args(ap, default_budget=90.0)
    a = ap.parse_args(argv)
    if a.device == "cuda":
        require_cuda("bench_search.py", a)
        return cuda_main(a)
    if a.quick:
        a.max_size, a.queries, a.budget = min(a.max_size, 1e4), min(a.queries, 50), 0.3
    sizes = [n for n in (1_000, 10_000, 100_000, 1_000_000) if n <= int(a.max_size)]
    if a.sizes:
        sizes = [int(float(v)) for v in a.sizes.split(",")]
    k, d = a.k, a.dim
    faiss = vector_bodies.faiss_module()
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
                default = vector_index.ivf_nprobe(nlist)
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
                               "defaults": {"hnsw_M": vector_index.HNSW_M, "hnsw_ef_construction": vector_index.HNSW_EF_CONSTRUCTION,
                                            "hnsw_ef_search": V.HNSW_EF_SEARCH,
                                            "ivf_nprobe": "max(16, nlist/64)"},
                               "wall_s": time.perf_counter() - t_start})
    print(f"\nwrote {path} ({time.perf_counter() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
