#!/usr/bin/env python3
"""The one runner for the borrowed GPU machine: installs the carried wheels and the package,
runs the GPU tests, then the ``--device cuda`` rows of the benchmarks, each step within its share
of the time budget; every result is JSON under ``$OUT``, a short table last.

    python3 benchmarks/device_run.py            # on the GPU machine, in one call of at most 600 s
    python benchmarks/device_run.py --dry-run   # anywhere: every step on the CPU, tiny sizes

How to prepare the machine (the ``.whl/`` folder), the steps and their budgets, and what each
script's rows measure: docs/gpu.md.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from _common import print_table

ROOT = Path(__file__).resolve().parents[1]
# the build backend and pybind11: `pip install -e . --no-build-isolation` builds _C with what is installed
WHEELS = ("av", "PyNvVideoCodec", "pybind11", "scikit_build_core", "pathspec", "pydantic", "tqdm")


@dataclass
class StepResult:
    name: str
    status: str  # ok, fail, skipped, timeout
    seconds: float
    summary: str
    cmd: list = field(default_factory=list)
    tail: str = ""


@dataclass
class BenchStep:
    """A benchmark's --device cuda rows: its script, full-size options and its share of the budget."""
    name: str
    script: str
    args: list
    share_s: float


BENCHES = [
    BenchStep("gate", "bench_gate.py", [], 60.0),
    BenchStep("search", "bench_search.py", ["--device-budget", "70"], 80.0),
    BenchStep("ingest", "bench_ingest.py", ["--device-budget", "60"], 70.0),
    BenchStep("embed", "bench_embed.py", ["--device-budget", "90"], 100.0),
    BenchStep("llm", "bench_llm.py", ["--device-budget", "100"], 110.0),
]


@dataclass(frozen=True)
class Row:
    """One measurement of the run, for the plan ``--list`` (and ``--dry-run``) prints first: the
    step that makes it, what it measures, and what it needs (see ``PROBES``). A row whose need
    is missing is skipped with the reason, or (``fallback``) runs another body and says which."""
    name: str
    step: str
    measures: str
    needs: tuple = ()
    fallback: str = ""  # what runs instead of a missing need (the row still runs)


ROWS = [
    Row("build", "install", "the carried wheels and `pip install -e .` (the C++ module compiled there)"),
    Row("compile report", "compile", "every Triton kernel compiled for sm_90 at the dispatch's launch "
        "configurations: registers, spills, shared memory, occupancy", ("triton",)),
    Row("kernel tests", "tests", "tests/gate/test_gate_triton.py and tests/kernels/ natively, then every "
        "gpu-marked test", ("cuda",)),
    Row("gate pass GB/s", "gate", "Triton gate_stats / gate_compare frames/s and GB/s at 720p and 1080p, "
        "batches 32-256, against a device-to-device copy", ("cuda", "triton")),
    Row("dedup GB/s", "gate", "the cosine-dedup kernel's time and GB/s for 18-258 rows of 512/768 dims against a "
        "copy; committer frames/s frame by frame vs push_batch", ("cuda", "triton")),
    Row("NVDEC decode", "ingest", "1080p30 H.264 frames/s with PyNvVideoCodec, 1/2/4/7 concurrent streams "
        "(frames/s per NVDEC engine), against PyAV on the CPUs", ("cuda", "PyNvVideoCodec", "av")),
    Row("device path", "capacity", "frames/s of decode -> gates -> embedding -> dedup at 1080p30 (index.DevicePath: "
        "frames on the device, kept ones back as JPEG) and the cameras it sustains (bench_capacity's GPU row)",
        ("cuda", "bench_capacity")),
    Row("vector search", "search", "brute-force top-10 over 1e6 and 1e7 x 512 fp16 rows resident on the GPU: "
        "p50/p99 latency, queries/s batched, recall", ("cuda",)),
    Row("embedder fp16", "embed", "ViT-B/16- and ViT-L/14-sized CLIP towers in fp32/fp16/bf16, with and "
        "without CUDA graphs: images/s", ("cuda",)),
    Row("embedder TensorRT", "tensorrt", "the TensorRT embedder body against torch (its gpu test)",
        ("cuda", "tensorrt")),
    Row("MLLM coarse/fine", "llm", "Qwen2-VL-sized model in bf16: prefill / decode tokens/s, the coarse->fine "
        "continuation from the cached prefix vs recomputing it", ("cuda",)),
    Row("MLLM flash-attn", "llm", "the same rows with flash-attn 2 as the attention", ("cuda", "flash_attn"),
        fallback="torch SDPA (flash kernels on Hopper)"),
]


def _module_missing(name: str) -> str | None:
    import importlib.util

    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else f"{name} is not importable"


def _cuda_missing() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return None if torch.cuda.is_available() else "no CUDA device (torch.cuda.is_available() is False)"


