"""ClusterEngine: the read/answer/watch surface of Engine over camera shards on a Ray cluster.

``connect(address, root=...)`` (``address``: a Ray address, "auto", or "local" to start one
here) opens the catalogue under ``root`` (catalogue.py), creates or reattaches the shard actors
(named, detached: they outlive the router, and a restarted router finds them), and routes:

- a new camera is placed on the least-loaded shard (fewest cameras) and stays there;
- search fans out to the shards that hold the requested cameras and is fused by the rank rule
  of one engine (fanout.py, memory/fusion.py); moments merge in the engine's order (camera, time);
  alerts merge by creation time;
- ids are cluster ids (catalogue.py: the shard number in the high bits);
- a shard that does not answer (down, restarting) is never silently skipped: every read result
  carries ``missing_cameras`` and ``missing_shards``; a write that needs it raises ShardDown.

``ask`` runs here, in the router's answering part (reason/ask.py's ``Answering``, the body
behind ``Engine.ask``), over a causal view whose reads fan out (view.py, ask.py).
"""
from __future__ import annotations

import hashlib
import heapq
import logging
import threading
import time
from dataclasses import dataclass, field, replace

from ..errors import Unavailable, VamError
from ..ingest import camera_list
from ..memory import SOURCES, SPEECH, Deletion, Moment, SearchResult, check_search
from ..reason import AlertSubscription
from .catalogue import Catalogue, cluster_id, split_id
from .fanout import by_shard, fuse_shards, in_fused_order
from .shard import ACTOR_PREFIX, NAMESPACE, ShardStatus, shard_actor_class
from .view import globalize


log = logging.getLogger(__name__)


class ShardDown(Unavailable):
    """A call that must reach a shard could not (it is down or restarting): 503 over HTTP."""


@dataclass
class ClusterSearchResult(SearchResult):
    missing_cameras: tuple[str, ...] = ()  # requested (or placed) cameras whose shard did not answer
    missing_shards: tuple[str, ...] = ()


class Partial(list):
    """A merged list that says what it lacks: ``missing_cameras``, ``missing_shards`` (empty: complete)."""

    def __init__(self, items=(), missing_cameras=(), missing_shards=()):
        super().__init__(items)
        self.missing_cameras = tuple(missing_cameras)
        self.missing_shards = tuple(missing_shards)


@dataclass(frozen=True)
class AlertCursor:
    """Where an alert reader is: the last alert id seen per shard (``since`` of the next call).
    ``after_time``: shards whose last id was not known when the reader started (they were
    down): their alerts created after that wall-clock time, until their first one gives an id."""

    last: tuple[tuple[str, int], ...] = ()
    after_time: tuple[tuple[str, float], ...] = ()

    def of(self, shard: str) -> int | None:
        return dict(self.last).get(shard)

    def time_of(self, shard: str) -> float | None:
        return dict(self.after_time).get(shard) if shard not in dict(self.last) else None


class AlertList(Partial):
    def __init__(self, items=(), cursor: AlertCursor = AlertCursor(), **kw):
        super().__init__(items, **kw)
        self.cursor = cursor


@dataclass(frozen=True)
class ShardInfo:
    name: str
    no: int
    alive: bool
    cameras: tuple[str, ...]  # placed on it (catalogue)
    status: ShardStatus | None  # None while it does not answer
    error: str | None = None


@dataclass
class ClusterInfo:
    root: str
    shards: list[ShardInfo] = field(default_factory=list)


def connect(address: str | None = "auto", *, root, shards: int | list[str] | None = None, config=None,
            llm_factory=None, device: str | None = None, shard_options: dict | None = None,
            timeout_s: float = 60.0, llm=None) -> "ClusterEngine":
    """A ClusterEngine over the Ray cluster at ``address`` (see ClusterEngine)."""
    return ClusterEngine(address, root=root, shards=shards, config=config, llm_factory=llm_factory,
                         device=device, shard_options=shard_options, timeout_s=timeout_s, llm=llm)


