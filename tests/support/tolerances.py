"""Tolerances of the GPU and reduced-precision bodies against their references, in one place:
the CPU tests and the gpu-marked tests import them (so a tolerance is never copied and drifts).

Gate statistics: (rtol, atol) per statistic of a body computed in float32 on a device (Triton)
against vam_engine/gate/reference.py in float64; the C++ body is held to tighter, per-test bounds
in tests/gate/test_gate_cpu.py (it is exact but for summation order)."""
from __future__ import annotations

import numpy as np

GATE_STATS = ("lap_var", "mad", "ssim", "hist_corr", "thumb", "hist", "tile_sums")  # the kernels' output order
GATE_DEVICE_TOL = {"lap_var": (1e-6, 0.0), "mad": (1e-6, 0.0), "ssim": (0.0, 1e-5), "hist_corr": (0.0, 1e-9),
                   "thumb": (0.0, 1e-3), "hist": (0.0, 0.0), "tile_sums": (0.0, 0.0)}  # tile sums: exact integers

VECTOR_RECALL_AT_10 = 0.99  # an exact body (fp16 scan + fp32 re-score) against float32 brute force
VECTOR_TOP1_SCORE_ATOL = 1e-5  # the re-scored best score against float32
EMBED_FP16_MIN_COS = 0.99  # a float16 embedder's rows against float32's
EMBED_BF16_MIN_COS = 0.98  # bfloat16 keeps 8 bits of mantissa: looser


def assert_gate_close(got: dict, exp: dict, msg: str, stats=GATE_STATS) -> None:
    """Every statistic of ``got`` within GATE_DEVICE_TOL of ``exp`` (NaN where exp is NaN)."""
    for q in stats:
        rtol, atol = GATE_DEVICE_TOL[q]
        np.testing.assert_allclose(np.asarray(got[q], np.float64), np.asarray(exp[q], np.float64),
                                   rtol=rtol, atol=atol, err_msg=f"{q}: {msg}")
