#!/usr/bin/env python3
"""Every GPU check of vam_engine in one run, for the lent GPU check machine (one H200, no network,
well under 10 minutes per call including the build). See shared/DEVICE.md.

Run it there from the repository root, exactly like this (``$OUT`` is set by the machine; the
install log lands next to the results and its tail is copied into the JSON):

    export OUT=${OUT:-benchmarks/results} CMAKE_BUILD_PARALLEL_LEVEL=16 PIP_NO_INDEX=1 \
        PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1; mkdir -p "$OUT"
    { if [ -d .whl ]; then for p in av PyNvVideoCodec pybind11 pydantic tqdm; do
        python3 -m pip install --no-index --find-links .whl "$p" || echo "NOT INSTALLED: $p"; done; fi
      python3 -m pip install -e . --no-build-isolation --no-deps; } > "$OUT/install.log" 2>&1
    tail -n 2 "$OUT/install.log"; python3 benchmarks/device_check.py

(PIP_BREAK_SYSTEM_PACKAGES lets pip install into a distribution-managed python, and older pips
ignore it; PIP_NO_INDEX keeps pip off the network, which that machine does not have.)

It takes about 6-7 minutes (the install about 30-60 s of that, vector_search about 30 s, the
embedder up to its 150 s budget); give the call a 600 s limit. The script stops starting new steps
after ``--budget`` seconds (default 360), each of vector_search and embedder also stops at its own
budget or 45 s before the hard limit, and, as a last resort, a watchdog writes what it has and exits
(code 3) after ``--hard-limit`` seconds (default 480). To give the embedder's CUDA-graph compiles
more room, run it alone: ``--steps embedder --embed-budget 400``. The mllm step (120 s,
``--mllm-budget``) does not fit after the others: run it in a second call, ``--steps mllm``.

Filling ``.whl/`` (ignored by git, carried to the machine; it holds about 62 MiB of the 64 MiB
that can be carried), on a machine with PyPI access, from the repository root:

    pip download --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl av PyNvVideoCodec pybind11 pydantic tqdm

All three ``--platform`` values are needed: pip does not widen ``manylinux_2_28`` to older glibc
tags, and pydantic-core ships only ``manylinux_2_17``/``manylinux2014`` wheels (with the 2_28
tag alone pip quietly falls back to the pure-Python pydantic 1.x). ``--only-binary=:all:`` is
required by pip together with ``--platform``/``--python-version``. av ships a ``cp311-abi3``
wheel, which pip accepts for 3.12. pybind11 is needed to build ``vam_engine._C`` with
``--no-build-isolation``; pydantic and tqdm are engine dependencies that the machine may lack.
The machine's python is expected to have pillow already (torchvision, timm's dependency, needs it).

Steps (each guarded: a failure is recorded with its traceback in the JSON and the rest still run):

1. env          torch / triton / CUDA versions, GPU, whether ``vam_engine._C`` and PyNvVideoCodec load
2. tests        ``pytest -q -m gpu tests/`` and ``pytest -q tests/test_gate_triton.py`` natively (180 s)
3. correctness  Triton gate kernels vs the numpy reference (3 frames per size) and vs the C++ body
                (whole batches of 32) at 1280x720 and 1920x1080; max abs / rel errors per statistic
4. throughput   Triton gate_stats / gate_compare frames/s and GB/s for batches of 32, 128, 256 vs a
                device-to-device copy of the same bytes; the C++ body on the machine's CPUs
5. decode       20 s 1080p30 H.264 (libx264, keyframe every 2 s, 2 B-frames): NVDEC (PyNvVideoCodec)
                frames/s for 1, 2, 4, 7 concurrent streams vs PyAV on the CPUs
6. engine       Engine(device="cuda") vs Engine(device="cpu") on that clip at 0.5 and 2 fps: x
                realtime, kept counts, and whether the moments' t_rel lists agree
7. vector_search  brute-force top-10 over 1e6 and 1e7 random unit rows x 512 resident in fp16 on the GPU
                (made there, with the exact float32 top-10 of 100 queries kept as the truth): for 1e6,
                ``VectorSpace(device="cuda")`` itself (built by one ``add`` from a host float32 array;
                fp16 scan + fp32 re-score on the host); for both sizes, its device body
                (``vectors._TorchRows.topk`` over the tensor: fp16, no re-score) and a row-blocked
                alternative tiling for batches. p50/p99 latency of one query (host to host), queries/s
                at batch 64 and 1024, recall@10 against the float32 truth (``--search-budget`` 90 s)
8. embedder     ViT-B/16- and ViT-L/14-sized CLIP vision towers (random weights, real sizes, a small text
                tower) saved to a temp dir and loaded through ``make_image_embedder(body="torch")`` on
                CUDA: images/s at batch 32 and 128 in fp32 (baseline), fp16 and bf16, end to end on
                640x360 RGB frames (upload, resize, crop, normalize, model, back to the host), the model
                alone and the preprocessing alone; then ``compile=True`` (CUDA graphs), fp16 first,
                each compile only while ``--embed-budget`` (150 s) has room for it (ViT-L/14 ones are
                estimated at twice a ViT-B/16 compile). Correctness on 16 images: fp16 vs fp32 cosine
                >= 0.99 (bf16 >= 0.98 soft; also the cosine centred on the images' mean, since random
                weights map images close together), compiled vs eager >= 0.99 (soft)
9. mllm         a Qwen2-VL-2B-sized model (``--mllm-size 2b``; ``7b``: Qwen2-VL-7B dims, whose LLM has
                Qwen2.5-VL-7B's dims) with random weights and the real vocab size (the tiny tokenizer of
                tests/_tiny_qwen.py uses its first ids), saved in bf16 to a temp dir (timed) and loaded
                through ``LocalQwenVL(device="cuda", dtype="bfloat16")``: prefill and decode tokens/s for
                batches of 1 and 8 requests (each 4 random 448x448 images + ~200 text tokens, greedy,
                64 new tokens; best of 2); coarse->fine: B = A + A's reply + a user turn with 2 more
                images, B's prefill with A's prefix cached vs cold (the cache cleared), cached tokens
                > 0 and the same greedy tokens (soft on bf16); peak GPU memory of the weights, the
                batches and the cache (``--mllm-budget`` 120 s; a 7b needs ``--mllm-budget 240``).
                In a full run it gets only what is left before the hard limit (usually nothing: it
                would start after ``--budget``), so run it in its own call, ``--steps mllm`` (1-2 min)

Bandwidth figures: a gate kernel reads the N*H*W frame bytes once (the reference frame stays in
L2), so its GB/s is N*H*W / time. A copy of those bytes reads and writes them, so the copy's GB/s
is 2*N*H*W / time (the usual device-to-device figure, ~4.3 TB/s on an H200). "of copy" is the
ratio of the two: the fraction of the memory bandwidth the kernel reaches.

``--dry-run`` (any machine, ~1 minute): every CUDA part is recorded as skipped ("no CUDA"); steps
1, 3 (C++ body vs reference), 4 (C++ body), 5 (PyAV on a small 640x360 clip), 6 (device="cpu"),
7 (1e4 vectors through ``VectorSpace(device="torch-cpu")`` in fp16 and the same bodies), 8 (a
tiny CLIP on the CPU, fp32 and fp16, batch 2) and 9 (the tiny Qwen2-VL of tests/_tiny_qwen.py's
dims on the CPU in fp32, same requests and batches, ~10-30 s) still run, so the plumbing is tested
without a GPU.

Results: a table per step as it ends, a summary table last, and everything (with tracebacks) in
``$OUT/device_check.json`` (``--out`` or ``$OUT``; default benchmarks/results/). The JSON is
rewritten after every step, so a crash or a kill leaves the steps before it.
"""
from __future__ import annotations

import argparse
import faulthandler
import importlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run from a checkout without an install too

STATS = ("lap_var", "mad", "ssim", "hist_corr", "thumb", "hist")
# (rtol, atol) per statistic: the tolerances of tests/test_gate_triton.py
TOL = {"lap_var": (1e-6, 0.0), "mad": (1e-6, 0.0), "ssim": (0.0, 1e-5), "hist_corr": (0.0, 1e-9),
       "thumb": (0.0, 1e-3), "hist": (0.0, 0.0)}
SEVERITY = {"ok": 0, "not built yet": 0, "skipped": 0, "warn": 1, "fail": 2, "error": 3}


# ================================================================================================
# plumbing: steps, guards, JSON
# ================================================================================================
class Step:
    """One step's record: data, checks, errors (with tracebacks) and skipped parts."""

    def __init__(self, name: str):
        self.name = name
        self.status = "running"
        self.seconds = 0.0
        self.headline = ""
        self.data: dict = {}
        self.checks: dict = {}
        self.errors: list = []
        self.skipped: list = []

    def guard(self, where: str, fn, *args, **kw):
        """Run fn; on an exception record it (with traceback) and return None."""
        try:
            return fn(*args, **kw)
        except Exception as e:  # noqa: BLE001 - every failure is recorded, the run goes on
            first = (str(e).strip().splitlines() or [""])[0][:300]
            self.errors.append({"where": where, "error": f"{type(e).__name__}: {first}",
                                "traceback": traceback.format_exc()})
            print(f"  ! {self.name}/{where}: {type(e).__name__}: {first}", flush=True)
            return None

    def check(self, name: str, ok: bool, detail=None, *, soft: bool = False) -> bool:
        self.checks[name] = {"ok": bool(ok), "soft": soft, "detail": detail}
        if not ok:
            print(f"  {'~' if soft else 'X'} check {name}: {detail}", flush=True)
        return bool(ok)

    def skip(self, where: str, why: str) -> None:
        self.skipped.append({"where": where, "why": why})

    def finish(self) -> None:
        if self.status != "running":
            return
        hard = [c for c in self.checks.values() if not c["ok"] and not c["soft"]]
        soft = [c for c in self.checks.values() if not c["ok"] and c["soft"]]
        if self.errors:
            self.status = "error"
        elif hard:
            self.status = "fail"
        elif soft:
            self.status = "warn"
        elif self.skipped and not self.checks and not self.data:
            self.status = "skipped"
        else:
            self.status = "ok"

    def to_json(self) -> dict:
        return {"status": self.status, "seconds": round(self.seconds, 2), "headline": self.headline,
                "data": self.data, "checks": self.checks, "errors": self.errors, "skipped": self.skipped}


class Run:
    def __init__(self, args):
        self.args = args
        self.t0 = time.monotonic()
        self.steps: dict[str, Step] = {}
        self.cuda = False  # set by the env step
        self.seed = int(np.random.SeedSequence().entropy % (2 ** 32)) if args.seed is None else args.seed
        self.tmp = Path(tempfile.mkdtemp(prefix="vam_device_check_"))
        self.cache: dict = {}  # frames and the clip, shared between steps
        self.sizes = [tuple(int(v) for v in s.lower().split("x")) for s in args.sizes.split(",")]  # (w, h)
        self.out_dir = Path(args.out or os.environ.get("OUT") or ROOT / "benchmarks" / "results")
        self.json_path = self.out_dir / "device_check.json"
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def run_step(self, name: str, fn) -> Step:
        st = Step(name)
        self.steps[name] = st
        print(f"\n== {name} ({self.elapsed():.0f} s elapsed) ==", flush=True)
        if self.elapsed() > self.args.budget:
            st.skip(name, f"out of time: {self.elapsed():.0f} s elapsed, budget {self.args.budget:.0f} s")
            st.status = "skipped"
            st.headline = "skipped: out of time budget"
            print(f"  skipped: {st.headline}", flush=True)
            self.save()
            return st
        self.save()  # a crash inside the step leaves it marked "running"
        t = time.monotonic()
        st.guard("step", fn, self, st)
        st.seconds = time.monotonic() - t
        st.finish()
        print(f"  -> {st.status} in {st.seconds:.1f} s: {st.headline}", flush=True)
        self.save()
        return st

    def save(self, note: str | None = None) -> Path:
        with self._lock:
            doc = {
                "script": "benchmarks/device_check.py",
                "argv": sys.argv[1:],
                "dry_run": self.args.dry_run,
                "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "elapsed_s": round(self.elapsed(), 2),
                "seed": self.seed,
                "note": note,
                "summary": self.summary_rows(),
                "steps": {k: v.to_json() for k, v in self.steps.items()},
            }
            self.out_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.json_path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(_clean(doc), indent=1, default=str, allow_nan=False) + "\n")
            tmp.replace(self.json_path)
            return self.json_path

    def summary_rows(self) -> list:
        return [[name, st.status, round(st.seconds, 1), st.headline] for name, st in self.steps.items()]


