"""Records the memory hands out. Plain dataclasses: what a caller reads, never live rows."""
from __future__ import annotations

from dataclasses import dataclass

from ..gate.records import GateRecord  # noqa: F401  (re-exported: memory stores the gates' record)


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


# -- camera-axis time -----------------------------------------------------------------------------
# Each moment has a time on its camera's own axis: absolute (unix seconds) when the caller or the
# container gave a start time, else relative (seconds since the source's first frame).

ABSOLUTE_TIME_MIN = 1e9  # unix seconds of 2001-09-09: a relative axis would need 31 years of recording


def is_absolute_time(t: float) -> bool:
    """Whether a time on a camera's axis is absolute (unix seconds): ``t > 1e9``. The one rule
    for code that sees only the number (formatting, prompts); code holding a record asks its
    ``t_abs`` instead."""
    return t > ABSOLUTE_TIME_MIN


def camera_time(t_rel: float, t_abs: float | None) -> float:
    """A time on its camera's axis: ``t_abs`` when known, else ``t_rel``."""
    return float(t_abs) if t_abs is not None else float(t_rel)