PROBES = {
    "cuda": _cuda_missing,
    "triton": lambda: _module_missing("triton"),
    "PyNvVideoCodec": lambda: _module_missing("PyNvVideoCodec"),
    "av": lambda: _module_missing("av"),
    "tensorrt": lambda: _module_missing("tensorrt"),
    "flash_attn": lambda: _module_missing("flash_attn"),
    "bench_capacity": lambda: None if (ROOT / "benchmarks" / "bench_capacity.py").is_file()
    else "benchmarks/bench_capacity.py is not in this checkout",
}


PLUMBED = {"tests", "gate", "ingest", "search", "embed", "llm", "capacity"}  # steps --dry-run runs on the CPU


def plan(dry_run: bool) -> list[dict]:
    """Each row of ROWS with what would happen to it on this machine (now: on the GPU machine,
    after the install step), and why."""
    missing = {name: probe() for name, probe in PROBES.items()}
    out = []
    for r in ROWS:
        no_cuda = "cuda" in r.needs and missing["cuda"]
        other = [missing[n] for n in r.needs if n != "cuda" and missing[n]]
        why = ([missing["cuda"]] if no_cuda else []) + other
        if r.step == "install" and dry_run:
            what, why = "skip", ["dry run (nothing is installed)"]
        elif no_cuda and dry_run and r.step in PLUMBED and not (r.step == "capacity" and other):
            what = "plumbing"  # its code on the CPU at tiny sizes; `why` says what a real run would lack
        elif no_cuda:
            what = "skip"
        elif other:
            what = f"run with {r.fallback}" if r.fallback else "skip"
        else:
            what = "run"
        out.append({"row": r.name, "step": r.step, "measures": r.measures, "would": what, "why": "; ".join(why)})
    return out


def print_plan(rows: list[dict]) -> None:
    print("== device_run plan (what each row measures, and what happens to it on this machine) ==")
    print_table(["row", "step", "would", "why", "measures"],
                [[r["row"], r["step"], r["would"], r["why"] or "-", r["measures"][:90]] for r in rows])


def _pytest_summary(text: str) -> str:
    for line in reversed(text.strip().splitlines()):
        if re.search(r"\d+ (passed|failed|skipped|deselected|error|errors)|no tests ran", line):
            return line.strip("= ").strip()
    return (text.strip().splitlines() or ["(no output)"])[-1][:200]


def _run(name: str, cmd: list, timeout: float, env: dict, log: Path) -> StepResult:
    """cmd as a subprocess (its own process group, killed whole on timeout), output to log."""
    t0 = time.monotonic()
    print(f"== {name}: {' '.join(cmd)} (up to {timeout:.0f} s)", flush=True)
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            rc = None
    text = log.read_text(errors="replace")
    status = "timeout" if rc is None else ("ok" if rc == 0 else "fail")
    summary = _pytest_summary(text) if "pytest" in cmd else (text.strip().splitlines() or [""])[-1][:160]
    if rc is None:
        summary = f"killed after {timeout:.0f} s; " + summary
    r = StepResult(name, status, time.monotonic() - t0, summary, cmd, text[-3000:])
    print(f"   -> {r.status} in {r.seconds:.0f} s: {r.summary}", flush=True)
    return r


def install(out: Path, env: dict, timeout: float) -> StepResult:
    """The carried wheels the machine lacks, then the package itself (editable, no deps)."""
    py = sys.executable
    lines = []
    if (ROOT / ".whl").is_dir():
        for pkg in WHEELS:
            lines.append(f"{py} -m pip install --no-index --find-links .whl {pkg} || echo 'NOT INSTALLED: {pkg}'")
    lines.append(f"{py} -m pip install -e . --no-build-isolation --no-deps")
    env = dict(env, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_BREAK_SYSTEM_PACKAGES="1",
               CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 4))
    # a missing wheel is logged ("NOT INSTALLED") and the run goes on; the package install decides
    return _run("install", ["bash", "-c", "; ".join(lines)], timeout, env, out / "install.log")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true",
                    help="every step on the CPU: no install, gpu tests collected (skipped without CUDA), the "
                         "benchmark rows with --plumbing at tiny sizes")
    ap.add_argument("--budget", type=float, default=480.0, help="seconds for the whole run (default 480)")
    ap.add_argument("--out", default=None, help="results folder (default $OUT, else benchmarks/results)")
    ap.add_argument("--only", default=None,
                    help="comma-separated steps of: install, compile, tests, " + ", ".join(b.name for b in BENCHES)
                    + ", tensorrt, capacity")
    ap.add_argument("--no-install", action="store_true", help="skip the install step")
    ap.add_argument("--tests-share", type=float, default=150.0, help="seconds for the pytest step (default 150)")
    ap.add_argument("--list", action="store_true",
                    help="print the plan (every row, what it measures, whether it would run here and why not; "
                         "with --dry-run: in a dry run) and exit. A run prints it too, after the install")
    return ap.parse_args(argv)


