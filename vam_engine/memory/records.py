"""Records the memory hands out and takes in. Plain dataclasses: what a caller reads, never
live rows; every repository of this package takes and returns these, never tuples or dicts."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ..gate import GateRecord
from ..ingest import Pose
from ..perception import SeenSpan

__all__ = ["GateRecord", "Moment", "Evidence", "Event", "DocumentJob", "WriterBacklog", "Summary", "SummaryKind",
           "ForestNode", "SourceState", "PendingMoment", "QARecord", "CameraExtent", "Deletion", "GateSample",
           "GateReference", "Transcript", "Pose", "camera_time", "is_absolute_time", "last_pose", "BoxRef",
           "DetectionRecord", "TextLineRecord", "TrackRecord", "EntityRecord", "EntitySighting", "EntityTimeline",
           "LastSeen", "CameraSignal"]


# -- camera-axis time -----------------------------------------------------------------------------
# Each moment has a time on its camera's own axis: absolute (unix seconds) when the caller or the
# container gave a start time, else relative (seconds since the source's first frame). Searches,
# ``as_of`` and retention all use this axis.

ABSOLUTE_TIME_MIN = 1e9  # unix seconds of 2001-09-09: a relative axis would need 31 years of recording


def is_absolute_time(t: float) -> bool:
    """Whether a time on a camera's axis is absolute (unix seconds): ``t > 1e9``. The one rule
    for code that sees only the number (formatting, prompts); code holding a record asks its
    ``t_abs`` instead."""
    return t > ABSOLUTE_TIME_MIN


def camera_time(t_rel: float, t_abs: float | None) -> float:
    """A time on its camera's axis: ``t_abs`` when known, else ``t_rel``."""
    return float(t_abs) if t_abs is not None else float(t_rel)


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
    pose: Pose | None = None  # where the camera was (None: no pose known)

    @property
    def t(self) -> float:
        """The moment's time on its camera's axis."""
        return camera_time(self.t_rel, self.t_abs)


@dataclass(frozen=True)
class ClipFrame:
    """A retained frame as a clip uses it: its times on the camera's axis (``t``) and on its
    source's clock (``t_rel``), the source it came from, its JPEG."""

    moment_id: int
    t: float
    t_rel: float
    source_id: int
    frame_path: str


@dataclass(frozen=True)
class BoxRef:
    """A box on a stored frame that evidence points at: a detected thing ("object", ``label``
    its class name) or a line of text read there ("text", ``label`` the text). ``box``:
    x0, y0, x1, y1 in the frame's pixels as indexed."""

    moment_id: int
    box: tuple[float, float, float, float]
    label: str
    score: float | None = None
    kind: str = "object"
    frame_size: tuple[int, int] = (0, 0)  # (width, height) the box is in; (0, 0): not known


@dataclass(frozen=True)
class Evidence:
    """A search hit or a citation: an interval of one camera, with the moments that show it
    (and, where perception found them, the boxes on those moments' frames)."""

    camera_id: str
    t_start: float  # the camera's axis: absolute seconds when known, else relative
    t_end: float
    moment_ids: tuple[int, ...]
    frame_paths: tuple[str, ...]
    score: float  # fused rank score (reciprocal rank fusion): comparable within one result list only
    source: str  # "frame" | "event" | "summary" | "speech"
    text: str | None = None  # the document (event/summary hits that have one), or what was said (speech)
    similarity: float | None = None  # the best cosine with the query in any space that found it
    # calibrated per space, in [0, 1]: the share of that space's vectors the hit outscores for the
    # query, estimated (memory/search.py); None when nothing could be compared (a lone vector)
    relevance: float | None = None
    # where its last moment with a pose was taken (``last_pose``): for "where" questions, the
    # place of the latest sighting it shows; None when none of its moments has a pose
    pose: Pose | None = None
    boxes: tuple[BoxRef, ...] = ()  # things and text on the cited frames ("object" and "ocr" hits)


