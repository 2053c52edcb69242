"""The indexing pipeline: a chain of stages, each a class with its own thread(s), a bounded
input queue of typed records (index/records.py) and a StageMeter (index/meter.py):

    decode  (decode_stage.py: a thread per file or URL source; live cameras' reader threads;
             pushed frames on the caller's thread)
      -> gate    (gate_stage.py: batches across cameras, one kernel call per camera)
      -> embed   (embed_stage.py: one embedder call per batch, the online committer per camera;
                  side stages: the JPEG encoder pool and perception's worker, index/perceive.py)
      -> commit  (commit_stage.py: waits for the unit's files and perception, one transaction)

Each stage hands its output to the next one's queue and blocks while that one is behind
(backpressure reaches decoding; a live camera drops the sample instead). No stage waits for
what a later one does: the gates never wait for the embedder, a file or SQLite.
``IndexPipeline`` wires them and is the pipeline's one surface: sources register, feed frames,
end, flush; ``stage_status()`` gives each stage's figures. The present (the working memory) is
fed beside this through one PresentFeed (index/present.py).
"""
from __future__ import annotations

import hashlib
import os
import queue
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from ..config import EngineConfig
from ..gate import GateCascade
from ..ingest import Frame
from ..memory import Store
from .commit_stage import CommitStage
from .decode_stage import DecodeStage
from .embed_stage import EmbedStage
from .gate_stage import GateStage
from .meter import StageMeter, StageStatus
from .present import PresentFeed
from .records import WAKE, CameraWarm, CommitUnit, SampledFrame, SourceEnd, SourceGap
from .semantic import SemanticStage


@dataclass
class SourceReport:
    """What indexing one source did. Counts cover this run (a resumed run counts what it added)."""

    camera_id: str
    uri: str
    decoder: str = ""
    decoded: int = 0
    sampled: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)  # gate name -> frames
    content_s: float = 0.0  # stream seconds covered by this run
    wall_s: float = 0.0
    resumed_from: float | None = None
    already_done: bool = False
    packets_bad: int = 0
    errors: list[str] = field(default_factory=list)
    failed: str | None = None  # why the source stopped before its end, if it did
    audio: dict | None = None  # its audio track's transcription (engine/audio.py's audio_summary), when on

    @property
    def x_realtime(self) -> float:
        return self.content_s / self.wall_s if self.wall_s > 0 else 0.0


@dataclass
class Progress:
    """A progress event: sent after every gated batch and when a source ends."""

    camera_id: str
    uri: str
    t_rel: float
    duration_s: float | None
    decoded: int
    sampled: int
    kept: int
    done: bool = False


def fingerprint(path: str) -> str:
    """Identifies a file's content cheaply: its size and its first and last 64 KiB."""
    h = hashlib.sha1()
    size = os.path.getsize(path)
    h.update(str(size).encode())
    with open(path, "rb") as f:
        h.update(f.read(1 << 16))
        if size > 1 << 17:
            f.seek(-(1 << 16), os.SEEK_END)
            h.update(f.read(1 << 16))
    return h.hexdigest()


class _Source:
    """Book-keeping for one active source (a file, a URL or a push camera)."""

    def __init__(self, source_id: int, report: SourceReport, duration: float | None,
                 on_progress: Callable[[Progress], None] | None):
        self.source_id = source_id
        self.report = report
        self.duration = duration
        self.on_progress = on_progress
        self.decoder = None
        self.last_t: float | None = None
        self.ended = False
        self.committed = threading.Event()  # set once its end is committed