def list_only(args) -> int:
    """--list: the plan, printed and (with --out or $OUT) written as device_run_plan.json."""
    rows = plan(args.dry_run)
    print_plan(rows)
    out = args.out or os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "device_run_plan.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list:
        return list_only(args)
    out = Path(args.out or os.environ.get("OUT") or ROOT / "benchmarks" / "results").resolve()
    out.mkdir(parents=True, exist_ok=True)
    wanted = set(args.only.split(",")) if args.only else None
    t0 = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(VAM_BENCH_RESULTS=str(out), PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
               HF_HUB_OFFLINE="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
    if not args.dry_run:
        env["VAM_TEST_REQUIRE_GPU"] = "1"  # a machine whose CUDA is broken fails instead of skipping
    scale = args.budget / 480.0  # every share shrinks with a smaller budget (the dry-run test uses ~60 s)
    results: list[StepResult] = []

    def left() -> float:
        return args.budget - (time.monotonic() - t0)

    def want(name: str) -> bool:
        return wanted is None or name in wanted

    def skip(name: str, why: str) -> None:
        results.append(StepResult(name, "skipped", 0.0, why))
        print(f"== {name}: skipped ({why})", flush=True)

    py = sys.executable
    if want("install"):
        if args.dry_run or args.no_install:
            skip("install", "dry run" if args.dry_run else "--no-install")
        else:
            results.append(install(out, env, min(90.0 * scale, left())))
    rows = plan(args.dry_run)  # after the install: the wheels it brought count
    print_plan(rows)
    if want("compile"):
        if PROBES["triton"]():
            skip("compile", PROBES["triton"]())
        else:
            cmd = [py, "-m", "vam_engine.kernels.compile_report", "--arch", "90", "--json", str(out / "compile_report.json")]
            results.append(_run("compile", cmd, min(45.0 * scale, left()), env, out / "compile.log"))
    if want("tests"):
        t = min(args.tests_share * scale, left())
        base = [py, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider"]
        if args.dry_run:
            # the gpu tests must collect and skip cleanly here; one fast module stands in for the run
            cmd = base + ["-m", "gpu", "tests/vectors/test_space.py", "tests/embed/test_embed.py"]
        else:
            # the gpu-marked tests (slow ones included), and test_gate_triton.py whole: natively on
            # CUDA its interpreter-slow tests take seconds (pytest runs a file named twice once)
            cmd = base + ["-m", "gpu or not gpu", "tests/gate/test_gate_triton.py", "tests/kernels/"]
            results.append(_run("tests_triton", cmd, t / 3, env, out / "tests_triton.log"))
            cmd = base + ["-m", "gpu", "tests/"]
            t = min(t * 2 / 3, left())
        results.append(_run("tests", cmd, t, env, out / "tests.log"))
    for b in BENCHES:
        if not want(b.name):
            continue
        t = min(b.share_s * scale, left())
        if t < 15 * scale:
            skip(b.name, f"out of time ({left():.0f} s left)")
            continue
        cmd = [py, str(ROOT / "benchmarks" / b.script), "--device", "cuda"]
        cmd += ["--plumbing", "--device-budget", f"{max(5.0, t - 5):.0f}"] if args.dry_run else b.args
        results.append(_run(b.name, cmd, t, env, out / f"{b.name}.log"))

    optional = [("tensorrt", ("tensorrt",), [py, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", "-m", "gpu",
                                             "tests/embed/test_embed.py", "-k", "tensorrt"], 40.0),
                ("capacity", ("bench_capacity",), [py, str(ROOT / "benchmarks" / "bench_capacity.py"), "--device",
                                                   "cuda"], 60.0)]
    for name, needs, cmd, share in optional:  # a missing piece is a skipped row that says why
        if not want(name):
            continue
        # a dry run goes on without CUDA: the tests are collected and skip, the benchmark runs --plumbing
        why = [m for m in (PROBES[n]() for n in ((() if args.dry_run else ("cuda",)) + needs)) if m]
        t = min(share * scale, left())
        if why:
            skip(name, "; ".join(why))
        elif t < 15 * scale:
            skip(name, f"out of time ({left():.0f} s left)")
        else:
            if args.dry_run and name == "capacity":
                cmd = cmd + ["--plumbing"]
            results.append(_run(name, cmd, t, env, out / f"{name}.log"))

    doc = {"script": "benchmarks/device_run.py", "plan": rows, "argv": sys.argv[1:] if argv is None else list(argv),
           "dry_run": args.dry_run, "elapsed_s": round(time.monotonic() - t0, 1),
           "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "steps": [asdict(r) for r in results]}
    (out / "device_run.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\n== device_run ({'dry run, ' if args.dry_run else ''}{doc['elapsed_s']:.0f} s; JSON in {out}) ==")
    print_table(["step", "status", "s", "result"], [[r.name, r.status, round(r.seconds, 1), r.summary[:140]]
                                                    for r in results])
    return 1 if any(r.status in ("fail", "timeout") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