def last_pose(moments) -> Pose | None:
    """The pose of the latest of ``moments`` (Moment records) that has one."""
    best = None
    for m in moments:
        if m is not None and m.pose is not None and (best is None or m.t >= best.t):
            best = m
    return None if best is None else best.pose


@dataclass(frozen=True)
class Event:
    """Contiguous moments of one camera; closed once its last moment is known."""

    event_id: int
    camera_id: str
    t_start: float  # camera axis
    t_end: float
    keyframes: tuple[int, ...]  # moment ids spread over the event (empty while open)
    doc: str | None  # the writer's retrieval document, None until written
    closed: bool = True
    doc_vector: np.ndarray | None = field(default=None, compare=False)  # when asked for


@dataclass(frozen=True)
class DocumentJob:
    """A closed event waiting for its document, with the frames the writer shows the model."""

    event: Event
    frames: tuple[tuple[str, float], ...]  # (frame path, camera-axis time) of its keyframes
    closed_at: float | None  # wall time of the close (the writer's lag is measured from it)


@dataclass(frozen=True)
class WriterBacklog:
    pending: int  # closed events without a document
    oldest_closed_at: float | None  # wall time the oldest of them closed


@dataclass(frozen=True)
class Summary:
    """A summary document over a time window (VAM ``summarize``)."""

    summary_id: int | None  # None: a draft, written for one answer and never stored
    camera_id: str | None  # None: every camera
    t0: float  # the window, camera axis
    t1: float
    granularity_s: float
    prompt: str
    structure: str | None
    text: str
    moment_ids: tuple[int, ...]  # the moments whose frames the writer saw


@dataclass(frozen=True)
class SummaryKind:
    """One kind of summary document: its structure label and window size, and how many
    documents of it there are (what the planner may filter on)."""

    structure: str | None
    granularity_s: float
    count: int


@dataclass
class ForestNode:
    """A node of a camera's event forest (OASIS): leaves are events."""

    node_id: int
    camera_id: str
    t_start: float
    t_end: float
    keyframes: list[int]             # moment ids, sorted by time, at most cfg.keyframes
    keyframe_times: list[float]      # their times (camera axis)
    summary: str                     # placeholder while stale
    embedding: np.ndarray | None     # float32, L2-normalized; None while pending
    height: int                      # 0 for a leaf
    n_leaves: int
    parent: int | None
    children: tuple[int, ...]        # (earlier, later); empty for a leaf
    event_id: int | None             # leaves only
    summary_version: int             # bumps whenever the node's content changes
    written_version: int             # the version the summary was written for (0: never)
    leaf_lo: int = 0                 # ordinals of the first and last leaf covered
    leaf_hi: int = 0

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def stale(self) -> bool:
        return self.written_version != self.summary_version


@dataclass(frozen=True)
class SourceState:
    source_id: int
    camera_id: str
    progress_t: float | None  # every sample with t_rel <= progress_t is gated and committed
    done: bool


@dataclass
class PendingMoment:
    """A kept frame whose JPEG is already on disk, waiting for its row."""

    camera_id: str
    source_id: int
    t_rel: float
    t_abs: float | None
    pts: int | None
    frame_ref: str
    width: int
    height: int
    gate: GateRecord
    embedding: np.ndarray | None = None  # float32, L2-normalized: goes to the "frame" space
    event_start: bool = False  # opens a new event of its camera (closing the open one)
    pose: Pose | None = None

    @property
    def t(self) -> float:
        return camera_time(self.t_rel, self.t_abs)


@dataclass(frozen=True)
class QARecord:
    """One answered question of the QA history."""

    qa_id: int
    t: float  # the question's present (camera axis)
    cameras: tuple[str, ...] | None  # the scope asked about; None: every camera
    question: str
    answer: str
    score: float | None = None  # cosine with the query, when retrieved


@dataclass(frozen=True)
class CameraExtent:
    """The moments of some cameras as far as a view sees them."""

    first: float | None  # earliest time (camera axis); None: no moment
    last: float | None
    absolute: bool  # whether any of them is on an absolute (unix) axis


