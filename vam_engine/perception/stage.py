"""The perception stage: what the indexer hands kept (and present) frames of any cameras to.

``process(frames)`` does the work on the calling thread (tests, benchmarks, offline runs).
``submit(frames)`` queues it for the stage's one worker thread and returns a Future at once: the
queue is bounded (``queue_batches`` submissions); the worker joins waiting submissions of several
cameras into one detector call of up to ``max_batch`` frames. A submission is answered with a
PerceptionBatch: a FramePerception per frame, in the order given, and copies of the tracks and
entities its frames created or changed (for the caller to store).

Per round: the detector on kept frames (present frames too when ``detect_present``): without a
``detect_gate`` one batched call for them all; with one (detgate.py, what the engine builds),
each camera's frames in time order, a step taking the next frame of every camera, and one call
per step for the frames the gate does not carry (whole frames, then changed-region crops, these
through ``region_detector`` when given); an appearance call per step for the new detections
(carried ones keep their rows). Then per kept frame in time order, the text gate (disregarding
where tracked things only moved, ``ocr_ignore_motion``), then OCR where it says so (otherwise
the camera's last lines are carried); then tracking per camera and entity linking. OCR lines whose box lies inside a detection's box (80% of its area)
are strings read on that thing.

With both a detector and OCR, a round's text is read on a second thread while the detector
works (``read_beside_detect``, on by default): each frame as soon as the detection gate's plan
for it is made (the text gate reads the plan, which comes before the detector's call), each
camera's frames in time order as before, so the results are those of reading after detecting.
Both libraries let go of the interpreter lock in their passes, so one round can use two cores
where it used one (the stage's one worker was the limit with cores idle: docs/benchmarks.md).
"""
from __future__ import annotations

import dataclasses
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Sequence

import numpy as np

from ..numerics import finite_time
from .appearance import AppearanceEncoder, crop
from .detect_base import Detector
from .detgate import DetectionGate, DetectPlan, to_frame
from .entities import EntityLinker, LinkParams
from .ocr import OcrReader
from .records import Entity, FramePerception, OcrLine, PerceptionBatch, PerceptionFrame, Track
from .state import CameraPerceptionState, PerceptionState
from .textgate import TextChangeGate, merge_lines, read_box, shift_lines, text_change
from .tracks import CameraTracker, TrackerParams

INSIDE = 0.8  # share of an OCR line's box inside a detection's box for the text to be read on it
_STOP = object()


def _inside(line: OcrLine, box) -> bool:
    lx0, ly0, lx1, ly1 = line.box
    area = max(lx1 - lx0, 0) * max(ly1 - ly0, 0)
    iw = max(0.0, min(lx1, box[2]) - max(lx0, box[0]))
    ih = max(0.0, min(ly1, box[3]) - max(ly0, box[1]))
    return area > 0 and iw * ih >= INSIDE * area


def _copy_track(t: Track, sightings=None) -> Track:
    return dataclasses.replace(t, sightings=list(t.sightings if sightings is None else sightings),
                               texts=list(t.texts))


def _copy_entity(e: Entity) -> Entity:
    return dataclasses.replace(e, track_ids=list(e.track_ids), seen=dict(e.seen), texts=list(e.texts))


def check_items(frames, who: str = "perception") -> list[PerceptionFrame]:
    if isinstance(frames, PerceptionFrame) or not isinstance(frames, (list, tuple)):
        raise ValueError(f"{who}: frames must be a list of PerceptionFrame, got {type(frames).__name__}")
    for i, f in enumerate(frames):
        if not isinstance(f, PerceptionFrame):
            raise ValueError(f"{who}: frames[{i}] must be a PerceptionFrame, got {type(f).__name__}")
        if not isinstance(f.camera_id, str) or not f.camera_id:
            raise ValueError(f"{who}: frames[{i}].camera_id must be a non-empty str, got {f.camera_id!r}")
        finite_time(f.t, f"{who}: frames[{i}].t")
        if f.kind not in ("kept", "present"):
            raise ValueError(f"{who}: frames[{i}].kind must be 'kept' or 'present', got {f.kind!r}")
        a = f.frame
        if not isinstance(a, np.ndarray) or a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != 3 or 0 in a.shape:
            desc = f"{a.dtype} {tuple(a.shape)}" if isinstance(a, np.ndarray) else type(a).__name__
            raise ValueError(f"{who}: frames[{i}].frame must be an H x W x 3 uint8 RGB array, got {desc}")
    return list(frames)