class ClusterEngine:
    """``shards``: how many (named shard-0, shard-1, ...) or their names; None: what the catalogue
    has, else one per alive Ray node. Shards already in the catalogue are always kept (their
    stores hold data); new names are added. ``config``: the shards' EngineConfig overrides (a
    dict; every shard must embed with the same models for their results to merge).
    ``llm_factory``: a picklable callable building each shard's model in the shard.
    ``shard_options``: Ray actor options (e.g. ``num_gpus=1`` for one shard per GPU,
    ``num_cpus``, ``scheduling_strategy``); by default shards spread over nodes and reserve no CPU.
    ``timeout_s``: how long a fan-out waits for a shard before naming it missing. ``llm``: the
    router's model for ``ask`` (an object, used in this process)."""

    def __init__(self, address: str | None = "auto", *, root, shards=None, config=None, llm_factory=None,
                 device: str | None = None, shard_options: dict | None = None, timeout_s: float = 60.0, llm=None):
        import ray

        from ..config import load_config
        from ..reason import Answering
        from ..tools import make_toolbox
        from .ask import RouterModels, RouterViews
        from .frames import FrameCache
        from .sessions import RouterMonitors

        self._ray = ray
        if not ray.is_initialized():
            _check_reachable(address)
            ray.init(address=address, namespace=NAMESPACE, include_dashboard=False)
        self.catalogue = Catalogue(root)
        self.root = str(self.catalogue.root.resolve())
        self.timeout_s = float(timeout_s)
        self._spec = (config, llm_factory, device)
        self._options = {"num_cpus": 0, "scheduling_strategy": "SPREAD", **(shard_options or {})}
        if isinstance(shards, int):
            if shards < 1:
                raise VamError(f"shards must be at least 1, got {shards}")
            names = [f"shard-{k}" for k in range(shards)]
        elif shards is None:
            names = [] if self.catalogue.shards() else [f"shard-{k}" for k in range(_alive_nodes(ray))]
        else:
            names = list(shards)
        for n in names:
            self.catalogue.add_shard(n)
        self._handles: dict[str, object] = {}
        for s in self.catalogue.shards():
            self._handles[s.name] = self._actor(s.name)
        self._extend_monitors()
        cfg = load_config(config, device)  # the shards': the router's answers use its tools and dialogue budget
        self._models = RouterModels(cfg, llm)
        self._views = RouterViews(self, self._models, cfg.ask)
        own = self._views.store  # sessions, turns and standing requests: the router's own store
        sessions = own.sessions
        self._standing = RouterMonitors(self, own.monitors, own.root / "alert-frames",
                                        resume=any(sessions.watches(x.session_id) for x in sessions.list()))
        # the one answering body, with the session policy of one engine
        self.answering = Answering(self._views, self._models, cfg, sessions=sessions, monitors=self._standing,
                                   tools=make_toolbox(cfg.tools))
        self.frame_cache = FrameCache(self, self.catalogue.root / "_router" / "frames")

    # -- shards ------------------------------------------------------------------------------
    def _actor(self, name: str):
        config, llm_factory, device = self._spec
        cls = shard_actor_class()
        return cls.options(name=self.actor_name(name), namespace=NAMESPACE, lifetime="detached",
                           get_if_exists=True, **self._options).remote(name, self.root, config, llm_factory, device)

    def actor_name(self, shard: str) -> str:
        """The shard's Ray actor name: the root is part of it, so two roots on one Ray cluster
        never share (and write through) one shard actor."""
        return f"{ACTOR_PREFIX}{hashlib.sha1(self.root.encode()).hexdigest()[:10]}-{shard}"

    def _extend_monitors(self) -> None:
        """Give each active monitor of every camera to the shards added since it was made
        (their cameras are "every camera" too). A shard that does not answer gets it at the
        next connect."""
        for e in self.catalogue.monitors():
            new = [s for s in self.shard_names() if s not in e.parts]
            if e.every_camera is None or not new:
                continue
            out, _ = self.call_many({s: ("monitors", (False,), {}) for s in e.parts})
            if not any(m.monitor_id == e.parts[s] for s, ms in out.items() for m in ms):
                continue  # ended on every shard (unwatched, or a "once" that fired)
            kw = {k: v for k, v in e.every_camera.items() if k != "condition"}
            for s in new:
                try:
                    m = self.call(s, "watch", e.every_camera["condition"], None, **kw)
                except ShardDown:
                    continue
                self.catalogue.add_monitor_part(e.monitor_id, s, m.monitor_id)

    def revive(self, name: str | None = None) -> None:
        """Re-create shards that Ray gave up on (killed for good, node lost without a restart):
        each reopens its store under the root. ``name`` None: every shard that does not answer."""
        for s in self.catalogue.shards():
            if (name is None or s.name == name) and not self._alive(s.name):
                self._handles[s.name] = self._actor(s.name)

    def _alive(self, name: str) -> bool:
        return self.call_many({name: ("pid", (), {})}, timeout=min(self.timeout_s, 5.0))[0] != {}

    def shard_names(self) -> list[str]:
        return [s.name for s in self.catalogue.shards()]

    def call_many(self, calls: dict, timeout: float | None = None):
        """``{shard: (method, args, kwargs)}`` -> ({shard: result}, [shards that did not answer]).
        An error the shard's code raised is raised here (it is not a missing shard)."""
        ray = self._ray
        refs = {}
        down = []
        for shard, (method, args, kw) in calls.items():
            try:
                refs[shard] = getattr(self._handles[shard], method).remote(*args, **kw)
            except ray.exceptions.RayError:
                down.append(shard)
        out = {}
        deadline = time.monotonic() + (self.timeout_s if timeout is None else timeout)
        for shard, ref in refs.items():
            try:
                out[shard] = ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))
            except ray.exceptions.RayTaskError as e:
                # the shard's own error, as its own type and message: Ray's wrapper carries the
                # remote traceback (paths, addresses), which belongs in logs, not in a reply
                cause = getattr(e, "cause", None)
                if isinstance(cause, Exception):
                    log.debug("shard %s: %s failed", shard, calls[shard][0], exc_info=e)
                    raise cause from None
                raise
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError,
                    getattr(ray.exceptions, "ActorUnavailableError", ray.exceptions.RayActorError)):
                down.append(shard)
        return out, down

    def call(self, shard: str, method: str, *args, **kw):
        out, down = self.call_many({shard: (method, args, kw)})
        if down:
            raise ShardDown(f"shard {shard!r} did not answer {method} (down or restarting); its cameras: "
                            f"{self.cameras_of([shard])}")
        return out[shard]

    def cameras_of(self, shards) -> tuple[str, ...]:
        return tuple(sorted(c for c, s in self.catalogue.cameras().items() if s in shards))

    def targets(self, cameras, name: str = "cameras") -> tuple[list[str], list[str] | None]:
        """The shards holding ``cameras`` (one id or a list; None: every shard) in catalogue
        order, and the camera list. ``name``: the caller's argument, named by an error."""
        cams = camera_list(cameras, name)
        if cams is None:
            return self.shard_names(), None
        placed = self.catalogue.cameras()
        wanted = {placed[c] for c in cams if c in placed}
        return [s for s in self.shard_names() if s in wanted], cams

    def missing_of(self, down, cams) -> tuple[str, ...]:
        held = self.cameras_of(down)
        return held if cams is None else tuple(c for c in held if c in cams)

    def shard_no(self, shard: str) -> int:
        return next(s.no for s in self.catalogue.shards() if s.name == shard)

    def locate(self, cid: int) -> tuple[str, int]:
        """(shard name, local id) of a cluster id."""
        no, local = split_id(cid)
        return self.catalogue.shard_by_no(no).name, local

    # -- ingest ------------------------------------------------------------------------------
    def place(self, camera_id: str) -> str:
        """The shard of ``camera_id`` (placing it now on the least-loaded shard if new)."""
        from ..ingest import check_camera_id

        return self.catalogue.place(check_camera_id(camera_id))

    def push(self, camera_id: str, frame, t: float, *, t_abs: float | None = None, pose=None) -> bool:
        """As Engine.push, on the camera's shard (``pose`` kept with the moment)."""
        return self.call(self.place(camera_id), "push", camera_id, frame, t, t_abs, pose)

    def push_many(self, camera_id: str, frames, ts, t_abs=None, poses=None) -> int:
        return self.call(self.place(camera_id), "push_many", camera_id, frames, ts, t_abs, poses)

    def index_files(self, paths, camera_ids=None, *, start_time_abs: float | None = None) -> list:
        """As Engine.index_files: each file indexed by its camera's shard (placed now when new;
        ``camera_ids`` default to the files' stems), the shards at once; the reports in the order
        of ``paths``. The files must be readable where the shards run (the same path on their node)."""
        from pathlib import Path

        paths = [str(p) for p in paths]
        cams = list(camera_ids) if camera_ids is not None else [Path(p).stem for p in paths]
        if len(cams) != len(paths):
            raise VamError(f"index_files: {len(paths)} files but {len(cams)} camera ids")
        mine: dict[str, list[int]] = {}
        for k, cam in enumerate(cams):
            mine.setdefault(self.place(cam), []).append(k)
        out, down = self.call_many({s: ("index_files", ([paths[k] for k in ks], [cams[k] for k in ks]),
                                         {"start_time_abs": start_time_abs}) for s, ks in mine.items()},
                                   timeout=max(self.timeout_s, 24 * 3600.0))  # indexing takes as long as it takes
        if down:
            raise ShardDown(f"index_files: shards {down} did not answer; their files "
                            f"{[paths[k] for s in down for k in mine[s]]} were not (all) indexed: run it again")
        reports: list = [None] * len(paths)
        for s, ks in mine.items():
            for k, rep in zip(ks, out[s]):
                reports[k] = rep
        return reports

    def push_progress(self, camera_id: str) -> float | None:
        """Up to which time the camera's pushed frames are committed on its shard (None: none):
        after a ShardDown, a pusher waits for the shard and continues with later frames (what
        was pushed after it was lost with the shard's process, as with one engine's crash)."""
        return self.call(self.place(camera_id), "push_progress", camera_id)

    def end_push(self, camera_id: str) -> None:
        self.call(self.place(camera_id), "end_push", camera_id)

    def flush(self, timeout: float | None = None) -> bool:
        out, down = self.call_many({s: ("flush", (timeout,), {}) for s in self.shard_names()})
        if down:
            raise ShardDown(f"shards {down} did not answer flush")
        return all(out.values())

    def add_camera(self, camera_id: str, url: str, **kw):
        return self.call(self.place(camera_id), "add_camera", camera_id, url, **kw)

    def remove_camera(self, camera_id: str) -> None:
        shard = self.catalogue.cameras().get(camera_id)
        if shard is None:
            raise VamError(f"no camera {camera_id!r} in this cluster")
        self.call(shard, "remove_camera", camera_id)

    def status(self, camera_id: str | None = None) -> Partial:
        shards, cams = self.targets(camera_id)
        out, down = self.call_many({s: ("camera_status", (camera_id,), {}) for s in shards})
        items = [st for s in shards if s in out for st in out[s]]
        return Partial(items, self.missing_of(down, cams), down)

    def gaps(self, camera_id: str | None = None, t0: float | None = None, t1: float | None = None) -> Partial:
        """As Engine.gaps, from the shards holding the camera (gap ids are cluster ids): a shard's
        restart shows as a gap of each live camera it resumed."""
        shards, cams = self.targets(camera_id)
        out, down = self.call_many({s: ("gaps", (camera_id, t0, t1), {}) for s in shards})
        items = [replace(g, gap_id=cluster_id(self.shard_no(s), g.gap_id)) for s in shards for g in out.get(s, [])]
        items.sort(key=lambda g: (g.t_start, g.camera_id))
        return Partial(items, self.missing_of(down, cams), down)

    # -- reads -------------------------------------------------------------------------------
    def search(self, text: str | None = None, image=None, top_k: int = 10, time_range=None, cameras=None,
               sources=None, as_of: float | None = None, *, labels=None, near=None, radius: float | None = None,
               region=None, map_frame: str | None = None) -> ClusterSearchResult:
        """As Engine.search, over every shard holding ``cameras``, every source included
        (frames, events, summaries, text on screen, detected things, speech), with ``labels`` and
        the place filters; evidence moment ids are cluster ids. Fused by the single engine's rank
        rule (fanout.py says where it can differ)."""
        from ..memory import make_place

        labels = [labels] if isinstance(labels, str) else labels
        place = make_place(near, radius, region, map_frame)
        shards, cams = self.targets(cameras)
        if sources is None:
            sources = SOURCES + (SPEECH,) if self._any_transcripts(shards) else SOURCES
        sources = tuple(sources)
        check_search(text, image, top_k, sources)
        if image is not None:  # read here: a path on the router's machine means nothing on a shard's node
            from ..memory import load_query_image

            image = load_query_image(image)
        kw = dict(text=text, image=image, top_k=int(top_k), time_range=time_range, cameras=cams, sources=sources,
                  as_of=as_of, place=place, labels=labels)
        out, down = self.call_many({s: ("search_lists", (), kw) for s in shards})
        parts = {s: out[s] for s in shards if s in out}
        notes = list(dict.fromkeys(n for h in parts.values() for n in h.notes))
        best = fuse_shards(parts, top_k, labels)
        got, late = self.call_many({s: ("search_evidence", (hs, labels), {}) for s, hs in by_shard(best).items()})
        down = down + [s for s in late if s not in down]
        evidence = [globalize(ev, self.shard_no(s)) for s, ev in in_fused_order(best, got, top_k)]
        missing = self.missing_of(down, cams)
        if down:
            notes.append(f"shards {down} did not answer: nothing from cameras {list(missing)}")
        return ClusterSearchResult(evidence, notes, missing, tuple(down))

    def _any_transcripts(self, shards) -> bool:
        """Whether any of ``shards`` holds a transcript segment (Engine.search's default sources)."""
        out, _ = self.call_many({s: ("has_transcripts", (), {}) for s in shards})
        return any(out.values())

    def moments(self, camera_id: str | None = None, t0: float | None = None, t1: float | None = None) -> Partial:
        """As Engine.moments (ordered by camera and time), with cluster ids."""
        shards, cams = self.targets(camera_id)
        out, down = self.call_many({s: ("moments", (camera_id, t0, t1), {}) for s in shards})
        items = []
        for s in shards:
            no = self.shard_no(s) if s in out else None
            items += [_global_moment(m, no) for m in out.get(s, [])]
        items.sort(key=lambda m: (m.camera_id, m.t_rel))  # per camera already in (t_rel, id) order; stable
        return Partial(items, self.missing_of(down, cams), down)

    def clip(self, camera_id: str, t0: float, t1: float):
        """As Engine.clip, made by the camera's shard (cut from its source or built from its
        retained frames); NoClip for a camera this cluster does not hold."""
        from ..engine import NoClip

        shard = self.catalogue.cameras().get(camera_id)
        if shard is None:
            raise NoClip(f"no camera {camera_id!r} in this cluster")
        return self.call(shard, "clip", camera_id, t0, t1)

    def frame(self, moment_id: int) -> bytes:
        """A moment's JPEG bytes, from its shard."""
        shard, local = self.locate(moment_id)
        f = self.call(shard, "moment_frame", local)
        if f is None or f.data is None:
            raise VamError(f"no moment {moment_id} (shard {shard!r}, local id {local})" if f is None else
                           f"moment {moment_id}: its frame's file is gone (retention or a deletion removed it)")
        return f.data

    def summarize(self, time_range, granularity_s: float, prompt: str, *, cameras=None,
                  structure: str | None = None) -> list:
        """As Engine.summarize, on every shard holding ``cameras`` (each writes its own cameras'
        documents; a summary over every camera is per shard). Summary ids are cluster ids.
        ShardDown, before writing anything, when a needed shard does not answer."""
        shards, cams = self.targets(cameras)
        self._need_all(shards, "summarize")
        out, down = self.call_many({s: ("summarize", (time_range, granularity_s, prompt, cams, structure), {})
                                     for s in shards})
        if down:
            raise ShardDown(f"summarize reached {sorted(out)} but not {down}: run it again when they are back")
        return [globalize(d, self.shard_no(s)) for s in shards for d in out[s]]

    def _need_all(self, shards, what: str) -> None:
        _, down = self.call_many({s: ("pid", (), {}) for s in shards})
        if down:
            raise ShardDown(f"{what} needs shards {down}, which do not answer (cameras {self.cameras_of(down)}); "
                            f"nothing was changed")

    # -- what perception found (linked across shards: entities.py) -----------------------------
    def _things(self, label=None, camera=None, time_range=None, as_of=None):
        """The entities in scope grouped into things, and the cameras and shards that did not answer."""
        from .entities import things_of

        shards, cams = self.targets(camera, "camera")
        t0, t1 = time_range if time_range is not None else (None, None)
        out, down = self.call_many({s: ("entity_candidates", (label, cams, t0, t1, as_of), {}) for s in shards})
        return things_of({self.shard_no(s): out[s] for s in shards if s in out}), self.missing_of(down, cams), down

    def entities(self, label=None, camera=None, time_range=None, as_of: float | None = None, *,
                 after: int | None = None, limit: int | None = None) -> Partial:
        """As Engine.entities, over the shards holding ``camera``, a thing seen on two shards'
        cameras being one entity (entities.py); by cluster id."""
        from .entities import merged

        groups, missing, down = self._things(label, camera, time_range, as_of)
        items = [merged(g) for g in groups]
        items = [e for e in items if after is None or e.entity_id > after]
        return Partial(items if limit is None else items[:int(limit)], missing, down)

    def _thing_of(self, entity_id: int, camera, as_of):
        """(the group holding ``entity_id``, its shard's timeline) or None when it is not in view."""
        from .entities import global_timeline

        shard, local = self.locate(entity_id)
        cams = camera_list(camera, "camera")
        line = self.call(shard, "entity_timeline", local, cams, as_of)
        if line is None:
            return None
        groups, _, _ = self._things(line.entity.label, camera, None, as_of)
        group = next((g for g in groups if any(e.record.entity_id == entity_id for e in g)), None)
        return (group, global_timeline(line, self.shard_no(shard))) if group else None

    def entity(self, entity_id: int, *, camera=None, as_of: float | None = None):
        """As Engine.entity: the timeline of the thing ``entity_id`` belongs to, its members'
        sightings and tracks joined; None when it is not in view."""
        from .entities import global_timeline, joined_timeline, merged

        found = self._thing_of(entity_id, camera, as_of)
        if found is None:
            return None
        group, line = found
        lines = [line]
        cams = camera_list(camera, "camera")
        for e in group:
            if e.record.entity_id != entity_id:
                shard, local = self.locate(e.record.entity_id)
                other = self.call(shard, "entity_timeline", local, cams, as_of)
                if other is not None:
                    lines.append(global_timeline(other, self.shard_no(shard)))
        return joined_timeline(merged(group), lines)

    def entity_crop(self, entity_id: int, cameras=None):
        """(shard, FrameData with bytes) of the crop of the thing ``entity_id`` belongs to; None
        when it has none in view."""
        from .entities import merged

        found = self._thing_of(entity_id, cameras, None)
        if found is None:
            return None
        thing = merged(found[0])
        owner = next((e for e in found[0] if e.record.crop_path == thing.crop_path and thing.crop_path), None)
        if owner is None:
            return None
        shard, local = self.locate(owner.record.entity_id)
        f = self.call(shard, "entity_crop", local, cameras)
        return None if f is None else (shard, f)

    def last_seen(self, query: str, *, camera=None, as_of: float | None = None):
        """As Engine.last_seen over the shards holding ``camera``: the best kind of match on any
        shard (a thing holding every word, some, then text on screen), then the latest."""
        from .entities import global_last_seen, local_entity, merged

        if not isinstance(query, str) or not query.strip():
            raise VamError(f"last_seen needs a non-empty query (a label, colour, text or words), got {query!r}")
        shards, cams = self.targets(camera, "camera")
        out, _ = self.call_many({s: ("last_seen_ranked", (query.strip()[:500], cams, as_of), {}) for s in shards})
        ranked = [(tier, -seen.t, self.shard_no(s), s, seen) for s, got in out.items() if got for tier, seen in [got]]
        if not ranked:
            return None
        _, _, no, shard, seen = min(ranked, key=lambda r: r[:3])
        thing = None
        if seen.entity is not None:
            cid = local_entity(seen.entity, no).entity_id
            groups, _, _ = self._things(seen.entity.label, camera, None, as_of)
            group = next((g for g in groups if any(e.record.entity_id == cid for e in g)), None)
            thing = merged(group) if group else local_entity(seen.entity, no)
        return global_last_seen(seen, no, thing)

    def perceived(self, moment_id: int) -> tuple[list, list]:
        """As Engine.perceived: a moment's detections and OCR lines, with cluster ids."""
        shard, local = self.locate(moment_id)
        dets, lines = self.call(shard, "perceived", local)
        no = self.shard_no(shard)
        g = lambda i: None if i is None else cluster_id(no, i)  # noqa: E731
        return ([replace(d, detection_id=g(d.detection_id), moment_id=g(d.moment_id), track_id=g(d.track_id),
                         entity_id=g(d.entity_id)) for d in dets],
                [replace(x, line_id=g(x.line_id), moment_id=g(x.moment_id)) for x in lines])

    # -- questions ---------------------------------------------------------------------------
    def ask(self, question: str, as_of: float | None = None, camera=None, mode: str = "auto", *, max_turns: int = 6,
            session: str | None = None, read_only: bool = False):
        """As Engine.ask, at the router over a causal view whose reads fan out to the shards
        (cluster/view.py): ``as_of`` and the camera scope hold on every shard. The answer also
        carries ``missing_cameras`` / ``missing_shards`` (empty: every shard answered). The
        router's model: ``llm=`` of connect, else the config's ``llm`` section."""
        return self.answering.ask(question, as_of, camera, mode, max_turns=max_turns, session=session,
                                  read_only=read_only)

    def wait_for_answers(self, timeout: float | None = None) -> bool:
        return self.answering.wait_for_answers(timeout)

    # -- sessions (held by the router: cluster/sessions.py) ------------------------------------
    def turn(self, text: str, *, session: str, camera=None, as_of: float | None = None, mode: str = "auto",
             max_turns: int = 6, intent: str | None = None, condition: str | None = None,
             target: str | None = None, every_s: float | None = None, may_watch: bool = True,
             read_only: bool = False, watch_quota=None):
        """As Engine.turn: a standing request is a router monitor over the shards of its cameras."""
        return self.answering.turn(text, session=session, camera=camera, as_of=as_of, mode=mode,
                                   max_turns=max_turns, intent=intent, condition=condition, target=target,
                                   every_s=every_s, may_watch=may_watch, read_only=read_only,
                                   watch_quota=watch_quota)

    def watch_sessions(self, monitor_ids=None) -> dict[str, str]:
        """As Engine.watch_sessions: the session of each standing request (the router's store)."""
        return self.router_store.sessions.monitor_sessions(monitor_ids)

    def create_session(self, session: str, camera=None):
        return self.answering.sessions.create(session, camera)

    def sessions(self, *, prefix: str | None = None, include_ended: bool = False):
        return self.answering.sessions.list(prefix, include_ended)

    def session(self, session: str, *, after: int | None = None, last: int | None = None):
        return self.answering.sessions.get(session, after=after, last=last)

    def end_session(self, session: str) -> bool:
        return self.answering.sessions.end(session)

    def subscribe_turns(self, callback=None):
        return self.answering.sessions.subscribe(callback)

    def wait_for_replies(self, timeout: float | None = None) -> bool:
        return self.answering.sessions.drain(timeout)

    def reply_stats(self):
        return self.answering.sessions.reply_stats()

    @property
    def router_store(self):
        """The router's own store (``<root>/_router``: the QA history of its answers), opened at first use."""
        return self._views.store

    def built_llm(self):
        """The router's model if it has been built (never builds it: for observers such as /metrics)."""
        return self._models.built_llm()

    def wrap_model(self, wrap) -> bool:
        """Use ``wrap(model)`` for the router's answers (the service's latency tap); False without a model."""
        return self._models.wrap_llm(wrap)

    # -- monitors ----------------------------------------------------------------------------
    def watch(self, condition: str, cameras=None, **kw):
        """As Engine.watch, on every shard holding ``cameras`` (cameras not placed yet are placed
        now, so a monitor can wait for a camera's first frame). None: every current shard."""
        if cameras is not None:
            for c in camera_list(cameras):
                self.place(c)
        shards, cams = self.targets(cameras)
        parts, monitors = {}, {}
        for s in shards:  # one at a time: a refusal (bad input, the cap) stops before the others
            mine = None if cams is None else [c for c in cams if self.catalogue.cameras().get(c) == s]
            try:
                m = self.call(s, "watch", condition, mine, **kw)
            except BaseException:
                for done, mid in parts.items():
                    self.call_many({done: ("unwatch", (mid,), {})})
                raise
            parts[s], monitors[s] = m.monitor_id, m
        entry = self.catalogue.add_monitor(parts, {"condition": condition, **kw} if cams is None else None)
        first = next(iter(monitors.values()))
        return replace(first, monitor_id=entry.monitor_id, cameras=None if cams is None else tuple(cams))

    def monitors(self, include_ended: bool = False) -> Partial:
        """The router's monitors (one per ``watch``, over the shards it spans): active while any
        part is; ``cameras`` the union of the parts' (None when a part watches every camera)."""
        entries = self.catalogue.monitors()
        shards = sorted({s for e in entries for s in e.parts})
        out, down = self.call_many({s: ("monitors", (True,), {}) for s in shards})
        by_id = {(s, m.monitor_id): m for s in out for m in out[s]}
        items = []
        for e in entries:
            parts = [by_id[(s, mid)] for s, mid in e.parts.items() if (s, mid) in by_id]
            if not parts:
                continue
            cams = None if any(m.cameras is None for m in parts) else \
                tuple(sorted({c for m in parts for c in m.cameras}))
            active = any(m.active for m in parts)
            ended = None if active else max((m.ended_at or 0.0) for m in parts)
            if active or include_ended:
                items.append(replace(parts[0], monitor_id=e.monitor_id, cameras=cams, active=active, ended_at=ended))
        return Partial(items, self.cameras_of(down), down)

    def unwatch(self, monitor_id: str) -> bool:
        entry = self.catalogue.monitor(monitor_id)
        if entry is None:
            return False
        out, down = self.call_many({s: ("unwatch", (mid,), {}) for s, mid in entry.parts.items()})
        if down:
            raise ShardDown(f"monitor {monitor_id}: shards {down} did not answer; unwatch it again")
        return any(out.values())

    def alerts(self, since: AlertCursor | None = None, monitor_id: str | None = None, camera=None) -> AlertList:
        """Alerts after ``since`` (a cursor from a previous list's ``.cursor``), oldest first,
        with cluster alert and moment ids and the router's monitor ids."""
        entry = self.catalogue.monitor(monitor_id) if monitor_id is not None else None
        if monitor_id is not None and entry is None:
            return AlertList()
        shards, cams = self.targets(camera)
        if entry is not None:
            shards = [s for s in shards if s in entry.parts]
        since = since or AlertCursor()
        calls = {s: ("alerts", (since.of(s), entry.parts[s] if entry else None, camera), {"created_after": since.time_of(s)})
                 for s in shards}
        out, down = self.call_many(calls)
        per_shard, last = [], dict(since.last)
        for s in shards:
            if s not in out:
                continue
            no = self.shard_no(s)
            mine = []
            for a in out[s]:
                last[s] = max(last.get(s, 0), a.alert_id)
                mine.append(replace(a, alert_id=cluster_id(no, a.alert_id),
                                    monitor_id=self.catalogue.local_monitor(s, a.monitor_id),
                                    moment_ids=tuple(cluster_id(no, m) for m in a.moment_ids)))
            per_shard.append(mine)
        # by creation time, each shard's own (id) order kept whatever its clock did: a reader's
        # position per shard (its last id) then never passes an alert it has not been given
        items = list(heapq.merge(*per_shard, key=lambda a: a.created_at))
        waiting = tuple((s, t) for s, t in since.after_time if s not in last)
        return AlertList(items, AlertCursor(tuple(sorted(last.items())), waiting), missing_cameras=self.missing_of(down, cams),
                         missing_shards=down)

    def alert_cursor_now(self) -> AlertCursor:
        """A cursor at the present: every shard's newest alert id; a shard that does not answer
        gets the present's wall-clock time instead (its alerts from then on, once it answers)."""
        now = int(time.time() * 1000) / 1000.0  # to the millisecond, as a position's text carries it
        out, down = self.call_many({s: ("last_alert_id", (), {}) for s in self.shard_names()})
        return AlertCursor(tuple(sorted(out.items())), tuple((s, now) for s in down))

    def subscribe_alerts(self, callback=None, poll_s: float = 0.2) -> "ClusterAlertSubscription":
        """Alerts from every shard as they are stored, in one stream (polled every ``poll_s``)."""
        return ClusterAlertSubscription(self, callback, poll_s)

    def wait_for_monitors(self, timeout: float | None = None) -> bool:
        out, down = self.call_many({s: ("wait_for_monitors", (timeout,), {}) for s in self.shard_names()})
        return not down and all(out.values())

    # -- deletion ----------------------------------------------------------------------------
    def delete(self, cameras=None, time_range=None) -> Deletion:
        """As Engine.delete, on every shard holding the cameras (all: every shard). All or
        nothing reached: ShardDown, before deleting anything, when a needed shard does not answer."""
        if cameras is None and time_range is None:
            raise ValueError("delete needs cameras=... and/or time_range=... (refusing to delete everything implicitly)")
        shards, cams = self.targets(cameras)
        self._need_all(shards, "delete")
        out, down = self.call_many({s: ("delete", (cams, time_range), {}) for s in shards})
        if down:
            raise ShardDown(f"delete reached {sorted(out)} but not {down}: run it again when they are back")
        parts = list(out.values())
        total = Deletion(*(sum(getattr(p, f) for p in parts) for f in ("moments", "events", "summaries", "vectors")),
                         tuple(sorted({c for p in parts for c in p.cameras})),
                         sum(p.alerts for p in parts), sum(p.monitors for p in parts))
        if time_range is None and cams is not None:
            self.catalogue.forget_cameras(cams)
        return total

    # -- cluster -----------------------------------------------------------------------------
    def info(self) -> ClusterInfo:
        """The shards, their nodes, cameras and health (``GET /api/cluster``)."""
        out, down = self.call_many({s: ("status", (), {}) for s in self.shard_names()},
                                   timeout=min(self.timeout_s, 10.0))
        info = ClusterInfo(self.root)
        for s in self.catalogue.shards():
            info.shards.append(ShardInfo(s.name, s.no, s.name in out, self.cameras_of([s.name]), out.get(s.name),
                                         None if s.name in out else "did not answer (down or restarting)"))
        return info

    def shutdown_shards(self) -> None:
        """Close every shard's engine and end its actor (their stores stay under the root)."""
        self.call_many({s: ("close", (), {}) for s in self.shard_names()})
        for h in self._handles.values():
            self._ray.kill(h, no_restart=True)

    def close(self) -> None:
        """Close the router's own parts (QA history, its store); the shards keep running (detached)."""
        try:
            self.answering.close()
        finally:
            self._views.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _global_moment(m: Moment, no: int) -> Moment:
    return replace(m, moment_id=cluster_id(no, m.moment_id),
                   event_id=None if m.event_id is None else cluster_id(no, m.event_id))


