"""The engine's monitors: the durable rows (memory/monitors.py), the worker that checks them
(reason/monitor.py) and the hub alerts are delivered through; ``StoreFollower`` feeds the
present from a store another process indexes (``vam-engine watch`` without sources).

When the worker runs: from ``watch``, and from the first ingest call (``index_file(s)``,
``push``, a live camera) of an engine whose store holds active monitors, so monitors survive a
restart. It needs the model; without one, ``watch`` is an error and a store's monitors wait.

Monitor and alert rows are the one write an engine makes without the store's writer lock: a
``vam-engine watch`` may watch a store another process indexes (SQLite serializes the writes;
the moments an alert protects are re-checked by retention in its own transaction).
"""
from __future__ import annotations

import logging
import os
import threading

import numpy as np

from ..config import EngineConfig
from ..errors import VamError
from ..llm import Image
from ..memory import Alert, Monitor, MonitorLimit, MonitorSpec, Store, check_spec
from ..reason import AlertHub, AlertSubscription, MonitorStats, MonitorWorker
from .models import EngineModels

log = logging.getLogger(__name__)
MAX_REFERENCE_IMAGES = 8


def reference_arrays(images) -> list[np.ndarray]:
    """``images``: None, or a list of H x W x 3 uint8 arrays and image file paths."""
    if images is None:
        return []
    if isinstance(images, (str, os.PathLike, np.ndarray)):
        images = [images]
    images = list(images)
    if len(images) > MAX_REFERENCE_IMAGES:
        raise ValueError(f"watch: at most {MAX_REFERENCE_IMAGES} reference images, got {len(images)}")
    out = []
    for k, img in enumerate(images):
        if isinstance(img, np.ndarray):
            if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8 or min(img.shape[:2]) < 1:
                raise ValueError(f"watch: reference image {k} must be an H x W x 3 uint8 array, got "
                                 f"{img.dtype} {img.shape}")
            out.append(img)
            continue
        if not isinstance(img, (str, os.PathLike)):
            raise ValueError(f"watch: reference image {k} must be an array or a file path, got {type(img).__name__}")
        try:
            out.append(Image(os.fspath(img)).array())
        except (OSError, ValueError) as e:
            raise ValueError(f"watch: reference image {k} ({img}): cannot read it as an image ({e})") from None
    return out


class EngineMonitors:
    """The monitors of one engine: ``watch`` adds a durable row and gives it to the worker, which
    judges each due check with the model (built at the first monitor) over the present."""

    def __init__(self, store: Store, config: EngineConfig, working, models: EngineModels, embedder):
        self.repo = store.monitors
        self._config = config.monitors
        self._working = working
        self._models = models
        self._embedder = embedder
        self.hub = AlertHub()
        self.worker: MonitorWorker | None = None
        self._lock = threading.RLock()
        self._resumed = False

    def watch(self, spec: MonitorSpec, images=None, *, bind=None) -> Monitor:
        """Store and start a monitor. ``bind(monitor)``: called once its row exists and before
        any check can fire it (a session binds its standing request there); when it raises, the
        monitor is ended and the error raised."""
        spec = check_spec(spec)
        refs = reference_arrays(images)
        if self._models.name is None:
            raise VamError("watch needs an LLM to judge its checks: set llm.backend, --llm, or pass llm=...")
        cap = self._config.max_active
        worker = self.start()  # first: a model that cannot load leaves no active row behind
        with self._lock:
            active = self.repo.count_active()
            if active >= cap:
                raise MonitorLimit(f"watch: {active} monitors are active, at most {cap} (monitors.max_active); "
                                   "unwatch one first")
            monitor = self.repo.add(spec, refs)
            if bind is not None:
                try:
                    bind(monitor)
                except BaseException:
                    self.repo.end(monitor.monitor_id)
                    raise
        worker.add(monitor)
        return monitor

    def list(self, include_ended: bool = False) -> list[Monitor]:
        """The monitors, never one between its row and its binding (``watch``'s ``bind``): a
        session's standing request is listed only once it is known to be the session's."""
        with self._lock:
            return self.repo.list(include_ended)

    def unwatch(self, monitor_id: str) -> bool:
        ended = self.repo.end(monitor_id)
        if self.worker is not None:
            self.worker.remove(monitor_id)
        return ended

    def start(self) -> MonitorWorker:
        """The worker (started with the store's active monitors)."""
        with self._lock:
            if self.worker is None:
                cfg = self._config
                self.worker = MonitorWorker(self.repo, self._working, self._models.llm, on_alert=self.hub.publish,
                                            workers=cfg.workers, max_pending=cfg.max_pending,
                                            change_min_tile_mad=cfg.change_min_tile_mad,
                                            vigilance=cfg.vigilance, embedder=self._embedder)
            return self.worker

    def resume(self) -> None:
        """Ingest is starting: run the store's active monitors (a restart keeps watching). Asked
        once per engine (every push would otherwise count the monitors)."""
        if self._resumed:
            return
        self._resumed = True
        if self.worker is None and self._models.name is not None and self.repo.count_active():
            self.start()

    def forget_deleted(self) -> None:
        """After a deletion: monitors that went with their cameras stop checking."""
        if self.worker is not None:
            alive = {m.monitor_id for m in self.repo.list()}
            for m in self.worker.active():
                if m.monitor_id not in alive:
                    self.worker.remove(m.monitor_id)

    def subscribe(self, callback=None) -> AlertSubscription:
        return self.hub.subscribe(callback)

    def alerts(self, since=None, monitor_id=None, camera=None) -> list[Alert]:
        return self.repo.alerts(since, monitor_id, camera)

    def stats(self) -> MonitorStats:
        return self.worker.stats if self.worker is not None else MonitorStats()

    def drain(self, timeout: float | None = None) -> bool:
        return self.worker is None or self.worker.drain(timeout)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()


class StoreFollower:
    """Feeds the present from moments another process commits to the store (``vam-engine watch``
    without sources): every ``interval_s`` the moments newer than the last one seen per camera
    are read back from their JPEGs. Their rate is the index rate, not 2 fps: a monitor sees what
    the writer keeps. History committed before it starts is not replayed (monitors watch what
    comes next)."""

    def __init__(self, store: Store, working, interval_s: float = 0.5):
        self._moments = store.moments
        self._working = working
        self.interval_s = interval_s
        repo = store.moments
        self._seen: dict[str, float] = {c: t for c in repo.cameras() if (t := repo.latest_time(c)) is not None}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> int:
        """One pass; returns the frames fed."""
        fed = 0
        repo = self._moments
        for cam in repo.cameras():
            after = self._seen.get(cam)
            for m in repo.list(cam, t0=after):
                if after is not None and m.t <= after:
                    continue
                try:
                    rgb = Image(m.frame_path).array()
                except OSError:  # thinned or deleted since the list: the next one will do
                    continue
                self._working.observe(cam, m.t, rgb)
                self._seen[cam] = m.t
                fed += 1
        return fed

    def start(self) -> "StoreFollower":
        def run():
            while not self._stop.wait(self.interval_s):
                try:
                    self.poll()
                except Exception:  # a store busy with a long write: try again next time
                    log.exception("following the store failed")
        self._thread = threading.Thread(target=run, name="vam-follow", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