class PerceptionStage:
    """See the module docstring. ``detector`` and ``ocr`` are optional (one at least);
    ``appearance`` defaults to AppearanceEncoder() (the descriptor embedder + colour histogram)."""

    def __init__(self, *, detector: Detector | None = None, ocr: OcrReader | None = None,
                 appearance: AppearanceEncoder | None = None, text_gate: TextChangeGate | None = None,
                 detect_present: bool = False, max_batch: int = 16, queue_batches: int = 8,
                 tracker: TrackerParams | None = None, linker: LinkParams | None = None,
                 detect_gate: DetectionGate | None = None, region_detector: Detector | None = None,
                 ocr_ignore_motion: bool = True, read_beside_detect: bool = True):
        if detector is None and ocr is None:
            raise ValueError("PerceptionStage: give a detector, an OCR reader, or both")
        if int(max_batch) < 1 or int(queue_batches) < 1:
            raise ValueError(f"PerceptionStage: max_batch and queue_batches must be >= 1, got {max_batch}, "
                             f"{queue_batches}")
        if region_detector is not None and (detector is None or tuple(region_detector.labels) != tuple(detector.labels)):
            raise ValueError("PerceptionStage: region_detector needs a detector with the same labels "
                             f"({getattr(region_detector, 'name', region_detector)!r} vs "
                             f"{getattr(detector, 'name', detector)!r})")
        self.detector, self.ocr = detector, ocr
        # None: the detector sees every frame whole (the gate off)
        self.detect_gate = detect_gate if detector is not None else None
        self.region_detector = region_detector
        self.ocr_ignore_motion = bool(ocr_ignore_motion)
        self.read_beside_detect = bool(read_beside_detect)  # False: read after detecting, on one thread
        self._moved: dict[str, list | None] = {}  # camera -> boxes of tracked motion since its last read
        self._last_apps: dict[str, np.ndarray] = {}  # camera -> appearance rows of the gate's last detections
        self.appearance = appearance if appearance is not None or detector is None else AppearanceEncoder()
        self.text_gate = text_gate if text_gate is not None else TextChangeGate()
        self.detect_present = bool(detect_present)
        self.max_batch = int(max_batch)
        self._tracker_params = tracker or TrackerParams()
        self._trackers: dict[str, CameraTracker] = {}
        self._linker = EntityLinker(linker)
        self._lines: dict[str, list[OcrLine]] = {}
        self._next_track = 1
        self._changed_tracks: dict[int, Track] = {}  # since the last snapshot
        self._state = threading.Lock()        # held while a round runs and by snapshots
        self._order = threading.Lock()        # guards _submitted_t
        self._submitted_t: dict[str, float] = {}
        self._processed_t: dict[str, float] = {}  # the last frame time a round took, per camera (_state)
        self._queue: queue.Queue = queue.Queue(maxsize=int(queue_batches))
        self.queue_capacity = int(queue_batches)
        self._worker: threading.Thread | None = None
        self._reader: ThreadPoolExecutor | None = None  # reads text beside the detector (_detect_and_read)
        self._closed = False
        self.stats = {"rounds": 0, "frames": 0, "detected_frames": 0, "detections": 0, "ocr_reads": 0,
                      "ocr_skips": 0, "text_changes": 0, "dropped_submissions": 0,
                      "ocr_region_reads": 0, "ocr_region_px": 0.0,
                      "detect_full": 0, "detect_regions": 0, "detect_carried": 0, "detect_region_px": 0.0,
                      "detect_calls": 0,
                      "detect_s": 0.0, "ocr_s": 0.0, "gate_s": 0.0, "track_s": 0.0,
                      "busy_s": 0.0}  # busy_s: the worker's rounds, all of them

    # -- the work -----------------------------------------------------------------------------------
    def _new_track_id(self) -> int:
        tid = self._next_track
        self._next_track += 1
        return tid

    def _check_order(self, items: list[PerceptionFrame], seen: dict[str, float]) -> None:
        """Each camera's frames must not go back in time (across calls too); updates ``seen``."""
        for f in sorted(items, key=lambda f: f.t):
            last = seen.get(f.camera_id)
            if last is not None and f.t < last:
                raise ValueError(f"perception: camera {f.camera_id!r} frame at t={f.t} comes after one at "
                                 f"t={last}: each camera's frames must be given in time order")
            seen[f.camera_id] = f.t

    def process(self, frames: Sequence[PerceptionFrame], *, snapshot: bool = False) -> PerceptionBatch:
        """Perceive ``frames`` on this thread (see the module docstring); ``snapshot``: the
        batch carries the stage's state right after them (``snapshot()``)."""
        items = check_items(frames)
        with self._order:
            self._check_order(items, self._submitted_t)
        with self._state:
            batch = self._round(items)
            return dataclasses.replace(batch, state=self._snapshot()) if snapshot else batch

    def _detect(self, items, order, planned_cb=None) -> tuple[dict[int, list], dict[int, np.ndarray], dict[int, DetectPlan]]:
        """Detections, their appearance rows and the gate's plan per detected frame index;
        ``planned_cb(i, plan)`` as soon as each frame's plan is made, before its detector call
        (None for a frame not detected)."""
        idx = [i for i in order if items[i].kind == "kept" or self.detect_present] if self.detector else []
        if planned_cb is not None:
            for i in set(order) - set(idx):
                planned_cb(i, None)
        if not idx:
            return {}, {}, {}
        if self.detect_gate is None:
            if planned_cb is not None:  # no plans: the text is read without waiting
                for i in idx:
                    planned_cb(i, None)
            got = self._call(self.detector, [items[i].frame for i in idx])
            self.stats["detect_full"] += len(idx)
            dets = dict(zip(idx, got))
            return dets, self._encode(items, dets, idx), {}
        # each camera's frames in time order; one step takes the next frame of every camera, so
        # one detector call serves the cameras' frames of that step (batched across cameras)
        per_cam: dict[str, list[int]] = {}
        for i in idx:
            per_cam.setdefault(items[i].camera_id, []).append(i)
        dets, apps, plans = {}, {}, {}
        last_apps: dict[str, np.ndarray] = {}
        while per_cam:
            step = [q.pop(0) for q in per_cam.values()]
            per_cam = {c: q for c, q in per_cam.items() if q}
            planned = {}
            for i in step:
                f = items[i]
                planned[i] = self.detect_gate.plan(f.camera_id, f.frame, f.t)
                if planned_cb is not None:  # what the text gate needs of it is known before the call
                    planned_cb(i, planned[i][0])
            full = [i for i in step if planned[i][0].kind == "full"]
            region = [i for i in step if planned[i][0].kind == "region"]
            found = dict(zip(full, self._call(self.detector, [items[i].frame for i in full]))) if full else {}
            if region:
                crops = []
                for i in region:
                    x0, y0, x1, y1 = planned[i][0].box
                    crops.append(np.ascontiguousarray(items[i].frame[y0:y1, x0:x1]))
                    fh, fw = items[i].frame.shape[:2]
                    self.stats["detect_region_px"] += (x1 - x0) * (y1 - y0) / (fh * fw)
                got = self._call(self.region_detector or self.detector, crops)
                for i, g in zip(region, got):
                    found[i] = to_frame(g, planned[i][0].box)
            self.stats["detect_full"] += len(full)
            self.stats["detect_regions"] += len(region)
            self.stats["detect_carried"] += len(step) - len(full) - len(region)
            fresh = self._encode(items, found, list(found))
            for i in step:
                f, (plan, thumb) = items[i], planned[i]
                prev = last_apps.get(f.camera_id, self._last_apps.get(f.camera_id))
                src = list(plan.carried_from)
                if plan.kind == "full" or not src:
                    old = self._no_rows()
                elif prev is not None and len(prev) > max(src):
                    old = prev[src]
                else:  # rows not held (a restored stage): encode the carried boxes afresh
                    old = self._encode(items, {i: list(plan.carried)}, [i]).get(i, self._no_rows())
                new = found.get(i, [])
                dets[i] = list(plan.carried) + list(new) if plan.kind != "full" else list(new)
                apps[i] = np.concatenate([old, fresh[i]]) if new else old
                plans[i] = plan
                last_apps[f.camera_id] = apps[i]
                self.detect_gate.update(f.camera_id, thumb, f.frame.shape[:2], f.t, dets[i], plan.kind == "full")
        self._last_apps.update(last_apps)
        self.stats["detected_frames"] += len(idx)
        self.stats["detections"] += sum(len(d) for d in dets.values())
        return dets, apps, plans

    def _call(self, detector: Detector, frames: list[np.ndarray]) -> list[list]:
        t0 = time.perf_counter()
        got = detector.detect(frames)
        self.stats["detect_s"] += time.perf_counter() - t0
        self.stats["detect_calls"] += 1
        return got

    def _no_rows(self) -> np.ndarray:
        return np.zeros((0, int(getattr(self.appearance, "dim", 0) or 0)), np.float32)

    def _encode(self, items, dets: dict[int, list], idx: list[int]) -> dict[int, np.ndarray]:
        """Appearance rows of every detection of the frames ``idx`` (one encoder call)."""
        crops = [crop(items[i].frame, d.box) for i in idx for d in dets.get(i, ())]
        if not crops:
            return {}
        t0 = time.perf_counter()
        a = self.appearance.encode(crops)
        self.stats["track_s"] += time.perf_counter() - t0
        out, pos = {}, 0
        for i in idx:
            n = len(dets.get(i, ()))
            out[i] = a[pos:pos + n]
            pos += n
        return out

    def _ignored(self, f: PerceptionFrame, plan: DetectPlan | None) -> list:
        """The boxes whose change the text gate disregards for ``f``: where tracked things moved
        since the camera's last read, while every frame since was explained by such motion (a
        thing's motion is not new text; text newly shown on it is not read until something else
        changes or the track's detection refreshes). Updated per frame in time order."""
        cam = f.camera_id
        if not self.ocr_ignore_motion or self.detect_gate is None:
            return []
        if plan is None or not plan.explained:
            self._moved[cam] = None  # something unexplained: nothing disregarded until the next read
        elif self._moved.get(cam, []) is not None:
            self._moved[cam] = self._moved.get(cam, []) + list(plan.moved)
        return list(self._moved.get(cam) or [])

    def _read_text(self, f: PerceptionFrame, plan: DetectPlan | None = None) -> tuple[tuple[OcrLine, ...], bool, object]:
        """(lines, read now, TextChange or None) for one kept frame, in camera time order."""
        if self.ocr is None:
            return (), False, None
        ignore = self._ignored(f, plan) if f.kind == "kept" or self.detect_present else []
        if f.kind != "kept":
            return (), False, None
        t0 = time.perf_counter()
        sig = self.text_gate.signature(f.frame)
        # (``ignore`` only when there is some: a text gate of an older signature still works)
        read = self.text_gate.should_read(f.camera_id, sig, ignore=ignore) if ignore else \
            self.text_gate.should_read(f.camera_id, sig)
        self.stats["gate_s"] += time.perf_counter() - t0
        if not read:
            self.stats["ocr_skips"] += 1
            return tuple(self._lines.get(f.camera_id, ())), False, None
        t0 = time.perf_counter()
        lines = self._ocr_read(f, sig, ignore)
        self._moved[f.camera_id] = []
        self.stats["ocr_s"] += time.perf_counter() - t0
        self.stats["ocr_reads"] += 1
        self.text_gate.mark_read(f.camera_id, sig)
        change = text_change(self._lines.get(f.camera_id), lines)
        self._lines[f.camera_id] = list(lines)
        self.stats["text_changes"] += change is not None
        return tuple(lines), True, change

    def _ocr_read(self, f: PerceptionFrame, sig, ignore=()) -> list[OcrLine]:
        """Read the parts of the frame where text-like cells changed (the camera's other lines
        carried), or the whole frame (a first read, a large change)."""
        last = self._lines.get(f.camera_id)
        parts = self.text_gate.regions(f.camera_id, sig, ignore=ignore or ()) if last is not None else None
        if not parts:
            return self.ocr.read([f.frame])[0]
        hw = f.frame.shape[:2]
        boxes = [read_box(p, last, hw) for p in parts]
        merged = True
        while merged:  # parts grown into each other (a line across both) are read as one
            merged = False
            for j in range(len(boxes)):
                for k in range(j + 1, len(boxes)):
                    a, b = boxes[j], boxes[k]
                    if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                        boxes[j] = read_box((min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])),
                                            last, hw, pad=0.0)
                        del boxes[k]
                        merged = True
                        break
                if merged:
                    break
        got = self.ocr.read([f.frame[y0:y1, x0:x1] for x0, y0, x1, y1 in boxes])
        lines = list(last)
        for (x0, y0, x1, y1), g in zip(boxes, got):
            self.stats["ocr_region_reads"] += 1
            self.stats["ocr_region_px"] += (x1 - x0) * (y1 - y0) / (hw[0] * hw[1])
            lines = merge_lines(lines, (x0, y0, x1, y1), shift_lines(g, x0, y0))
        return lines

    def _round(self, items: list[PerceptionFrame]) -> PerceptionBatch:
        order = sorted(range(len(items)), key=lambda i: items[i].t)
        for i in order:
            self._processed_t[items[i].camera_id] = items[i].t
        if self.detector is not None and self.ocr is not None and self.read_beside_detect:
            dets, apps_of, plans, text = self._detect_and_read(items, order)
        else:
            dets, apps_of, plans = self._detect(items, order)
            text = {i: self._read_text(items[i], plans.get(i)) for i in order}
        t0 = time.perf_counter()
        touched_tracks: dict[int, Track] = {}
        added: dict[int, list] = {}  # track id -> the sightings this round added
        touched_entities: dict[int, Entity] = {}
        track_ids: dict[int, tuple[int, ...]] = {}
        for i in order:
            f, ds = items[i], dets.get(i, [])
            if not ds:
                continue
            tracker = self._trackers.get(f.camera_id)
            if tracker is None:
                tracker = self._trackers[f.camera_id] = CameraTracker(f.camera_id, self._new_track_id,
                                                                      self._tracker_params)
            a = apps_of[i]
            joined = tracker.update(f.t, ds, a, f.key)
            lines, read_now, _ = text[i]
            for k, (tr, new) in enumerate(joined):
                texts = [ln.text for ln in lines if read_now and _inside(ln, ds[k].box)]
                e = self._linker.observe(tr, new, a[k], f.frame, ds[k], f.t, texts)
                touched_tracks[tr.track_id], touched_entities[e.entity_id] = tr, e
                self._changed_tracks[tr.track_id] = tr
                added.setdefault(tr.track_id, []).append(tr.sightings[-1])
            track_ids[i] = tuple(tr.track_id for tr, _ in joined)
        self.stats["track_s"] += time.perf_counter() - t0
        self.stats["rounds"] += 1
        self.stats["frames"] += len(items)
        out = []
        for i, f in enumerate(items):
            lines, read_now, change = text[i]
            out.append(FramePerception(f.camera_id, float(f.t), f.key, f.kind, tuple(dets.get(i, ())),
                                       track_ids.get(i, ()), lines, read_now, change is not None, change))
        tracks = tuple(_copy_track(t, added[t.track_id]) for t in touched_tracks.values())
        return PerceptionBatch(tuple(out), tracks, tuple(_copy_entity(e) for e in touched_entities.values()))

    def _detect_and_read(self, items, order):
        """``_detect`` on this thread, ``_read_text`` of each frame in ``order`` on the reader
        thread as soon as the gate's plan for it is made (module docstring). The reader's state
        (text gate, lines, motion boxes) is touched by it alone meanwhile, the detection gate's
        by this thread alone. One long-lived reader, not a thread a round: a fresh thread's
        allocations took the engine's RSS up by hundreds of MB (bench_capacity)."""
        ready = {i: threading.Event() for i in order}
        plans: dict[int, DetectPlan | None] = {}
        text: dict[int, tuple] = {}
        stop = threading.Event()  # detection failed: read nothing more

        def planned(i, plan):
            plans[i] = plan
            ready[i].set()

        def read_all():
            for i in order:
                ready[i].wait()
                if stop.is_set():
                    return
                text[i] = self._read_text(items[i], plans[i])

        if self._reader is None:
            self._reader = ThreadPoolExecutor(1, thread_name_prefix="perception-ocr")
        reading = self._reader.submit(read_all)
        try:
            dets, apps_of, plan_of = self._detect(items, order, planned)
        except BaseException:
            stop.set()
            for e in ready.values():
                e.set()
            reading.exception()  # the reader has stopped before the round's error goes up
            raise
        reading.result()  # the reader's error, if it failed
        return dets, apps_of, plan_of, text

    def _close_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.shutdown(wait=True)

    # -- the worker ---------------------------------------------------------------------------------
    def submit(self, frames: Sequence[PerceptionFrame], *, block: bool = True,
               timeout: float | None = None, snapshot: bool = False) -> Future | None:
        """Queue ``frames`` for the worker; returns a Future of their PerceptionBatch, or None when
        the queue stayed full (``block=False``, or ``timeout`` passed; counted in
        stats["dropped_submissions"]). Bad frames, or a camera's frames going back in time, raise
        ValueError here, on the caller's thread. ``snapshot``: the batch carries the stage's
        state right after these frames (the worker joins no later submission into their round;
        ``frames`` may be empty)."""
        if self._closed:
            raise RuntimeError("PerceptionStage: submit after close()")
        items = check_items(frames)
        with self._order:
            seen = dict(self._submitted_t)
            self._check_order(items, seen)
            fut: Future = Future()
            try:
                self._queue.put((items, fut, snapshot), block=block, timeout=timeout)
            except queue.Full:
                self.stats["dropped_submissions"] += 1
                return None
            self._submitted_t = seen
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="perception", daemon=True)
                self._worker.start()
        return fut

    def _run(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            if item is _STOP:
                break
            group, n = [item], len(item[0])
            while n < self.max_batch and not group[-1][2]:  # a snapshot ends its round
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                group.append(nxt)
                n += len(nxt[0])
            live = [g for g in group if g[1].set_running_or_notify_cancel()]
            if live:
                self._serve(live)
        self._close_reader()  # here, where no round can be running

    def _serve(self, group: list) -> None:
        """One round for the submissions of ``group``; each gets its part (or the error)."""
        t0 = time.perf_counter()
        try:
            with self._state:
                batch = self._round([f for items, *_ in group for f in items])
                state = self._snapshot() if group[-1][2] else None
        except BaseException as e:  # noqa: BLE001 - handed to every waiting caller
            for _, fut, *_ in group:
                fut.set_exception(e)
            return
        finally:
            self.stats["busy_s"] += time.perf_counter() - t0
        start = 0
        for k, (items, fut, *_) in enumerate(group):
            part = self._part(batch, start, len(items))
            fut.set_result(dataclasses.replace(part, state=state) if k == len(group) - 1 else part)
            start += len(items)

    @staticmethod
    def _part(batch: PerceptionBatch, start: int, n: int) -> PerceptionBatch:
        frames = batch.frames[start:start + n]
        tids = {t for f in frames for t in f.track_ids}
        tracks = tuple(t for t in batch.tracks if t.track_id in tids)
        eids = {t.entity_id for t in tracks}
        return PerceptionBatch(frames, tracks, tuple(e for e in batch.entities if e.entity_id in eids))

    def queued(self) -> int:
        """Submissions waiting for the worker."""
        return self._queue.qsize()

    def close(self, wait: bool = True) -> None:
        """Finish what is queued, then stop the worker."""
        if self._closed:
            return
        self._closed = True
        if self._worker is not None:
            self._queue.put(_STOP)  # the worker closes the reader as it ends
            if wait:
                self._worker.join()
        else:
            self._close_reader()

    def __enter__(self) -> "PerceptionStage":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- saved state (perception/state.py) ---------------------------------------------------------
    @property
    def max_entities(self) -> int:
        """Entities held for linking at most (the rest stay in the caller's tables)."""
        return self._linker.params.max_entities

    def snapshot(self) -> PerceptionState:
        """The state to save between rounds (what changed since the last snapshot, and what a
        resumed stage needs of each camera)."""
        with self._state:
            return self._snapshot()

    def _snapshot(self) -> PerceptionState:
        # what the rounds so far took (never _order: a submit holds it while the queue is full)
        submitted = dict(self._processed_t)
        cams = set(self._trackers) | set(self._lines) | set(submitted)
        cameras = {}
        for cam in sorted(cams):
            tr = self._trackers.get(cam)
            cameras[cam] = CameraPerceptionState(tuple(tr.export()) if tr else (), tr.last_t if tr else None,
                                                 tuple(self._lines.get(cam, ())), cam in self._lines,
                                                 submitted.get(cam))
        tracks = {tid: _copy_track(t, []) for tid, t in self._changed_tracks.items()}
        self._changed_tracks = {}
        return PerceptionState(self._next_track, self._linker.next_id, cameras, tuple(self._linker.export_changes()),
                               tracks)

    def restore(self, state: PerceptionState) -> None:
        """Continue from saved state: ``state.cameras`` as a snapshot gave them, ``entities``
        every entity to hold for linking and ``tracks`` the tracks they are made of. Call it
        before the first frame."""
        with self._state:
            # ids already handed out (rounds processed but not committed when a deletion restores
            # the stage mid-run) are never handed out again: a row or crop would be overwritten
            next_track, next_entity = self._next_track, self._linker.next_id
            tracks = dict(state.tracks)
            self._trackers, self._lines, self._processed_t = {}, {}, {}
            # what the detection gate compared with is not saved: each camera's next frame is
            # detected whole
            self._moved, self._last_apps = {}, {}
            if self.detect_gate is not None:
                for cam in list(self.detect_gate.cameras()):
                    self.detect_gate.forget(cam)
            for cam, cs in state.cameras.items():
                for a in cs.tracks:
                    tracks[a.track.track_id] = a.track  # one object for tracker and linker
                if cs.tracks or cs.tracker_t is not None:
                    tr = self._trackers[cam] = CameraTracker(cam, self._new_track_id, self._tracker_params)
                    tr.load(cs.tracker_t, list(cs.tracks))
                if cs.lines_read:
                    self._lines[cam] = list(cs.lines)
                if cs.submitted_t is not None:
                    self._processed_t[cam] = cs.submitted_t
            self._linker.load(list(state.entities), tracks, max(int(state.next_entity), next_entity))
            self._next_track = max([int(state.next_track), next_track, *(t + 1 for t in tracks)])
            for cam in list(self.text_gate.cameras()):  # a camera whose lines were not restored reads afresh
                if cam not in self._lines:
                    self.text_gate.forget(cam)
            self._changed_tracks = {}
            processed = dict(self._processed_t)
        with self._order:
            self._submitted_t = processed

    # -- snapshots ----------------------------------------------------------------------------------
    def tracks(self, camera_id: str | None = None) -> list[Track]:
        """Copies of the active tracks (of one camera, or all), with their recent sightings."""
        with self._state:
            return [_copy_track(t) for cam, tr in self._trackers.items() if camera_id in (None, cam)
                    for t in tr.active]

    def entities(self) -> list[Entity]:
        """Copies of the entities held for linking."""
        with self._state:
            return [_copy_entity(e) for e in self._linker.entities.values()]

    def forget_camera(self, camera_id: str) -> None:
        """Drop a camera's tracks in progress and text state (a removed camera, a gap in its
        stream): its next frame starts afresh. Its entities stay for linking."""
        with self._state:
            self._forget(camera_id)
        with self._order:
            self._submitted_t.pop(camera_id, None)

    def _forget(self, camera_id: str) -> None:
        self._processed_t.pop(camera_id, None)
        self._moved.pop(camera_id, None)
        self._last_apps.pop(camera_id, None)
        if self.detect_gate is not None:
            self.detect_gate.forget(camera_id)
        self._trackers.pop(camera_id, None)
        self._lines.pop(camera_id, None)
        self.text_gate.forget(camera_id)
