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

It takes about 3-4 minutes (the install about 30-60 s of that); give the call a 600 s limit. The
script stops starting new steps after ``--budget`` seconds (default 360) and, as a last resort, a
watchdog writes what it has and exits (code 3) after ``--hard-limit`` seconds (default 480).

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
7-9. embedder, vector_search, mllm: not built yet (TODO sections at the end of this file)

Bandwidth figures: a gate kernel reads the N*H*W frame bytes once (the reference frame stays in
L2), so its GB/s is N*H*W / time. A copy of those bytes reads and writes them, so the copy's GB/s
is 2*N*H*W / time (the usual device-to-device figure, ~4.3 TB/s on an H200). "of copy" is the
ratio of the two: the fraction of the memory bandwidth the kernel reaches.

``--dry-run`` (any machine, ~1 minute): every CUDA part is recorded as skipped ("no CUDA"); steps
1, 3 (C++ body vs reference), 4 (C++ body), 5 (PyAV on a small 640x360 clip) and 6 (device="cpu")
still run, so the plumbing is tested without a GPU.

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
# 7-9. TODO: DEVICE.md items 5-7, not built in the engine yet
# ================================================================================================
def step_embedder(run: Run, st: Step) -> None:
    # TODO(embedder): images/s for ViT-B/16- and ViT-L/14-sized CLIP image towers with random weights
    # (built from configs: same FLOPs and bytes), fp16 and bf16, batch 64-256, with and without CUDA
    # graphs; kept frames taken from the engine run above. Fill in once vam_engine has an embedder.
    st.status = "not built yet"
    st.headline = "not built yet (TODO: CLIP ViT-B/16, ViT-L/14 images/s, fp16/bf16, CUDA graphs)"
    print(f"  {st.headline}")


def step_vector_search(run: Run, st: Step) -> None:
    # TODO(vector_search): a resident fp16 tensor of 1e6 and 1e7 x 512 on the GPU, torch.topk over
    # the matmul scores: p50 latency of one query and queries/s batched (e.g. 256 queries).
    # Fill in once vam_engine has its vector memory.
    st.status = "not built yet"
    st.headline = "not built yet (TODO: 1e6/1e7 x 512 fp16 brute-force top-k, p50 latency, batched q/s)"
    print(f"  {st.headline}")


def step_mllm(run: Run, st: Step) -> None:
    # TODO(mllm): a Qwen2.5-VL-7B-sized model with random weights (smaller if memory or time is
    # short): prefill and decode tokens/s, and the coarse->fine continuation from the cached prefix
    # against recomputing it. Fill in once vam_engine has its MLLM writer.
    st.status = "not built yet"
    st.headline = "not built yet (TODO: 7B VLM random weights prefill/decode tok/s, prefix-cache reuse)"
    print(f"  {st.headline}")


STEPS = [("env", step_env), ("tests", step_tests), ("correctness", step_correctness),
         ("throughput", step_throughput), ("decode", step_decode), ("engine", step_engine),
         ("embedder", step_embedder), ("vector_search", step_vector_search), ("mllm", step_mllm)]


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
