"""The indexing pipeline: decode workers (one per source) -> one batched gate stage -> commits.

Decode workers put sampled frames on one bounded queue (backpressure on decoding). The gate
thread takes batches across cameras, gates each camera's frames in one kernel call, and hands
kept frames to a small pool that converts them to RGB and writes their JPEGs. The commit thread
waits for those files, then commits rows, gate records, per-source progress and camera
references in one transaction; the gate thread never waits for a file or for SQLite.

The present (the working memory) is fed beside this, never through it: with ``present_fps``
set, each decode worker asks its decoder for the present's frames at that rate as well
(``want_present``) and hands them to ``observe`` on the decode thread, scaled to
``present_side``; they never reach the queue, the gates, the embedder or the store. Without it
the semantic stage offers ``observe`` the frames that passed the gates (as nothing reads the
present without a model, nothing extra is decoded for it).
"""
from __future__ import annotations

import hashlib
import os
import queue
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..config import EngineConfig
from ..errors import SourceError
from ..gate import GateCascade
from ..ingest import Frame
from ..ingest.frame import PresentFrame
from ..memory import CommitBatch, GateReference, GateSample, Store, camera_time
from .stage import SemanticStage


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


_WAKE = object()  # queued by flush(): wakes the gate thread without a frame


@dataclass
class _Item:
    frame: Frame
    source_id: int


@dataclass
class _End:
    source_id: int
    error: str | None = None


@dataclass
class _Warm:
    """Queued when a source registers: the gate thread loads its camera's saved reference
    while the decoder opens and decodes its first frame, instead of when that frame arrives."""

    camera_id: str


