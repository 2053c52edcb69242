"""Small helpers shared by the benchmarks: a timing loop, a table printer, JSON results.

Every benchmark reports ratios against a baseline measured in the same process on the same
input; nothing here asserts on a time.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def timeit(fn: Callable[[], object], *, warmup: int = 1, repeats: int = 3) -> dict:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times; seconds per call.

    Returns {"median", "min", "max", "runs": [...]}; the median is the figure to report.
    """
    for _ in range(max(0, warmup)):
        fn()
    runs = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return {"median": statistics.median(runs), "min": min(runs), "max": max(runs), "runs": runs}


def time_rounds(fns: dict, *, warmup: int = 1, repeats: int = 3, once: Sequence[str] = (),
                min_time: float = 0.0) -> dict:
    """Time several functions on the same input in interleaved rounds (A B C, A B C, ...), so a
    burst of load from elsewhere hits every method alike. Each sample calls a function as many
    times as its warm-up says it needs to run at least ``min_time`` seconds (so one preemption
    does not decide a sample), and records seconds per call. Names in ``once`` are timed in the
    first round only, one call, without warm-up. Returns {name: {"median", "min", "max",
    "runs", "calls_per_sample"}}; the median is the figure to report."""
    calls = {}
    for name, fn in fns.items():
        calls[name] = 1
        if name in once:
            continue
        dt = 0.0
        for _ in range(max(0, warmup)):
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
        if min_time > 0 and dt > 0:
            calls[name] = max(1, int(min_time / dt + 0.999))
    runs: dict = {name: [] for name in fns}
    for r in range(max(1, repeats)):
        for name, fn in fns.items():
            if r > 0 and name in once:
                continue
            n = calls[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            runs[name].append((time.perf_counter() - t0) / n)
    return {name: {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": v,
                   "calls_per_sample": calls[name]} for name, v in runs.items()}


def percentiles(values, *qs: float, scale: float = 1.0) -> tuple:
    """The ``qs`` percentiles of ``values`` (numpy's linear interpolation; NaN values left out),
    each times ``scale`` (1e3: seconds to milliseconds), as a tuple in the order asked; None for
    each when no value is left. The one percentile of the benchmarks:
    ``p50, p99 = percentiles(latencies_s, 50, 99, scale=1e3)``."""
    import numpy as np

    a = np.asarray(values, dtype=np.float64).ravel()
    a = a[~np.isnan(a)]
    if a.size == 0:
        return tuple(None for _ in qs)
    return tuple(float(v) * scale for v in np.percentile(a, qs))


def call_latencies(fn: Callable[[], object], n: int, *, warmup: int = 1) -> list[float]:
    """Seconds of each of ``n`` calls of ``fn`` (after ``warmup`` untimed ones), in call order."""
    for _ in range(max(0, warmup)):
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict:
    info = {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "omp_num_threads_env": os.environ.get("OMP_NUM_THREADS"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    try:
        import numpy

        info["numpy"] = numpy.__version__
    except ImportError:
        info["numpy"] = None
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    except ImportError:
        info["torch"] = None
    try:
        load = os.getloadavg()
        info["loadavg_at_end"] = [round(x, 2) for x in load]
    except OSError:
        pass
    return info


def fmt(x, digits: int = 3) -> str:
    """A compact number: None -> '-', large values without decimals, small ones with `digits`
    significant digits."""
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if x != x:
        return "nan"
    ax = abs(x)
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    return f"{x:.{digits}g}"


def print_table(headers: Sequence[str], rows: Sequence[Sequence], *, file=None) -> str:
    """Print a plain aligned table (numbers right-aligned) and return it as text."""
    cells = [[fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    numeric = [all(not isinstance(r[i], str) for r in rows) if rows else False for i in range(len(headers))]

    def line(vals):
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells]
    text = "\n".join(out)
    print(text, file=file or sys.stdout, flush=True)
    return text


def write_json(name: str, payload: dict) -> Path:
    """Write ``payload`` plus machine info to benchmarks/results/<name>.json (or under
    $VAM_BENCH_RESULTS); returns the path."""
    out = Path(os.environ.get("VAM_BENCH_RESULTS") or RESULTS_DIR)  # benchmarks/device_run.py points it at $OUT
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    data = {"benchmark": name, "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": machine_info(), **payload}
    path.write_text(json.dumps(_clean(data), indent=2, default=_json_default, allow_nan=False) + "\n")
    return path


def _clean(o):
    """NaN and infinities become null, so the file is strict JSON."""
    if type(o).__module__ == "numpy" and hasattr(o, "item") and getattr(o, "ndim", 1) == 0:
        o = o.item()
    if isinstance(o, float):
        return o if o == o and o not in (float("inf"), float("-inf")) else None
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def _json_default(o):
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:
        pass
    if isinstance(o, Path):
        return str(o)
    return str(o)


# -- the --device cuda rows ------------------------------------------------------------------------
def add_device_args(ap, default_budget: float = 120.0) -> None:
    """--device / --plumbing / --budget / --seed for a script with ``--device cuda`` rows."""
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: the GPU rows (needs a CUDA device) instead of the CPU table")
    ap.add_argument("--plumbing", action="store_true",
                    help="with --device cuda: run the GPU rows' code on the CPU at tiny sizes (checks the "
                         "script, measures nothing; what benchmarks/device_run.py --dry-run uses)")
    ap.add_argument("--device-budget", type=float, default=default_budget,
                    help=f"--device cuda: seconds for the rows; later ones are skipped (default {default_budget:g})")
    if "--seed" not in ap._option_string_actions:  # some scripts have their own
        ap.add_argument("--seed", type=int, default=None, help="input seed (default fresh; recorded in the JSON)")


def require_cuda(script: str, args) -> None:
    """Exit with one clear line (status 2) when ``--device cuda`` is asked for without CUDA."""
    if args.device != "cuda" or args.plumbing:
        return
    try:
        import torch

        ok, why = torch.cuda.is_available(), "torch.cuda.is_available() is False"
    except ImportError:
        ok, why = False, "torch is not installed"
    if not ok:
        print(f"{script}: --device cuda needs a CUDA device ({why}); --plumbing runs these rows' code on the CPU",
              file=sys.stderr, flush=True)
        raise SystemExit(2)


class DeviceRun:
    """One ``--device cuda`` run: its options, seed, time budget, a temp dir, and its parts'
    records (data, checks, skipped pieces and errors with tracebacks), written as one JSON."""

    def __init__(self, name: str, args):
        import tempfile

        import numpy as np

        self.name, self.args = name, args
        self.plumbing = bool(args.plumbing)
        self.cuda = not self.plumbing
        self.seed = int(np.random.SeedSequence().entropy % (2 ** 32)) if args.seed is None else int(args.seed)
        self.t0 = time.monotonic()
        self.tmp = Path(tempfile.mkdtemp(prefix=f"vam_{name}_"))
        self.parts: dict = {}

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        return self.args.device_budget - self.elapsed()

    def part(self, name: str) -> "Part":
        p = self.parts[name] = Part(name)
        return p

    def finish(self, extra: dict | None = None) -> int:
        """Write <name>_cuda.json (or _plumbing), print the parts' summary; 1 when a hard check
        failed or a part raised, else 0."""
        import shutil

        shutil.rmtree(self.tmp, ignore_errors=True)
        rows = [[p.name, p.status(), p.headline] for p in self.parts.values()]
        print_table(["part", "status", "result"], rows)
        suffix = "plumbing" if self.plumbing else "cuda"
        path = write_json(f"{self.name}_{suffix}", {"args": vars(self.args), "seed": self.seed,
                                                     "elapsed_s": self.elapsed(), **(extra or {}),
                                                     "parts": {k: p.to_json() for k, p in self.parts.items()}})
        print(f"wrote {path}", flush=True)
        return 1 if any(p.status() in ("fail", "error") for p in self.parts.values()) else 0


def run_part(name: str, part: str, rows, args) -> int:
    """A ``--device cuda`` run of one part: ``rows(run, part)`` (guarded: its exception is
    recorded), then the summary and the JSON; the exit status."""
    run = DeviceRun(name, args)
    st = run.part(part)
    st.guard(part, rows, run, st)
    return run.finish()


def free_memory(torch, gpu: bool) -> None:
    """Garbage collected, and the CUDA caching allocator's free blocks returned (``gpu``)."""
    import gc

    gc.collect()
    if gpu:
        torch.cuda.empty_cache()


class Part:
    """A part of a device run: measured data, checks (hard or soft), skipped pieces, errors."""

    def __init__(self, name: str):
        self.name = name
        self.headline = ""
        self.data: dict = {}
        self.checks: dict = {}
        self.errors: list = []
        self.skipped: list = []

    def guard(self, where: str, fn, *args, **kw):
        """Run fn; an exception is recorded (with its traceback) and None returned, so one
        broken row does not lose the others."""
        import traceback

        try:
            return fn(*args, **kw)
        except Exception as e:  # noqa: BLE001 - recorded, the run goes on
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

    def status(self) -> str:
        if self.errors:
            return "error"
        if any(not c["ok"] and not c["soft"] for c in self.checks.values()):
            return "fail"
        if any(not c["ok"] for c in self.checks.values()):
            return "warn"
        if self.skipped and not self.data:
            return "skipped"
        return "ok"

    def to_json(self) -> dict:
        return {"status": self.status(), "headline": self.headline, "data": self.data, "checks": self.checks,
                "errors": self.errors, "skipped": self.skipped}


def cuda_time(torch, fn, *, warmup: int = 3, iters: int = 10, repeats: int = 5) -> float:
    """Seconds per call on the device: median over ``repeats`` of CUDA-event-timed loops of
    ``iters`` calls (host-timed when torch has no CUDA: the --plumbing runs)."""
    if not torch.cuda.is_available():
        for _ in range(warmup):
            fn()
        return timeit(fn, warmup=0, repeats=repeats)["median"]
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


def host_timed(fn, sync=None, *, warmup: int = 2, repeats: int = 5, iters: int = 1) -> float:
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


def quiet_hf() -> None:
    """Hugging Face offline (the GPU machine has no network) and without progress bars (they
    would push the tables out of the output's tail)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - cosmetic
        pass
