"""Cameras whose frames the caller pushes (a robot's loop): ``Engine.push`` and ``end_push``.

Each camera is one source (``push:<camera>``) sampled at the configured rate like a file;
a camera pushed again after a restart resumes after its committed progress. The fast path
(a frame the sampler does not take) costs microseconds: nothing is copied or converted.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..config import EngineConfig
from ..errors import FrameError
from ..index import IndexPipeline, SourceReport, sweep_source
from ..ingest import (BufferPool, Frame, TickSampler, check_camera_id, check_pose, gray_and_spare, own_copy,
                      pushed_view)
from ..numerics import finite_time
from ..memory import Store, camera_time


@dataclass
class PushState:
    """One pushed camera: its source row, its sampler and the time of its last frame."""

    source_id: int
    sampler: TickSampler
    last_t: float | None


class PushedCameras:
    """``pipe``: the pipeline (started at the first call); ``pipeline``: the running one or None.
    ``working``: the present, which sees every pushed frame."""

    def __init__(self, store: Store, config: EngineConfig, pipe: Callable[[], IndexPipeline],
                 pipeline: Callable[[], IndexPipeline | None], working):
        self._store = store
        self._config = config
        self._pipe = pipe
        self._pipeline = pipeline
        self._working = working
        self._states: dict[str, PushState] = {}
        self._buffers = BufferPool()  # private copies of sampled pushed frames
        self._lock = threading.Lock()

    def has(self, camera_id: str) -> bool:
        return camera_id in self._states

    def push(self, camera_id: str, frame, t: float, t_abs: float | None = None, pose=None) -> bool:
        """See ``Engine.push``."""
        # a camera pushed before was checked then (only a str can equal a key of _states)
        st = self._states.get(camera_id) if self._pipeline() is not None and type(camera_id) is str else None
        cam = camera_id if st is not None else check_camera_id(camera_id)
        finite_time(t, f"camera {cam!r}: t", error=FrameError)
        if pose is not None:  # checked whether sampled or not: a bad pose is an error every time
            pose = check_pose(pose, cam)
        first = st is None
        if first:
            st = self._state(cam)
        if st.last_t is not None and t <= st.last_t:
            raise FrameError(f"camera {cam!r}: t={t} is not after the previous frame's t={st.last_t}")
        view = pushed_view(cam, frame)
        if first and isinstance(view, np.ndarray):
            # A buffer for the camera's first sampled frame, its page faults (1.5 ms and more
            # for 720p) paid here, on the call that opens the camera's source anyway; the gate
            # thread keeps one ready after that (gray_and_spare).
            self._buffers.reserve(view.shape, view.dtype)
        st.last_t = t
        t = float(t)
        if not st.sampler.accept(t):  # the present sees every pushed frame (it copies what it keeps)
            ct = t if t_abs is None else float(t_abs)  # camera_time, inline: this path is timed in us
            if self._working.wants(cam, ct):
                self._working.observe(cam, ct, view)
            return False  # nothing copied or converted: most frames of a fast loop end here
        # The caller may overwrite its buffer as soon as push returns: copy it; the present's
        # downscaled copy is read from that copy, still in cache; the gray plane is made from it
        # on the gate thread (Frame runs the callable at its first read).
        rgb = own_copy(view, self._buffers)
        self._working.observe(cam, camera_time(t, t_abs), rgb)
        f = Frame(cam, t, t_abs, None, lambda: gray_and_spare(rgb, self._buffers), lambda: rgb, pose)
        self._state(cam)  # (re-)registers the source: the pipeline may have ended it
        self._pipe().put_frame(f, st.source_id)
        return True

    def _state(self, cam: str) -> PushState:
        pipe = self._pipe()  # claims the store before its first write
        with self._lock:
            st = self._states.get(cam)
            if st is None:
                state = self._store.sources.open(cam, f"push:{cam}", "push", self.sampling())
                sampler = TickSampler(self._config.ingest.fps)
                if state.progress_t is not None:
                    sampler.resume_after(state.progress_t)
                    sweep_source(self._store, cam, state.source_id)
                st = PushState(state.source_id, sampler, state.progress_t)
                self._states[cam] = st
        pipe.register(st.source_id, SourceReport(cam, f"push:{cam}", decoder="push"), None)
        return st

    def sampling(self) -> str:
        return f"fps={self._config.ingest.fps:g}"

    def progress(self, camera_id: str) -> float | None:
        """The time up to which the camera's pushed frames are committed (None: nothing yet)."""
        st = self._store.sources.find(camera_id, "push", self.sampling())
        return None if st is None else st.progress_t

    def end(self, camera_id: str) -> None:
        """See ``Engine.end_push``."""
        st = self._states.get(camera_id)
        if st is None:
            raise ValueError(f"camera {camera_id!r} has pushed nothing in this engine")
        self._pipe().end_source(st.source_id)