@dataclass(frozen=True)
class Deletion:
    """What a deletion removed."""

    moments: int
    events: int
    summaries: int
    vectors: int
    cameras: tuple[str, ...]  # the cameras whose references restart
    alerts: int = 0
    monitors: int = 0  # ended with their cameras
    transcripts: int = 0  # segments (with their full-text rows and vectors)
    detections: int = 0  # perception's rows of the range: detections, OCR lines, entities left with no sighting
    ocr_lines: int = 0
    entities: int = 0


@dataclass(frozen=True)
class Transcript:
    """A stored transcript segment: what was said on a camera between two times."""

    segment_id: int
    camera_id: str
    t_start: float  # camera axis
    t_end: float
    text: str
    language: str | None
    confidence: float | None


@dataclass(frozen=True)
class DetectionRecord:
    """A stored detection: one thing on one kept frame (``track_id`` / ``entity_id``: what
    perception joined it to)."""

    detection_id: int
    moment_id: int
    camera_id: str
    t: float  # the moment's, camera axis
    box: tuple[float, float, float, float]
    label: str
    score: float
    track_id: int | None
    entity_id: int | None
    frame_size: tuple[int, int] = (0, 0)  # (width, height) the box is in


@dataclass(frozen=True)
class TextLineRecord:
    """A stored OCR line of a kept frame; ``read`` False: carried from the camera's last read
    (the text gate saw no text-like change)."""

    line_id: int
    moment_id: int
    camera_id: str
    t: float
    box: tuple[float, float, float, float]
    text: str
    confidence: float
    read: bool
    frame_size: tuple[int, int] = (0, 0)  # (width, height) the box is in


@dataclass(frozen=True)
class TrackRecord:
    """Sightings of one thing on one camera over time."""

    track_id: int
    camera_id: str
    entity_id: int | None
    label: str
    first_t: float  # camera axis
    last_t: float
    count: int
    texts: tuple[str, ...]


@dataclass(frozen=True)
class EntityRecord(SeenSpan):
    """One thing, across cameras: its label, colour names, the strings read on it, when it was
    first and last seen on each camera (``seen``: camera -> (first, last), camera axis; in a
    view bounded by ``as_of``, as far as it sees) and its representative crop (a JPEG path;
    None when it has none, or it lies outside the view)."""

    entity_id: int
    label: str
    colours: tuple[str, ...]
    texts: tuple[str, ...]
    seen: dict[str, tuple[float, float]]
    crop_path: str | None = None
    crop_camera: str | None = None

    @property
    def cameras(self) -> tuple[str, ...]:
        return tuple(sorted(self.seen, key=lambda c: self.seen[c][0]))


@dataclass(frozen=True)
class EntitySighting:
    """An entity on a stored frame."""

    entity_id: int
    track_id: int | None
    camera_id: str
    t: float
    moment_id: int
    frame_path: str
    box: tuple[float, float, float, float]
    label: str
    score: float
    frame_size: tuple[int, int] = (0, 0)
    pose: Pose | None = None  # where the camera was (its moment's pose)


@dataclass(frozen=True)
class EntityTimeline:
    """An entity with its sightings in time order (on frames the memory still holds), its
    tracks, and ``similar``: other entities of its label whose appearance is close (entity id,
    cosine), best first: links the online linker did not make, for a reader to judge."""

    entity: EntityRecord
    sightings: tuple[EntitySighting, ...]
    tracks: tuple[TrackRecord, ...]
    similar: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class LastSeen:
    """Where and when something matching a query was last seen: ``source`` "object" (an entity
    matched by label, colour or the text read on it) or "ocr" (text shown on screen). ``t`` is
    the latest time it was seen; ``moment_id``, ``frame_path`` and ``box`` the latest stored
    frame showing it (None when none is left: retention thinned them)."""

    query: str
    source: str
    camera_id: str
    t: float
    entity: EntityRecord | None
    text: str
    moment_id: int | None = None
    frame_path: str | None = None
    box: tuple[float, float, float, float] | None = None
    pose: Pose | None = None  # where the camera was for that frame, when known


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
    and H x W uint8 luma) and the blur gate's history at that point (the Laplacian variances of
    the camera's last kept frames). A resumed run gates its first samples against both."""

    t: float
    gray: object  # numpy on the commit path; the gate thread may hold a CUDA tensor until then
    sharpness: tuple[float, ...] = ()  # empty for stores from before schema 4


