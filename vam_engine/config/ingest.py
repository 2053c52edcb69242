"""Decoding and sampling (``ingest``)."""
from __future__ import annotations

from pydantic import Field

from .base import Section


class IngestConfig(Section):
    """Decoding and sampling (ingest/): which frames of a source reach the gates."""

    fps: float = Field(0.5, gt=0, le=1000, description="base sampling rate")
    keyframes_only: bool = Field(False, description="decode keyframes only; take the nearest keyframe per tick")
    skip_nonref: bool | None = Field(None, description="skip non-reference frames; None = when sampling is sparse")
    skip_gops: bool | None = Field(None, description="skip GOPs that end before the next tick; None = when sparse")
    batch_size: int = Field(16, ge=1, le=1024, description="frames gated per kernel call")
    queue_frames: int = Field(64, ge=1, description="decoded frames buffered between decode and gate")
    decode_threads: int = Field(0, ge=0, description="FFmpeg threads per source; 0 = FFmpeg's choice")
