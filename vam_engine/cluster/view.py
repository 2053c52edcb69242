"""FanoutView: the causal view ``ask`` reads through at the router, its reads fanned out to shards.

It offers what memory/view.py's MemoryView offers the answerers (reason/two_phase.py,
reason/agent.py, reason/qa_record.py). Each read is sent to the shards holding the view's
cameras, where a MemoryView with the same ``as_of`` and camera scope answers it, so the bound
and the scope are applied where the data is, by the same code as in one engine; the router
merges (camera order, time order, search by the one rank rule: fanout.py) and turns ids into cluster ids. The
QA history (questions asked of the cluster) lives in the router's own store under the root.

The frames it hands the answerers have paths the router can read (cluster/frames.py: fetched
from the shard when its store is on another node's disk).

A shard that does not answer leaves its cameras out and is recorded in ``missing_cameras``
(``ClusterEngine.ask`` puts them in the answer's notes): never silently partial.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from ..ingest import camera_list
from ..memory import (SOURCES, SPEECH, Alert, Event, Evidence, ForestNode, Moment, ProvisionalNode, Summary,
                      SummaryKind, Transcript, summary_kinds)
from .catalogue import cluster_id


def globalize(obj, no: int):
    """A shard's record with its ids made cluster ids (records without ids pass unchanged)."""
    g = lambda i: None if i is None else cluster_id(no, i)  # noqa: E731
    if isinstance(obj, Moment):
        return replace(obj, moment_id=g(obj.moment_id), event_id=g(obj.event_id))
    if isinstance(obj, Evidence):
        return replace(obj, moment_ids=tuple(map(g, obj.moment_ids)),
                       boxes=tuple(replace(b, moment_id=g(b.moment_id)) for b in obj.boxes))
    if isinstance(obj, Event):
        return replace(obj, event_id=g(obj.event_id), keyframes=tuple(map(g, obj.keyframes)))
    if isinstance(obj, Alert):  # (its monitor id is the shard's: the router maps it)
        return replace(obj, alert_id=g(obj.alert_id), moment_ids=tuple(map(g, obj.moment_ids)))
    if isinstance(obj, Summary):
        return replace(obj, summary_id=g(obj.summary_id), moment_ids=tuple(map(g, obj.moment_ids)))
    if isinstance(obj, ForestNode):
        return replace(obj, node_id=g(obj.node_id), keyframes=[g(k) for k in obj.keyframes], parent=g(obj.parent),
                       children=tuple(map(g, obj.children)), event_id=g(obj.event_id))
    if isinstance(obj, Transcript):
        return replace(obj, segment_id=g(obj.segment_id))
    if isinstance(obj, ProvisionalNode):
        return replace(obj, event_id=g(obj.event_id), keyframes=tuple(map(g, obj.keyframes)))
    return obj


