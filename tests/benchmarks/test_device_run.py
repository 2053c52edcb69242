"""benchmarks/device_run.py --dry-run: every step of the GPU machine's runner on the CPU (the
benchmark rows with --plumbing at tiny sizes), so the runner is known to work before a GPU
machine's few minutes are spent on it."""
from __future__ import annotations

import importlib.util
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
    optional = {"tensorrt": "skipped" if importlib.util.find_spec("tensorrt") is None else "ok",
                "capacity": "ok" if (ROOT / "benchmarks" / "bench_capacity.py").is_file() else "skipped"}
    assert status == {"install": "skipped", "compile": "ok", "tests": "ok", "gate": "ok", "search": "ok",
                      "ingest": "ok", "embed": "ok", "llm": "ok", **optional}, status
    assert {r["row"] for r in doc["plan"]} >= {"dedup GB/s", "NVDEC decode", "embedder TensorRT"}
    for name in ("gate", "search", "ingest", "embed", "llm"):  # the dedup rows are bench_gate's
        bench = json.loads((tmp_path / f"bench_{name}_plumbing.json").read_text())
        parts = bench["parts"]
        assert parts and all(p["status"] in ("ok", "warn") for p in parts.values()), (name, parts)
        assert all(p["data"] for p in parts.values()), f"bench_{name}: a part measured nothing"
    last = r.stdout[r.stdout.rindex("== device_run"):]  # the summary table comes last, one row a step
    assert all(name in last for name in status), last


# what the issue asks device_run.py to measure, each a row of its plan
ROWS = {"build", "compile report", "kernel tests", "gate pass GB/s", "dedup GB/s", "NVDEC decode", "device path",
        "vector search", "embedder fp16", "embedder TensorRT", "MLLM coarse/fine", "MLLM flash-attn"}


def test_dry_run_plan_lists_every_row_and_why_optional_ones_skip(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "device_run.py"), "--list", "--dry-run",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    rows = {x["row"]: x for x in json.loads((tmp_path / "device_run_plan.json").read_text())}
    assert set(rows) == ROWS
    assert all(name in r.stdout for name in ROWS)  # the table printed
    assert rows["build"]["would"] == "skip" and "dry run" in rows["build"]["why"]
    for row in rows.values():
        assert row["measures"] and row["would"] in ("run", "plumbing", "skip", "run with torch SDPA (flash kernels "
                                                                              "on Hopper)"), row
        if row["would"] != "run":  # every row that does not simply run says why
            assert row["why"], row
    absent = {"tensorrt": "embedder TensorRT", "flash_attn": "MLLM flash-attn", "PyNvVideoCodec": "NVDEC decode"}
    for module, name in absent.items():
        if importlib.util.find_spec(module) is None:
            assert f"{module} is not importable" in rows[name]["why"], rows[name]
    if not (ROOT / "benchmarks" / "bench_capacity.py").is_file():
        assert rows["device path"]["would"] == "skip" and "bench_capacity.py" in rows["device path"]["why"]
    if not cuda_available():
        assert rows["gate pass GB/s"]["would"] == "plumbing" and "no CUDA device" in rows["gate pass GB/s"]["why"]
        assert rows["embedder TensorRT"]["would"] == "skip"


@pytest.mark.needs("no_gpu")  # where CUDA is present the rows would run
def test_cuda_rows_without_cuda_exit_with_one_line():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_search.py"), "--device", "cuda"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--device cuda needs a CUDA device" in lines[0], r.stderr
    assert "Traceback" not in r.stderr + r.stdout