@dataclass
class _Gap:
    """A live source lost its video (engine/live.py): its held frame and open event close, and
    the gates compare the first frame after it with nothing (its reference is reset)."""

    source_id: int


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
        moments."""
        if present_fps is not None and (isinstance(present_fps, bool) or not isinstance(present_fps, (int, float))
                                        or not 0 < present_fps < float("inf")):
            raise ValueError(f"IndexPipeline: present_fps must be a positive number or None, got {present_fps!r}")
        if present_fps is not None and observe is None:
            raise ValueError("IndexPipeline: present_fps needs observe (where the present's frames go)")
        if isinstance(present_side, bool) or not isinstance(present_side, int) or present_side < 1:
            raise ValueError(f"IndexPipeline: present_side must be a positive int, got {present_side!r}")
        self.store = store
        self.after_commit = after_commit  # called on the commit thread after each transaction (the writer)
        self.cascade = cascade
        self.cfg = cfg
        self._queue: queue.Queue = queue.Queue(maxsize=cfg.ingest.queue_frames)
        self._sources: dict[int, _Source] = {}
        self._lock = threading.Lock()
        self._encoder = ThreadPoolExecutor(cfg.store.encode_threads, thread_name_prefix="vam-jpeg")
        for _ in range(cfg.store.encode_threads):  # started now, not at the first kept frame's submit
            self._encoder.submit(int)
        self.observe = observe
        self.present_fps = present_fps
        self.present_side = present_side
        self.perception = perception
        self._gated_t: dict[str, float] = {}  # camera -> time of its last gated sample (camera axis)
        # camera -> (source, t_rel of its sample before the one its gates' current hold began with)
        self._hold_floor: dict[str, tuple[int, float | None]] = {}
        self.semantic = SemanticStage(store, embedder, cfg, self._encoder,
                                      observe=observe if present_fps is None else None, perception=perception)
        self._stop = threading.Event()
        self._flush_requested = threading.Event()
        self._error: BaseException | None = None
        self._idle = threading.Condition()
        # items put and items committed, ever (committed in the order put: one commit thread);
        # flush waits for the count put before it, so a producer that never pauses cannot starve it
        self._put_count = 0
        self._done_count = 0
        self._fresh: set[str] = set()  # cameras whose reference a gap reset: not reloaded from the store
        # gated batches wait here for their JPEGs and their transaction, off the gate thread
        self._commits: queue.Queue = queue.Queue(maxsize=8)
        self._thread = threading.Thread(target=self._gate_loop, name="vam-gate", daemon=True)
        self._committer = threading.Thread(target=self._commit_loop, name="vam-commit", daemon=True)
        self._thread.start()
        self._committer.start()

    # -- feeding -------------------------------------------------------------------------------
    def register(self, source_id: int, report: SourceReport, duration: float | None,
                 on_progress=None) -> _Source:
        """Start book-keeping for a source; a source already registered is returned as it is."""
        with self._lock:
            src = self._sources.get(source_id)
            fresh = src is None or src.ended
            if fresh:
                src = self._sources[source_id] = _Source(source_id, report, duration, on_progress)
        if fresh:
            self.put(_Warm(report.camera_id))
        return src

    def wait(self, src: _Source) -> None:
        """Block until the source's end is committed (or the pipeline fails)."""
        while not src.committed.wait(0.2):
            self.raise_if_failed()

    def put(self, item) -> None:
        self.raise_if_failed()
        with self._idle:
            self._put_count += 1
        while True:
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                self.raise_if_failed()

    def put_frame(self, frame: Frame, source_id: int) -> None:
        """Queue one sampled frame of a registered source (blocks while the gates are behind)."""
        self.put(_Item(frame, source_id))

    def offer_frame(self, frame: Frame, source_id: int, timeout: float) -> bool:
        """Queue a live source's sample unless the gates stay behind for ``timeout`` s: False
        then (the caller counts it dropped; a live reader must keep reading its socket)."""
        self.raise_if_failed()
        try:
            self._queue.put(_Item(frame, source_id), timeout=timeout)
        except queue.Full:
            return False
        # Counted once queued (it may be committed first: the count only trails), never before:
        # a flush must not wait for an item that was then dropped.
        with self._idle:
            self._put_count += 1
        return True

    def gap(self, source_id: int) -> None:
        """Queue a live source's loss of video after its frames so far (see ``_Gap``)."""
        self.put(_Gap(source_id))

    def end_source(self, source_id: int) -> None:
        """Queue a source's end after its frames (for pushed streams; decoders do it themselves)."""
        self.put(_End(source_id))

    def decode_worker(self, src: _Source, decoder) -> threading.Thread:
        """Start a thread feeding the decoder's samples to the gates (and, with present_fps,
        its present frames to ``observe``) until it ends; returns the thread."""
        if self.present_fps is not None:
            decoder.want_present(self.present_fps)

        def work():
            err = None
            try:
                for frame in decoder:
                    if isinstance(frame, PresentFrame):
                        try:
                            t = camera_time(frame.t_rel, frame.t_abs)
                            if self.perception is not None and self.perception.detect_present:
                                self.perception.present(frame.camera_id, t, frame.rgb(1 << 16))  # full size
                            self.observe(frame.camera_id, t, frame.rgb(self.present_side))
                        except Exception as e:  # noqa: BLE001 - the present is best effort, the index is not
                            if len(decoder.stats.errors) < 20:
                                decoder.stats.errors.append(f"present: {e}")
                        continue
                    self.put_frame(frame, src.source_id)
            except SourceError as e:
                err = e.problem
            except Exception as e:  # noqa: BLE001 - a decoder failure must end the source, not hang it
                err = f"decoding failed: {type(e).__name__}: {e}"
            finally:
                decoder.close()
            self.put(_End(src.source_id, err))

        src.decoder = decoder
        t = threading.Thread(target=work, name=f"vam-decode-{src.report.camera_id}", daemon=True)
        t.start()
        return t

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything put before this call is gated and committed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            target = self._put_count
        try:
            self._queue.put_nowait(_WAKE)  # after everything put so far: commit it now, not at the next interval
        except queue.Full:
            self._flush_requested.set()  # the gate thread is busy: it sees the request at its next batch
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
        if self._thread.is_alive():
            try:
                self.flush()
            finally:
                self._stop.set()
                self._queue.put(None)  # wakes the loop at once
                self._thread.join()
                self._commits.put(None)
                self._committer.join()
        self._encoder.shutdown(wait=True)

    def raise_if_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"indexing pipeline stopped: {self._error}") from self._error

    # -- the gate/commit loop ------------------------------------------------------------------
    def _take_batch(self) -> list:
        try:
            first = self._queue.get(timeout=self.cfg.store.commit_interval_s)
        except queue.Empty:
            return []
        if first is None:  # close() woke us
            return []
        if first is _WAKE:
            self._flush_requested.set()
            return []
        items = [first]
        limit = self.cfg.ingest.batch_size * max(1, len(self._sources))
        while len(items) < limit and not isinstance(items[-1], _Gap):  # a batch ends at a gap: no frame crosses it
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                break
            if item is _WAKE:
                self._flush_requested.set()
            else:
                items.append(item)
        return items

    def _gate_loop(self) -> None:
        batch, writes, ended, perceived = CommitBatch(), [], [], []
        taken = gated = 0  # items taken since the last hand-over; frames gated since then
        last = time.monotonic()
        try:
            self.store.db.conn()  # this thread's connection (a few ms), opened before any frame waits for it
            while not self._stop.is_set() and self._error is None:
                items = self._take_batch()
                taken += len(items)
                n, done = self._gate(items, batch, writes)
                gated += n
                ended += done
                if self.perception is not None:  # the kept frames of every camera: one submission
                    perceived += self.perception.submit(self._undecided())
                # Commit by size, at a source's end, on flush(), or once per commit interval: a
                # commit per sample would write the camera's reference frame every time.
                if taken and (gated >= self.cfg.store.commit_every or ended or self._flush_requested.is_set()
                              or time.monotonic() - last >= self.cfg.store.commit_interval_s):
                    self._flush_requested.clear()
                    self.semantic.checkpoint(batch, writes)
                    if self.perception is not None:
                        perceived.append(self.perception.snapshot(self._undecided()))
                    self._hand_over((batch, writes, ended, taken, perceived))
                    batch, writes, ended, perceived = CommitBatch(), [], [], []
                    taken = gated = 0
                    last = time.monotonic()
        except BaseException as e:  # noqa: BLE001 - surfaced to every caller through raise_if_failed
            self._fail(e)

    def _hand_over(self, unit) -> None:
        while True:  # blocks while commits fall behind, unless the committer has failed
            try:
                self._commits.put(unit, timeout=0.2)
                return
            except queue.Full:
                self.raise_if_failed()

    def _commit_loop(self) -> None:
        try:
            self.store.db.conn()  # opened now: the last commit of a run waits for nothing but its rows
        except BaseException as e:  # noqa: BLE001
            self._fail(e)
            return
        while True:
            unit = self._commits.get()
            if unit is None:
                return
            batch, writes, ended, taken, perceived = unit
            try:
                for w in writes:
                    w.result()  # every file is in place before its row commits
                if perceived:
                    self.perception.resolve(perceived, batch)
                batch.refs = {cam: GateReference(r.t, _host(r.gray), r.sharpness) for cam, r in batch.refs.items()}
                self.store.commit(batch)
                if self.after_commit is not None:
                    self.after_commit()
            except BaseException as e:  # noqa: BLE001
                self._fail(e)
                return
            for src in ended:
                src.committed.set()
            with self._idle:
                self._done_count += taken
                self._idle.notify_all()

    def _fail(self, e: BaseException) -> None:
        self._error = e
        with self._idle:
            self._idle.notify_all()

    def _gate(self, items: list, batch: CommitBatch, writes: list[Future]) -> tuple[int, list[_Source]]:
        """Gate a batch into ``batch``; returns the frames gated and the sources that ended."""
        by_camera: dict[str, list[_Item]] = defaultdict(list)
        ends = []  # a source's end marker follows all its frames, so it closes after them
        gaps = [it for it in items if isinstance(it, _Gap)]  # at most the batch's last item
        warm = 0
        for it in items:
            if isinstance(it, _End):
                ends.append(it)
            elif isinstance(it, _Warm):
                self._load_reference(it.camera_id)
                warm += 1
            elif not isinstance(it, _Gap):
                by_camera[it.frame.camera_id].append(it)
        touched = set()
        passed = []  # (frame, source_id, gate record) of frames the gates kept
        for cam, cam_items in by_camera.items():
            self._load_reference(cam)
            self._fresh.discard(cam)
            run = self.cascade.gate(cam, [it.frame.gray for it in cam_items],
                                    [camera_time(it.frame.t_rel, it.frame.t_abs) for it in cam_items], cam_items)
            kept_before = defaultdict(list)  # frame index -> held samples kept before its decision
            for r in run.released:
                kept_before[r.before].append(r)
            before = {it.source_id: self._sources[it.source_id].last_t for it in cam_items}
            for i, (it, rec) in enumerate(zip(cam_items, run.records)):
                for r in kept_before.pop(i, ()):
                    self._pass_released(cam, r, batch, passed)
                if it is self.cascade.hold_start(cam):  # gated again by a resumed run: see _hold_progress
                    self._hold_floor[cam] = (it.source_id, before[it.source_id])
                before[it.source_id] = it.frame.t_rel
                src = self._sources[it.source_id]
                f = it.frame
                rep = src.report
                rep.sampled += 1
                src.last_t = f.t_rel
                self._gated_t[cam] = camera_time(f.t_rel, f.t_abs)
                touched.add(src)
                if self.cfg.store.record_samples:
                    batch.samples.append(GateSample(cam, it.source_id, f.t_rel, rec))
                batch.progress[it.source_id] = f.t_rel
                if rec.dropped_by is not None:
                    rep.dropped[rec.dropped_by] += 1
                    continue
                passed.append((f, it.source_id, rec))
                batch.refs[cam] = GateReference(f.t_rel, f.gray, self.cascade.sharpness(cam))
            for rs in kept_before.values():  # kept after the call's last frame
                for r in rs:
                    self._pass_released(cam, r, batch, passed)
            self._hold_progress(cam, batch)
        for cam in {self._sources[x.source_id].report.camera_id for x in gaps + ends}:
            for r in self.cascade.end(cam):  # the view ended with the stream: its held sample is kept
                self._pass_released(cam, r, batch, passed)
        decisions = self.semantic.process(passed, batch, writes)
        for g in gaps:
            cam = self._sources[g.source_id].report.camera_id
            decisions += self.semantic.finish(cam, batch, writes)
            self.cascade.forget([cam])
            self._fresh.add(cam)
        for end in ends:
            src = self._sources[end.source_id]
            if not end.error:  # a file source's end: its camera's held frame and open event close
                decisions += self.semantic.finish(src.report.camera_id, batch, writes)
        for sid, reason in decisions:
            src = self._sources.get(sid)
            if src is None:
                continue  # a frame held from a source of an earlier run
            if reason is None:
                src.report.kept += 1
            else:
                src.report.dropped[reason] += 1
            touched.add(src)
        for end in ends:
            src = self._sources[end.source_id]
            src.ended = True
            if end.error:
                src.report.failed = end.error
            else:
                batch.finished.add(end.source_id)
            touched.add(src)
        for src in touched:
            self._report_progress(src)
        return len(items) - len(ends) - len(gaps) - warm, [self._sources[end.source_id] for end in ends]

    def _undecided(self) -> dict[str, float]:
        """Per camera, the time from which frames may still be kept (what perception's present
        frames wait for): the semantic stage's bound, or the gates' held sample's when older."""
        out = self.semantic.undecided(self._gated_t)
        for cam, t in out.items():
            it = self.cascade.held_key(cam)
            if it is not None:
                out[cam] = min(t, camera_time(it.frame.t_rel, it.frame.t_abs))
        return out

    def _hold_progress(self, cam: str, batch: CommitBatch) -> None:
        """While the gates hold a blurred sample of the camera (their view rule keeps no state in
        the store), its source's committed progress stays before the hold's first sample: a
        resumed run gates again from there, from the same reference, and decides alike."""
        if self.cascade.hold_start(cam) is None:
            self._hold_floor.pop(cam, None)
            return
        floor = self._hold_floor.get(cam)
        if floor is None:
            return
        sid, t = floor
        if t is None:
            batch.progress.pop(sid, None)  # held since the source's first sample: nothing is done
        else:
            batch.progress[sid] = t

    def _pass_released(self, cam: str, r, batch: CommitBatch, passed: list) -> None:
        """A held blurred sample its view kept (the gates' view rule): it passes the gates now
        (it was counted dropped by blur when gated) and becomes the camera's reference."""
        it = r.key
        f = it.frame
        src = self._sources.get(it.source_id)
        if src is not None:
            dropped = src.report.dropped
            dropped["blur"] -= 1
            if dropped["blur"] <= 0:
                del dropped["blur"]
        if self.cfg.store.record_samples:
            batch.samples.append(GateSample(cam, it.source_id, f.t_rel, r.record))
        passed.append((f, it.source_id, r.record))
        batch.refs[cam] = GateReference(f.t_rel, f.gray, self.cascade.sharpness(cam))

    def _load_reference(self, cam: str) -> None:
        """The camera's saved gate reference, when the cascade has none in memory and no gap
        reset it (a camera's first frames in this pipeline compare with its last kept frame)."""
        if self.cascade.reference(cam) is None and cam not in self._fresh:
            saved = self.store.sources.camera_ref(cam)
            if saved is not None:
                self.cascade.set_reference(cam, saved.gray, saved.sharpness)

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


def _host(gray) -> np.ndarray:
    if isinstance(gray, np.ndarray):
        return gray
    return gray.detach().cpu().numpy()
