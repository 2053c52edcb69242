"""The gate stage: one thread takes batches of samples across cameras from the pipeline's one
bounded queue (backpressure on decoding), gates each camera's frames in one kernel call
(gate/cascade.py) and hands a ``GatedBatch`` (index/records.py) to the embed stage. It never
waits for a model, a file or SQLite.

It owns the gates' per-camera state: their references (loaded from the store when a source
registers), the view rule's holds and what they mean for committed progress (``_hold_progress``).
"""
from __future__ import annotations

import queue
import threading
from collections import defaultdict
from typing import Callable

from ..config import EngineConfig
from ..gate import GateCascade
from ..memory import GateReference, GateSample, Store, camera_time
from .meter import StageMeter, stop_thread
from .records import WAKE, CameraWarm, GatedBatch, GatedFrame, SampledFrame, SourceCounts, SourceEnd, SourceGap


class GateStage:
    def __init__(self, store: Store, cascade: GateCascade, cfg: EngineConfig, *, out: Callable[[GatedBatch], None],
                 n_sources: Callable[[], int], fail: Callable[[BaseException], None]):
        """``out``: where each gated batch goes (blocks while the next stage is behind);
        ``n_sources``: how many sources are registered (a batch takes up to ``batch_size`` each)."""
        self.store = store
        self.cascade = cascade
        self.cfg = cfg
        self._out = out
        self._n_sources = n_sources
        self._fail = fail
        self.queue: queue.Queue = queue.Queue(maxsize=cfg.ingest.queue_frames)
        self.meter = StageMeter("gate", depth=self.queue.qsize, capacity=cfg.ingest.queue_frames)
        self.flush_requested = threading.Event()  # set by flush() when it could not queue WAKE
        self._stop = threading.Event()
        self._fresh: set[str] = set()  # cameras whose reference a gap reset: not reloaded from the store
        self._last_t: dict[int, float | None] = {}  # source -> t_rel of its last gated sample
        self._gated_t: dict[str, float] = {}  # camera -> time of its last gated sample (camera axis)
        # camera -> (source, t_rel of its sample before the one its gates' current hold began with)
        self._hold_floor: dict[str, tuple[int, float | None]] = {}
        self._thread = threading.Thread(target=self._loop, name="vam-gate", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        """After everything queued is gated: ends the thread."""
        self._stop.set()
        stop_thread(self._thread, self.queue)

    # -- the loop --------------------------------------------------------------------------------
    def _take(self) -> list:
        try:
            first = self.queue.get(timeout=self.cfg.store.commit_interval_s)
        except queue.Empty:
            return []
        if first is None:  # stop() woke us
            return []
        if first is WAKE:
            self.flush_requested.set()
            return []
        items = [first]
        limit = self.cfg.ingest.batch_size * max(1, self._n_sources())
        while len(items) < limit and not isinstance(items[-1], SourceGap):  # a batch ends at a gap: no frame crosses it
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                break
            if item is WAKE:
                self.flush_requested.set()
            else:
                items.append(item)
        return items

    def _loop(self) -> None:
        try:
            self.store.db.conn()  # this thread's connection (a few ms), opened before any frame waits for it
            while not self._stop.is_set():
                items = self._take()
                with self.meter.busy():
                    out = self._gate(items)
                self.meter.add(items=out.gated)
                if self.flush_requested.is_set():
                    self.flush_requested.clear()
                    out.flush = True
                self._out(out)  # also when empty: the embed stage commits once per interval
        except BaseException as e:  # noqa: BLE001 - surfaced to every caller through raise_if_failed
            self._fail(e)

    # -- gating a batch ---------------------------------------------------------------------------
    def _gate(self, items: list) -> GatedBatch:
        out = GatedBatch(taken=len(items))
        by_camera: dict[str, list[SampledFrame]] = defaultdict(list)
        for it in items:
            if isinstance(it, SourceEnd):
                out.ends.append(it)  # after all its frames, so it closes after them
            elif isinstance(it, CameraWarm):
                self._last_t[it.source_id] = None  # a source (re)registered: its first sample comes next
                self._load_reference(it.camera_id)
            elif isinstance(it, SourceGap):
                out.gaps.append(it.camera_id)  # at most the batch's last item
            else:
                by_camera[it.frame.camera_id].append(it)
        for cam, cam_items in by_camera.items():
            self._gate_camera(cam, cam_items, out)
        for cam in dict.fromkeys(out.gaps + [e.camera_id for e in out.ends]):
            for r in self.cascade.end(cam):  # the view ended with the stream: its held sample is kept
                self._pass_released(cam, r, out)
        for cam in out.gaps:
            self.cascade.forget([cam])
            self._fresh.add(cam)
        out.gated = sum(len(v) for v in by_camera.values())
        out.gated_t = dict(self._gated_t)
        for cam in self._gated_t:
            it = self.cascade.held_key(cam)
            if it is not None:
                out.held_t[cam] = camera_time(it.frame.t_rel, it.frame.t_abs)
        return out

    def _gate_camera(self, cam: str, cam_items: list[SampledFrame], out: GatedBatch) -> None:
        self._load_reference(cam)
        self._fresh.discard(cam)
        run = self.cascade.gate(cam, [it.frame.gray for it in cam_items],
                                [camera_time(it.frame.t_rel, it.frame.t_abs) for it in cam_items], cam_items)
        kept_before = defaultdict(list)  # frame index -> held samples kept before its decision
        for r in run.released:
            kept_before[r.before].append(r)
        for i, (it, rec) in enumerate(zip(cam_items, run.records)):
            for r in kept_before.pop(i, ()):
                self._pass_released(cam, r, out)
            f, sid = it.frame, it.source_id
            if it is self.cascade.hold_start(cam):  # gated again by a resumed run: see _hold_progress
                self._hold_floor[cam] = (sid, self._last_t.get(sid))
            self._last_t[sid] = f.t_rel
            counts = out.counts.setdefault(sid, SourceCounts())
            counts.sampled += 1
            counts.last_t = f.t_rel
            self._gated_t[cam] = camera_time(f.t_rel, f.t_abs)
            if self.cfg.store.record_samples:
                out.samples.append(GateSample(cam, sid, f.t_rel, rec))
            out.progress[sid] = f.t_rel
            if rec.dropped_by is not None:
                counts.dropped[rec.dropped_by] += 1
                continue
            out.passed.append(GatedFrame(f, sid, rec))
            out.refs[cam] = GateReference(f.t_rel, f.gray, self.cascade.sharpness(cam))
        for rs in kept_before.values():  # kept after the call's last frame
            for r in rs:
                self._pass_released(cam, r, out)
        self._hold_progress(cam, out)

    def _hold_progress(self, cam: str, out: GatedBatch) -> None:
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
        out.progress[sid] = t  # None: held since the source's first sample, nothing is done

    def _pass_released(self, cam: str, r, out: GatedBatch) -> None:
        """A held blurred sample its view kept (the gates' view rule): it passes the gates now
        (it was counted dropped by blur when gated) and becomes the camera's reference."""
        it = r.key
        f = it.frame
        out.counts.setdefault(it.source_id, SourceCounts()).dropped["blur"] -= 1
        if self.cfg.store.record_samples:
            out.samples.append(GateSample(cam, it.source_id, f.t_rel, r.record))
        out.passed.append(GatedFrame(f, it.source_id, r.record))
        out.refs[cam] = GateReference(f.t_rel, f.gray, self.cascade.sharpness(cam))

    def _load_reference(self, cam: str) -> None:
        """The camera's saved gate reference, when the cascade has none in memory and no gap
        reset it (a camera's first frames in this pipeline compare with its last kept frame)."""
        if self.cascade.reference(cam) is None and cam not in self._fresh:
            saved = self.store.sources.camera_ref(cam)
            if saved is not None:
                self.cascade.set_reference(cam, saved.gray, saved.sharpness)
