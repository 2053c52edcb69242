"""Records the memory hands out. Plain dataclasses: what a caller reads, never live rows."""
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


@dataclass(frozen=True)
class Moment:
    """One retained frame."""

    moment_id: int
    camera_id: str
    t_rel: float  # seconds since the source's first frame (from PTS)
    t_abs: float | None  # unix seconds, when known
    frame_path: str  # absolute path of the JPEG
    width: int
    height: int
    gate: GateRecord
    tier: str = "recent"
    event_id: int | None = None
    embedding_id: int | None = None


@dataclass(frozen=True)
class Evidence:
    """A search hit or a citation: an interval of one camera, with the moments that show it."""

    camera_id: str
    t_start: float  # the camera's axis: absolute seconds when known, else relative
    t_end: float
    moment_ids: tuple[int, ...]
    frame_paths: tuple[str, ...]
    score: float  # fused rank score (reciprocal rank fusion): comparable within one result list only
    source: str  # "frame" | "event" | "summary"
    text: str | None = None  # the document, for event/summary hits that have one
    similarity: float | None = None  # the best cosine with the query in any space that found it


@dataclass(frozen=True)
class GateSample:
    """One sample's gate decision as the commit path records it (the ``samples`` table): the
    image gates' statistics and what dropped it (an image gate or "dedup"; None: kept)."""

    camera_id: str
    source_id: int
    t_rel: float
    gate: GateRecord


@dataclass(frozen=True)
class GateReference:
    """A camera's gate reference as committed: the last frame the image gates kept (its t_rel
    and H x W uint8 luma). A resumed run compares its first samples against it."""

    t: float
    gray: object  # numpy on the commit path; the gate thread may hold a CUDA tensor until then
