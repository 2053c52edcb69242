"""Gate statistics throughput: the fused C++ body against a per-frame OpenCV/scikit-image path
(the baseline, as the VAM reference implementation computed them), the numpy reference, a
vectorized torch CPU version, and a plain copy of the same bytes (the bandwidth ceiling).

Every figure is a ratio measured in this process on the same frames:
- "x opencv": frames/s of the method over frames/s of ``opencv_per_frame``;
- "% copy BW": the method's GB/s over the best copy of the same bytes (``memcpy``).

Bytes per frame = H*W (the frame) + H*W (the reference, read again for the mean absolute
difference). GB/s = those bytes / time. Targets (information, not assertions): the C++ body
>= 30x faster than ``opencv_per_frame`` at 1280x720 and >= 60% of the copy bandwidth. The C++
body computes the local-change tiles too (GateConfig defaults: 32 px tiles, cells of 16), and is
given the reference's cached thumbnail and histogram, as the cascade does. ``cpp_fused`` is the
default behaviour (the helpers only while calls with them are faster: csrc/gate_stats.cpp,
ThreadChoice); ``cpp_fused_team`` always uses them, ``cpp_fused_1t`` never.

Where the time goes, per statistic (the section "time per statistic", one thread, the same
frames): the C++ row pass alone (``vam_engine.native.gate_row_pass``, no per-frame finish) with its parts switched
on one after another: the thumbnail (the memory pass and the column sums), + the Laplacian, +
the histogram, + |F - R| and its tiles (reading the reference); then the whole CpuBody.stats
call, whose difference to the row pass is the finish (SSIM, histogram correlation, the tile
reduction, call overhead). Best of --breakdown-rounds interleaved rounds (minima: a shared
machine's load bursts move medians far more than these differences). ``cpp_part_compare`` is the
cascade's second call (the reference-dependent statistics alone).

    python benchmarks/bench_gate.py                  # default: 3 sizes, batch 32, 5 rounds (~1-2 min)
    python benchmarks/bench_gate.py --quick          # smoke run (~15 s)
    python benchmarks/bench_gate.py --sizes 1920x1080 --batch 64 --repeats 7
    python benchmarks/bench_gate.py --calibrate      # the tile threshold's evidence (~20 s)
    python benchmarks/bench_gate.py --hist-check     # the row-subsampled histogram vs the full frame's
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from _common import DeviceRun, add_device_args, cuda_time, print_table, require_cuda, time_rounds, write_json
from _gate_methods import MemCopy, OpenCVPerFrame, TorchCPU, max_errors, stats_dict

from vam_engine.synthetic import gate_batch

DEFAULT_SIZES = "640x360,1280x720,1920x1080"
TARGET_X_OPENCV = 30.0  # C++ body vs opencv_per_frame at 720p
TARGET_COPY_FRAC = 0.60  # C++ body GB/s over copy GB/s


# -- input ---------------------------------------------------------------------------------------
def make_frames(n: int, h: int, w: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """N gray frames of one panning camera and its reference (vam_engine.synthetic.gate_batch:
    illumination, flat objects, fine texture and sensor noise; no two frames equal)."""
    b = gate_batch(np.random.default_rng(seed), n, h, w)
    return b.frames, b.ref


# -- where the time goes ----------------------------------------------------------------------------
BREAKDOWN = (("thumbnail + memory pass", None, "rows_thumb"), ("Laplacian", "rows_thumb", "rows_+lap"),
             ("histogram", "rows_+lap", "rows_+hist"), ("|F-R| + tiles", "rows_+hist", "rows_+mad"),
             ("finish (SSIM, hist corr, tile reduce, call)", "rows_+mad", "fused_1t"))


def time_per_statistic(cpu_body, frames, ref, rthumb, rhist, tiles, omp, omp_threads, rounds: int = 15) -> dict:
    """ms per frame of each statistic on one thread: the C++ row pass alone
    (vam_engine.native.gate_row_pass) with its parts switched on one after another (thumbnail;
    + Laplacian; + histogram; + |F - R| and tiles), then the whole CpuBody.stats call; each
    statistic is the difference of two neighbours. Every variant is timed once per round, in
    turn, for ``rounds`` rounds, and the fastest round of each is taken: a difference of minima
    stays put under load bursts that the medians of a shared machine do not."""
    from vam_engine.native import gate_row_pass

    cell = tiles.cell
    fns = {
        "rows_thumb": lambda: gate_row_pass(frames, None, lap=False, hist=False, tile=cell),
        "rows_+lap": lambda: gate_row_pass(frames, None, lap=True, hist=False, tile=cell),
        "rows_+hist": lambda: gate_row_pass(frames, None, lap=True, hist=True, tile=cell),
        "rows_+mad": lambda: gate_row_pass(frames, ref, lap=True, hist=True, tile=cell),
        "fused_1t": lambda: cpu_body.stats(frames, ref, rthumb, rhist, tiles=tiles),
    }
    if not omp.set(1):
        fns.pop("fused_1t")
    try:
        best = {k: float("inf") for k in fns}
        for f in fns.values():
            f()  # warm
        for _ in range(max(1, rounds)):
            for k, f in fns.items():
                t0 = time.perf_counter()
                f()
                best[k] = min(best[k], time.perf_counter() - t0)
    finally:
        omp.set(omp_threads)
    ms = {k: 1e3 * v / len(frames) for k, v in best.items()}
    out = {}
    for label, before, after in BREAKDOWN:
        if after in ms and (before is None or before in ms):
            out[label] = ms[after] - (0.0 if before is None else ms[before])
    if "fused_1t" in ms:
        out["total (CpuBody.stats, 1 thread)"] = ms["fused_1t"]
    return out


def print_breakdown(breakdown: dict) -> None:
    if not breakdown:
        return
    sizes = list(breakdown)
    tot = "total (CpuBody.stats, 1 thread)"
    labels = [label for label, _, _ in BREAKDOWN] + [tot]
    print("\ntime per statistic, one thread (ms per frame, best of the interleaved rounds; "
          "see time_per_statistic):")
    rows = []
    for label in labels:
        vals = [breakdown[s].get(label) for s in sizes]
        if all(v is None for v in vals):
            continue
        total = [breakdown[s].get(tot) for s in sizes]
        rows.append([label] + [f"{v:.4f} ({100 * v / t:.0f}%)" if v is not None and t else "-"
                               for v, t in zip(vals, total)])
    print_table(["statistic"] + sizes, rows)


# -- process settings --------------------------------------------------------------------------------
class OmpThreads:
    """Sets the OpenMP thread count of calls made from this thread (the one _C's parallel
    regions read), through the libgomp that _C loaded. None when it cannot be reached."""

    def __init__(self):
        import ctypes

        try:
            self._lib = ctypes.CDLL("libgomp.so.1")
            self._lib.omp_set_num_threads.argtypes = [ctypes.c_int]
        except (OSError, AttributeError):
            self._lib = None

    def set(self, n: int) -> bool:
        if self._lib is None:
            return False
        self._lib.omp_set_num_threads(int(n))
        return True


# -- driver ----------------------------------------------------------------------------------------
def parse_sizes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        w, h = part.lower().strip().split("x")
        out.append((int(w), int(h)))
    return out


# -- --device cuda: the Triton kernels against a device-to-device copy ------------------------------
def cuda_main(args) -> int:
    """Triton gate_stats / gate_compare frames/s and GB/s for batches of 32-256 at 720p and
    1080p against a device-to-device copy of the same bytes. A kernel reads the N*H*W frame
    bytes once (the reference stays in L2): its GB/s is N*H*W / time; a copy reads and writes
    them: 2*N*H*W / time. "of copy" is the ratio, the fraction of the bandwidth reached.
    --plumbing: tiny frames through the Triton interpreter on the CPU."""
    if args.plumbing:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    import torch

    from vam_engine.kernels import gate_stats as gs

    run = DeviceRun("bench_gate", args)
    dev = "cpu" if run.plumbing else "cuda"
    if run.plumbing:
        sizes, n0, batches = [(32, 24)], 2, [2]  # the interpreter takes seconds per kernel call
    else:
        sizes, n0 = parse_sizes(args.sizes or "1280x720,1920x1080"), args.batch or 32
        batches = [int(b) for b in args.cuda_batches.split(",") if int(b) % n0 == 0]
    timing = dict(warmup=0, iters=1, repeats=1) if run.plumbing else {}
    # gate_stats once before timing: JIT-compiles the kernels for this shape (and gives compare's inputs)
    st = run.part("triton")
    rows, split = [], []
    for w, h in sizes:
        if run.left() < 5:
            st.skip(f"{w}x{h}", "out of time")
            continue
        frames, ref = make_frames(n0, h, w, run.seed)

        def one_size():
            reps = -(-max(batches) // n0)
            big = torch.from_numpy(frames).to(dev).repeat(reps, 1, 1).contiguous()
            r = torch.from_numpy(ref).to(dev)
            dst = torch.empty_like(big)
            for n in batches:
                x = big[:n]
                out = gs.gate_stats(x, r)
                th, hi = out[4], out[5]
                rth, rhi = th[1].clone(), hi[1].clone()
                t_gate = cuda_time(torch, lambda: gs.gate_stats(x, r), **timing)
                t_cmp = cuda_time(torch, lambda: gs.gate_compare(x, th, hi, r, rth, rhi), **timing)
                t_copy = cuda_time(torch, lambda: dst[:n].copy_(x), **timing)
                nbytes = n * h * w
                row = {"size": f"{w}x{h}", "batch": n, "gate_ms": t_gate * 1e3, "gate_fps": n / t_gate,
                       "gate_GBps": nbytes / t_gate / 1e9, "compare_ms": t_cmp * 1e3,
                       "compare_GBps": nbytes / t_cmp / 1e9, "copy_GBps": 2 * nbytes / t_copy / 1e9}
                row["gate_of_copy"] = row["gate_GBps"] / row["copy_GBps"]
                st.data.setdefault("rows", []).append(row)
                rows.append([row["size"], n, row["gate_ms"], row["gate_fps"], row["gate_GBps"], row["copy_GBps"],
                             f"{100 * row['gate_of_copy']:.0f}%", row["compare_GBps"]])
            split.extend(launch_split(torch, gs, st, f"{w}x{h}", big[:max(batches)], r, timing))

        st.guard(f"{w}x{h}", one_size)
    if rows:
        print(f"Triton gate_stats on {dev} (GB/s: frame bytes read / time; copy: read + write of the same bytes)")
        print_table(["size", "batch", "ms", "frames/s", "GB/s", "copy GB/s", "of copy", "compare GB/s"], rows)
        print("gate_stats by launch, the largest batch (the plan gate_stats runs, each launch timed alone)")
        print_table(["size", "kernel", "blocks", "us", "share"], split)
        best = max(st.data["rows"], key=lambda r: r["gate_fps"])
        st.headline = (f"{best['size']} b{best['batch']}: {best['gate_fps']:,.0f} fps, {best['gate_GBps']:.0f} GB/s "
                       f"= {100 * best['gate_of_copy']:.0f}% of copy")
    dd = run.part("dedup")
    dd.guard("similarities", dedup_rows, torch, dd, dev, run.plumbing, timing)
    dd.guard("committer", committer_rows, dd, dev, run.plumbing, run.seed)
    return run.finish({"device": dev})


def launch_split(torch, gs, st, size: str, frames, ref, timing: dict) -> list:
    """Each launch of gate_stats's plan timed alone: which kernel the batch's time goes to (the
    compile report's blocks and waves columns say how each is shaped)."""
    import math

    _, launches = gs.plan_gate_stats(frames, ref)
    times = [cuda_time(torch, launch.run, **timing) for launch in launches]
    total = sum(times)
    out = []
    for launch, t in zip(launches, times):
        blocks = math.prod(launch.grid)
        st.data.setdefault("launches", []).append({"size": size, "batch": len(frames), "kernel": launch.name,
                                                   "blocks": blocks, "us": t * 1e6, "share": t / total})
        out.append([size, launch.name, blocks, t * 1e6, f"{100 * t / total:.0f}%"])
    return out


def dedup_rows(torch, st, dev: str, plumbing: bool, timing: dict) -> None:
    """The cosine-dedup kernel (kernels/cosine_dedup.py) for a camera's batch of rows (the
    reference, the held frame and 16 / 64 / 256 new frames) of CLIP ViT-B and ViT-L dimensions:
    time per batch and GB/s (the float64 rows read once, the M x M matrix written) against a
    device-to-device copy of the rows (read + write). Batches this small are launch-bound: the
    copy is too, so "of copy" says how close to the floor of one launch the two kernels come."""
    from vam_engine.kernels import cosine_dedup as cd

    shapes = [(5, 16)] if plumbing else [(m + 2, d) for m in (16, 64, 256) for d in (512, 768)]
    rows = []
    for m, d in shapes:
        x = torch.randn((m, d), dtype=torch.float64, device=dev)
        dst = torch.empty_like(x)
        t_k = cuda_time(torch, lambda: cd.cosine_sims(x), **timing)
        t_copy = cuda_time(torch, lambda: dst.copy_(x), **timing)
        nbytes = m * d * 8 + m * m * 8
        row = {"rows": m, "dim": d, "us": t_k * 1e6, "GBps": nbytes / t_k / 1e9, "copy_us": t_copy * 1e6,
               "copy_GBps": 2 * m * d * 8 / t_copy / 1e9}
        row["of_copy"] = row["GBps"] / row["copy_GBps"]
        st.data.setdefault("rows", []).append(row)
        rows.append([m, d, row["us"], row["GBps"], row["copy_us"], row["copy_GBps"], f"{100 * row['of_copy']:.0f}%"])
    print(f"cosine-dedup similarities on {dev} (GB/s: rows read + matrix written / time; copy: the rows read + written)")
    print_table(["rows", "dim", "us", "GB/s", "copy us", "copy GB/s", "of copy"], rows)
    big = st.data["rows"][-1]
    st.headline = f"{big['rows']} x {big['dim']}: {big['us']:.1f} us a batch, {big['GBps']:.1f} GB/s"


def committer_rows(st, dev: str, plumbing: bool, seed: int) -> None:
    """Frames/s the online committer decides: frame by frame (numpy dot products) against
    push_batch with the CPU body (one matrix product, the host scan), the CUDA similarities under
    the host scan, and the CUDA body's similarities and scan; the same decisions checked."""
    from vam_engine.config import CommitConfig
    from vam_engine.index import OnlineCommitter
    from vam_engine.index.dedup_bodies import CpuBody, CudaBody

    rng = np.random.default_rng(seed)
    n, d, batch = (40, 16, 8) if plumbing else (4096, 512, 64)
    centres = rng.normal(size=(n // 20 + 1, d))
    embs = centres[np.arange(n) // 20] + 0.4 * rng.normal(size=(n, d)) / np.sqrt(d)
    embs = (embs / np.linalg.norm(embs, axis=1)[:, None]).astype(np.float32)
    ts = np.arange(n, dtype=np.float64)
    cfg = CommitConfig()

    def frame_by_frame():
        c = OnlineCommitter(cfg)
        return [x for i in range(n) for x in c.push(ts[i], embs[i], i)] + c.finish()

    def batched(body):
        c = OnlineCommitter(cfg, body=body)
        out = [x for i in range(0, n, batch) for x in c.push_batch(ts[i:i + batch], embs[i:i + batch],
                                                                  range(i, min(n, i + batch)))]
        return out + c.finish()

    truth = [(x.key, x.kept) for x in frame_by_frame()]
    rows = []
    for name, fn in [("push, frame by frame", frame_by_frame), ("push_batch, cpu body", lambda: batched(CpuBody())),
                     (f"push_batch, {dev} similarities, host scan", lambda: batched(CudaBody(dev, scans=False))),
                     (f"push_batch, {dev} similarities and scan", lambda: batched(CudaBody(dev)))]:
        got = [(x.key, x.kept) for x in fn()]
        st.check(f"{name}: same decisions", got == truth)
        t0 = time.perf_counter()
        fn()
        fps = n / (time.perf_counter() - t0)
        st.data.setdefault("committer", []).append({"how": name, "frames": n, "batch": batch, "fps": fps})
        rows.append([name, n, batch, fps])
    print(f"online committer, {n} frames of dimension {d} (push_batch: {batch} frames a call)")
    print_table(["how", "frames", "batch", "frames/s"], rows)


# -- --calibrate: the local-change tile statistic on inputs with a known answer ---------------------
def calibrate(h: int = 360, w: int = 640, seed: int = 0) -> int:
    """Largest tile MAD of frames that must be dropped (still scenes through sensor noise, JPEG
    and H.264) and smallest of frames that must be kept (a crossing sprite, a counting digit
    display), each frame against the one before it, with GateConfig's tiles: where
    ``tile_min_mad`` sits between them (vam_engine.synthetic.gate_sequences, the tests' inputs)."""
    from vam_engine.synthetic import gate_sequences as S
    from vam_engine.config import GateConfig
    from vam_engine.gate.bodies import CpuBody, Tiles

    cfg = GateConfig()
    body, rng = CpuBody(), np.random.default_rng(seed)
    tiles = Tiles(cfg.tile_size, cfg.tile_min_mad)

    def tile_mads(frames):
        return [float(body.stats(np.stack(frames[i:i + 1]), frames[i - 1], tiles=tiles).tile_mad[0])
                for i in range(1, len(frames))]

    rows = []
    for sigma in (0.0, 2.0, 4.0):
        for codec, q in ((None, 0), ("jpeg", 20), ("jpeg", 50), ("jpeg", 90), ("h264", 0)):
            v = tile_mads(S.static_scene(rng, 10, h, w, sigma, codec, q))
            rows.append(["drop", f"still, noise sigma {sigma:g}, {codec or 'raw'}{q or ''}", "max", max(v)])
    scene = S.gray_scene(rng, h, w)
    for crf in (23, 35, 40):
        v = tile_mads(S.h264_roundtrip([S.noisy(rng, scene, 4.0) for _ in range(12)], crf=crf))
        rows.append(["drop", f"still, noise sigma 4, h264 crf {crf}", "max", max(v)])
    for codec in (None, "jpeg", "h264"):
        for size in (12, 16):
            v = tile_mads(S.sprite(rng, 10, h, w, size=size, codec=codec))
            rows.append(["keep", f"sprite {size} px, {codec or 'raw'}", "min", min(v)])
        for hgt in (32, 40):
            v = tile_mads(S.digits(rng, 12, h, w, codec=codec, hgt=hgt))
            rows.append(["keep", f"digits {hgt} px counting, {codec or 'raw'}", "min", min(v)])
    print(f"local-change tiles at {w}x{h}: {cfg.tile_size} px tiles overlapping by half; "
          f"tile_min_mad = {cfg.tile_min_mad:g}")
    print_table(["must", "input", "stat", "tile MAD"], rows)
    worst_drop = max(r[3] for r in rows if r[0] == "drop")
    missed = [r[1] for r in rows if r[0] == "keep" and r[3] < cfg.tile_min_mad]
    print(f"largest tile MAD that must be dropped: {worst_drop:.2f}; kept inputs under the threshold: "
          f"{', '.join(missed) or 'none'}")
    return 0


# -- --hist-check: the row-subsampled histogram against the full-frame one ---------------------------
def hist_check(h: int = 360, w: int = 640, seed: int = 0) -> int:
    """hist_corr of the bodies' histogram (every reference.HIST_ROW_STEP-th row) against the
    full-frame histogram's, on pairs the cascade sees: panning frames against their reference,
    cuts between unrelated scenes, a crossing sprite, a digit display, still JPEG-noisy scenes.
    Reports the largest difference and how many pairs land on the other side of
    GateConfig.cut_max_hist_corr."""
    from vam_engine.synthetic import gate_sequences as S
    from vam_engine.config import GateConfig
    from vam_engine.gate import reference as R
    from vam_engine.synthetic import gray_scene

    rng, cut = np.random.default_rng(seed), GateConfig().cut_max_hist_corr

    def full_corr(a, b):
        return R.hist_corr(*(np.bincount((x >> 2).ravel(), minlength=64).astype(np.float64) for x in (a, b)))

    groups = {"pan vs reference": [], "cut (unrelated scenes)": [], "sprite": [], "digits": [], "still, jpeg 50": []}
    for _ in range(4):
        b = gate_batch(rng, 6, h, w)
        groups["pan vs reference"] += [(f, b.ref) for f in b.frames]
    for _ in range(16):
        a, c = (np.clip(gray_scene(rng, h, w), 0, 255).astype(np.uint8) for _ in range(2))
        groups["cut (unrelated scenes)"].append((a, c))
    for name, fr in (("sprite", S.sprite(rng, 6, h, w, size=16)), ("digits", S.digits(rng, 6, h, w)),
                     ("still, jpeg 50", S.static_scene(rng, 6, h, w, 4.0, "jpeg", 50))):
        groups[name] += [(fr[i], fr[i - 1]) for i in range(1, len(fr))]
    rows = []
    for name, pairs in groups.items():
        full = np.array([full_corr(a, b) for a, b in pairs])
        sub = np.array([R.hist_corr(R.histogram(a), R.histogram(b)) for a, b in pairs])
        rows.append([name, len(pairs), f"{full.min():.4f}..{full.max():.4f}", float(np.abs(sub - full).max()),
                     int(np.count_nonzero((sub < cut) != (full < cut)))])
    print(f"hist_corr, histogram of every {R.HIST_ROW_STEP}th row vs the full frame, {w}x{h}")
    print_table(["pairs", "n", "full-frame hist_corr", "max |difference|", f"other side of {cut:g}"], rows)
    return 0


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=None, help=f"WxH list (default {DEFAULT_SIZES}; 640x360,1280x720 with --quick)")
    ap.add_argument("--batch", type=int, default=None, help="frames per call (default 32; 8 with --quick)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed rounds over all methods, median reported (default 5; 1 with --quick)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=None,
                    help="seconds each timed sample runs at least, repeating the call (default 0.2; 0.05 with --quick)")
    ap.add_argument("--reference-frames", type=int, default=2,
                    help="frames for the (very slow) numpy reference (default 2)")
    ap.add_argument("--reference-repeats", action="store_true",
                    help="repeat the numpy reference like the others (default: timed once, no warm-up)")
    ap.add_argument("--reference-all-sizes", action="store_true",
                    help="time the numpy reference at every size (default: only the smallest)")
    ap.add_argument("--threads", type=int, default=None,
                    help="OpenMP/torch/OpenCV threads (default: OMP_NUM_THREADS or all cores)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 640x360 and 1280x720, batch 8, 1 round")
    ap.add_argument("--no-batch1", action="store_true",
                    help="skip the cpp_fused rows with one frame per call (the pipeline's case at sparse sampling)")
    ap.add_argument("--breakdown-rounds", type=int, default=15,
                    help="interleaved rounds of the time-per-statistic section (best taken; default 15)")
    ap.add_argument("--torch-conv2d", choices=["off", "small", "all"], default="small",
                    help="also time torch with F.conv2d for the Laplacian (slow on CPU): off, at the smallest "
                         "size only (default), or at every size")
    ap.add_argument("--name", default="bench_gate", help="results file name (benchmarks/results/<name>.json)")
    ap.add_argument("--cuda-batches", default="32,128,256", help="--device cuda: batches (multiples of --batch)")
    ap.add_argument("--calibrate", action="store_true", help="print the tile threshold's evidence and exit")
    ap.add_argument("--hist-check", action="store_true",
                    help="print hist_corr of the row-subsampled histogram against the full frame's and exit (~10 s)")
    add_device_args(ap, default_budget=120.0)
    args = ap.parse_args(argv)
    if args.device == "cpu" and not (args.calibrate or args.hist_check):
        if args.sizes is None:
            args.sizes = "640x360,1280x720" if args.quick else DEFAULT_SIZES
        if args.batch is None:
            args.batch = 8 if args.quick else 32
        if args.repeats is None:
            args.repeats = 1 if args.quick else 5
        if args.min_time is None:
            args.min_time = 0.05 if args.quick else 0.2
    return args


# -- the CPU table: rows per size ---------------------------------------------------------------------
@dataclass
class Setup:
    """What every size's rows share: the options, the bodies, the thread counts, the OpenMP switch."""
    args: argparse.Namespace
    cpu_body: object
    ref_body: object
    tiles: object
    threads: int
    omp_threads: int
    omp: "OmpThreads"


def process_settings(args) -> str | None:
    """Thread count and torch's huge pages, set before _C and torch load; OMP_NUM_THREADS after."""
    if args.threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before _C loads its OpenMP runtime
    # torch's CPU allocator returns large buffers to the OS on free, so every temporary
    # page-faults again on the next call (numpy asks for huge pages and mostly does not); let
    # torch ask for transparent huge pages too, before torch is imported.
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    return os.environ.get("OMP_NUM_THREADS")


def make_setup(args, threads_env: str | None) -> Setup:
    import cv2
    import torch

    from vam_engine import native
    from vam_engine.config import GateConfig
    from vam_engine.gate.bodies import CpuBody, ReferenceBody, Tiles

    threads = int(threads_env) if threads_env else (os.cpu_count() or 1)
    torch.set_num_threads(threads)
    cv2.setNumThreads(threads)
    cfg = GateConfig()
    return Setup(args, CpuBody(), ReferenceBody(), Tiles(cfg.tile_size, cfg.tile_min_mad), threads,
                 native.load().max_threads(), OmpThreads())


def print_header(setup: Setup, threads_env: str | None) -> None:
    import cv2
    import torch

    from vam_engine import native

    a = setup.args
    print(f"gate statistics throughput; batch {a.batch} frames, median of {a.repeats} interleaved rounds "
          f"after {a.warmup} warm-up call(s) per method; each sample repeats the call for >= {a.min_time:g} s")
    print(f"threads: cpp_fused OpenMP {setup.omp_threads} (OMP_NUM_THREADS={threads_env or 'unset'}, "
          f"os.cpu_count()={os.cpu_count()}), row kernels '{native.load().gate_isa()}'; torch "
          f"{torch.get_num_threads()}; OpenCV {cv2.getNumThreads()}; memcpy 1 and {setup.threads} threads, best "
          f"taken as the ceiling")
    print("bytes per frame = 2*H*W (frame + reference re-read for mad); opencv_per_frame gets gray input "
          "(the VAM reference's cv2.cvtColor is not counted)")
    print(f"torch THP_MEM_ALLOC_ENABLE={os.environ.get('THP_MEM_ALLOC_ENABLE')} (huge pages for large "
          f"tensors, as numpy does); load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"(other processes on these cores make multi-thread rows noisy; the 1-thread rows less so)")
    print(f"targets (information only): cpp_fused >= {TARGET_X_OPENCV:g}x opencv_per_frame at 1280x720, "
          f">= {TARGET_COPY_FRAC:.0%} of copy bandwidth")
    print()


def check_agreement(setup: Setup, frames, ref, torch_impl, torch_conv, label: str) -> dict:
    """Largest errors of each body against the reference on a small slice, before anything is timed."""
    k = min(2, setup.args.batch)
    want = stats_dict(setup.ref_body.stats(frames[:k], ref))
    err_torch = max_errors(torch_impl(frames[:k], ref), want)
    checks = {"torch_cpu": err_torch, "cpp_fused": max_errors(stats_dict(setup.cpu_body.stats(frames[:k], ref)), want),
              "opencv_per_frame": max_errors(OpenCVPerFrame(ref)(frames[:k]), want)}
    if torch_conv is not None:
        checks["torch_conv2d"] = max_errors(torch_conv(frames[:k], ref), want)
    print(f"[{label}] max error vs reference on {k} frames (relative for lap_var/mad, absolute otherwise):")
    for name, e in checks.items():
        print(f"    {name:17s} " + "  ".join(f"{kk}={vv:.2e}" for kk, vv in e.items()))
    if max(err_torch["lap_var"], err_torch["mad"]) > 1e-4 or max(err_torch["ssim"], err_torch["hist_corr"]) > 1e-6:
        print("    WARNING: torch_cpu disagrees with the reference")
    return checks


def baseline_methods(setup: Setup, frames, ref, torch_impl, torch_conv, with_reference: bool) -> list:
    """(name, fn, frames per call, note) of the rows we compare against: OpenCV per frame (the
    baseline), the numpy reference (timed once), vectorized torch (and its conv2d variant)."""
    import torch

    a, n = setup.args, setup.args.batch
    cv_impl = OpenCVPerFrame(ref)
    rows = [("opencv_per_frame", lambda: cv_impl(frames), n, "gray input; resize INTER_LINEAR thumb")]
    if with_reference:
        nref = max(1, min(a.reference_frames, n))
        rows.append(("numpy_reference", lambda: setup.ref_body.stats(frames[:nref], ref), nref,
                     f"{nref} frames" + ("" if a.reference_repeats else ", timed once")))
    rows.append(("torch_cpu", lambda: torch_impl(frames, ref), n,
                 f"{torch.get_num_threads()} threads, shifted-add Laplacian"))
    if torch_conv is not None:
        rows.append(("torch_conv2d", lambda: torch_conv(frames, ref), n,
                     f"{torch.get_num_threads()} threads, F.conv2d Laplacian"))
    return rows


def with_threads(setup: Setup, n_threads: int, fn):
    """fn run with ``n_threads`` OpenMP threads, the usual count restored after."""
    def go():
        setup.omp.set(n_threads)
        try:
            return fn()
        finally:
            setup.omp.set(setup.omp_threads)
    return go


def cpp_methods(setup: Setup, frames, ref, rthumb, rhist) -> list:
    """The C++ body's rows: adaptive threads (the default), the team always, the cascade's second
    call, one thread, and one frame per call (the pipeline's case at sparse sampling)."""
    from vam_engine import native

    body, tiles, nt, n = setup.cpu_body, setup.tiles, setup.omp_threads, setup.args.batch
    pre = body.stats(frames, ref, rthumb, rhist, tiles=tiles)

    def fused():
        return body.stats(frames, ref, rthumb, rhist, tiles=tiles)

    def team():
        native.set_adaptive_threads(False)  # every call with the helpers, whatever they cost
        try:
            return fused()
        finally:
            native.set_adaptive_threads(True)

    def per_frame():  # one sample per camera per gate batch: per-call costs (fork/join) not amortized
        for i in range(len(frames)):
            body.stats(frames[i:i + 1], ref, rthumb, rhist, tiles=tiles)

    rows = [("cpp_fused", fused, n, f"{nt} threads (csrc/gate_pool, adaptive), with tiles")]
    if nt > 1:
        rows.append(("cpp_fused_team", team, n,
                     f"{nt} threads always (cpp_fused: one thread while the team is slower)"))
    rows.append(("cpp_part_compare", lambda: body.compare(frames, pre.thumb, pre.hist, ref, rthumb, rhist, tiles=tiles),
                 n, "the cascade's second call: |F-R| + tiles + SSIM + hist corr"))
    if nt > 1 and setup.omp.set(1):
        rows.append(("cpp_fused_1t", with_threads(setup, 1, fused), n, "1 thread"))
        setup.omp.set(nt)
    if not setup.args.no_batch1:
        rows.append(("cpp_fused_b1", with_threads(setup, nt, per_frame), n, f"1 frame per call, {nt} threads"))
        if nt > 1 and setup.omp.set(nt):
            rows.append(("cpp_fused_b1_1t", with_threads(setup, 1, per_frame), n, "1 frame per call, 1 thread"))
    return rows


def time_methods(setup: Setup, methods: list, copies: dict, h: int, w: int) -> dict:
    """Every method timed in interleaved rounds: frames/s, GB/s, and the ratios against
    opencv_per_frame and the faster copy."""
    a = setup.args
    timed = time_rounds({name: fn for name, fn, _, _ in methods}, warmup=a.warmup, repeats=a.repeats,
                        once=() if a.reference_repeats else ("numpy_reference",), min_time=a.min_time)
    res = {}
    for name, fn, n, note in methods:
        tm = timed[name]
        fps = n / tm["median"]
        res[name] = {"frames": n, "seconds": tm, "frames_per_s": fps, "gb_per_s": fps * 2 * h * w / 1e9, "note": note}
    for mc in copies.values():
        mc.close()
    base_fps = res["opencv_per_frame"]["frames_per_s"]
    copy_name = max((m for m in res if m.startswith("memcpy")), key=lambda m: res[m]["gb_per_s"])
    for r in res.values():
        r["x_vs_opencv"] = r["frames_per_s"] / base_fps
        r["frac_of_copy_bw"] = r["gb_per_s"] / res[copy_name]["gb_per_s"]
    return res


def size_rows(setup: Setup, si: int, w: int, h: int) -> tuple[list, list, dict, dict]:
    """One frame size: agreement checks, every method's row, the time per statistic; (table rows,
    records, checks, breakdown)."""
    a = setup.args
    frames, ref = make_frames(a.batch, h, w, seed=si)
    torch_impl = TorchCPU(h, w)
    torch_conv = TorchCPU(h, w, conv2d=True) if a.torch_conv2d == "all" or (
        a.torch_conv2d == "small" and si == 0) else None
    checks = check_agreement(setup, frames, ref, torch_impl, torch_conv, f"{w}x{h}")
    own = setup.cpu_body.stats(ref[None], None, tiles=setup.tiles)  # the reference's cached thumbnail and histogram
    rthumb, rhist = own.thumb[0], own.hist[0]
    copies = {1: MemCopy(frames, ref, 1)}
    if setup.threads > 1:
        copies[setup.threads] = MemCopy(frames, ref, setup.threads)
    methods = (baseline_methods(setup, frames, ref, torch_impl, torch_conv, si == 0 or a.reference_all_sizes)
               + cpp_methods(setup, frames, ref, rthumb, rhist)
               + [("memcpy" if t == 1 else f"memcpy_{t}t", mc, a.batch, f"np.copyto, {t} thread(s)")
                  for t, mc in copies.items()])
    res = time_methods(setup, methods, copies, h, w)
    rows = [[f"{w}x{h}", name, r["frames_per_s"], r["gb_per_s"], r["x_vs_opencv"], 100.0 * r["frac_of_copy_bw"],
             r["note"]] for name, r in res.items()]
    records = [{"size": [w, h], "method": name, **r} for name, r in res.items()]
    breakdown = time_per_statistic(setup.cpu_body, frames, ref, rthumb, rhist, setup.tiles, setup.omp,
                                   setup.omp_threads, rounds=a.breakdown_rounds)
    return rows, records, checks, breakdown


def print_verdicts(records: list) -> dict:
    """The targets at 1280x720 (information, not assertions) and the other C++ rows' ratios."""
    verdicts = {}
    r720 = [r for r in records if r["size"] == [1280, 720] and r["method"] == "cpp_fused"]
    if r720:
        x, frac = r720[0]["x_vs_opencv"], r720[0]["frac_of_copy_bw"]
        verdicts = {"x_vs_opencv_720p": x, "x_target": TARGET_X_OPENCV, "x_met": x >= TARGET_X_OPENCV,
                    "copy_frac_720p": frac, "copy_frac_target": TARGET_COPY_FRAC,
                    "copy_frac_met": frac >= TARGET_COPY_FRAC}
        print(f"target cpp_fused >= {TARGET_X_OPENCV:g}x opencv_per_frame at 1280x720: {x:.1f}x -> "
              f"{'met' if verdicts['x_met'] else 'NOT met'}")
        print(f"target cpp_fused >= {TARGET_COPY_FRAC:.0%} of copy bandwidth at 1280x720: {frac:.0%} -> "
              f"{'met' if verdicts['copy_frac_met'] else 'NOT met'}")
    else:
        print("targets: 1280x720 not in --sizes, not evaluated")
    for r in records:
        if r["method"].startswith("cpp_fused") and not (r["method"] == "cpp_fused" and r["size"] == [1280, 720]):
            print(f"  ({r['method']} at {r['size'][0]}x{r['size'][1]}: {r['x_vs_opencv']:.1f}x opencv_per_frame, "
                  f"{r['frac_of_copy_bw']:.0%} of copy bandwidth)")
    return verdicts


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.calibrate:
        return calibrate()
    if args.hist_check:
        return hist_check()
    if args.device == "cuda":
        require_cuda("bench_gate.py", args)
        return cuda_main(args)
    threads_env = process_settings(args)
    setup = make_setup(args, threads_env)
    print_header(setup, threads_env)
    rows, records, checks, breakdown = [], [], {}, {}
    t_start = time.perf_counter()
    for si, (w, h) in enumerate(parse_sizes(args.sizes)):
        r, rec, checks[f"{w}x{h}"], breakdown[f"{w}x{h}"] = size_rows(setup, si, w, h)
        rows += r
        records += rec
    print()
    table = print_table(["resolution", "method", "frames/s", "GB/s", "x vs opencv_per_frame", "% of memcpy BW",
                         "notes"], rows)
    print("(% of memcpy BW is against the faster of the 1-thread and multi-thread copies)")
    print_breakdown(breakdown)
    verdicts = print_verdicts(records)
    import cv2
    import torch

    from vam_engine import native

    path = write_json(args.name, {
        "args": vars(args), "torch_thp_mem_alloc": os.environ.get("THP_MEM_ALLOC_ENABLE"),
        "threads": {"omp": setup.omp_threads, "omp_env": threads_env, "torch": torch.get_num_threads(),
                    "opencv": cv2.getNumThreads(), "isa": native.load().gate_isa()},
        "bytes_per_frame": "2*H*W (frame + reference)", "agreement_max_error": checks, "results": records,
        "time_per_statistic_ms": breakdown,
        "targets": verdicts, "table": table, "total_s": time.perf_counter() - t_start})
    print(f"wrote {path} ({time.perf_counter() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
