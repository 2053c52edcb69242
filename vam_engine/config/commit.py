"""The online per-camera commit (``commit``)."""
from __future__ import annotations

from pydantic import Field

from .base import Section


class CommitConfig(Section):
    """The online per-camera commit (index/online.py): semantic dedup and event boundaries over
    the embeddings of the frames that passed the gates."""

    dedup_fallback_sim: float = Field(0.88, ge=-1, le=1, description="redundant when cosine sim to the reference "
                                                                     "is above this, until Otsu has history")
    event_fallback_sim: float = Field(0.80, ge=-1, le=1, description="event boundary when consecutive sim drops "
                                                                     "below this, until Otsu has history")
    window: int = Field(256, ge=8, description="recent distances Otsu thresholds are computed over")
    min_history: int = Field(32, ge=2, description="distances needed before the adaptive thresholds apply")
    max_event_s: float = Field(300.0, gt=0, description="an event longer than this is closed and a new one opened")
    keep_local_changes: bool = Field(True, description="a frame the image gates kept for a local change (a small "
                                                       "object, a changing digit) is never dropped as a semantic "
                                                       "duplicate: a whole-frame embedding barely sees it")
