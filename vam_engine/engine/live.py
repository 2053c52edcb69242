"""Live cameras on an Engine: add and remove them at run time, their status, their gaps, and
applying a cameras file (a reload diffs it against what runs).

Each camera is one ``LiveCamera`` thread (ingest/live.py) feeding the engine's one pipeline
through a ``_Feed``: samples are offered without waiting long (a camera never waits for another
one's backlog: a sample the gates cannot take within its interval is dropped and counted), a
loss of video is a durable gap row (memory/gaps.py) plus a gap marker in the pipeline after the
camera's frames so far (the held frame and the open event close, the gate's reference resets),
and removal ends the camera's source after its last queued frame. Each run of a camera is one
source row, whose ``t_rel`` continues across reconnections (its moments never collide); its
epoch (``t_abs`` at ``t_rel`` 0) is kept in the source's info, so the next run of the camera
records the time between the runs (engine stopped or killed, camera removed) as a gap too.
The cameras file's monitors become ``repeat`` monitors of their camera (``_monitor_plan``).
With the audio path on (engine/audio.py), each camera's reader also demuxes its audio track and
hands it to the audio hub; the camera's status carries its audio state (``CameraStatus.audio``).
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from ..config import EngineConfig, GateConfig
from ..index import IndexPipeline, SourceReport
from ..ingest import (CameraDiff, CameraSpec, CameraStatus, LiveCamera, LiveSpec, check_gate, diff_cameras,
                      load_cameras, make_pose_source, pose_at)
from ..urls import redact
from ..memory import Gap, GapRepository, MonitorSpec, Store
from .audio import EngineAudio
from .monitors import EngineMonitors
from .pushed import PushedCameras


class _Feed:
    """A camera's sink into the pipeline (see LiveSink). ``close`` stops it taking anything: after
    it, the camera's thread may still be blocked in a read, but whatever it yields is ignored."""

    def __init__(self, live: "LiveCameras", pipe, camera_id: str, source_id: int, spec: LiveSpec):
        self.live = live
        self.pipe = pipe
        self.camera_id = camera_id
        self.source_id = source_id
        self.spec = spec
        self.lock = threading.Lock()
        self.closed = False
        self.done = False  # its source ended (a file's end, gave up, removed)
        self.gap_id: int | None = None
        self.stale: list[int] = []  # gaps an earlier process left open: this run's first sample ends them
        self.prev_end: float | None = None  # camera axis: the last sample the camera's previous run committed
        self.prev_killed = False  # that run's process died before ending it (killed engine, restarted shard)
        self.first = True
        self.opening_gap = False  # this run's first sample recorded the time without video before it
        self.timeout = min(0.5, 1.0 / spec.fps)  # the longest a sample waits for room in the queue
        self.poses = None  # the camera's pose source (ingest/poses.py), when it has one

    def frame(self, frame) -> bool:
        with self.lock:
            if self.closed or self.done:
                return False
            if self.first:
                self._first(frame)
            if self.poses is not None:  # where the camera was at this sample (never raises)
                frame.pose = pose_at(self.poses, frame.t_abs if frame.t_abs is not None else frame.t_rel)
            return self.pipe.offer_frame(frame, self.source_id, self.timeout)

    def _first(self, frame) -> None:
        """This run's first sample: record its epoch (t_abs at t_rel 0: a later run finds where
        this one stopped), and end the time without video since the camera's previous run."""
        self.first = False
        self.live.store.sources.update_info(self.source_id, epoch=frame.t_abs - frame.t_rel)
        for i in self.stale:  # an outage a killed process left open: it ends here
            self.live.gaps_repo.close(i, frame.t_abs, "frame")
            self.opening_gap = True
        # Between two clean runs (a reload) up to two sample intervals are no gap; after a killed
        # run any time is: its process lost what it had not committed, and a restarted shard comes
        # back within a second or two, under 2/fps at the default 0.5 fps.
        late = self.prev_end is not None and (self.prev_killed or frame.t_abs - self.prev_end > 2.0 / self.spec.fps)
        if not self.stale and late:
            self.live.gaps_repo.add_closed(self.camera_id, self.source_id, self.prev_end, frame.t_abs,
                                           "not watched: no run of this live camera (the engine was stopped or "
                                           "killed, or the camera removed)")
            self.opening_gap = True
        self.stale = []

    def gap(self, t_start: float, reason: str) -> None:
        with self.lock:
            if self.closed or self.done:
                return
            self.gap_id = self.live.gaps_repo.open(self.camera_id, self.source_id, t_start, reason)
            self.pipe.gap(self.source_id)

    def resumed(self, t_end: float) -> None:
        with self.lock:
            if self.gap_id is not None and not self.closed:
                self.live.gaps_repo.close(self.gap_id, t_end, "frame")
                self.gap_id = None

    def ended(self, error: str | None) -> None:
        with self.lock:
            if self.closed or self.done:
                return
            self._end("gave_up")

    def close(self, ended_by: str = "removed") -> None:
        """Stop taking frames; end the source after what is queued (its held frame is decided)."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            if not self.done:
                self._end(ended_by)

    def _end(self, ended_by: str) -> None:
        """The source ends (done: its gap marker already decided what was held at a loss)."""
        self.done = True
        if self.gap_id is not None:
            self.live.gaps_repo.close(self.gap_id, None, ended_by)  # no frame came back: its end is unknown
            self.gap_id = None
        self.pipe.end_source(self.source_id)


class _Running:
    def __init__(self, spec: CameraSpec, camera: LiveCamera, feed: _Feed, report: SourceReport, src):
        self.spec = spec
        self.camera = camera
        self.feed = feed
        self.report = report
        self.src = src  # the pipeline's book-keeping (its last gated time gives the lag)


class LiveCameras:
    """The live cameras of one engine (``Engine.add_camera`` and friends delegate here).
    ``pipe``: the pipeline (started at the first camera); ``cascade``: the gates (per-camera
    overrides); ``pushed``: ids fed by push cannot be live too; ``monitors``: a cameras file's
    monitors; ``has_model``: monitors need one."""

    def __init__(self, store: Store, config: EngineConfig, pipe: Callable[[], IndexPipeline], cascade,
                 pushed: PushedCameras, monitors: EngineMonitors, has_model: bool, audio: EngineAudio | None = None):
        self.store = store
        self._audio = audio
        self._config = config
        self._pipe = pipe
        self._cascade = cascade
        self._pushed = pushed
        self._monitors = monitors
        self._has_model = has_model
        self.gaps_repo = GapRepository(store.db)
        self._cams: dict[str, _Running] = {}
        self._lock = threading.RLock()
        self._from_file: set[str] = set()  # cameras the last applied specs (a cameras file) named
        self._ran: set[int] = set()  # source ids of the runs this process started

    def specs(self) -> list[CameraSpec]:
        with self._lock:
            return [r.spec for r in self._cams.values()]

    # -- adding and removing ---------------------------------------------------------------------
    def add(self, spec: CameraSpec, pose=None) -> CameraStatus:
        """``pose``: the camera's pose source (a callable or a JSON-lines file: ingest/poses.py)."""
        live_spec = spec.live_spec(self._config.ingest.fps)  # validated before anything starts
        gate = check_gate(spec.camera_id, spec.gate, self._config.gate)
        poses = make_pose_source(pose, spec.camera_id)
        with self._lock:
            if spec.camera_id in self._cams:
                raise ValueError(f"camera {spec.camera_id!r} is already running (remove_camera it first, or "
                                 f"reload the cameras file to change it)")
            if self._pushed.has(spec.camera_id):
                raise ValueError(f"camera {spec.camera_id!r} is fed by push() in this engine: a live camera "
                                 f"needs its own id")
            pipe = self._pipe()  # claims the store, starts the writer and the pipeline
            cam = spec.camera_id
            self._set_gate(cam, gate)
            url = redact(spec.url)
            sampling = f"fps={live_spec.fps:g},live"
            prev_end, prev_killed = self._previous_end(cam)
            state = self.store.sources.open(cam, url, f"live:{url}@{time.time():.6f}", sampling,
                                           info={"kind": live_spec.kind, "realtime": live_spec.realtime})
            report = SourceReport(cam, url, decoder="pyav-live")
            src = pipe.register(state.source_id, report, None)
            # A run starts after a time without video (or none before): the gates' reference resets,
            # and what an earlier run of the camera left held or open closes.
            pipe.gap(state.source_id)
            feed = _Feed(self, pipe, cam, state.source_id, live_spec)
            feed.poses = poses
            camera = LiveCamera(live_spec, feed, present=pipe.present.decoded,  # without its fps: the gated frames
                                present_fps=pipe.present.fps, audio=self._audio.live(cam) if self._audio is not None else None)
            src.decoder = camera  # the pipeline's progress reads its DecodeStats
            running = _Running(spec, camera, feed, report, src)
            self._cams[cam] = running
            # An outage of an earlier process (a gap it left open) ends with this run's first sample.
            feed.stale = [g.gap_id for g in self.gaps_repo.list(cam) if g.open]
            feed.prev_end, feed.prev_killed = prev_end, prev_killed
            self._ran.add(state.source_id)
            camera.start()
            return self._status(running)

    def _previous_end(self, cam: str) -> tuple[float | None, bool]:
        """Camera axis of the last sample the camera's previous live run committed (None: none),
        and whether that run was killed: not ended, nor run by this process (whose removal of it
        may still be queued)."""
        sources = self.store.sources
        prev = sources.latest(cam, ",live")
        if prev is None or prev.progress_t is None:
            return None, False
        epoch = sources.info(prev.source_id).get("epoch")
        killed = not prev.done and prev.source_id not in self._ran
        return (None, False) if epoch is None else (epoch + prev.progress_t, killed)

    def _set_gate(self, cam: str, gate: dict) -> None:
        if gate:
            self._cascade.camera_cfg[cam] = GateConfig(**{**self._config.gate.model_dump(), **gate})
        else:
            self._cascade.camera_cfg.pop(cam, None)

    def remove(self, camera_id: str, *, ended_by: str = "removed") -> None:
        with self._lock:
            running = self._cams.pop(camera_id, None)
        if running is None:
            raise ValueError(f"no live camera {camera_id!r} (running: {sorted(self._cams) or 'none'})")
        running.camera.stop()
        running.feed.close(ended_by)
        self._cascade.camera_cfg.pop(camera_id, None)
        if self._audio is not None:
            self._audio.end(camera_id)  # speech in progress is transcribed

    def close(self) -> None:
        """Stop every camera (the engine is closing); their sources end after what is queued."""
        with self._lock:
            running = list(self._cams.values())
        for r in running:
            self.remove(r.spec.camera_id, ended_by="closed")
        deadline = time.monotonic() + 1.0  # readers end at once unless blocked in a read (then: its timeout)
        for r in running:
            r.camera.join(max(0.0, deadline - time.monotonic()))

    # -- the cameras file ------------------------------------------------------------------------
    def apply(self, specs: list[CameraSpec]) -> CameraDiff:
        """Make the running cameras match ``specs``: remove those gone, restart those whose reading
        changed, add the new ones; a camera whose monitors alone changed keeps running. Every spec
        is validated before anything changes, the monitor cap included; then each camera's monitors
        (``_monitor_plan``)."""
        ids = [s.camera_id for s in specs]
        if len(set(ids)) != len(ids):
            raise ValueError(f"camera ids must be unique, got {ids}")
        for s in specs:
            s.live_spec(self._config.ingest.fps)
            check_gate(s.camera_id, s.gate, self._config.gate)
            if s.monitors and not self._has_model:
                raise ValueError(f"camera {s.camera_id!r}: monitors need an LLM to judge them (set llm.backend, "
                                 f"--llm, or pass llm=...)")
        with self._lock:
            # the file's cameras only: one added through add_camera (the HTTP API) is not the
            # file's to remove; the file naming it takes it over
            old = [s for s in self.specs() if s.camera_id in self._from_file or s.camera_id in set(ids)]
            end, start = self._monitor_plan(old, specs)
            cap = self._config.monitors.max_active
            if end or start:
                active = self._monitors.repo.count_active()
                if active - len(end) + len(start) > cap:  # checked before anything changes
                    raise ValueError(f"the cameras file's monitors would make {active - len(end) + len(start)} "
                                     f"active, at most {cap} (monitors.max_active)")
            diff = diff_cameras(old, specs)
            by_id = {s.camera_id: s for s in specs}
            for cam in diff.removed + diff.changed:
                self.remove(cam)
            for cam in diff.changed + diff.added:
                self.add(by_id[cam])
            for cam in diff.monitors_changed:
                self._cams[cam].spec = by_id[cam]
            for monitor_id in end:
                self._monitors.unwatch(monitor_id)
            for cam, condition in start:
                self._monitors.watch(MonitorSpec(condition, (cam,), "repeat"))
            self._from_file = set(ids)
        return diff

    def _monitor_plan(self, old: list[CameraSpec], new: list[CameraSpec]) -> tuple[list[str], list[tuple]]:
        """The cameras file's monitors: each condition of a camera is one ``repeat`` monitor on that
        camera alone. One already active (persisted by an earlier run) is kept, not duplicated; a
        condition gone from the file ends its monitor. Returns (monitor ids to end, (camera,
        condition) to watch)."""
        if not any(s.monitors for s in old + new):
            return [], []
        before = {(s.camera_id, m) for s in old for m in s.monitors}
        wanted = {(s.camera_id, m) for s in new for m in s.monitors}
        active = {}
        for m in self._monitors.repo.list():
            if m.cameras is not None and len(m.cameras) == 1 and m.mode == "repeat":
                active.setdefault((m.cameras[0], m.condition), m.monitor_id)
        return [active[k] for k in sorted(before - wanted) if k in active], sorted(wanted - set(active))

    def reload(self, path) -> CameraDiff:
        """Read the cameras file again and apply it (see ``apply``); an invalid file changes nothing."""
        return self.apply(load_cameras(path))

    # -- reading ----------------------------------------------------------------------------------
    def status(self, camera_id: str | None = None) -> list[CameraStatus]:
        with self._lock:
            running = list(self._cams.values()) if camera_id is None else (
                [self._cams[camera_id]] if camera_id in self._cams else [])
        if camera_id is not None and not running:
            raise ValueError(f"no live camera {camera_id!r}")
        return [self._status(r) for r in running]

    def _status(self, r: _Running) -> CameraStatus:
        st = r.camera.status()
        st.frames_kept = r.report.kept
        # The time without video before this run (the engine, or a cluster's shard, was killed or
        # stopped) is a gap of this run too: a resumed camera's status shows it (its gap row is in gaps()).
        st.gaps += int(r.feed.opening_gap)
        if self._audio is not None and self._audio.active:
            st.audio = self._audio.summary(r.spec.camera_id) or {"state": "starting"}
        if st.state in ("online", "stalled") and st.last_frame_t is not None:
            # Behind live: the last frame's age when the gates have every sample it sent, else
            # the age of the last sample they have gated (its backlog waits in the queue).
            gated, sent = r.src.last_t, r.camera.last_sent
            behind = sent is not None and (gated is None or gated < sent)
            t = (r.camera.t_abs(gated) if gated is not None else None) if behind else st.last_frame_t
            if t is not None:
                st.lag_s = max(0.0, time.time() - t)
        return st

    def gaps(self, camera_id: str | None = None, t0: float | None = None, t1: float | None = None) -> list[Gap]:
        return self.gaps_repo.list(camera_id, t0, t1)