class IndexPipeline:
    def __init__(self, store: Store, cascade: GateCascade, cfg: EngineConfig, embedder, *,
                 after_commit=None, observe=None, present_fps: float | None = None, present_side: int = 448,
                 perception=None):
        """``observe(camera, t, rgb)``: the working memory's feed. ``present_fps``: the rate
        decoders feed it at from decode (None: only the gated frames feed it); fixed for the
        pipeline's life. ``present_side``: the long side those frames are scaled to.
        ``perception``: a PerceptionFeed (index/perceive.py): kept frames (and the present's,
        when it detects on them) are perceived on its stage's worker and committed with their
        moments. ``after_commit``: called on the commit thread after each transaction."""
        if present_fps is not None and (isinstance(present_fps, bool) or not isinstance(present_fps, (int, float))
                                        or not 0 < present_fps < float("inf")):
            raise ValueError(f"IndexPipeline: present_fps must be a positive number or None, got {present_fps!r}")
        if present_fps is not None and observe is None:
            raise ValueError("IndexPipeline: present_fps needs observe (where the present's frames go)")
        if isinstance(present_side, bool) or not isinstance(present_side, int) or present_side < 1:
            raise ValueError(f"IndexPipeline: present_side must be a positive int, got {present_side!r}")
        self.store = store
        self.cfg = cfg
        self.perception = perception
        self.present = PresentFeed(observe, fps=present_fps, side=present_side, perception=perception)
        self._sources: dict[int, _Source] = {}
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._idle = threading.Condition()
        # items put and items committed, ever (committed in the order put: one commit thread);
        # flush waits for the count put before it, so a producer that never pauses cannot starve it
        self._put_count = 0
        self._done_count = 0
        # the stages, last first: each is given where its output goes
        self.commit = CommitStage(store, perception=perception, after_commit=after_commit, done=self._committed,
                                  fail=self._fail)
        self._encoder = ThreadPoolExecutor(cfg.store.encode_threads, thread_name_prefix="vam-jpeg")
        for _ in range(cfg.store.encode_threads):  # started now, not at the first kept frame's submit
            self._encoder.submit(int)
        self._encode_meter = StageMeter("encode", workers=cfg.store.encode_threads)
        self.semantic = SemanticStage(store, embedder, cfg, self._encoder, present=self.present,
                                      perception=perception, encode_meter=self._encode_meter)
        self.embed = EmbedStage(self.semantic, cfg, perception=perception, source=self._source,
                                report=self._report_progress, out=self._hand_to(self.commit.queue),
                                fail=self._fail)
        self.gate = GateStage(store, cascade, cfg, out=self._hand_to(self.embed.queue),
                              n_sources=lambda: len(self._sources), fail=self._fail)
        self.decode = DecodeStage(self.present, sources=self._source_list)
        for stage in (self.commit, self.embed, self.gate):
            stage.start()

    # -- feeding -------------------------------------------------------------------------------
    def register(self, source_id: int, report: SourceReport, duration: float | None,
                 on_progress=None) -> _Source:
        """Start book-keeping for a source; a source already registered is returned as it is."""
        with self._lock:
            src = self._sources.get(source_id)
            fresh = src is None or src.ended
            if fresh:
                if src is not None:
                    self.decode.retire(src)
                src = self._sources[source_id] = _Source(source_id, report, duration, on_progress)
        if fresh:
            self.put(CameraWarm(report.camera_id, source_id))
        return src

    def wait(self, src: _Source) -> None:
        """Block until the source's end is committed (or the pipeline fails)."""
        while not src.committed.wait(0.2):
            self.raise_if_failed()

    def put(self, item) -> None:
        """Queue a record for the gate stage (blocks while it is behind)."""
        self.raise_if_failed()
        with self._idle:
            self._put_count += 1
        while True:
            try:
                self.gate.queue.put(item, timeout=0.2)
                return
            except queue.Full:
                self.raise_if_failed()

    def put_frame(self, frame: Frame, source_id: int) -> None:
        """Queue one sampled frame of a registered source (blocks while the gates are behind)."""
        self.put(SampledFrame(frame, source_id))

    def offer_frame(self, frame: Frame, source_id: int, timeout: float) -> bool:
        """Queue a live source's sample unless the gates stay behind for ``timeout`` s: False
        then (the caller counts it dropped; a live reader must keep reading its socket)."""
        self.raise_if_failed()
        try:
            self.gate.queue.put(SampledFrame(frame, source_id), timeout=timeout)
        except queue.Full:
            self.decode.meter.add(dropped=1)
            return False
        # Counted once queued (it may be committed first: the count only trails), never before:
        # a flush must not wait for an item that was then dropped.
        with self._idle:
            self._put_count += 1
        return True

    def gap(self, source_id: int) -> None:
        """Queue a live source's loss of video after its frames so far (see ``SourceGap``)."""
        self.put(SourceGap(source_id, self._sources[source_id].report.camera_id))

    def end_source(self, source_id: int, error: str | None = None) -> None:
        """Queue a source's end after its frames (for pushed streams; decoders do it themselves)."""
        self.put(SourceEnd(source_id, self._sources[source_id].report.camera_id, error))

    def decode_worker(self, src: _Source, decoder) -> threading.Thread:
        """Start a thread feeding the decoder's samples to the gates (and, with present_fps,
        its present frames to the present) until it ends; returns the thread."""
        return self.decode.start(src, decoder, lambda f: self.put_frame(f, src.source_id),
                                 lambda err: self.end_source(src.source_id, err))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything put before this call is gated and committed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            target = self._put_count
        try:
            self.gate.queue.put_nowait(WAKE)  # after everything put so far: commit it now, not at the next interval
        except queue.Full:
            self.gate.flush_requested.set()  # the gates are busy: they see the request at their next batch
        with self._idle:
            while self._done_count < target:
                self.raise_if_failed()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(0.2 if left is None else min(0.2, left))
        self.raise_if_failed()
        return True

    def close(self) -> None:
        """Commit what is queued, then stop the stages in the order frames flow."""
        try:
            if self.gate.running:
                self.flush()  # raises the error a stage stopped with
        finally:
            self.gate.stop()
            self.embed.stop()
            self.commit.stop()
            self._encoder.shutdown(wait=True)

    def raise_if_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"indexing pipeline stopped: {self._error}") from self._error

    def forget(self, cameras) -> None:
        """After a deletion cleared cameras' saved state: their online committers start afresh."""
        self.semantic.reset(cameras)

    # -- what the stages report -------------------------------------------------------------------
    def stage_status(self) -> list[StageStatus]:
        """Each stage's figures since the pipeline started, in the order frames flow (decode,
        gate, embed, encode, perceive when perception is on, commit): see index/meter.py."""
        out = [self.decode.status(), self.gate.meter.status(), self.embed.meter.status(), self._encode_meter.status()]
        if self.perception is not None:
            out.append(self.perception.stage_status())
        return out + [self.commit.meter.status()]

    # -- between the stages -----------------------------------------------------------------------
    def _hand_to(self, q: queue.Queue) -> Callable[[object], None]:
        """A stage's output: put on the next stage's queue, blocking while it is full, unless
        the pipeline has failed (then the stage's thread ends with the error)."""
        def put(item) -> None:
            while True:
                try:
                    q.put(item, timeout=0.2)
                    return
                except queue.Full:
                    self.raise_if_failed()
        return put

    def _committed(self, unit: CommitUnit) -> None:
        for src in unit.ended:
            src.committed.set()
        with self._idle:
            self._done_count += unit.taken
            self._idle.notify_all()

    def _fail(self, e: BaseException) -> None:
        if self._error is None:
            self._error = e
        with self._idle:
            self._idle.notify_all()

    def _source(self, source_id: int) -> _Source | None:
        return self._sources.get(source_id)

    def _source_list(self) -> list[_Source]:
        with self._lock:
            return list(self._sources.values())

    def _report_progress(self, src: _Source) -> None:
        rep = src.report
        dec = src.decoder
        if dec is not None:
            rep.decoded = dec.stats.decoded
            rep.packets_bad = dec.stats.packets_bad
            rep.errors = list(dec.stats.errors)
        covered_to = src.last_t
        if src.ended and not rep.failed and src.duration:
            covered_to = src.duration
        if covered_to is not None:
            rep.content_s = max(0.0, covered_to - (rep.resumed_from or 0.0))
        if src.on_progress is not None:
            src.on_progress(Progress(rep.camera_id, rep.uri, src.last_t or 0.0, src.duration, rep.decoded,
                                     rep.sampled, rep.kept, src.ended))
