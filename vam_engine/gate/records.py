"""The gate cascade's output records (the memory stores a GateRecord with each moment)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
    # kept though the blur rule dropped it: the sharpest sample of a view none of whose samples
    # passed the blur rule (cascade's view rule); False for every other record
    blurred: bool = False


@dataclass(frozen=True)
class Released:
    """A view's held blurred sample, kept when its view ended (the view rule, gate/cascade.py)."""

    key: Any  # what the caller gave with the frame (GateCascade.gate's ``keys``)
    record: GateRecord  # its record as kept: dropped_by None, blurred True
    before: int  # kept before the decision on this frame of the call (its length: after all of them)


@dataclass(frozen=True)
class GateRun:
    """What one GateCascade.gate call decided: a record per frame, and the held samples kept."""

    records: list[GateRecord]
    released: list[Released]