MONITOR_MODES = ("once", "repeat")


@dataclass(frozen=True)
class Monitor:
    """A watched-for condition (StreamMind's Monitor Worker): checked on the latest ``frames``
    frames of its cameras every ``every_s`` of stream time; fires at ``confidence >=
    min_confidence``. ``once`` ends at its first alert; ``repeat`` fires again only after
    ``repeat_gap_s`` without a match. ``cameras`` None: every camera."""

    monitor_id: str
    condition: str
    cameras: tuple[str, ...] | None
    mode: str
    min_confidence: float
    every_s: float
    frames: int
    repeat_gap_s: float
    n_images: int        # reference images stored with the condition
    active: bool
    created_at: float    # wall clock
    ended_at: float | None

    def watches(self, camera_id: str) -> bool:
        return self.cameras is None or camera_id in self.cameras

    def to_json(self) -> dict:
        d = asdict(self)
        d["cameras"] = list(self.cameras) if self.cameras is not None else None
        return d


@dataclass(frozen=True)
class Alert:
    """One firing of a monitor. ``t`` is the camera-axis time of the last frame the firing check
    observed (StreamArena's trigger-observation time, recorded before delivery); ``frame_paths``
    are the observed frames as saved in the store and ``moment_ids`` the committed moments of the
    observed span (both kept: retention never thins them)."""

    alert_id: int
    monitor_id: str
    camera_id: str
    t: float
    t_abs: float | None
    confidence: float
    observed: str
    moment_ids: tuple[int, ...]
    frame_paths: tuple[str, ...]
    created_at: float

    def to_json(self) -> dict:
        d = asdict(self)
        d["moment_ids"], d["frame_paths"] = list(self.moment_ids), list(self.frame_paths)
        return d


@dataclass(frozen=True)
class ProvisionalNode:
    """An event the forest does not hold yet (still open, or closed and waiting for its
    document), as the fast path may see it: its frames and their mean embedding, no invented
    description. Replaced by the event's forest leaf once its document lands."""

    event_id: int
    camera_id: str
    t_start: float  # camera axis; t_end: its last frame in view (``as_of`` clips an event)
    t_end: float
    n_frames: int  # its moments in view
    open: bool  # still open (at ``as_of``, when given): more frames may join it
    keyframes: tuple[int, ...]  # moment ids spread evenly over it, in time order
    keyframe_times: tuple[float, ...]
    frame_paths: tuple[str, ...]
    embedding: np.ndarray | None = field(default=None, compare=False)  # unit mean of its frames' image embeddings
    document: str | None = None  # written but not yet a forest leaf (it waits for an earlier event's)


@dataclass(frozen=True)
class EventMemory:
    """What the coarse stage sees of history: the forest's roots and the provisional nodes of
    the events no root covers yet, read so that no event is in both."""

    roots: tuple[ForestNode, ...]
    provisional: tuple[ProvisionalNode, ...]


@dataclass(frozen=True)
class CameraSignal:
    """What a question's budget ranks a camera by (memory/cameras.py), as it stood at ``as_of``:
    ``matches`` how many of the question's words its documents, transcripts, text read and
    detected things in the matched span hold, ``score`` those words weighted by how few cameras
    hold each (higher: better); its newest alert's time and its newest moment's time (None:
    none); its newest documented event (time and document, None: none)."""

    camera_id: str
    matches: int = 0
    score: float = 0.0
    last_alert_t: float | None = None
    last_moment_t: float | None = None
    last_event_t: float | None = None
    last_document: str | None = None