class FanoutView:
    """``write``: the planner's summaries are stored by the shards (else drafted for the answer
    only: the asker may not write). ``session``: with the cameras, the QA history it reads."""

    def __init__(self, router, text_embedder, qa_store, *, as_of: float | None = None, cameras=None,
                 session: str = "", write: bool = True):
        self._router = router
        self._qa = qa_store.qa
        self._qa_db = qa_store.db
        self.text_embedder = text_embedder
        self.as_of = None if as_of is None else float(as_of)
        self.cameras = camera_list(cameras) or None  # an empty scope is no scope: every camera
        self.session = session or ""
        self.write = write
        self.missing_cameras: set[str] = set()
        self.missing_shards: set[str] = set()

    # -- fan-out -------------------------------------------------------------------------------
    def _shards(self, camera: str | None = None) -> list[str]:
        scope = [camera] if camera else self.cameras
        return self._router.targets(scope)[0]

    def _each(self, method: str, *args, camera: str | None = None, **kw) -> dict:
        """{shard: result of its MemoryView's ``method``} over the view's shards (in catalogue order)."""
        r = self._router
        shards = self._shards(camera)
        call = ("view", (method, self.as_of, self.cameras, args, kw), {"write": self.write})
        out, down = r.call_many({s: call for s in shards})
        if down:
            self.missing_shards.update(down)
            self.missing_cameras.update(r.missing_of(down, self.cameras))
        return {s: out[s] for s in shards if s in out}

    def _g(self, shard: str, obj):
        return globalize(obj, self._router.shard_no(shard))

    # -- time ----------------------------------------------------------------------------------
    def camera_ids(self) -> list[str]:
        if self.cameras:
            return list(self.cameras)
        return sorted({c for ids in self._each("camera_ids").values() for c in ids})

    def latest_time(self, camera_id: str) -> float | None:
        if self.cameras and camera_id not in self.cameras:
            return None
        got = self._each("latest_time", camera_id, camera=camera_id)
        return next(iter(got.values()), None)

    def now(self) -> float | None:
        if self.as_of is not None:
            return self.as_of
        ts = [t for t in self._each("latest_times").values() for t in t.values() if t is not None]
        return max(ts) if ts else None

    def origin(self) -> float:
        exts = [e for e in self._each("extent").values() if e.first is not None]
        absolute = any(e.absolute for e in exts)
        return float(min(e.first for e in exts)) if exts and absolute else 0.0

    # -- reads ---------------------------------------------------------------------------------
    def search(self, text: str | None, top_k: int = 10, time_range=None, sources=None, *,
               image=None, labels=None) -> list[Evidence]:
        if sources is None:
            sources = self.default_sources()
        if time_range is not None and self.as_of is not None:
            t0, t1 = time_range
            time_range = (t0, self.as_of if t1 is None else min(t1, self.as_of))
        res = self._router.search(text, image=image, top_k=top_k, time_range=time_range, cameras=self.cameras,
                                  sources=sources, as_of=self.as_of, labels=labels)
        self.missing_cameras.update(res.missing_cameras)
        self.missing_shards.update(res.missing_shards)
        return self._router.frame_cache.localize(res.evidence)

    # -- what perception found (linked across shards: entities.py) -----------------------------
    def entities(self, label=None, time_range=None, limit: int | None = None):
        got = self._router.entities(label, self.cameras, time_range, self.as_of, limit=limit)
        self.missing_cameras.update(got.missing_cameras)
        self.missing_shards.update(got.missing_shards)
        return list(got)

    def entity(self, entity_id: int):
        return self._router.entity(entity_id, camera=self.cameras, as_of=self.as_of)

    def last_seen(self, query: str):
        return self._router.last_seen(query, camera=self.cameras, as_of=self.as_of)

    def default_sources(self) -> tuple[str, ...]:
        """As MemoryView's: frames, events, summaries, text read and detected things, and speech
        when transcript segments are in view."""
        return SOURCES + (SPEECH,) if self.transcripts(limit=1) else SOURCES

    def camera_signals(self, text: str, since: float | None = None) -> list:
        """Every shard's per-camera signals (memory/cameras.py), in camera order. The match
        scores are bm25 within each shard's own index: comparable within a shard only, so
        across shards the ranking by them is approximate (the counts are exact)."""
        got = {c.camera_id: c for xs in self._each("camera_signals", text, since).values() for c in xs}
        return [got[c] for c in self.camera_ids() if c in got]

    def transcripts(self, t0: float | None = None, t1: float | None = None, camera: str | None = None,
                    limit: int | None = None) -> list[Transcript]:
        """Every shard's transcript segments in view, merged in time order (cluster ids)."""
        got = self._each("transcripts", t0, t1, camera, limit, camera=camera)
        items = sorted((self._g(s, x) for s, xs in got.items() for x in xs),
                       key=lambda x: (x.t_start, x.camera_id, x.segment_id))
        return items if limit is None else items[:limit]

    def frames(self, t0: float, t1: float, max_frames: int, camera: str | None = None) -> list[Moment]:
        got = self._each("frames", t0, t1, max_frames, camera, camera=camera)
        per_cam: dict[str, list] = {}
        for s, ms in got.items():
            for m in ms:
                per_cam.setdefault(m.camera_id, []).append(self._g(s, m))
        order = [camera] if camera else self.camera_ids()
        return self._router.frame_cache.localize([m for cam in order for m in per_cam.get(cam, [])])

    def moments_by_id(self, ids) -> dict[int, Moment]:
        r = self._router
        by_shard: dict[str, list[int]] = {}
        for cid in ids:
            try:
                shard, local = r.locate(int(cid))
            except Exception:  # noqa: BLE001 - an id of no shard (a model's invention) is not in view
                continue
            by_shard.setdefault(shard, []).append(local)
        out, down = r.call_many({s: ("view", ("moments_by_id", self.as_of, self.cameras, (loc,), {}), {})
                                  for s, loc in by_shard.items()})
        self.missing_shards.update(down)
        found = {cluster_id(r.shard_no(s), k): self._g(s, m) for s, got in out.items() for k, m in got.items()}
        return dict(zip(found, r.frame_cache.localize(list(found.values()))))

    def summaries(self) -> list[Summary]:
        items = [self._g(s, x) for s, xs in self._each("summaries").items() for x in xs]
        return sorted(items, key=lambda x: x.t0)

    def summary_kinds(self) -> list[SummaryKind]:
        return summary_kinds(self.summaries())

    # -- the forest and the provisional nodes --------------------------------------------------
    def forest_roots(self) -> list[ForestNode]:
        return self._by_camera([self._g(s, n) for s, ns in self._each("forest_roots").items() for n in ns])

    def _by_camera(self, items):
        order = {c: k for k, c in enumerate(self.camera_ids())}
        return sorted(items, key=lambda x: order.get(x.camera_id, len(order)))  # stable: each shard's order kept

    def forest_retrieve(self, text: str, k: int = 2, *, query=None) -> list[tuple[ForestNode, float]]:
        if self.text_embedder is None:
            return []
        q = self.text_embedder.embed_texts([text])[0] if query is None else query
        hits = [(self._g(s, n), sc) for s, hs in self._each("forest_retrieve", text, k, query=q).items() for n, sc in hs]
        return sorted(hits, key=lambda h: -h[1])[:k]  # lineages never cross shards: the best k of the union

    def provisional_nodes(self, keyframes: int = 4, *, before: Mapping[str, float] | None = None,
                          limit: int | None = None) -> list[ProvisionalNode]:
        kw = {"before": before} if limit is None else {"before": before, "limit": limit}
        return self._by_camera([self._g(s, n) for s, ns in self._each("provisional_nodes", keyframes, **kw).items()
                                for n in ns])

    def event_memory(self, keyframes: int = 4, *, before: Mapping[str, float] | None = None, limit: int | None = None):
        from ..memory import EventMemory

        kw = {"before": before} if limit is None else {"before": before, "limit": limit}
        got = self._each("event_memory", keyframes, **kw)
        roots = self._by_camera([self._g(s, n) for s, em in got.items() for n in em.roots])
        prov = self._by_camera([self._g(s, n) for s, em in got.items() for n in em.provisional])
        return EventMemory(tuple(roots), tuple(prov))

    def rank_provisional(self, text: str, nodes, k: int, *, query=None):
        """Cosines against the image embedder's text side, which the shards have (any one answers)."""
        nodes = list(nodes)
        if not nodes or k < 1:
            return []
        got = self._each("rank_provisional", text, nodes, k, query=query)
        return next(iter(got.values()), [])

    # -- the QA history (the router's own store): this view's own history only (memory/qa.py) ---
    def similar_answers(self, query_emb, k: int = 1):
        return self._qa.retrieve(query_emb, k, as_of=self.as_of, cameras=self.cameras, session=self.session)

    def dialogue(self, n: int = 3):
        return self._qa.recent(n, as_of=self.as_of, cameras=self.cameras, session=self.session)

    def set_answer_embedding(self, qa_id: int, embedding) -> None:
        self._qa.set_embedding(qa_id, embedding)

    def release_thread(self) -> None:
        self._qa_db.close()

    def qa_summary(self, at: float | None = None) -> str:
        t = self.as_of if at is None else (at if self.as_of is None else min(at, self.as_of))
        return self._qa.summary(as_of=t, cameras=self.cameras, session=self.session)

    def remember_answer(self, t: float, question: str, answer: str, embedding) -> int:
        return self._qa.add(t, question, answer, embedding, cameras=self.cameras, session=self.session)

    def set_qa_summary(self, t: float, text: str) -> None:
        self._qa.update_summary(t, text, cameras=self.cameras, session=self.session)

    # -- writes through the shards' memory writers ---------------------------------------------
    def summarize(self, t0: float, t1: float, granularity_s: float, prompt: str, structure: str | None = None):
        return [self._g(s, x) for s, xs in self._each("summarize", t0, t1, granularity_s, prompt, structure).items()
                for x in xs]
