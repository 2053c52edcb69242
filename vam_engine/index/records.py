"""The records that travel between the indexing pipeline's stages, in the order they flow:

    decode --SampledFrame/SourceEnd/SourceGap/CameraWarm--> gate --GatedBatch--> embed
           --CommitUnit--> commit

(perception and the JPEG encoder are side stages the embed stage hands work to; their futures
ride in the CommitUnit.) Each stage's input is one bounded queue of these.
"""
from __future__ import annotations

from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field

from ..gate import GateRecord
from ..ingest import Frame
from ..memory import CommitBatch, GateReference, GateSample


@dataclass
class SampledFrame:
    """A sampled frame of a registered source, for the gates."""

    frame: Frame
    source_id: int


@dataclass
class SourceEnd:
    """A source ended after its frames (``error``: why it stopped early, None at its end)."""

    source_id: int
    camera_id: str
    error: str | None = None


@dataclass
class SourceGap:
    """A live source lost its video (engine/live.py): its held frame and open event close, and
    the gates compare the first frame after it with nothing (its reference is reset)."""

    source_id: int
    camera_id: str


@dataclass
class CameraWarm:
    """Queued when a source registers: the gate stage loads its camera's saved reference while
    the decoder opens and decodes its first frame, instead of when that frame arrives."""

    camera_id: str
    source_id: int


WAKE = object()  # queued by flush(): wakes the gate stage without a frame


@dataclass
class GatedFrame:
    """A frame that passed the gates, with their statistics."""

    frame: Frame
    source_id: int
    record: GateRecord


@dataclass
class SourceCounts:
    """What the gates did with one source's samples in one batch (applied to its report by the
    embed stage, the one thread that writes reports)."""

    sampled: int = 0
    dropped: Counter = field(default_factory=Counter)  # gate -> frames (a held sample kept later: -1 blur)
    last_t: float | None = None  # its last gated sample's t_rel


@dataclass
class GatedBatch:
    """The gate stage's output for one batch taken from its queue (possibly empty: a tick)."""

    passed: list[GatedFrame] = field(default_factory=list)  # in time order per camera
    samples: list[GateSample] = field(default_factory=list)  # gate records to store
    refs: dict[str, GateReference] = field(default_factory=dict)  # camera -> its new gate reference
    # source -> committed progress after this batch; None: none may be committed yet (a hold
    # that began at the source's first sample)
    progress: dict[int, float | None] = field(default_factory=dict)
    counts: dict[int, SourceCounts] = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)  # cameras whose video was lost after these frames
    ends: list[SourceEnd] = field(default_factory=list)
    gated_t: dict[str, float] = field(default_factory=dict)  # camera -> its last gated sample's time (camera axis)
    held_t: dict[str, float] = field(default_factory=dict)  # camera -> the time of the sample its gates hold
    taken: int = 0  # queue items this batch took (a flush waits for their commit)
    gated: int = 0  # frames gated
    flush: bool = False  # commit what is pending now

    def into(self, batch: CommitBatch) -> None:
        """Adds the gates' rows to the pending commit."""
        batch.samples += self.samples
        batch.refs.update(self.refs)
        for sid, t in self.progress.items():
            if t is None:
                batch.progress.pop(sid, None)
            else:
                batch.progress[sid] = t


@dataclass
class CommitUnit:
    """One transaction's worth, from the embed stage to the commit stage."""

    batch: CommitBatch
    writes: list[Future]  # the JPEGs its rows reference: each in place before the rows commit
    perceived: list[Future]  # perception's rounds for its kept frames (and its state, last)
    ended: list  # the pipeline's book-keeping of sources whose end it commits
    taken: int  # queue items it covers