def _clean(o):
    """Strict JSON: numpy scalars and arrays to Python, NaN and infinities to null."""
    if isinstance(o, np.ndarray):
        o = o.tolist()
    if isinstance(o, np.generic):
        o = o.item()
    if isinstance(o, float):
        return o if o == o and o not in (float("inf"), float("-inf")) else None
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if x != x:
        return "nan"
    ax = abs(x)
    if ax == 0:
        return "0"
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 0.01:
        return f"{x:.2f}"
    return f"{x:.1e}"


def table(headers, rows, *, max_col: int = 80) -> str:
    cells = [[fmt(c)[:max_col] for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    right = [bool(rows) and all(not isinstance(r[i], str) for r in rows) for i in range(len(headers))]

    def line(vals):
        return "  ".join(v.rjust(w) if rj else v.ljust(w) for v, w, rj in zip(vals, widths, right)).rstrip()

    text = "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells])
    print(text, flush=True)
    return text


def _quiet_hf() -> None:
    """Hugging Face offline (that machine has no network) and without progress bars (they would
    push the tables out of the output's tail)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - cosmetic
        pass


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _import_C():
    from vam_engine import _C

    return _C


def _gate_kernels():
    """The Triton gate kernels: vam_engine.kernels once installed, else kernels/ from the checkout."""
    try:
        return importlib.import_module("vam_engine.kernels.gate_stats")
    except ModuleNotFoundError:
        return importlib.import_module("kernels.gate_stats")


def _stats_dict(out) -> dict:
    """A (lap_var, mad, ssim, hist_corr, thumb, hist) tuple of arrays or tensors -> dict of numpy."""
    vals = [o.detach().cpu().numpy() if hasattr(o, "detach") else np.asarray(o) for o in out]
    return dict(zip(STATS, vals))


def _errors(got, exp, qty: str) -> dict:
    """Max abs / rel error of got against exp; NaN matches NaN, NaN against a number is inf."""
    a = np.asarray(got, np.float64).ravel()
    b = np.asarray(exp, np.float64).ravel()
    if a.shape != b.shape:
        return {"max_abs": float("inf"), "max_rel": float("inf"), "ok": False,
                "detail": f"shapes {a.shape} vs {b.shape}"}
    na, nb = np.isnan(a), np.isnan(b)
    nan_mismatch = bool(np.any(na != nb))
    m = ~(na | nb)
    d = np.abs(a[m] - b[m])
    mag = np.abs(b[m])
    max_abs = float(d.max()) if d.size else 0.0
    max_rel = float((d / np.maximum(mag, 1e-300)).max()) if d.size else 0.0
    rtol, atol = TOL[qty]
    ok = (not nan_mismatch) and bool(np.all(d <= atol + rtol * mag))
    out = {"max_abs": max_abs if not nan_mismatch else float("inf"), "max_rel": max_rel, "ok": ok}
    if nan_mismatch:
        out["detail"] = "NaN in one and not the other"
    return out


def _compare_sets(got: dict, exp: dict, qtys=STATS) -> dict:
    return {q: _errors(got[q], exp[q], q) for q in qtys if q in got and q in exp}


# ================================================================================================
# input: realistic gray frames and an H.264 clip
# ================================================================================================
def scene_base(rng, h: int, w: int) -> np.ndarray:
    """A float32 'scene': smooth illumination, a few flat objects with hard edges, fine texture."""
    y = np.linspace(0.0, 1.0, h, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, w, dtype=np.float32)[None, :]
    gx, gy = rng.uniform(-60, 60, 2).astype(np.float32)
    img = 120 + gx * (x - 0.5) + gy * (y - 0.5)
    f1, f2, ph = rng.uniform(0.5, 3.0), rng.uniform(0.5, 3.0), rng.uniform(0, 6.28)
    two_pi = np.float32(2 * np.pi)
    img = img + np.float32(25) * np.sin(two_pi * np.float32(f1) * x + np.float32(ph)) \
        * np.cos(two_pi * np.float32(f2) * y)
    for _ in range(14):  # objects: flat rectangles
        bh, bw = int(rng.integers(h // 20 + 1, h // 3 + 2)), int(rng.integers(w // 20 + 1, w // 3 + 2))
        y0, x0 = int(rng.integers(0, max(1, h - bh))), int(rng.integers(0, max(1, w - bw)))
        img[y0:y0 + bh, x0:x0 + bw] += np.float32(rng.uniform(-60, 60))
    kx, ky = rng.uniform(0.6, 1.4, 2) * np.float32(np.pi / 2)  # fine texture, a few pixels period
    img = img + np.float32(7) * np.sin(np.arange(w, dtype=np.float32)[None, :] * np.float32(kx)) \
        * np.sin(np.arange(h, dtype=np.float32)[:, None] * np.float32(ky))
    return img


def gate_batch(rng, n: int, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """n frames of one panning camera plus the reference frame (the 'last kept' one). Frame 0 is a
    near copy of the reference (SSIM ~ 1); the others pan away from it, each with sensor noise."""
    pad = 3 * (n + 1)
    base = scene_base(rng, h + pad, w + pad)
    out = np.empty((n + 1, h, w), np.uint8)
    for i in range(n + 1):
        dy, dx = (i * 2) % pad, (i * 3) % pad
        img = base[dy:dy + h, dx:dx + w] + rng.standard_normal((h, w), dtype=np.float32) * np.float32(3.0)
        np.clip(img, 0, 255, out=img)
        out[i] = img
    ref = out[0].copy()
    frames = out[1:].copy()
    frames[0] = np.clip(ref.astype(np.int16) + rng.integers(-2, 3, ref.shape, dtype=np.int16), 0, 255)
    return frames, ref


def frames_for(run: Run, n: int, h: int, w: int):
    key = ("frames", n, h, w)
    if key not in run.cache:
        rng = np.random.default_rng([run.seed, h, w, n])
        run.cache[key] = gate_batch(rng, n, h, w)
    return run.cache[key]


def make_clip(path: Path, w: int, h: int, seconds: float, fps: int, *, gop_s: float = 2.0, bframes: int = 2,
              codec: str = "libx264", seed: int = 0) -> dict:
    """An H.264 clip of scenes (5 s each, or seconds/2 if shorter): a panning camera, a still one,
    a fast pan; sensor noise on every frame. Built as yuv420p directly (no colour conversion)."""
    import av
    from fractions import Fraction

    rng = np.random.default_rng(seed)
    n_frames = int(round(seconds * fps))
    scene_len = int(min(5.0, seconds / 2) * fps)
    pan = max(1, w // 640)  # pixels per frame
    pad = pan * 2 * scene_len + 8
    noise = [rng.integers(-3, 4, (h, w), dtype=np.int16) for _ in range(8)]
    gop = int(round(gop_s * fps))
    t = time.perf_counter()
    with av.open(str(path), "w") as out:
        s = out.add_stream(codec, rate=fps)
        s.width, s.height, s.pix_fmt = w, h, "yuv420p"
        s.time_base = Fraction(1, fps)
        s.codec_context.time_base = Fraction(1, fps)
        if codec == "libx264":
            s.options = {"preset": "ultrafast", "g": str(gop), "keyint_min": str(gop), "sc_threshold": "0",
                         "bf": str(bframes), "crf": "23"}
        else:
            s.options = {"g": str(gop), "bf": str(bframes)}
        base = None
        yuv = np.empty((h * 3 // 2, w), np.uint8)
        for i in range(n_frames):
            k, j = divmod(i, scene_len)
            if j == 0:
                base = np.clip(scene_base(rng, h + pad, w + pad), 0, 255).astype(np.int16)
                yuv[h:h + h // 4] = int(rng.integers(100, 156))
                yuv[h + h // 4:] = int(rng.integers(100, 156))
            mode = k % 3  # 0: slow pan, 1: still camera, 2: fast pan
            dx = 0 if mode == 1 else (j * pan if mode == 0 else (2 * j * pan) % pad)
            dy = 0 if mode == 1 else (j * pan // 3) % pad
            dx = min(dx, pad - 1)
            np.clip(base[dy:dy + h, dx:dx + w] + noise[i % len(noise)], 0, 255, out=yuv[:h], casting="unsafe")
            frame = av.VideoFrame.from_ndarray(yuv, format="yuv420p")
            frame.pts = i
            frame.time_base = Fraction(1, fps)
            for p in s.encode(frame):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    enc_s = time.perf_counter() - t
    # probe: packets, keyframes, picture types of the first GOP
    keys = packets = 0
    with av.open(str(path)) as c:
        for p in c.demux(c.streams.video[0]):
            if p.size:
                packets += 1
                keys += bool(p.is_keyframe)
    types: dict = {}
    with av.open(str(path)) as c:
        for i, f in enumerate(c.decode(video=0)):
            pt = f.pict_type  # an enum in some PyAV versions, an int (AVPictureType) in others
            if not isinstance(pt, str):
                pt = getattr(pt, "name", None) or _PICT.get(int(pt), str(pt))
            types[pt] = types.get(pt, 0) + 1
            if i + 1 >= gop:
                break
    return {"path": str(path), "codec": codec, "width": w, "height": h, "fps": fps, "seconds": seconds,
            "frames": n_frames, "packets": packets, "keyframes": keys, "gop_frames": gop,
            "bframes_asked": bframes, "first_gop_picture_types": types, "bytes": path.stat().st_size,
            "encode_s": round(enc_s, 2)}


_PICT = {0: "NONE", 1: "I", 2: "P", 3: "B", 4: "S", 5: "SI", 6: "SP", 7: "BI"}  # AVPictureType


def clip_for(run: Run) -> dict:
    """The decode / engine clip, made once (default 20 s 1080p30; 6 s 640x360 in a dry run)."""
    if "clip" not in run.cache:
        if run.args.dry_run:
            w, h, secs = 640, 360, 6.0
        else:
            w, h = (int(v) for v in run.args.clip_size.lower().split("x"))
            secs = run.args.clip_seconds
        run.cache["clip"] = make_clip(run.tmp / f"clip_{w}x{h}.mp4", w, h, secs, 30, seed=run.seed)
    return run.cache["clip"]


# ================================================================================================
# 1. environment
# ================================================================================================
def step_env(run: Run, st: Step) -> None:
    d = st.data
    d["python"] = sys.version.split()[0]
    d["executable"] = sys.executable
    d["platform"] = platform.platform()
    d["cpu_count"] = os.cpu_count()
    d["cpus_usable"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        with open("/proc/cpuinfo") as f:
            d["cpu_model"] = next((ln.split(":", 1)[1].strip() for ln in f
                                   if ln.lower().startswith("model name")), None)
    except OSError:
        d["cpu_model"] = None
    d["versions"] = {p: _version(p) for p in ("numpy", "torch", "triton", "av", "PyNvVideoCodec", "pydantic",
                                                "pillow", "opencv-python-headless", "opencv-python", "pytest",
                                                "pybind11", "setuptools", "nvidia-dali-cuda130", "vam_engine")}

    def torch_info():
        import torch

        t = {"version": torch.__version__, "cuda_build": torch.version.cuda,
             "cuda_available": torch.cuda.is_available()}
        if t["cuda_available"]:
            p = torch.cuda.get_device_properties(0)
            t.update(device_count=torch.cuda.device_count(), name=p.name, capability=f"{p.major}.{p.minor}",
                     memory_gib=round(p.total_memory / 2 ** 30, 1), sm_count=p.multi_processor_count)
        return t

    d["torch"] = st.guard("torch", torch_info) or {}
    run.cuda = bool(d["torch"].get("cuda_available")) and not run.args.dry_run
    if run.args.dry_run:
        st.skip("cuda", "dry run: every CUDA part is skipped")
    elif not run.cuda:
        st.check("cuda_available", False, "torch sees no CUDA device: every GPU part is skipped")

    def triton_info():
        import triton

        return triton.__version__

    d["triton"] = st.guard("triton", triton_info)

    def cmd(args, timeout=15):
        if not shutil.which(args[0]):
            return None
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        return (r.stdout or r.stderr).strip()

    smi = st.guard("nvidia-smi", cmd, ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                                       "--format=csv,noheader"])
    d["nvidia_smi"] = smi
    nvcc = st.guard("nvcc", cmd, ["nvcc", "--version"])
    d["nvcc"] = nvcc.splitlines()[-2:] if nvcc else None

    def vam_info():
        import vam_engine

        return {"file": vam_engine.__file__, "version": vam_engine.__version__}

    d["vam_engine"] = st.guard("vam_engine", vam_info)

    def c_info():
        C = _import_C()
        return {"file": C.__file__, "isa": C.gate_isa(), "max_threads": C.max_threads()}

    d["_C"] = st.guard("vam_engine._C", c_info)
    st.check("_C_imports", d["_C"] is not None, "vam_engine._C did not import: was `pip install -e .` run?")

    def kernels_info():
        try:
            m = importlib.import_module("vam_engine.kernels")
            return {"vam_engine.kernels": m.__file__, "aliased": False}
        except ModuleNotFoundError as e:
            # Not installed (setup.py maps kernels/ to vam_engine.kernels): alias the checkout's
            # kernels/ package so that the CUDA gate body still imports in this process.
            import vam_engine

            k = importlib.import_module("kernels")
            sys.modules["vam_engine.kernels"] = k
            vam_engine.kernels = k
            return {"vam_engine.kernels": k.__file__, "aliased": True, "why": str(e)}

    d["kernels"] = st.guard("kernels", kernels_info)
    if not run.args.dry_run:
        st.check("vam_engine.kernels installed", bool(d["kernels"]) and not d["kernels"]["aliased"],
                 "vam_engine.kernels is not installed (was `pip install -e .` run?): aliased to kernels/ here",
                 soft=True)

    def nvc_info():
        from vam_engine.ingest.nvdec_decoder import _import_nvc

        nvc = _import_nvc("<env check>")
        return {"loaded": True, "file": getattr(nvc, "__file__", None)}

    if run.cuda:
        d["PyNvVideoCodec"] = st.guard("PyNvVideoCodec", nvc_info)
    else:
        st.skip("PyNvVideoCodec", "no CUDA")
    for mod in ("av", "pydantic", "PIL"):
        d.setdefault("imports", {})[mod] = st.guard(f"import {mod}", lambda m=mod: bool(importlib.import_module(m)))

    log = run.out_dir / "install.log"
    if log.exists():
        lines = log.read_text(errors="replace").splitlines()
        d["install_log_tail"] = lines[-15:]
        d["install_not_installed"] = [ln for ln in lines if ln.startswith("NOT INSTALLED")]

    tv = d["torch"]
    gpu = tv.get("name") or ("no CUDA" if not run.args.dry_run else "dry run")
    C = d["_C"] or {}
    nvc = "nvc ok" if d.get("PyNvVideoCodec") else "nvc -"
    st.headline = (f"torch {tv.get('version', '?')} cu{tv.get('cuda_build') or '-'}, triton {d['triton'] or '-'}, "
                   f"{gpu}, _C {'ok ' + str(C.get('isa')) if C else 'MISSING'}, {nvc}")


# ================================================================================================
# 2. tests
# ================================================================================================
def _pytest_summary(text: str) -> str:
    for line in reversed(text.strip().splitlines()):
        if re.search(r"\d+ (passed|failed|skipped|deselected|error|errors|xfailed|xpassed)|no tests ran", line):
            return line.strip("= ").strip()
    return (text.strip().splitlines() or ["(no output)"])[-1][:200]


def step_tests(run: Run, st: Step) -> None:
    py = sys.executable
    runs = [("gpu_marked", [py, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-m", "gpu", "tests/"])]
    if run.cuda:
        runs.append(("gate_triton", [py, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider",
                                     "tests/test_gate_triton.py"]))
    else:
        st.skip("gate_triton", "no CUDA: tests/test_gate_triton.py would run under the slow Triton interpreter")
    deadline = time.monotonic() + run.args.tests_timeout
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    summaries = []
    for name, args in runs:
        left = deadline - time.monotonic()
        if left < 5:
            st.check(name, False, "no time left in the tests' 180 s")
            continue

        def go():
            t = time.monotonic()
            try:
                r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=left, env=env)
                rc, text = r.returncode, (r.stdout or "") + (r.stderr or "")
            except subprocess.TimeoutExpired as e:
                out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
                rc, text = "timeout", out + f"\n(timed out after {left:.0f} s)"
            return {"cmd": " ".join(args[1:]), "rc": rc, "seconds": round(time.monotonic() - t, 1),
                    "summary": _pytest_summary(text),
                    "failed": [ln for ln in text.splitlines() if ln.startswith(("FAILED", "ERROR"))][:30],
                    "tail": text[-4000:]}

        r = st.guard(name, go)
        if r is None:
            continue
        st.data[name] = r
        summaries.append(f"{name}: {r['summary']}")
        print(f"  {r['cmd']}: rc={r['rc']} {r['summary']} ({r['seconds']} s)", flush=True)
        for ln in r["failed"][:10]:
            print(f"    {ln[:150]}", flush=True)
        st.check(name, r["rc"] in (0, 5), f"rc={r['rc']}: {r['summary']}")  # 5: nothing collected
    st.headline = "; ".join(summaries)


# ================================================================================================
# 3. correctness: Triton vs numpy reference vs C++
# ================================================================================================
def step_correctness(run: Run, st: Step) -> None:
    from vam_engine.gate import reference as R

    C = st.guard("import _C", _import_C)
    gs = torch = None
    if run.cuda:
        import torch

        gs = st.guard("import kernels", _gate_kernels)
    else:
        st.skip("triton", "no CUDA")
    n = run.args.batch
    rows, worst = [], {}

    def record(size: str, pair: str, errs: dict):
        st.data.setdefault(size, {})[pair] = errs
        ok = all(e["ok"] for e in errs.values())
        st.check(f"{size}:{pair}", ok, {q: e["max_abs"] for q, e in errs.items() if not e["ok"]})
        rows.append([size, pair] + [errs[q]["max_abs"] if q in errs else None for q in STATS]
                    + ["ok" if ok else "FAIL"])
        for q, e in errs.items():
            worst[q] = max(worst.get(q, 0.0), e["max_abs"])

    for w, h in run.sizes:
        size = f"{w}x{h}"
        t = time.perf_counter()
        frames, ref = st.guard(f"{size}:frames", frames_for, run, n, h, w) or (None, None)
        if frames is None:
            continue
        picks = sorted({0, n // 2, n - 1})
        st.data.setdefault(size, {})["picks"] = picks
        exp = st.guard(f"{size}:reference", lambda: {k: R.frame_stats(frames[k], ref) for k in picks})
        exp_d = {q: np.stack([np.asarray(exp[k][q]) for k in picks]) for q in STATS} if exp else None
        ref_thumb = R.thumbnail(frames[1]) if exp else None  # gate_compare against frame 1 as reference

        def compare_ref(thumbs_by_k):
            """mad, ssim, hist_corr of the picks against frames[1], from the reference's pieces."""
            hist1 = R.histogram(frames[1])
            out = {"mad": [], "ssim": [], "hist_corr": []}
            for k in picks:
                out["mad"].append(np.abs(frames[k].astype(np.float64) - frames[1]).mean())
                out["ssim"].append(R.ssim(thumbs_by_k[k], ref_thumb))
                out["hist_corr"].append(R.hist_corr(R.histogram(frames[k]), hist1))
            return {q: np.array(v) for q, v in out.items()}

        exp_cmp = None
        if exp:
            exp_cmp = st.guard(f"{size}:reference compare", compare_ref, {k: exp[k]["thumb"] for k in picks})

        cpp = None
        if C is not None:
            cpp = st.guard(f"{size}:C++ gate_stats", lambda: _stats_dict(C.gate_stats(frames, ref)))
            if cpp is not None and exp_d is not None:
                record(size, "C++ vs ref", _compare_sets({q: v[picks] for q, v in cpp.items()}, exp_d))
            cpp_cmp = None
            if cpp is not None:
                cpp_cmp = st.guard(f"{size}:C++ gate_compare", lambda: dict(zip(
                    ("mad", "ssim", "hist_corr"),
                    C.gate_compare(frames, cpp["thumb"], cpp["hist"], frames[1], cpp["thumb"][1], cpp["hist"][1]))))
            if cpp_cmp is not None and exp_cmp is not None:
                record(size, "C++ compare vs ref", _compare_sets({q: np.asarray(v)[picks] for q, v in cpp_cmp.items()},
                                                                 exp_cmp))
        if gs is not None:
            def triton_all():
                f_t = torch.from_numpy(frames).cuda()
                r_t = torch.from_numpy(ref).cuda()
                out = gs.gate_stats(f_t, r_t)
                tri = _stats_dict(out)
                noref = _stats_dict(gs.gate_stats(f_t[:4], None))
                cmp = gs.gate_compare(f_t, out[4], out[5], f_t[1], out[4][1].clone(), out[5][1].clone())
                torch.cuda.synchronize()
                return tri, noref, dict(zip(("mad", "ssim", "hist_corr"), (c.cpu().numpy() for c in cmp)))

            got = st.guard(f"{size}:triton", triton_all)
            if got is not None:
                tri, noref, tri_cmp = got
                if exp_d is not None:
                    record(size, "Triton vs ref", _compare_sets({q: v[picks] for q, v in tri.items()}, exp_d))
                if cpp is not None:
                    record(size, f"Triton vs C++ (all {n})", _compare_sets(tri, cpp))
                    # no reference: mad/ssim/hist_corr must be NaN, the rest as with one
                    nr_exp = {q: (cpp[q][:4] if q in ("lap_var", "thumb", "hist") else np.full(4, np.nan))
                              for q in STATS}
                    record(size, "Triton no-ref vs C++", _compare_sets(noref, nr_exp))
                if exp_cmp is not None:
                    record(size, "Triton compare vs ref",
                           _compare_sets({q: v[picks] for q, v in tri_cmp.items()}, exp_cmp))
                if cpp is not None and cpp_cmp is not None:
                    record(size, f"Triton compare vs C++ (all {n})",
                           _compare_sets(tri_cmp, {q: np.asarray(v) for q, v in cpp_cmp.items()}))
        st.data[size]["seconds"] = round(time.perf_counter() - t, 2)
    if rows:
        print("  max abs error (tolerances as tests/test_gate_triton.py)")
        table(["size", "pair"] + list(STATS) + ["ok"], rows)
    n_ok = sum(1 for r in rows if r[-1] == "ok")
    st.headline = (f"{n_ok}/{len(rows)} comparisons within tolerance; worst abs err "
                   + ", ".join(f"{q} {fmt(worst[q])}" for q in STATS if q in worst))
    if not run.cuda:
        st.headline += " (C++ vs reference only: no CUDA)"


# ================================================================================================
# 4. throughput: Triton on the GPU vs a device copy; the C++ body on the CPUs
# ================================================================================================
def cuda_time(torch, fn, *, warmup: int = 3, iters: int = 10, repeats: int = 5) -> float:
    """Seconds per call: median over `repeats` of CUDA-event-timed loops of `iters` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1000.0 / iters)
    return statistics.median(times)


def host_time(fn, *, warmup: int = 1, repeats: int = 3) -> float:
    for _ in range(warmup):
        fn()
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def step_throughput(run: Run, st: Step) -> None:
    n0 = run.args.batch
    batches = [] if run.args.dry_run else [int(b) for b in run.args.batches.split(",") if int(b) % n0 == 0]
    gpu_rows, cpu_rows, best = [], [], {}
    gs = torch = None
    if run.cuda:
        import torch

        gs = st.guard("import kernels", _gate_kernels)
    else:
        st.skip("triton", "no CUDA")
    C = st.guard("import _C", _import_C)
    for w, h in run.sizes:
        size = f"{w}x{h}"
        frames, ref = st.guard(f"{size}:frames", frames_for, run, n0, h, w) or (None, None)
        if frames is None:
            continue
        hw = h * w
        if gs is not None:
            def gpu_size():
                reps = -(-max(batches) // n0)
                big = torch.from_numpy(frames).cuda().repeat(reps, 1, 1).contiguous()
                r = torch.from_numpy(ref).cuda()
                dst = torch.empty_like(big)
                base = _stats_dict(gs.gate_stats(big[:n0], r))
                for n in batches:
                    x = big[:n]
                    out = gs.gate_stats(x, r)
                    # batch consistency: frame i of the tiled batch is frame i % n0 of the first
                    got = _stats_dict(out)
                    diff = max(float(np.nanmax(np.abs(got[q].astype(np.float64)
                                                      - np.concatenate([base[q]] * (n // n0)))))
                               for q in STATS)
                    st.check(f"{size}:batch{n}_consistent", diff == 0.0, f"max diff {diff} vs batch {n0}")
                    th, hi = out[4], out[5]
                    rth, rhi = th[1].clone(), hi[1].clone()
                    t_gate = cuda_time(torch, lambda: gs.gate_stats(x, r))
                    t_cmp = cuda_time(torch, lambda: gs.gate_compare(x, th, hi, r, rth, rhi))
                    t_copy = cuda_time(torch, lambda: dst[:n].copy_(x))
                    nbytes = n * hw
                    gate_gbs, cmp_gbs, copy_gbs = nbytes / t_gate / 1e9, nbytes / t_cmp / 1e9, 2 * nbytes / t_copy / 1e9
                    row = {"size": size, "batch": n, "gate_ms": t_gate * 1e3, "gate_fps": n / t_gate,
                           "gate_GBps": gate_gbs, "compare_ms": t_cmp * 1e3, "compare_GBps": cmp_gbs,
                           "copy_ms": t_copy * 1e3, "copy_GBps": copy_gbs, "gate_of_copy": gate_gbs / copy_gbs,
                           "consistency_max_diff": diff}
                    st.data.setdefault("gpu", []).append(row)
                    gpu_rows.append([size, n, row["gate_ms"], row["gate_fps"], gate_gbs, copy_gbs,
                                     f"{100 * row['gate_of_copy']:.0f}%", cmp_gbs])
                    if n == max(batches):
                        best[size] = row
                del big, dst
                torch.cuda.empty_cache()

            st.guard(f"{size}:gpu", gpu_size)
        if C is not None:
            def cpu_size():
                t_c = host_time(lambda: C.gate_stats(frames, ref), repeats=3 if not run.args.dry_run else 2)
                dst = np.empty_like(frames)
                t_copy = host_time(lambda: np.copyto(dst, frames), repeats=3)
                nbytes = frames.size
                row = {"size": size, "batch": n0, "threads": C.max_threads(), "cpp_ms": t_c * 1e3,
                       "cpp_fps": n0 / t_c, "cpp_GBps": nbytes / t_c / 1e9, "memcpy_GBps": 2 * nbytes / t_copy / 1e9}
                row["cpp_of_memcpy"] = row["cpp_GBps"] / row["memcpy_GBps"]
                st.data.setdefault("cpu", []).append(row)
                cpu_rows.append([size, n0, C.max_threads(), row["cpp_ms"], row["cpp_fps"], row["cpp_GBps"],
                                 row["memcpy_GBps"], f"{100 * row['cpp_of_memcpy']:.0f}%"])

            st.guard(f"{size}:cpu", cpu_size)
    if gpu_rows:
        print("  Triton gate_stats on the GPU (GB/s: frame bytes read / time; copy: read+write of the same bytes)")
        table(["size", "batch", "ms", "frames/s", "GB/s", "copy GB/s", "of copy", "compare GB/s"], gpu_rows)
    if cpu_rows:
        print("  C++ body (vam_engine._C) on the CPUs")
        table(["size", "batch", "threads", "ms", "frames/s", "GB/s", "memcpy GB/s", "of memcpy"], cpu_rows)
    parts = []
    for size, r in best.items():
        parts.append(f"{size} b{r['batch']}: {fmt(r['gate_fps'])} fps {fmt(r['gate_GBps'])} GB/s "
                     f"= {100 * r['gate_of_copy']:.0f}% of copy")
    for r in st.data.get("cpu", []):
        parts.append(f"C++ {r['size']}: {fmt(r['cpp_fps'])} fps")
    st.headline = "; ".join(parts)


# ================================================================================================
# 5. decode: NVDEC (PyNvVideoCodec) vs PyAV, 1 and N concurrent streams
# ================================================================================================
def run_streams(open_one, count_one, n: int, timeout: float) -> dict:
    """Open n decoders (not timed), then decode them in n threads at once; frames/s overall."""
    decs = [open_one() for _ in range(n)]
    counts, errors = [0] * n, []
    barrier = threading.Barrier(n + 1)

    def work(i):
        try:
            barrier.wait()
            counts[i] = count_one(decs[i])
        except Exception as e:  # noqa: BLE001
            errors.append(f"stream {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join(timeout=max(1.0, timeout - (time.perf_counter() - t0)))
    wall = time.perf_counter() - t0
    hung = sum(t.is_alive() for t in threads)
    for d in decs:
        try:
            d.close()
        except Exception:  # noqa: BLE001
            pass
    if hung:
        errors.append(f"{hung} stream(s) still running after {timeout:.0f} s")
    total = sum(counts)
    return {"streams": n, "frames": total, "per_stream": counts, "wall_s": wall,
            "fps": total / wall if wall > 0 else 0.0, "fps_per_stream": total / wall / n if wall > 0 else 0.0,
            "errors": errors}


def step_decode(run: Run, st: Step) -> None:
    clip = st.guard("make clip", clip_for, run)
    if clip is None:
        return
    st.data["clip"] = clip
    print(f"  clip: {clip['width']}x{clip['height']} {clip['seconds']:g} s {clip['fps']} fps, {clip['frames']} frames, "
          f"{clip['keyframes']} keyframes, first GOP {clip['first_gop_picture_types']}, "
          f"encoded in {clip['encode_s']} s",
          flush=True)
    b = clip["first_gop_picture_types"]
    st.check("clip_has_b_frames", "B" in b, f"picture types {b}", soft=True)
    path, expect = clip["path"], clip["frames"]
    streams = [1, 2] if run.args.dry_run else [int(x) for x in run.args.streams.split(",")]
    rows = []
    bodies = []
    if run.cuda:
        from vam_engine.ingest.nvdec_decoder import NvdecDecoder

        import torch

        def nv_open():
            return NvdecDecoder(path, "cam", fps=1000.0)  # a tick per ms: every frame is sampled

        def nv_count(dec):  # the engine's path: decode, clone the Y plane out (torch), one Frame per frame
            n = sum(1 for _ in dec)
            torch.cuda.synchronize()
            return n

        def nv_raw_count(dec):  # decode only: the decoder's surfaces, nothing cloned
            return sum(1 for _ in dec._decoded())

        bodies += [("nvdec", nv_open, nv_count), ("nvdec raw", nv_open, nv_raw_count)]
    else:
        st.skip("nvdec", "no CUDA")

    from vam_engine.ingest.pyav_decoder import PyAVDecoder

    def av_open():
        return PyAVDecoder(path, "cam", fps=1000.0)  # thread_type AUTO, FFmpeg's thread count

    def av_count(dec):
        return sum(1 for _ in dec)

    bodies.append(("pyav", av_open, av_count))
    for name, opener, counter in bodies:
        for n in streams:
            if run.elapsed() > run.args.budget + 30:
                st.skip(f"{name} x{n}", "out of time")
                continue
            r = st.guard(f"{name} x{n}", run_streams, opener, counter, n, run.args.decode_timeout)
            if r is None:
                continue
            r["body"] = name
            st.data.setdefault("runs", []).append(r)
            for e in r["errors"]:
                st.errors.append({"where": f"{name} x{n}", "error": e, "traceback": ""})
            ok = all(c == expect for c in r["per_stream"])
            st.check(f"{name} x{n} all frames", ok, f"per stream {r['per_stream']}, expected {expect}")
            rows.append([name, n, r["frames"], r["wall_s"], r["fps"], r["fps_per_stream"]])
    if rows:
        table(["body", "streams", "frames", "wall s", "frames/s", "per stream"], rows)
    by = {(r["body"], r["streams"]): r["fps"] for r in st.data.get("runs", [])}
    parts = []
    for name in ("nvdec", "nvdec raw", "pyav"):
        got = [f"{n}:{fmt(by[(name, n)])}" for n in streams if (name, n) in by]
        if got:
            parts.append(f"{name} " + " ".join(got))
    st.headline = f"{clip['height']}p fps by streams: " + "; ".join(parts)


# ================================================================================================
# 6. engine end to end: device="cuda" vs device="cpu"
# ================================================================================================
def step_engine(run: Run, st: Step) -> None:
    clip = st.guard("make clip", clip_for, run)
    if clip is None:
        return
    from vam_engine.engine import Engine

    devices = ["cuda", "cpu"] if run.cuda else ["cpu"]
    if not run.cuda:
        st.skip("engine cuda", "no CUDA")
    rows, parts = [], []
    if run.cuda:  # JIT-compile the Triton kernels for this clip's shapes before anything is timed
        def warmup():
            t = time.perf_counter()
            store = run.tmp / "store_warmup"
            with Engine(store, {"ingest": {"fps": 2.0}}, device="cuda") as eng:
                eng.index_file(clip["path"], "cam")
            shutil.rmtree(store, ignore_errors=True)
            return time.perf_counter() - t

        st.data["cuda_warmup_s"] = st.guard("cuda warmup", warmup)
    for fps in (0.5, 2.0):
        got = {}
        for dev in devices:
            def one():
                store = run.tmp / f"store_{dev}_{fps:g}"
                shutil.rmtree(store, ignore_errors=True)
                with Engine(store, {"ingest": {"fps": fps}}, device=dev) as eng:
                    rep = eng.index_file(clip["path"], "cam")
                    ts = [round(m.t_rel, 6) for m in eng.moments()]
                    info = eng.info()
                shutil.rmtree(store, ignore_errors=True)
                return {"device": dev, "fps": fps, "decoder": rep.decoder, "gate_body": info.get("gate_body"),
                        "decoded": rep.decoded, "sampled": rep.sampled, "kept": rep.kept,
                        "dropped": dict(rep.dropped), "wall_s": rep.wall_s, "content_s": rep.content_s,
                        "x_realtime": rep.x_realtime, "errors": rep.errors[:10], "failed": rep.failed,
                        "moments_t_rel": ts}

            r = st.guard(f"{dev} fps={fps:g}", one)
            if r is None:
                continue
            got[dev] = r
            st.data.setdefault("runs", []).append(r)
            st.check(f"{dev} fps={fps:g} finished", not r["failed"], r["failed"])
            rows.append([dev, fps, r["decoder"], r["gate_body"], r["sampled"], r["kept"],
                         ",".join(f"{k}:{v}" for k, v in sorted(r["dropped"].items())) or "-", r["wall_s"],
                         r["x_realtime"]])
        if "cuda" in got and "cpu" in got:
            a, b = set(got["cuda"]["moments_t_rel"]), set(got["cpu"]["moments_t_rel"])
            overlap = len(a & b) / len(a | b) if a | b else 1.0
            same = got["cuda"]["moments_t_rel"] == got["cpu"]["moments_t_rel"]
            cmp = {"fps": fps, "equal": same, "overlap_jaccard": overlap, "only_cuda": sorted(a - b)[:20],
                   "only_cpu": sorted(b - a)[:20], "sampled_equal": got["cuda"]["sampled"] == got["cpu"]["sampled"]}
            st.data.setdefault("cuda_vs_cpu", []).append(cmp)
            st.check(f"fps={fps:g} sampled equal", cmp["sampled_equal"],
                     f"cuda {got['cuda']['sampled']} vs cpu {got['cpu']['sampled']}")
            st.check(f"fps={fps:g} moments equal", same, f"overlap {overlap:.3f}", soft=True)
            parts.append(f"{fps:g} fps: cuda {fmt(got['cuda']['x_realtime'])}x rt, "
                         f"cpu {fmt(got['cpu']['x_realtime'])}x rt, "
                         f"kept {got['cuda']['kept']}/{got['cpu']['kept']}, moments "
                         + ("equal" if same else f"overlap {overlap:.2f}"))
        elif "cpu" in got:
            parts.append(f"{fps:g} fps: cpu {fmt(got['cpu']['x_realtime'])}x rt, kept {got['cpu']['kept']}"
                         f"/{got['cpu']['sampled']}")
    if rows:
        table(["device", "fps", "decoder", "gate", "sampled", "kept", "dropped", "wall s", "x realtime"], rows)
    st.headline = "; ".join(parts)


# ================================================================================================
# 7. vector_search: brute-force top-k over a resident fp16 tensor (VectorSpace's device body)
# ================================================================================================
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
    """VectorSpace's device body over ``t``: vam_engine.memory.vectors._TorchRows.topk when it
    exists (query chunks of 2^26 / n rows, fp16 matmul + torch.topk, results to the host), else
    the same computation written out here. Returns fn(q numpy M x dim, k) -> (scores, rows)."""
    try:
        from vam_engine.memory.vectors import _TorchRows

        body = _TorchRows(t.shape[1], str(t.device), t.dtype)
        body.t = t
        return (lambda q, k: body.topk(q, None, n, k)), "vectors._TorchRows.topk"
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

    return fn, "local mirror of _TorchRows.topk"


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


def step_vector_search(run: Run, st: Step) -> None:
    import gc

    import torch

    from vam_engine.config import VectorConfig
    from vam_engine.memory.vectors import VectorSpace

    a = run.args
    dim, k = 512, 10
    gpu = run.cuda
    deadline = min(time.monotonic() + a.search_budget, run.t0 + a.hard_limit - 45)

    def left() -> float:
        return deadline - time.monotonic()

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
                    s = _timed(lambda: fn(Q[:b], k), None, warmup=1, repeats=3)
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
        table(["n", "body", "p50 ms", "p99 ms", "scan GB/s"] + [f"b{b} q/s" for b in batches] + ["recall@10"], rows)
    st.headline = "; ".join(parts) + ("" if gpu else " (CPU plumbing run, no CUDA)")


# ================================================================================================
# 8. embedder: CLIP image towers of the real sizes, random weights, through make_image_embedder
# ================================================================================================
# vision towers of the real sizes (the FLOPs and bytes of the trained models); a small text tower
CLIP_SIZES = {
    "ViT-B/16": dict(vision=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                 num_attention_heads=12, patch_size=16, image_size=224), projection_dim=512),
    "ViT-L/14": dict(vision=dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24,
                                 num_attention_heads=16, patch_size=14, image_size=224), projection_dim=768),
}
CLIP_TINY = {"tiny": dict(vision=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=2, patch_size=8, image_size=32), projection_dim=16)}
_CLIP_TEXT = dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                  max_position_embeddings=77, bos_token_id=0, eos_token_id=1, pad_token_id=2)


def vit_gflops(vision: dict) -> float:
    """Forward GFLOPs (2 per multiply-add) of one image through a ViT: patch embedding, each
    block's qkv/out projections and MLP, and its two attention products."""
    h, i, layers = vision["hidden_size"], vision["intermediate_size"], vision["num_hidden_layers"]
    p, s = vision["patch_size"], vision["image_size"]
    g = (s // p) ** 2
    tok = g + 1
    block = 2 * tok * (4 * h * h + 2 * h * i) + 4 * tok * tok * h
    return (2 * g * 3 * p * p * h + layers * block) / 1e9


def save_clip(path: Path, spec: dict, device: str, seed: int) -> dict:
    """A random-weight transformers CLIPModel of ``spec``'s vision size, saved to ``path`` (fp16
    weights when made on CUDA: half the bytes to write and read; each load casts to its dtype)."""
    import torch
    from transformers import CLIPConfig, CLIPModel

    t0 = time.perf_counter()
    cfg = CLIPConfig(text_config=_CLIP_TEXT, vision_config=spec["vision"], projection_dim=spec["projection_dim"])
    torch.manual_seed(seed)
    try:
        with torch.device(device):  # initialized where it is made: seconds faster for ViT-L on a GPU
            model = CLIPModel(cfg)
    except Exception:  # noqa: BLE001 - the default device then
        model = CLIPModel(cfg)
    model = model.eval()
    if str(device).startswith("cuda"):
        model = model.half()
    vparams = sum(p.numel() for p in model.vision_model.parameters()) + model.visual_projection.weight.numel()
    model.save_pretrained(path)
    del model
    if str(device).startswith("cuda"):
        torch.cuda.empty_cache()
    return {"path": str(path), "vision_params_M": vparams / 1e6, "gflops_per_image": vit_gflops(spec["vision"]),
            "build_s": time.perf_counter() - t0}


def rgb_frames(run: Run, n: int, h: int, w: int, distinct: int = 16) -> np.ndarray:
    """n RGB uint8 frames (``distinct`` different scenes, repeated)."""
    key = ("rgb", n, h, w, distinct)
    if key not in run.cache:
        rng = np.random.default_rng([run.seed, 3, h, w])
        base = [np.stack([np.clip(scene_base(rng, h, w), 0, 255) for _ in range(3)], -1).astype(np.uint8)
                for _ in range(min(n, distinct))]
        run.cache[key] = np.stack([base[i % len(base)] for i in range(n)])
    return run.cache[key]


def _timed(fn, sync=None, *, warmup: int = 2, repeats: int = 5, iters: int = 1) -> float:
    """Seconds per call, host-timed (after ``sync`` when given): median over ``repeats`` loops."""
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        if sync:
            sync()
        ts.append((time.perf_counter() - t) / iters)
    return statistics.median(ts)


def _cos(a: np.ndarray, b: np.ndarray, ref: np.ndarray) -> dict:
    """Cosines of the rows of a and b (unit rows), plain and centred on ref's mean row (random
    weights can map all images close together: the centred cosine shows the error against the
    spread between images)."""
    cos = np.einsum("ij,ij->i", a, b)
    mu = ref.mean(0, keepdims=True)
    ac, bc = a - mu, b - mu
    cc = np.einsum("ij,ij->i", ac, bc) / np.maximum(np.linalg.norm(ac, axis=1) * np.linalg.norm(bc, axis=1), 1e-30)
    return {"min_cos": float(cos.min()), "mean_cos": float(cos.mean()), "min_centred_cos": float(cc.min())}


def step_embedder(run: Run, st: Step) -> None:
    import gc
    import warnings

    import torch

    from vam_engine.config import EmbedConfig
    from vam_engine.embed import make_image_embedder
    from vam_engine.embed.models import preprocess

    _quiet_hf()
    a = run.args
    gpu = run.cuda
    deadline = min(time.monotonic() + a.embed_budget, run.t0 + a.hard_limit - 45)

    def left() -> float:
        return deadline - time.monotonic()

    if gpu:
        models, dev, dtypes = CLIP_SIZES, "cuda", ["float32", "float16", "bfloat16"]
        batches = [int(b) for b in a.embed_batches.split(",")]
        n_corr, reps = 16, 5
        sync = torch.cuda.synchronize
    else:
        st.skip("cuda", "no CUDA: the tiny CLIP on the CPU through the same code (plumbing only)")
        models, dev, dtypes, batches, n_corr, reps = CLIP_TINY, "cpu", ["float32", "float16"], [2], 4, 2
        sync = None
    fh, fw = 360, 640  # 640x360 RGB in: every end-to-end figure includes the resize / crop / normalize
    frames = rgb_frames(run, max(max(batches), n_corr), fh, fw)
    corr = frames[:n_corr]
    st.data.update(device=dev, frame=f"{fw}x{fh}", batches=batches, correctness_images=n_corr,
                   weights="random (transformers CLIPModel from a CLIPConfig of the real vision sizes)")
    rows, runs, info, outs = [], [], {}, {}
    st.data["models"], st.data["runs"] = info, runs  # filled in place: a watchdog save keeps what was measured
    st.data["float32_matmul_precision"] = torch.get_float32_matmul_precision()

    def free():
        gc.collect()
        if gpu:
            torch.cuda.empty_cache()

    def measure(emb, name, dtype, graphs, bs, extra=None):
        spec = emb.source.spec
        base = {"model": name, "dtype": dtype, "graphs": graphs, **(extra or {})}
        for b in bs:
            if left() < 3:
                st.skip(f"{name} {dtype} graphs={graphs} b{b}", "out of time")
                continue
            fb = frames[:b]
            r = dict(base, batch=b)
            t = _timed(lambda: emb.embed_images(fb), sync, warmup=3 if graphs else 2, repeats=reps)
            r.update(e2e_ms=t * 1e3, e2e_img_s=b / t)
            x = preprocess(fb, spec, emb.device, emb.dtype)
            if hasattr(emb, "_run_image"):  # the model alone, on preprocessed input already on the device
                with torch.inference_mode():
                    t = _timed(lambda: emb._run_image(x), sync, warmup=3 if graphs else 2, repeats=reps,
                               iters=3 if gpu else 1)
                r.update(model_ms=t * 1e3, model_img_s=b / t,
                         model_TFLOPS=b / t * info[name]["gflops_per_image"] / 1e3)
            del x
            t = _timed(lambda: preprocess(fb, spec, emb.device, emb.dtype), sync, warmup=1, repeats=3)
            r.update(preprocess_ms=t * 1e3, preprocess_img_s=b / t)
            runs.append(r)

    # -- eager: fp32 (baseline and reference), fp16, bf16 ----------------------------------------
    for name, spec in models.items():
        if left() < 20:
            st.skip(name, f"out of time ({left():.0f} s left of the step's budget)")
            continue
        path = run.tmp / ("clip_" + re.sub(r"\W+", "_", name))
        got = st.guard(f"{name}: build", save_clip, path, spec, dev, run.seed)
        if got is None:
            continue
        info[name] = got
        outs[name] = {}
        for dtype in dtypes:
            if left() < 8:
                st.skip(f"{name} {dtype}", "out of time")
                continue

            def eager():
                t0 = time.perf_counter()
                emb = make_image_embedder(EmbedConfig(body="torch", model=str(path), dtype=dtype,
                                                      batch_size=max(batches)), device=dev, compile=False)
                load_s = time.perf_counter() - t0
                info[name].setdefault("dim", emb.dim)
                owner = getattr(getattr(emb, "_image", None), "owner", None)
                attn = getattr(getattr(owner, "config", None), "_attn_implementation", None)
                if attn:
                    info[name]["attn_implementation"] = attn
                outs[name][dtype] = emb.embed_images(corr)
                measure(emb, name, dtype, False, batches, {"load_s": load_s})
                del emb

            st.guard(f"{name} {dtype} eager", eager)
            free()
        ref = outs[name].get("float32")
        for dtype, thr, soft in (("float16", 0.99, False), ("bfloat16", 0.98, True)):
            if ref is None or dtype not in outs[name]:
                continue
            c = _cos(outs[name][dtype], ref, ref)
            st.data.setdefault("correctness", {})[f"{name} {dtype} vs float32"] = c
            st.check(f"{name} {dtype} vs float32 cosine", c["min_cos"] >= thr, f"min {c['min_cos']:.5f} < {thr}",
                     soft=soft)
        if ref is not None and len(ref) > 1:
            g = ref @ ref.T
            st.data.setdefault("correctness", {})[f"{name} spread"] = {
                "mean_cos_between_images": float((g.sum() - np.trace(g)) / (len(g) * (len(g) - 1)))}

    # -- CUDA graphs: torch.compile(mode="reduce-overhead"), one static batch per embedder -------
    if gpu:
        plan = [("ViT-B/16", "float16", max(batches)), ("ViT-B/16", "float16", min(batches)),
                ("ViT-L/14", "float16", max(batches)), ("ViT-B/16", "bfloat16", max(batches)),
                ("ViT-L/14", "float16", min(batches)), ("ViT-B/16", "bfloat16", min(batches)),
                ("ViT-L/14", "bfloat16", max(batches)), ("ViT-L/14", "bfloat16", min(batches))]
        plan = list(dict.fromkeys(p for p in plan if p[0] in info))
        est = {"ViT-B/16": 60.0, "ViT-L/14": 120.0}  # compile seconds guessed until one is measured
        l_measured = [False]
        for name, dtype, b in plan:
            need = est[name] + 10
            if left() < need:
                st.skip(f"{name} {dtype} graphs b{b}", f"out of time: {left():.0f} s left, compile needs "
                                                       f"~{est[name]:.0f} s")
                continue

            def compiled():
                t0 = time.perf_counter()
                emb = make_image_embedder(EmbedConfig(body="torch", model=info[name]["path"], dtype=dtype,
                                                      batch_size=b), device=dev, compile=True)
                load_s = time.perf_counter() - t0
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    t0 = time.perf_counter()
                    out = emb.embed_images(corr)  # the first call compiles
                    sync()
                    compile_s = time.perf_counter() - t0
                fell_back = getattr(emb, "_compiled", True) is None
                why = [str(w.message)[:300] for w in caught if "compile" in str(w.message)]
                st.check(f"{name} {dtype} b{b} compiled", not fell_back, why[:1] or "fell back to eager")
                est[name] = compile_s
                if name == "ViT-B/16" and not l_measured[0]:
                    est["ViT-L/14"] = 2 * compile_s  # twice the layers, a third more width
                l_measured[0] |= name == "ViT-L/14"
                eager_out = outs[name].get(dtype)
                if eager_out is not None:
                    c = _cos(out, eager_out, outs[name].get("float32", eager_out))
                    st.data.setdefault("correctness", {})[f"{name} {dtype} graphs b{b} vs eager"] = c
                    st.check(f"{name} {dtype} b{b} graphs vs eager cosine", c["min_cos"] >= 0.99,
                             f"min {c['min_cos']:.5f} < 0.99", soft=True)
                if not fell_back:
                    measure(emb, name, dtype, True, [b], {"load_s": load_s, "compile_s": compile_s})
                del emb

            st.guard(f"{name} {dtype} graphs b{b}", compiled)
            try:
                torch._dynamo.reset()  # drop the graphs (and their memory pool) before the next one
            except Exception:  # noqa: BLE001
                pass
            free()
    else:
        st.skip("graphs", "no CUDA: CUDA graphs (compile=True) apply on CUDA only")

    by = {(r["model"], r["dtype"], r["graphs"], r["batch"]): r for r in runs}
    for r in runs:
        r32 = by.get((r["model"], "float32", False, r["batch"]))
        eag = by.get((r["model"], r["dtype"], False, r["batch"]))
        x_fp32 = r["e2e_img_s"] / r32["e2e_img_s"] if r32 else None
        x_eager = r["e2e_img_s"] / eag["e2e_img_s"] if (eag and r["graphs"]) else None
        r["e2e_x_fp32"], r["e2e_x_eager"] = x_fp32, x_eager
        rows.append([r["model"], r["dtype"], "yes" if r["graphs"] else "no", r["batch"], r["e2e_img_s"],
                     r.get("model_img_s"), r.get("model_TFLOPS"), r["preprocess_img_s"], x_fp32, x_eager,
                     r.get("compile_s", r.get("load_s"))])
    if rows:
        print(f"  images/s on {dev}: e2e = embed_images on {fw}x{fh} RGB (upload, resize, crop, normalize, model, "
              f"back to the host); model = the image tower alone; x fp32 / x eager: e2e ratios")
        table(["model", "dtype", "graphs", "batch", "e2e img/s", "model img/s", "TFLOPS", "preproc img/s", "x fp32",
               "x eager", "load/compile s"], rows)
    cr = st.data.get("correctness", {})
    if cr:
        table(["pair", "min cos", "mean cos", "min centred cos"],
              [[kk] + [f"{v[q]:.5f}" for q in ("min_cos", "mean_cos", "min_centred_cos")]
               for kk, v in cr.items() if "min_cos" in v])
    parts = []
    for name in info:
        bmax = max(batches)
        e = by.get((name, "float16", False, bmax)) or by.get((name, "float32", False, bmax))
        if e:
            s = (f"{name} {e['dtype']} b{bmax}: {fmt(e['e2e_img_s'])} img/s e2e, "
                 f"{fmt(e.get('model_img_s'))} model")
            gph = by.get((name, "float16", True, bmax))
            if gph:
                s += f", graphs {fmt(gph['e2e_img_s'])} e2e / {fmt(gph.get('model_img_s'))} model"
            c = cr.get(f"{name} float16 vs float32")
            if c:
                s += f", fp16 vs fp32 min cos {c['min_cos']:.4f}"
            parts.append(s)
    st.headline = "; ".join(parts) + ("" if gpu else " (CPU plumbing run, no CUDA)")


# ================================================================================================
# 9. mllm: a Qwen2-VL of a real size, random weights, through the engine's LocalQwenVL
# ================================================================================================
# Dims of the real checkpoints (their config.json). Qwen2-VL-7B's LLM has the dims of
# Qwen2.5-VL-7B's (the model DEVICE.md names); the vision towers differ (Qwen2.5-VL's uses window
# attention and a gated MLP), and LocalQwenVL is only verified on Qwen2-VL, so Qwen2-VL it is.
# The vocabulary keeps the real size (the embedding / lm_head bytes and the lm_head FLOPs of the
# real model); the tokenizer is the tiny one of tests/_tiny_qwen.py and uses its first ids only.
# Qwen2-VL-2B ties lm_head to the input embedding; here it is untied: a tied random model only
# repeats its last input token (a row's product with itself dominates its logits). Same FLOPs and
# the same bytes read per decode step; the weights take 0.47 GB (151936 x 1536 bf16) more memory.
_QWEN_VISION = dict(depth=32, embed_dim=1280, num_heads=16, mlp_ratio=4, patch_size=14, spatial_merge_size=2,
                    temporal_patch_size=2)
QWEN_SIZES = {
    "2b": dict(label="Qwen2-VL-2B-sized",
               text=dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                         num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=False, rope_theta=1e6,
                         rms_norm_eps=1e-6),
               vision=dict(_QWEN_VISION, hidden_size=1536), sharpen=dict(lm=8.0)),
    "7b": dict(label="Qwen2-VL-7B-sized",
               text=dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                         num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False, rope_theta=1e6,
                         rms_norm_eps=1e-6),
               vision=dict(_QWEN_VISION, hidden_size=3584), sharpen=dict(lm=8.0)),
    # the dims and the weight sharpening of tests/_tiny_qwen.py; vocab None: the tokenizer's size
    "tiny": dict(label="tiny Qwen2-VL",
                 text=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=None, tie_word_embeddings=False, rope_theta=1e4,
                           rms_norm_eps=1e-6),
                 vision=dict(depth=2, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2, patch_size=14,
                             spatial_merge_size=2, temporal_patch_size=2),
                 sharpen=dict(qk=10.0, vo=3.0, lm=8.0)),
}
# Qwen2-VL's own image processor bounds (so a 448x448 image is 32x32 patches, 256 image tokens)
_QWEN_PREPROCESSOR = {
    "image_processor_type": "Qwen2VLImageProcessor", "do_resize": True, "do_rescale": True,
    "rescale_factor": 1 / 255, "do_normalize": True, "do_convert_rgb": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
    "min_pixels": 56 * 56, "max_pixels": 28 * 28 * 16384, "patch_size": 14, "temporal_patch_size": 2,
    "merge_size": 2,
}


