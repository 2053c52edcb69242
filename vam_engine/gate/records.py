"""The gate cascade's output record (the memory stores it with each moment)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GateRecord:
    """One sampled frame's gate statistics and the gate that dropped it (None: kept)."""

    lap_var: float
    mad: float | None  # None for a camera's first frame (nothing to compare with)
    ssim: float | None
    hist_corr: float | None
    dropped_by: str | None  # "blur" | "low_change" | "ssim" | "hist" | None
    tile_mad: float | None = None  # the largest tile's mean abs diff; None without a reference or for old samples
    tiles_changed: int | None = None  # tiles at or over GateConfig.tile_min_mad; None likewise
