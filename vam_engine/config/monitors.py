"""Monitors (``monitors``)."""
from __future__ import annotations

from pydantic import Field

from .base import Section


class MonitorConfig(Section):
    """Monitors (reason/monitor.py, StreamMind): conditions watched on the cameras' present."""

    max_active: int = Field(8, ge=1, le=1024, description="active monitors at most (StreamMind: 8)")
    workers: int = Field(4, ge=1, le=256, description="monitor checks judged at once")
    max_pending: int = Field(4, ge=1, description="checks of one monitor and camera waiting behind a slow "
                             "model; beyond it the oldest is dropped (counted)")
    vigilance: bool = Field(True, description="skip the model when a check's frames did not change, or are far "
                            "below the condition's recent similarity (reason/vigilance.py)")
    change_min_tile_mad: float = Field(8.0, ge=0, description="vigilance: a frame changed when a 1/64 tile of its "
                                       "32x32 thumbnail moved this many grey levels since the last judged frame")
