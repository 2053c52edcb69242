"""The records perception hands across module boundaries: detections, OCR lines, what one frame
yielded, tracks and entities. Boxes are (x0, y0, x1, y1) in the frame's own pixels, x0 <= x1,
y0 <= y1, clipped to the frame."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..errors import VamError

Box = tuple[float, float, float, float]


class PerceptionError(VamError):
    """A detector or OCR model cannot be built or run (missing file, unloadable model, an output
    of an unknown layout); the message names the model and what is wrong."""


@dataclass(frozen=True)
class Detection:
    """One object in one frame."""

    box: Box
    label: str
    score: float
    class_id: int  # as the model emits it (the index into the detector's labels)


@dataclass(frozen=True)
class OcrLine:
    """One line of text read in a frame: its axis-aligned box, the text and the recogniser's
    confidence; ``polygon`` is the detected quadrilateral (4 points, clockwise from top-left)."""

    box: Box
    text: str
    confidence: float
    polygon: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class TextChange:
    """What changed in a camera's text since its previous read: the strings that appeared and
    the ones that disappeared (whitespace-collapsed, as read)."""

    appeared: tuple[str, ...]
    disappeared: tuple[str, ...]


@dataclass(frozen=True)
class PerceptionFrame:
    """A frame handed to perception. ``key`` is the caller's own handle (a moment id, a frame
    reference), returned as is with the result. ``kind``: "kept" frames are detected and read
    (OCR); "present" frames (the 2 fps present, for tracking between kept frames) are detected
    only, and only when the stage's ``detect_present`` is on."""

    camera_id: str
    t: float  # stream time, seconds (the container's PTS); non-decreasing per camera
    frame: np.ndarray  # H x W x 3 uint8 RGB
    key: Any = None
    kind: Literal["kept", "present"] = "kept"


@dataclass(frozen=True)
class FramePerception:
    """What perception found in one frame.

    ``detections`` and ``track_ids`` are parallel (a track id per detection). ``ocr`` holds the
    camera's current text lines: read on this frame when ``ocr_read``, else carried from the
    camera's last read (the text gate saw no text-like region change; empty when OCR is off).
    ``text_changed``: this read's strings differ from the camera's previous read (an event
    boundary signal); ``text_change`` says how."""

    camera_id: str
    t: float
    key: Any
    kind: str
    detections: tuple[Detection, ...] = ()
    track_ids: tuple[int, ...] = ()
    ocr: tuple[OcrLine, ...] = ()
    ocr_read: bool = False
    text_changed: bool = False
    text_change: TextChange | None = None


@dataclass(frozen=True)
class Sighting:
    """A track's detection in one frame."""

    t: float
    box: Box
    score: float
    key: Any = None


@dataclass
class Track:
    """Detections of one thing on one camera over time. ``first_t`` / ``last_t``: its first and
    last sighting; ``count``: sightings so far. ``sightings`` (time order): in the stage's own
    state the most recent ones (at most KEEP_SIGHTINGS); in a PerceptionBatch the ones that
    batch added, for the caller to append to what it stored. ``texts``: OCR strings read inside
    its boxes, in order of first reading (at most MAX_TEXTS)."""

    track_id: int
    camera_id: str
    label: str
    first_t: float
    last_t: float
    count: int = 0
    sightings: list[Sighting] = field(default_factory=list)
    entity_id: int | None = None
    texts: list[str] = field(default_factory=list)


KEEP_SIGHTINGS = 16   # recent sightings a track keeps in the stage (motion needs the last two)
MAX_TEXTS = 64        # strings kept per track and per entity


class SeenSpan:
    """First and last seen over every camera, for records with ``seen``: camera id -> (first,
    last) stream time."""

    seen: dict

    @property
    def first_t(self) -> float:
        return min(a for a, _ in self.seen.values())

    @property
    def last_t(self) -> float:
        return max(b for _, b in self.seen.values())


@dataclass
class Entity(SeenSpan):
    """Tracks of one thing, across cameras. ``seen``: camera id -> (first, last) stream time;
    ``crop`` is the representative crop (from the sighting of the highest score x sqrt(area)),
    ``crop_from`` where it came from: (camera id, t, box, key); ``colours`` are the dominant
    colour names of that crop; ``texts``: OCR strings read on it."""

    entity_id: int
    label: str
    track_ids: list[int] = field(default_factory=list)
    seen: dict[str, tuple[float, float]] = field(default_factory=dict)
    colours: tuple[str, ...] = ()
    crop: np.ndarray | None = None
    crop_from: tuple[str, float, Box, Any] | None = None
    texts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PerceptionBatch:
    """The answer to one submission: a result per frame, in the order given, plus the tracks
    and entities this batch created or changed (copies: the caller may keep them); each track
    carries only the sightings this batch added."""

    frames: tuple[FramePerception, ...]
    tracks: tuple[Track, ...] = ()
    entities: tuple[Entity, ...] = ()
    state: Any = None  # the stage's PerceptionState right after these frames, when asked for (snapshot=True)
