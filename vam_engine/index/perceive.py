"""The pipeline's perception feed: kept frames (and, with ``detect_present``, the present's
frames) go to the perception stage's worker, never perceived on the gate thread, and what it
found comes back to the commit thread, to be committed with the moments.

- Kept frames are collected as the semantic stage decides them (``kept``) and submitted once
  per gated batch (``submit``: every camera's kept frames in one submission, so the worker
  batches them across cameras into one detector call).
- Present frames (``present``, from the decode threads) wait per camera until no undecided
  frame of that camera is older: the stage takes each camera's frames in time order, and a
  frame the online committer still holds may be kept later. Older ones than the camera's last
  submitted frame are dropped; at most ``present_backlog`` wait per camera.
- At each hand-over to the commit thread, ``snapshot`` asks for the stage's state after
  everything submitted so far; the commit thread (``resolve``) waits for the unit's results and
  its snapshot, marks a kept frame whose text changed as the start of an event (a change of the
  text on screen is an event boundary like a change of the picture), and attaches a
  ``PerceptionCommit`` to the batch.

A round that fails mid-stream (the model broke after it loaded) leaves that unit's moments
without perception and counts the error (``stats``); indexing goes on. A detector that cannot
load fails when the engine builds the stage, before any frame.
"""
from __future__ import annotations

import threading
from collections import defaultdict, deque
from concurrent.futures import Future

import numpy as np

from ..memory import CommitBatch, PerceptionCommit, Store
from ..perception import PerceptionFrame, PerceptionStage, PerceptionState
from .meter import StageStatus


class PerceptionFeed:
    def __init__(self, stage: PerceptionStage, store: Store, *, present_backlog: int = 64):
        self.stage = stage
        self.store = store
        self.ocr = stage.ocr is not None
        self.detect_present = bool(stage.detect_present and stage.detector is not None)
        self._kept: list[PerceptionFrame] = []  # gate thread only
        self._present: dict[str, deque] = defaultdict(lambda: deque(maxlen=int(present_backlog)))
        self._lock = threading.Lock()  # the present's frames come from the decode threads
        self._submitted: dict[str, float] = {}
        self.stats = {"submissions": 0, "kept_frames": 0, "present_frames": 0, "present_dropped": 0,
                      "failed_rounds": 0}
        self.last_error: str | None = None

    def restore(self) -> None:
        """Load the stage's saved state from the store (a resumed run, a later run, the store
        after a deletion): tracks, entities and text go on where the committed rows left them."""
        state = self.store.entities.stage_state(self.stage.max_entities)
        # nothing saved (a store without perception yet, or all of it deleted): a fresh stage
        self.stage.restore(state if state is not None else PerceptionState(1, 1))
        with self._lock:
            self._submitted = {cam: cs.submitted_t for cam, cs in (state.cameras.items() if state else ())
                               if cs.submitted_t is not None}
            self._present.clear()

    # -- in -----------------------------------------------------------------------------------
    def kept(self, camera_id: str, t: float, rgb, key) -> None:
        """A kept frame (``rgb`` an array, or a callable reading it back from its file)."""
        frame = rgb() if callable(rgb) else rgb
        self._kept.append(PerceptionFrame(camera_id, float(t), np.ascontiguousarray(frame), key=key, kind="kept"))

    def present(self, camera_id: str, t: float, rgb: np.ndarray) -> None:
        """A frame of the present (decode thread): detected between kept frames."""
        if not self.detect_present:
            return
        with self._lock:
            last = self._submitted.get(camera_id)
            if last is not None and t <= last:
                self.stats["present_dropped"] += 1
                return
            q = self._present[camera_id]
            if len(q) == q.maxlen:
                self.stats["present_dropped"] += 1
            q.append(PerceptionFrame(camera_id, float(t), rgb, kind="present"))

    def _due(self, bounds: dict[str, float]) -> list[PerceptionFrame]:
        """Kept frames collected so far, and the present's frames older than each camera's
        earliest undecided frame (``bounds``: camera -> the time of the frame its online
        committer holds, else of its last gated sample: later kept frames come after it)."""
        frames, self._kept = self._kept, []
        with self._lock:
            for cam, q in self._present.items():
                bound = bounds.get(cam)
                while bound is not None and q and q[0].t < bound:
                    frames.append(q.popleft())
            for f in frames:
                self._submitted[f.camera_id] = max(self._submitted.get(f.camera_id, f.t), f.t)
        kept = sum(f.kind == "kept" for f in frames)
        self.stats["kept_frames"] += kept
        self.stats["present_frames"] += len(frames) - kept
        return frames

    def submit(self, bounds: dict[str, float]) -> list[Future]:
        """Hand what is due to the stage's worker (after a gated batch); the futures go with
        the commit unit."""
        frames = self._due(bounds)
        if not frames:
            return []
        self.stats["submissions"] += 1
        return [self.stage.submit(frames)]

    def snapshot(self, bounds: dict[str, float]) -> Future:
        """What is due, and the stage's state right after it (at a hand-over)."""
        self.stats["submissions"] += 1
        return self.stage.submit(self._due(bounds), snapshot=True)

    # -- out (the commit thread) ---------------------------------------------------------------
    def resolve(self, futures: list[Future], batch: CommitBatch) -> None:
        """Wait for a unit's results; text changes become event starts; the results ride with
        the batch into its transaction."""
        frames, state = [], None
        for fut in futures:
            try:
                got = fut.result()
            except Exception as e:  # noqa: BLE001 - this unit goes without perception (module doc)
                self.stats["failed_rounds"] += 1
                self.last_error = f"{type(e).__name__}: {e}"
                continue
            frames += [fp for fp in got.frames if fp.kind == "kept"]
            if got.state is not None:
                state = got.state
        if not frames and state is None:
            return
        changed = {tuple(fp.key) for fp in frames if fp.text_changed}
        for m in batch.moments:
            if (m.source_id, m.t_rel) in changed:
                m.event_start = True
        batch.perception = PerceptionCommit(frames, state, self.ocr)

    def stage_status(self) -> StageStatus:
        """The perception worker as a pipeline stage (index/meter.py): its rounds' time, the
        submissions waiting, what was dropped (present frames past their backlog, submissions
        refused)."""
        st = self.stage.stats
        return StageStatus("perceive", 1, st["busy_s"], st["rounds"], self.stage.queued(), self.stage.queue_capacity,
                           self.stats["present_dropped"] + st["dropped_submissions"])

    def close(self) -> None:
        self.stage.close()
