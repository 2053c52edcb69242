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
    """Write ``payload`` plus machine info to benchmarks/results/<name>.json; returns the path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
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