def _tiny_qwen_module():
    """tests/_tiny_qwen.py (its tokenizer and corpus), imported from the checkout."""
    import importlib.util

    if "_tiny_qwen" in sys.modules:
        return sys.modules["_tiny_qwen"]
    spec = importlib.util.spec_from_file_location("_tiny_qwen", ROOT / "tests" / "_tiny_qwen.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules["_tiny_qwen"] = mod
    return mod


def _qwen_config(spec: dict, ids: dict, n_tok: int):
    """A Qwen2VLConfig of ``spec``'s dims with the tiny tokenizer's special ids. transformers 5
    takes a ``text_config`` with ``rope_parameters``; older versions take flat text kwargs with
    ``rope_scaling`` (and may silently ignore the other form), so each form is checked."""
    from transformers import Qwen2VLConfig

    t = dict(spec["text"])
    vocab = t.pop("vocab_size") or n_tok
    tie = t.pop("tie_word_embeddings")
    theta = t.pop("rope_theta")
    half = t["hidden_size"] // t["num_attention_heads"] // 2
    tq = half // 4  # Qwen2-VL's [16, 24, 24] for head_dim 128 (temporal, height, width)
    mrope = [tq, (half - tq) // 2, half - tq - (half - tq) // 2]
    special = dict(bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                   pad_token_id=ids["<|endoftext|>"])
    top = dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
               vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
               tie_word_embeddings=tie)
    want = (t["hidden_size"], t["num_hidden_layers"], vocab, mrope)

    def got(cfg):
        tc = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        rope = getattr(tc, "rope_parameters", None) or getattr(tc, "rope_scaling", None) or {}
        return (tc.hidden_size, tc.num_hidden_layers, tc.vocab_size, list(rope.get("mrope_section") or []))

    forms = {
        "text_config + rope_parameters": lambda: Qwen2VLConfig(
            text_config=dict(t, vocab_size=vocab, max_position_embeddings=32768, tie_word_embeddings=tie,
                             rope_parameters={"rope_type": "default", "rope_theta": theta, "mrope_section": mrope},
                             **special),
            vision_config=dict(spec["vision"]), **top),
        "flat + rope_scaling": lambda: Qwen2VLConfig(
            **t, vocab_size=vocab, max_position_embeddings=32768, rope_theta=theta,
            rope_scaling={"type": "mrope", "mrope_section": mrope}, vision_config=dict(spec["vision"]),
            **special, **top),
    }
    tried = []
    for form, make in forms.items():
        try:
            cfg = make()
        except Exception as e:  # noqa: BLE001 - the next form
            tried.append(f"{form}: {type(e).__name__}: {e}")
            continue
        if got(cfg) == want:
            return cfg
        tried.append(f"{form}: built {got(cfg)}, wanted {want}")
    raise RuntimeError("cannot build a Qwen2VLConfig in this transformers version: " + "; ".join(tried))


def save_qwen(path: Path, size: str, device: str, seed: int) -> dict:
    """A random-weight Qwen2VLForConditionalGeneration of ``size``, made on ``device``, saved in
    bfloat16 (float32 for the tiny one) to ``path`` with the tiny tokenizer, a generation config
    and Qwen2-VL's image processor bounds: a directory ``LocalQwenVL`` loads like a real one.

    Weights: the default init (std 0.02), then lm_head x8 (all sizes; the tiny one also sharpens
    attention like tests/_tiny_qwen.py) so greedy picks do not hinge on rounding noise, and the
    lm_head rows of ids the tokenizer lacks and of the stop tokens zeroed: every other row's
    logit is then above them almost surely, so replies are text the tokenizer knows and each
    request decodes exactly max_tokens. Neither changes the FLOPs or the bytes."""
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen2VLForConditionalGeneration

    spec = QWEN_SIZES[size]
    tiny = _tiny_qwen_module()
    t0 = time.perf_counter()
    tok_dir = path.parent / (path.name + "_tokenizer")
    try:
        tiny.build_tiny_qwen2_vl(tok_dir)  # the tokenizer is written first; only it is used
    except Exception:  # noqa: BLE001 - e.g. the tiny config's form in an older transformers
        if not (tok_dir / "tokenizer.json").exists():
            raise
    tok = PreTrainedTokenizerFast.from_pretrained(str(tok_dir))
    vocab = tok.get_vocab()
    n_tok = len(vocab)
    ids = {s: vocab[s] for s in tiny.SPECIAL_TOKENS}
    cfg = _qwen_config(spec, ids, n_tok)
    torch.manual_seed(seed)
    try:
        with torch.device(device):  # initialized where it is made: much faster for billions of weights
            model = Qwen2VLForConditionalGeneration(cfg)
    except Exception:  # noqa: BLE001 - the default device then
        model = Qwen2VLForConditionalGeneration(cfg)
    dtype = torch.float32 if size == "tiny" else torch.bfloat16
    model = model.to(dtype).eval()
    lm = getattr(model.model, "language_model", model.model)  # transformers 5 / older layouts
    visual = getattr(model.model, "visual", None) or getattr(model, "visual")
    sh = spec["sharpen"]
    stops = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    with torch.no_grad():
        for layer in lm.layers:
            for name, f in (("q_proj", sh.get("qk")), ("k_proj", sh.get("qk")), ("v_proj", sh.get("vo")),
                            ("o_proj", sh.get("vo"))):
                if f:
                    getattr(layer.self_attn, name).weight.mul_(f)
        w = model.lm_head.weight
        w.mul_(sh["lm"])
        w[n_tok:] = 0
        w[stops] = 0
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    build_s = time.perf_counter() - t0
    n_all = sum(p.numel() for p in model.parameters())  # tied weights are counted once
    n_vis = sum(p.numel() for p in visual.parameters())
    n_layers = sum(p.numel() for p in lm.layers.parameters())
    n_merger = sum(p.numel() for p in visual.merger.parameters()) if hasattr(visual, "merger") else 0
    tc = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    vc = cfg.vision_config
    t0 = time.perf_counter()
    model.save_pretrained(str(path))
    save_s = time.perf_counter() - t0
    del model
    for f in tok_dir.iterdir():  # the tokenizer's files (not the tiny model's)
        if f.is_file() and not (f.name in ("config.json", "generation_config.json", "preprocessor_config.json")
                                or f.name.startswith("model") or f.suffix in (".safetensors", ".bin")):
            shutil.copy2(f, path / f.name)
    (path / "generation_config.json").write_text(json.dumps({"eos_token_id": stops, "pad_token_id": stops[1]}))
    (path / "preprocessor_config.json").write_text(json.dumps(_QWEN_PREPROCESSOR, indent=1))
    nbytes = sum(f.stat().st_size for f in path.iterdir() if f.suffix == ".safetensors")
    return {"path": str(path), "label": spec["label"], "saved_dtype": str(dtype).replace("torch.", ""),
            "params_M": n_all / 1e6, "vision_params_M": n_vis / 1e6, "text_layer_params_M": n_layers / 1e6,
            "merger_params_M": n_merger / 1e6, "vocab_size": tc.vocab_size, "tokenizer_vocab": n_tok,
            "hidden_size": tc.hidden_size, "layers": tc.num_hidden_layers, "heads": tc.num_attention_heads,
            "kv_heads": tc.num_key_value_heads, "intermediate_size": tc.intermediate_size,
            "vision_depth": vc.depth, "vision_embed_dim": vc.embed_dim,
            "tie_word_embeddings": bool(getattr(cfg, "tie_word_embeddings", None)),
            "kv_bytes_per_token": 2 * tc.num_hidden_layers * tc.num_key_value_heads
            * (tc.hidden_size // tc.num_attention_heads) * (4 if size == "tiny" else 2),
            "build_s": build_s, "save_s": save_s, "save_GB": nbytes / 1e9, "save_GBps": nbytes / 1e9 / save_s}


def _prefill_gflops(info: dict, prompt_tokens: int, n_images: int, patches_per_image: int) -> float:
    """Forward GFLOPs (2 per multiply-add) of one prompt's prefill: the text layers' weights over
    every token plus causal attention (2 L^2 d per layer), lm_head for the last token only, and the
    vision tower over each image's patches (its blocks over the patches, full attention within the
    image, the merger over a quarter of them). Norms, rotary and softmax are left out."""
    L, d = prompt_tokens, info["hidden_size"]
    text = 2 * info["text_layer_params_M"] * 1e6 * L + 2 * L * L * d * info["layers"] + 2 * d * info["vocab_size"]
    blocks = (info["vision_params_M"] - info["merger_params_M"]) * 1e6
    p, e = patches_per_image, info["vision_embed_dim"]
    vision = n_images * (2 * blocks * p + 4 * p * p * e * info["vision_depth"]
                         + 2 * info["merger_params_M"] * 1e6 * p / 4)
    return (text + vision) / 1e9


def step_mllm(run: Run, st: Step) -> None:
    import gc

    import torch

    from vam_engine.llm.base import Image, LLMRequest, Message, Sampling
    from vam_engine.llm.local_qwen import LocalQwenVL

    _quiet_hf()
    a = run.args
    gpu = run.cuda
    deadline = min(time.monotonic() + a.mllm_budget, run.t0 + a.hard_limit - 45)

    def left() -> float:
        return deadline - time.monotonic()

    if gpu:
        size, dev, dtype, reps = a.mllm_size, "cuda", "bfloat16", 2
        sync = torch.cuda.synchronize
    else:
        size, dev, dtype, reps = "tiny", "cpu", "float32", 1
        sync = None
        st.skip("cuda", "no CUDA: the tiny Qwen2-VL on the CPU in float32 through the same code (plumbing only)"
                + ("" if a.mllm_size == "tiny" else f"; --mllm-size {a.mllm_size} needs CUDA"))
    spec = QWEN_SIZES[size]
    batches = [int(b) for b in a.mllm_batches.split(",")]
    n_img, img_px, text_tokens, max_tokens = 4, 448, 200, a.mllm_max_tokens
    need = {"2b": 45.0, "7b": 120.0}.get(size, 10.0)  # build + save + load, guessed
    if left() < need:
        st.skip("mllm", f"out of time: {left():.0f} s left of the step's budget, building and loading a "
                        f"{size} model needs ~{need:.0f} s (raise --mllm-budget or run --steps mllm)")
        st.status, st.headline = "skipped", f"skipped: out of time ({left():.0f} s left, {size} needs ~{need:.0f} s)"
        return
    st.data.update(model=spec["label"], size=size, device=dev, dtype=dtype, batches=batches,
                   request=f"system + {n_img} random RGB {img_px}x{img_px} images + ~{text_tokens} text tokens, "
                           f"greedy, max_tokens {max_tokens}",
                   weights="random (transformers Qwen2VLForConditionalGeneration from a config of the real dims; "
                           "real vocab size, the tiny tokenizer of tests/_tiny_qwen.py uses its first ids; lm_head "
                           "untied and x8, its rows of unused ids and of the stop tokens zeroed: see save_qwen)",
                   decode_tok_s="(sum over rows of completion_tokens - 1) / the longest decode_s: the tokens "
                                "made by decode steps (the first comes from the prefill's logits)",
                   prefill_tok_s="sum of prompt_tokens / prefill_s (one prefill for the whole batch; it includes "
                                 "the image preprocessing on the host)")
    mem = st.data["memory_GiB"] = {}
    runs, conts = [], []
    st.data["runs"], st.data["continuation"] = runs, conts  # filled in place: a watchdog save keeps them

    def free():
        gc.collect()
        if gpu:
            torch.cuda.empty_cache()

    def peak_reset():
        if gpu:
            sync()
            torch.cuda.reset_peak_memory_stats()

    def peak():
        return torch.cuda.max_memory_allocated() / 2 ** 30 if gpu else None

    # -- build, save, load ----------------------------------------------------------------------
    path = run.tmp / f"qwen2vl_{size}"
    info = st.guard("build + save", save_qwen, path, size, dev, run.seed)
    free()
    if info is None:
        st.headline = f"{spec['label']}: building the model failed"
        return
    st.data["model_info"] = info
    print(f"  {info['label']}: {fmt(info['params_M'])} M params ({fmt(info['vision_params_M'])} M vision), "
          f"built in {info['build_s']:.1f} s, saved {fmt(info['save_GB'])} GB in {info['save_s']:.1f} s", flush=True)
    if gpu:
        mem["before_load"] = torch.cuda.memory_allocated() / 2 ** 30
        torch.cuda.reset_peak_memory_stats()

    def load():
        t0 = time.perf_counter()
        m = LocalQwenVL(info["path"], device=dev, dtype=dtype, max_batch=max(batches))
        if sync:
            sync()
        return m, time.perf_counter() - t0

    got = st.guard("load", load)
    if got is None:
        st.headline = f"{spec['label']}: LocalQwenVL could not load it"
        return
    llm, st.data["load_s"] = got
    st.data["attn_implementation"] = llm.attn_implementation
    if gpu:
        mem["weights"] = torch.cuda.memory_allocated() / 2 ** 30
        mem["load_peak"] = peak()

    tiny = _tiny_qwen_module()
    lines = [ln.strip() for ln in tiny._CORPUS.splitlines() if ln.strip()]
    rng = np.random.default_rng([run.seed, 9])
    base_len = len(llm.tokenize([Message("user", [""])]))
    texts: dict = {}

    def text(i: int) -> str:
        """~text_tokens tokens of corpus sentences, different for each i."""
        if i not in texts:
            s, k = f"Request {i}.", i
            while len(llm.tokenize([Message("user", [s])])) - base_len < text_tokens:
                s += " " + lines[k % len(lines)]
                k += 1
            texts[i] = s
        return texts[i]

    def images(n: int) -> list:  # fresh pixels every time: no request hits another's cache entry
        return [Image(rng.integers(0, 256, (img_px, img_px, 3), dtype=np.uint8)) for _ in range(n)]

    system = Message("system", ["You are a helpful assistant that watches a video stream and answers questions "
                                "about it."])
    greedy = Sampling(temperature=0.0, max_tokens=max_tokens)
    plain = len(llm.tokenize([Message("user", ["x"])]))
    img_tokens = len(llm.tokenize([Message("user", ["x"] + images(1))])) - plain - 2  # minus vision start/end
    patches = img_tokens * 4  # merge_size 2: 2x2 patches per image token
    st.data.update(image_tokens=img_tokens, patches_per_image=patches)
    n_req = [0]

    def request(n_images: int) -> LLMRequest:
        n_req[0] += 1
        # its own system text too: the body caches every message boundary, and a shared system
        # message would be a (small) hit, not the full prefill this part measures
        own = Message("system", [f"{system.content[0]} Request {n_req[0]}."])
        return LLMRequest([own, Message("user", images(n_images) + [text(n_req[0])])], greedy)

    # -- warm-up (CUDA context, cuBLAS and SDPA kernels), not measured ---------------------------
    def warmup():
        t0 = time.perf_counter()
        llm.generate([LLMRequest([system, Message("user", images(1) + ["Describe the image."])],
                                 Sampling(max_tokens=4))])
        st.data["warmup_s"] = time.perf_counter() - t0

    st.guard("warmup", warmup)

    # -- prefill / decode tokens/s for batches of 1 and 8 ---------------------------------------
    rows = []
    for b in batches:
        best = None
        for rep in range(reps):
            if left() < 8 + 2 * b:
                st.skip(f"b{b} rep{rep}", f"out of time ({left():.0f} s left)")
                continue

            def measure():
                reqs = [request(n_img) for _ in range(b)]
                peak_reset()
                t0 = time.perf_counter()
                rs = llm.generate(reqs)
                wall = time.perf_counter() - t0
                steps = max(x.completion_tokens for x in rs) - 1
                decode_s = max(x.decode_s for x in rs)
                prefill_s = max(x.prefill_s for x in rs)  # one group: the same for every row
                r = {"batch": b, "rep": rep, "prompt_tokens": sum(x.prompt_tokens for x in rs),
                     "completion_tokens": sum(x.completion_tokens for x in rs),
                     "cached_tokens": sum(x.cached_tokens for x in rs),
                     "finish": dict(Counter(x.finish_reason for x in rs)), "prefill_s": prefill_s,
                     "decode_s": decode_s, "wall_s": wall, "peak_GiB": peak()}
                r["prefill_tok_s"] = r["prompt_tokens"] / prefill_s
                r["decode_tok_s"] = sum(x.completion_tokens - 1 for x in rs) / decode_s if decode_s > 0 else None
                r["ms_per_step"] = decode_s / steps * 1e3 if steps > 0 else None
                # each decode step reads the text layers' and lm_head's weights once (the floor of its time)
                step_bytes = (info["text_layer_params_M"] * 1e6 + info["vocab_size"] * info["hidden_size"]) \
                    * (2 if dtype == "bfloat16" else 4)
                r["decode_weights_GBps"] = step_bytes / (r["ms_per_step"] / 1e3) / 1e9 if steps > 0 else None
                gfl = sum(_prefill_gflops(info, x.prompt_tokens, n_img, patches) for x in rs)
                r["prefill_TFLOPS"] = gfl / prefill_s / 1e3
                return r

            r = st.guard(f"b{b} rep{rep}", measure)
            if r is not None and (best is None or r["wall_s"] < best["wall_s"]):
                best = r
        if best is None:
            continue
        runs.append(best)
        st.check(f"b{b}: no prefix-cache hit (fresh images)", best["cached_tokens"] == 0,
                 f"{best['cached_tokens']} cached tokens")
        rows.append([f"b{b}", best["prompt_tokens"], best["completion_tokens"], best["prefill_s"],
                     best["prefill_tok_s"], best["prefill_TFLOPS"], best["decode_s"], best["decode_tok_s"],
                     best["ms_per_step"], best["decode_weights_GBps"], best["peak_GiB"]])
    if rows:
        print(f"  {info['label']} {dtype} on {dev}, each request: {st.data['request']} "
              f"({img_tokens} tokens per image); best of {reps} by wall time")
        table(["batch", "prompt tok", "gen tok", "prefill s", "prefill tok/s", "prefill TFLOPS", "decode s",
               "decode tok/s", "ms/step", "weights GB/s", "peak GiB"], rows)
        print("  (prefill TFLOPS: estimated forward FLOPs over prefill_s; weights GB/s: the text layers' and "
              "lm_head's bytes once per decode step)")
    mem["kv_cache_after_batches"] = llm.cache_info()["bytes"] / 2 ** 30

    # -- coarse -> fine: B = A + A's reply + a new user turn with 2 more images -----------------
    def cold_generate(reqs):
        """B again without the prefix cache: the same LocalQwenVL (same weights, same warm
        kernels) with its cache emptied (``_cache.clear()``, what ``close()`` calls; there is no
        public method), else a second instance with kv_cache_bytes=0."""
        cache = getattr(llm, "_cache", None)
        if cache is not None and hasattr(cache, "clear") and hasattr(llm, "_lock"):
            with llm._lock:
                cache.clear()
            st.data["cold"] = "the same LocalQwenVL, prefix cache cleared"
            return llm.generate(reqs)
        st.data["cold"] = "a second LocalQwenVL with kv_cache_bytes=0"
        other = LocalQwenVL(info["path"], device=dev, dtype=dtype, kv_cache_bytes=0)
        try:
            return other.generate(reqs)
        finally:
            other.close()

    crow = []
    for rnd in range(reps):
        if left() < 12:
            st.skip(f"continuation round {rnd}", f"out of time ({left():.0f} s left)")
            continue

        def continuation():
            A = [system, Message("user", images(n_img) + [text(1000 + rnd)])]
            ra = llm.generate([LLMRequest(A, greedy)])[0]
            L_A = len(llm.tokenize(A))
            B = A + [Message("assistant", [ra.text]),
                     Message("user", images(2) + ["Look closer at these two frames: what changed since the "
                                                  "first four?"])]
            L_B = len(llm.tokenize(B))
            peak_reset()
            warm = llm.generate([LLMRequest(B, greedy)])[0]
            c = {"round": rnd, "A_prompt_tokens": L_A, "A_prefill_s": ra.prefill_s, "A_decode_s": ra.decode_s,
                 "B_prompt_tokens": L_B, "warm_cached_tokens": warm.cached_tokens,
                 "warm_prefill_s": warm.prefill_s, "warm_decode_s": warm.decode_s, "warm_peak_GiB": peak(),
                 "cache_bytes": llm.cache_info()["bytes"], "cache_entries": llm.cache_info()["entries"]}
            peak_reset()
            cold = cold_generate([LLMRequest(B, greedy)])[0]
            c.update(cold_cached_tokens=cold.cached_tokens, cold_prefill_s=cold.prefill_s,
                     cold_decode_s=cold.decode_s, cold_peak_GiB=peak(),
                     prefill_speedup=cold.prefill_s / warm.prefill_s if warm.prefill_s > 0 else None)
            same = warm.token_ids == cold.token_ids
            n_same = next((i for i, (x, y) in enumerate(zip(warm.token_ids, cold.token_ids)) if x != y),
                          min(len(warm.token_ids), len(cold.token_ids)))
            c.update(same_tokens=same, same_leading_tokens=n_same, completion_tokens=len(warm.token_ids))
            st.check(f"continuation {rnd}: B hits A's cached prefix", L_A <= warm.cached_tokens < L_B,
                     f"cached {warm.cached_tokens}, A's prompt {L_A}, B's prompt {L_B}")
            st.check(f"continuation {rnd}: the cold B is uncached", cold.cached_tokens == 0,
                     f"cached {cold.cached_tokens}")
            st.check(f"continuation {rnd}: cached and cold B give the same greedy tokens", same,
                     f"first difference at token {n_same} of {len(warm.token_ids)}", soft=gpu)
            return c

        c = st.guard(f"continuation round {rnd}", continuation)
        if c is None:
            continue
        conts.append(c)
        crow.append([f"{rnd} cached", c["B_prompt_tokens"], c["warm_cached_tokens"], c["warm_prefill_s"],
                     c["prefill_speedup"], f"{c['same_leading_tokens']}/{c['completion_tokens']}", c["warm_peak_GiB"]])
        crow.append([f"{rnd} cold", c["B_prompt_tokens"], c["cold_cached_tokens"], c["cold_prefill_s"], 1.0, "-",
                     c["cold_peak_GiB"]])
    if crow:
        print(f"  coarse->fine: A = system + {n_img} images + ~{text_tokens} tokens; B = A + A's reply + a user "
              f"turn with 2 more images; B's prefill with A's prefix cached vs cold ({st.data.get('cold')})")
        table(["round, B", "prompt tok", "cached tok", "prefill s", "x cold", "same tokens", "peak GiB"], crow)

    mem["kv_cache_end"] = llm.cache_info()["bytes"] / 2 ** 30
    st.data["cache_info"] = llm.cache_info()
    if gpu:  # the highest of the measured peaks (loading, the batches, the continuations)
        mem["peak_overall"] = max([mem.get("load_peak") or 0.0] + [r["peak_GiB"] or 0.0 for r in runs]
                                  + [c[k] or 0.0 for c in conts for k in ("warm_peak_GiB", "cold_peak_GiB")])
    llm.close()
    del llm
    free()

    parts = [f"{info['label']} {dtype} on {dev}"]
    for r in runs:
        parts.append(f"b{r['batch']} prefill {fmt(r['prefill_tok_s'])} tok/s, decode {fmt(r['decode_tok_s'])} tok/s")
    if conts:
        c = conts[-1]
        parts.append(f"continuation prefill {fmt(c['warm_prefill_s'])} s cached ({c['warm_cached_tokens']}/"
                     f"{c['B_prompt_tokens']} tok) vs {fmt(c['cold_prefill_s'])} s cold (x{fmt(c['prefill_speedup'])}), "
                     f"same tokens {'yes' if c['same_tokens'] else 'no'}")
    if gpu and "weights" in mem:
        parts.append(f"weights {mem['weights']:.1f} GiB, peak {mem['peak_overall']:.1f} GiB")
    st.headline = "; ".join(parts) + ("" if gpu else " (CPU plumbing run, no CUDA)")


STEPS = [("env", step_env), ("tests", step_tests), ("correctness", step_correctness),
         ("throughput", step_throughput), ("decode", step_decode), ("engine", step_engine),
         ("vector_search", step_vector_search), ("embedder", step_embedder), ("mllm", step_mllm)]


# ================================================================================================
def print_summary(run: Run) -> None:
    print(f"\n== summary ({'dry run, ' if run.args.dry_run else ''}{run.elapsed():.0f} s; "
          f"JSON: {run.json_path}) ==", flush=True)
    table(["step", "status", "s", "result"], run.summary_rows(), max_col=150)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true",
                   help="skip every CUDA part; small clip; tests the plumbing on a CPU machine")
    p.add_argument("--out", default=None, help="results folder (default $OUT, else benchmarks/results)")
    p.add_argument("--steps", default=None, help="comma-separated subset of: " + ",".join(n for n, _ in STEPS))
    p.add_argument("--sizes", default="1280x720,1920x1080", help="frame sizes (WxH) for correctness and throughput")
    p.add_argument("--batch", type=int, default=32, help="correctness batch, and the unit tiled for throughput")
    p.add_argument("--batches", default="32,128,256", help="GPU throughput batches (multiples of --batch)")
    p.add_argument("--streams", default="1,2,4,7", help="concurrent decode streams to measure")
    p.add_argument("--clip-size", default="1920x1080", help="decode / engine test clip size (WxH)")
    p.add_argument("--clip-seconds", type=float, default=20.0, help="decode / engine test clip length")
    p.add_argument("--tests-timeout", type=float, default=180.0, help="seconds for the pytest runs together")
    p.add_argument("--decode-timeout", type=float, default=60.0, help="seconds for one decode measurement")
    p.add_argument("--vec-sizes", default="1e6,1e7", help="vector_search: rows of the resident fp16 tensor")
    p.add_argument("--vec-batches", default="64,1024", help="vector_search: query batch sizes")
    p.add_argument("--vec-space-max", type=float, default=1e6,
                   help="vector_search: sizes up to this also go through VectorSpace itself (host float32 copy)")
    p.add_argument("--search-budget", type=float, default=90.0, help="vector_search: seconds for the step")
    p.add_argument("--embed-batches", default="32,128", help="embedder: batch sizes")
    p.add_argument("--embed-budget", type=float, default=150.0,
                   help="embedder: seconds for the step (CUDA-graph compiles that would not fit are skipped)")
    p.add_argument("--mllm-size", choices=sorted(QWEN_SIZES), default="2b",
                   help="mllm: Qwen2-VL dims of the random-weight model on CUDA (the CPU run is always tiny)")
    p.add_argument("--mllm-budget", type=float, default=120.0,
                   help="mllm: seconds for the step (build, save, load and the measurements)")
    p.add_argument("--mllm-batches", default="1,8", help="mllm: batch sizes (requests per generate call)")
    p.add_argument("--mllm-max-tokens", type=int, default=64, help="mllm: tokens generated per request (greedy)")
    p.add_argument("--budget", type=float, default=360.0, help="no new step starts after this many seconds")
    p.add_argument("--hard-limit", type=float, default=480.0,
                   help="write what was measured and exit (code 3) after this many seconds")
    p.add_argument("--seed", type=int, default=None, help="input seed (default: fresh, recorded in the JSON)")
    args = p.parse_args(argv)

    faulthandler.enable()  # a crash in a native library prints where it was
    run = Run(args)
    wanted = set(args.steps.split(",")) if args.steps else None
    print(f"device_check: dry_run={args.dry_run} seed={run.seed} out={run.json_path}", flush=True)

    def watchdog():
        cur = next((n for n, s in run.steps.items() if s.status == "running"), None)
        if cur:
            st = run.steps[cur]
            st.status, st.headline = "error", f"killed by the watchdog after {args.hard_limit:.0f} s"
            st.errors.append({"where": "watchdog", "error": st.headline, "traceback": ""})
        run.save(note=f"watchdog: stopped after {args.hard_limit:.0f} s")
        print_summary(run)
        sys.stdout.flush()
        os._exit(3)

    timer = threading.Timer(args.hard_limit, watchdog)
    timer.daemon = True
    timer.start()
    try:
        for name, fn in STEPS:
            if wanted is not None and name not in wanted and name != "env":
                continue
            run.run_step(name, fn)
    finally:
        timer.cancel()
        shutil.rmtree(run.tmp, ignore_errors=True)
    run.save()
    print_summary(run)
    worst = max((SEVERITY.get(s.status, 3) for s in run.steps.values()), default=0)
    return 1 if worst >= 2 else 0


if __name__ == "__main__":
    sys.exit(main())
