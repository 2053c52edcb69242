"""benchmarks/device_run.py --dry-run: every step of the GPU machine's runner on the CPU (the
benchmark rows with --plumbing at tiny sizes), so the runner is known to work before a GPU
machine's few minutes are spent on it."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.paths import REPO as ROOT
from vam_engine.device import cuda_available



@pytest.mark.slow  # about a minute on two cores (the Triton interpreter and the tiny Qwen2-VL)
def test_dry_run_exercises_every_step(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "device_run.py"), "--dry-run", "--budget", "300",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    doc = json.loads((tmp_path / "device_run.json").read_text())
    status = {s["name"]: s["status"] for s in doc["steps"]}
    assert status == {"install": "skipped", "tests": "ok", "gate": "ok", "search": "ok", "ingest": "ok",
                      "embed": "ok", "llm": "ok"}, status
    for name in ("gate", "search", "ingest", "embed", "llm"):
        bench = json.loads((tmp_path / f"bench_{name}_plumbing.json").read_text())
        parts = bench["parts"]
        assert parts and all(p["status"] in ("ok", "warn") for p in parts.values()), (name, parts)
        assert all(p["data"] for p in parts.values()), f"bench_{name}: a part measured nothing"
    last = r.stdout[r.stdout.rindex("== device_run"):]  # the summary table comes last, one row a step
    assert all(name in last for name in status), last


def test_cuda_rows_without_cuda_exit_with_one_line():
    if cuda_available():
        pytest.skip("CUDA is present: the rows would run")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_search.py"), "--device", "cuda"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--device cuda needs a CUDA device" in lines[0], r.stderr
    assert "Traceback" not in r.stderr + r.stdout
