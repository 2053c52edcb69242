"""The compile report (kernels/compile_report.py): every Triton kernel of the package compiles
ahead of time for a GPU target, without a GPU, at the launch configurations the dispatch uses,
with registers read from the cubin and no spill; and its occupancy arithmetic."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

from support.paths import REPO  # noqa: E402


def _jit_kernels() -> set[str]:
    """The @triton.jit kernels of kernels/*.py (``_*_kernel``; the other jit functions are helpers
    they call), read from the sources, not from the report."""
    out = set()
    for path in (REPO / "kernels").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_kernel") and any(
                    ast.unparse(d).startswith("triton.jit") for d in node.decorator_list):
                out.add(node.name)
    return out


def test_report_compiles_every_kernel_for_sm90(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # other tests set it
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")  # compiled here, not read from a cache
    out = tmp_path / "report.json"
    p = subprocess.run([sys.executable, "-m", "vam_engine.kernels.compile_report", "--arch", "90", "--json", str(out)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads(out.read_text())
    rows = doc["compilations"]
    kernels = _jit_kernels()
    assert {"_gate_pass_kernel", "_cosine_sim_kernel", "_dedup_scan_kernel"} <= kernels
    assert {r["kernel"] for r in rows} == kernels  # every kernel appears
    for r in rows:
        assert r["ok"] and r["arch"] == 90, r
        assert r["regs"] > 0 and r["spill_bytes"] == 0, r
        assert 0 < r["occupancy"] <= 1 and r["warps_per_sm"] % r["warps_per_block"] == 0, r
        assert r["blocks"] > 0 and r["waves"] >= 0, r
    cases = {c for r in rows for c in r["cases"]}
    for res in ("360p", "720p", "1080p", "4K"):  # each frame size, each way the cascade calls the kernels
        assert {f"{res} stats", f"{res} stats first", f"{res} reference", f"{res} compare"} <= cases
    assert {"dedup D=512", "dedup D=768", "dedup scan held", "dedup scan none held"} <= cases
    assert "_gate_pass_kernel" in p.stdout and "0 failed, 0 spill" in p.stdout


def test_report_rejects_bad_arch():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-m", "vam_engine.kernels.compile_report", "--arch", "90,sm75"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "--arch must be comma-separated integers" in p.stderr
    p = subprocess.run([sys.executable, "-m", "vam_engine.kernels.compile_report", "--arch", "75"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "unknown compute capability [75]" in p.stderr


def _report_module():
    import importlib

    try:
        return importlib.import_module("vam_engine.kernels.compile_report")
    except ModuleNotFoundError:
        sys.path.insert(0, str(REPO))
        return importlib.import_module("kernels.compile_report")


@pytest.mark.parametrize("arch,regs,smem,warps,want", [
    (90, 128, 2048, 4, (16, "registers")),  # 4096 registers a warp: 4 warps per scheduler
    (90, 64, 2048, 4, (32, "registers")),
    (90, 255, 0, 4, (8, "registers")),  # 255 rounds up to 256 a thread
    (90, 32, 100 * 1024, 4, (8, "shared memory")),  # two blocks of 100 KB in 228 KB
    (80, 32, 82 * 1024, 4, (4, "shared memory")),  # 164 KB: two blocks of 82 KB but for the 1 KB reserved each
    (90, 16, 0, 1, (32, "blocks")),  # 32 blocks an SM at most
    (90, 32, 0, 8, (64, "warps")),  # registers allow 64 warps too: the SM's cap is named
])
def test_occupancy_arithmetic(arch, regs, smem, warps, want):
    cr = _report_module()
    wps, frac, limit = cr.occupancy(arch, regs, smem, warps)
    assert (wps, limit) == want
    assert frac == pytest.approx(wps / cr.ARCHS[arch].max_warps)