def _check_reachable(address: str | None, timeout_s: float = 5.0) -> None:
    """A ``host:port`` (or ``ray://host:port``) that nothing answers is an error in seconds:
    Ray itself retries an unreachable head for minutes."""
    import socket

    if not address or address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise VamError(f"cluster address {address!r}: expected HOST:PORT of a Ray head, 'auto' or 'local'")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise VamError(f"cluster address {address!r}: no Ray head answers there ({e.strerror or e}); start one "
                       f"with 'ray start --head' or use --cluster local") from None


def _alive_nodes(ray) -> int:
    return max(1, sum(1 for n in ray.nodes() if n.get("Alive")))


class ClusterAlertSubscription(AlertSubscription):
    """Iterate (or ``get(timeout)``, without a callback) for alerts from every shard; ``close()`` when done. Alerts
    stored while a shard was down arrive once it answers again (its cursor waited)."""

    def __init__(self, router: ClusterEngine, callback, poll_s: float):
        super().__init__(None, callback)  # no hub: a thread polls the shards instead
        self._router, self._poll_s = router, poll_s
        self._stop = threading.Event()
        self.cursor = router.alert_cursor_now()  # only alerts from now on
        self._thread = threading.Thread(target=self._run, name="cluster-alerts", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._poll_s):
            try:
                got = self._router.alerts(self.cursor)
            except VamError:
                continue
            self.cursor = got.cursor
            for a in got:
                self._deliver(a)

    def close(self) -> None:
        self.closed = True
        self._stop.set()
        self._thread.join(5)
