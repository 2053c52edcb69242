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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true",
                    help="every step on the CPU: no install, gpu tests collected (skipped without CUDA), the "
                         "benchmark rows with --plumbing at tiny sizes")
    ap.add_argument("--budget", type=float, default=480.0, help="seconds for the whole run (default 480)")
    ap.add_argument("--out", default=None, help="results folder (default $OUT, else benchmarks/results)")
    ap.add_argument("--only", default=None,
                    help="comma-separated steps of: install, tests, " + ", ".join(b.name for b in BENCHES))
    ap.add_argument("--no-install", action="store_true", help="skip the install step")
    ap.add_argument("--tests-share", type=float, default=150.0, help="seconds for the pytest step (default 150)")
    args = ap.parse_args(argv)

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
    if want("tests"):
        t = min(args.tests_share * scale, left())
        base = [py, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider"]
        if args.dry_run:
            # the gpu tests must collect and skip cleanly here; one fast module stands in for the run
            cmd = base + ["-m", "gpu", "tests/vectors/test_space.py", "tests/embed/test_embed.py"]
        else:
            # the gpu-marked tests (slow ones included), and test_gate_triton.py whole: natively on
            # CUDA its interpreter-slow tests take seconds (pytest runs a file named twice once)
            cmd = base + ["-m", "gpu or not gpu", "tests/gate/test_gate_triton.py"]
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

    doc = {"script": "benchmarks/device_run.py", "argv": sys.argv[1:] if argv is None else list(argv),
           "dry_run": args.dry_run, "elapsed_s": round(time.monotonic() - t0, 1),
           "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "steps": [asdict(r) for r in results]}
    (out / "device_run.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\n== device_run ({'dry run, ' if args.dry_run else ''}{doc['elapsed_s']:.0f} s; JSON in {out}) ==")
    print_table(["step", "status", "s", "result"], [[r.name, r.status, round(r.seconds, 1), r.summary[:140]]
                                                    for r in results])
    return 1 if any(r.status in ("fail", "timeout") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
