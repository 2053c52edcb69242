"""A shard: one Ray actor owning one Engine over its own store directory ``<root>/<name>``.

It ingests the cameras placed on it (live sources, pushed frames the router forwards), runs
their monitors and their document writer, and answers the router's fan-out reads with its
local ids (the router turns them into cluster ids: catalogue.py). Ray restarts a shard whose
process dies (``max_restarts=-1``): the constructor runs again, reopens the store (the
writer's flock died with the old process) and re-adds the live cameras it was running (their
specs are kept in ``<store>/shard_cameras.json``); pushed frames not yet committed when it
died are lost, as they would be for one engine, and the pushing side resumes after the last
committed time (the engine's push sampler resumes from the source's progress). Calls made
while it restarts fail (``max_task_retries=0``: a push is never applied twice) and the router
reports the shard's cameras as missing.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

from .fanout import ShardLists, shard_evidence, shard_lists

ACTOR_PREFIX = "vam-shard-"
NAMESPACE = "vam_engine"
LIVE_SPECS = "shard_cameras.json"
log = logging.getLogger(__name__)
_VIEW_READS = frozenset({"camera_ids", "latest_time", "frames", "moments_by_id", "summaries", "forest_roots",
                         "forest_retrieve", "provisional_nodes", "event_memory", "rank_provisional", "summarize",
                         "transcripts", "camera_signals"})


@dataclass(frozen=True)
class ShardStatus:
    name: str
    store_dir: str
    node_id: str | None
    pid: int
    started_at: float       # wall clock of this incarnation's start
    restarted: bool         # this incarnation is a restart by Ray (the previous one died)
    cameras: tuple[str, ...]  # cameras with moments in its store
    moments: int
    live: tuple[str, ...]    # live cameras it runs


class Shard:
    """The actor's body (``shard_actor_class()`` wraps it for Ray). ``llm_factory``: a picklable
    callable returning the shard's model (None: the config's ``llm`` section, e.g. an
    OpenAI-compatible server on this node)."""

    def __init__(self, name: str, root: str, config: dict | None = None, llm_factory=None, device: str | None = None):
        from ..engine import Engine
        from ..server import LocalBackend

        self.name = name
        self.store_dir = Path(root) / name
        self.store_dir.mkdir(parents=True, exist_ok=True)
        llm = llm_factory() if llm_factory is not None else None
        self.engine = Engine(self.store_dir, config, device=device, llm=llm)
        self._backend = LocalBackend(self.engine)
        self.started_at = time.time()
        self.restarted = _was_reconstructed()
        self._resume_live()

    # -- health --------------------------------------------------------------------------
    def status(self) -> ShardStatus:
        st = self.engine.store
        live = tuple(s.camera_id for s in self.engine.status())
        return ShardStatus(self.name, str(self.store_dir), _node_id(), os.getpid(), self.started_at, self.restarted,
                           tuple(st.moments.cameras()), st.info().get("moments", 0), live)

    def pid(self) -> int:
        return os.getpid()

    # -- reads ---------------------------------------------------------------------------
    def search_lists(self, **query) -> ShardLists:
        return shard_lists(self.engine, **query)

    def search_evidence(self, hits, labels=None) -> list:
        return shard_evidence(self.engine, hits, labels)

    def has_transcripts(self) -> bool:
        return self.engine.store.transcripts.exists()

    def moments(self, camera_id=None, t0=None, t1=None):
        return self.engine.moments(camera_id, t0, t1)

    def moments_by_id(self, ids):
        return self.engine.store.moments.by_id(ids)

    def events(self, camera_id=None):
        return self.engine.store.events.list(camera_id)

    # the service's reads (server/backend.py), answered by this store's LocalBackend
    def page_after(self, kind, cameras, t0, t1, as_of, after, limit, place=None):
        from ..server import page_after

        return page_after(self.engine.store, kind, cameras=cameras, t0=t0, t1=t1, as_of=as_of, after=after,
                          limit=limit, place=place)

    def moment_frame(self, moment_id: int):
        """The moment's FrameData with its bytes (the router may be on another node); None: no such moment."""
        return _with_bytes(self._backend.moment_frame(moment_id))

    def moment_frames(self, moment_ids) -> dict:
        """{moment id: its JPEG bytes (None: no such moment, or its file is gone)} for the
        router's FrameCache (cluster/frames.py)."""
        out = {}
        for mid in moment_ids:
            f = _with_bytes(self._backend.moment_frame(mid))
            out[mid] = None if f is None else f.data
        return out

    # what perception found (the router links entities across shards: cluster/entities.py)
    def entity_candidates(self, label, cameras, t0, t1, as_of) -> list:
        from .entities import entity_candidates

        return entity_candidates(self.engine.store, label, cameras, t0, t1, as_of)

    def entity_timeline(self, entity_id, cameras, as_of):
        return self.engine.entity(entity_id, camera=cameras, as_of=as_of)

    def last_seen_ranked(self, query, cameras, as_of):
        return self.engine.store.entities.last_seen_ranked(query, cameras=cameras, as_of=as_of)

    def perceived(self, moment_id):
        return self.engine.perceived(moment_id)

    def entity_crop(self, entity_id, cameras):
        """The entity's crop as FrameData with its bytes; None when it has none in view."""
        return _with_bytes(self._backend.entity_crop(entity_id, cameras))

    def clip(self, camera_id, t0, t1):
        return self.engine.clip(camera_id, t0, t1)

    def alert(self, alert_id: int):
        return self._backend.alert(alert_id)

    def alert_frame(self, alert_id: int, k: int):
        a = self._backend.alert(alert_id)
        if a is None or not 0 <= k < len(a.frame_paths):
            return None
        return _with_bytes(self._backend.alert_frame(a, k))

    def last_alert_id(self) -> int:
        return self._backend.alert_position_now()

    def store_stats(self):
        return self._backend.store_stats()

    def writer_backlog(self):
        return self._backend.writer_backlog()

    def stage_status(self):
        return self.engine.stage_status()

    def summarize(self, time_range, granularity_s, prompt, cameras=None, structure=None):
        return self.engine.summarize(time_range, granularity_s, prompt, cameras=cameras, structure=structure)

    def view(self, method: str, as_of, cameras, args=(), kwargs=None, write: bool = True):
        """One read of a causal view (memory/view.py) with this ``as_of`` and camera scope: the
        router's FanoutView sends every read of an ``ask`` here. ``write`` False: the planner's
        summaries are drafted for the answer, not stored (the asker may not write)."""
        e, kwargs = self.engine, kwargs or {}
        if method == "summarize" and cameras:  # write only this shard's cameras' documents
            mine = set(e.store.moments.cameras())
            cameras = [c for c in cameras if c in mine]
            if not cameras:
                return []
        v = e.view(as_of, cameras, write=write)
        if method == "latest_times":
            return {c: v.latest_time(c) for c in v.camera_ids()}
        if method == "extent":
            return e.store.moments.extent(v.camera_ids(), as_of)
        if method not in _VIEW_READS:
            raise ValueError(f"shard {self.name}: {method!r} is not a view read")
        return getattr(v, method)(*args, **kwargs)  # the actor's threads keep their connections

    def present_latest(self, camera_id):
        return self.engine.working.latest(camera_id)

    def present_window(self, camera_id, now):
        """(covers, short, medium) of the camera's working memory at ``now`` (cluster/present.py)."""
        w = self.engine.working
        return (w.covers(camera_id, now), *w.window(camera_id, now))

    def present_heard(self, camera_id, t0=None, t1=None):
        """The camera's recent transcript segments in its working memory (cluster/present.py)."""
        return self.engine.working.heard(camera_id, t0, t1)

    def camera_status(self, camera_id=None):
        """The live cameras' status, and an offline one for each camera this incarnation could not
        resume (``_resume_live``): it is still the shard's, and says why it is not running."""
        from ..ingest import CameraStatus
        from ..urls import redact

        failed = [CameraStatus(cam, redact(url), "offline", error=err, since=self.started_at)
                  for cam, (url, err) in sorted(self.resume_errors.items()) if camera_id in (None, cam)]
        if failed and camera_id is not None:
            return failed
        if camera_id is not None and camera_id not in {s.camera_id for s in self.engine.status()}:
            return []  # not a live camera here (pushed, or not yet added)
        return self.engine.status(camera_id) + failed

    def gaps(self, camera_id=None, t0=None, t1=None):
        """The live cameras' gaps (memory/gaps.py), a restart's time without video among them."""
        return self.engine.gaps(camera_id, t0, t1)

    # -- ingest --------------------------------------------------------------------------
    def push(self, camera_id, frame, t, t_abs=None, pose=None) -> bool:
        return self.engine.push(camera_id, frame, t, t_abs=t_abs, pose=pose)

    def push_many(self, camera_id, frames, ts, t_abs=None, poses=None) -> int:
        """Push a batch of one camera's frames (one actor call per batch); returns how many were sampled."""
        n = 0
        for k, (f, t) in enumerate(zip(frames, ts)):
            n += bool(self.engine.push(camera_id, f, t, t_abs=None if t_abs is None else t_abs[k],
                                       pose=None if poses is None else poses[k]))
        return n

    def index_files(self, paths, camera_ids, start_time_abs=None) -> list:
        return self.engine.index_files(paths, camera_ids, start_time_abs=start_time_abs)

    def push_progress(self, camera_id) -> float | None:
        """The time up to which the camera's pushed frames are committed (None: nothing yet): a
        pusher resuming after a restart continues with frames after it."""
        return self.engine.push_progress(camera_id)

    def end_push(self, camera_id) -> None:
        self.engine.end_push(camera_id)

    def flush(self, timeout=None) -> bool:
        return self.engine.flush(timeout)

    def add_camera(self, camera_id, url, **kw):
        status = self.engine.add_camera(camera_id, url, **kw)
        self.resume_errors.pop(camera_id, None)  # added again: it runs now
        specs = self._live_specs()
        specs[camera_id] = {"url": url, **kw}
        self._save_live_specs(specs)
        return status

    def remove_camera(self, camera_id) -> None:
        if self.resume_errors.pop(camera_id, None) is None:  # one not resumed is only forgotten
            self.engine.remove_camera(camera_id)
        specs = self._live_specs()
        specs.pop(camera_id, None)
        self._save_live_specs(specs)

    # -- monitors ------------------------------------------------------------------------
    def watch(self, condition, cameras=None, **kw):
        return self.engine.watch(condition, cameras, **kw)

    def unwatch(self, monitor_id) -> bool:
        return self.engine.unwatch(monitor_id)

    def monitors(self, include_ended=False):
        return self.engine.monitors(include_ended)

    def alerts(self, since=None, monitor_id=None, camera=None, created_after=None):
        """As Engine.alerts; ``created_after`` (wall clock) for a reader that started while this
        shard was down and so knows no id of it (router.AlertCursor)."""
        got = self.engine.alerts(since, monitor_id, camera)
        return got if created_after is None else [a for a in got if a.created_at > created_after]

    def wait_for_monitors(self, timeout=None) -> bool:
        return self.engine.wait_for_monitors(timeout)

    # -- deletion ------------------------------------------------------------------------
    def delete(self, cameras=None, time_range=None):
        return self.engine.delete(cameras, time_range)

    def close(self) -> None:
        self.engine.close()

    # -- live cameras across restarts ------------------------------------------------------
    def _live_specs(self) -> dict:
        p = self.store_dir / LIVE_SPECS
        return json.loads(p.read_text()) if p.exists() else {}

    def _save_live_specs(self, specs: dict) -> None:
        p = self.store_dir / LIVE_SPECS
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(specs, indent=1, sort_keys=True))
        os.replace(tmp, p)

    def _resume_live(self) -> None:
        """Re-add the live cameras a previous incarnation ran (the engine records their gap).

        One that cannot be re-added (its file is gone, its gate overrides no longer valid) is
        logged and kept in ``resume_errors``, never raised: Ray does not restart an actor whose
        constructor raised, so one bad camera would take the whole shard down for good. Its spec
        stays (the next restart tries again) until ``remove_camera``."""
        from ..errors import VamError

        self.resume_errors: dict[str, tuple[str, str]] = {}  # camera -> (url, why it did not resume)
        for cam, spec in self._live_specs().items():
            spec = dict(spec)
            url = spec.pop("url")
            try:
                self.engine.add_camera(cam, url, **spec)
            except (ValueError, TypeError, VamError) as e:
                log.warning("shard %s: live camera %r not resumed: %s", self.name, cam, e)
                self.resume_errors[cam] = (url, f"not resumed after the shard's restart: {e}")


def _with_bytes(frame):
    """FrameData carrying the file's bytes instead of its path (None and a gone file pass)."""
    if frame is None or frame.path is None:
        return frame
    return replace(frame, path=None, data=frame.path.read_bytes())


def _was_reconstructed() -> bool:
    try:
        import ray

        return bool(ray.get_runtime_context().was_current_actor_reconstructed)
    except Exception:  # noqa: BLE001 - outside an actor (a Shard used directly)
        return False


def _node_id() -> str | None:
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001
        return None


def shard_actor_class():
    """The Ray actor class of a shard (Ray imported here: the engine itself never needs it).

    Restarted without limit when its process dies; calls are never retried by Ray (a retried
    push could be applied twice, and the router reports a down shard instead of waiting);
    threaded (``max_concurrency``) so reads go on while a push waits for the pipeline."""
    import ray

    return ray.remote(max_restarts=-1, max_task_retries=0, max_concurrency=8)(Shard)
