"""What a question may see of the memory: one causal, read-only view per question.

The reasoning layer (reason/) holds a ``MemoryView`` and nothing else of the memory: no store,
no connection. Every read it offers applies the view's ``as_of`` bound (nothing that ends after
it) and camera scope itself, so no stage can forget them. Times are on each camera's axis
(absolute seconds when known, else relative). The only writes are the QA history's (an
answered question is remembered, in the history of the view's cameras and session alone) and
summary documents, through the summarizer the view was given (one that stores them, or, for an
asker who may not write, one that only drafts them for the answer).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np

from ..numerics import spread_evenly
from ..ingest import camera_list
from .cameras import camera_signals
from .provisional import PER_CAMERA_LIMIT, ProvisionalReader
from .records import (CameraSignal, EntityRecord, EntityTimeline, Evidence, EventMemory, ForestNode, LastSeen, Moment,
                      ProvisionalNode, QARecord, Summary, SummaryKind, Transcript)
from .search import SOURCES, SPEECH, search

if TYPE_CHECKING:
    from .forest import EventForest
    from .store import Store

# summarize(camera, t0, t1, granularity_s, prompt, structure) -> Summary list: the memory
# writer's (stored) or its drafts (summary_id None: kept in the answer only)
Summarizer = Callable[[str, float, float, float, str, "str | None"], list]


class MemoryView:
    """``session``: the conversation the question belongs to ("": none); with ``cameras`` it
    names the QA history the question reads and is recorded in."""

    def __init__(self, store: "Store", vectors, embedder, text_embedder, forest: "EventForest | None" = None,
                 summarizer: Summarizer | None = None, *, as_of: float | None = None, cameras=None,
                 session: str = ""):
        self._store = store
        self._vectors = vectors
        self._embedder = embedder
        self._forest = forest
        self._summarizer = summarizer
        self.text_embedder = text_embedder
        self.as_of = None if as_of is None else float(as_of)
        self.cameras = camera_list(cameras) or None  # an empty scope is no scope: every camera
        self.session = session or ""

    def _in_view(self, camera_id: str | None, t_end: float) -> bool:
        # a summary over every camera (camera_id None) may describe cameras outside a scoped view:
        # only an unscoped view sees it
        return ((self.cameras is None or camera_id in self.cameras)
                and (self.as_of is None or t_end <= self.as_of))

    # -- time ----------------------------------------------------------------------------------
    def camera_ids(self) -> list[str]:
        return list(self.cameras or self._store.moments.cameras())

    def latest_time(self, camera_id: str) -> float | None:
        """Time of the camera's newest moment in view (None: none)."""
        if self.cameras and camera_id not in self.cameras:
            return None
        return self._store.moments.latest_time(camera_id, self.as_of)

    def now(self) -> float | None:
        """The question's present: ``as_of``, else the newest moment in view (None: empty)."""
        if self.as_of is not None:
            return self.as_of
        ts = [t for t in map(self.latest_time, self.camera_ids()) if t is not None]
        return max(ts) if ts else None

    def origin(self) -> float:
        """Time zero of "relative" times: 0 on a relative axis; on an absolute (unix) axis, the
        first moment in view."""
        ext = self._store.moments.extent(self.camera_ids(), self.as_of)
        return float(ext.first) if ext.first is not None and ext.absolute else 0.0

    # -- reads ---------------------------------------------------------------------------------
    def search(self, text: str | None, top_k: int = 10, time_range=None, sources=None, *,
               image=None, labels=None) -> list[Evidence]:
        """Fused search by text and/or ``image`` (an RGB array or a frame path), clipped to the
        view (``as_of``: nothing that ends after it); ``sources`` None: ``default_sources()``;
        ``labels``: hits showing detected things of these classes only."""
        if sources is None:
            sources = self.default_sources()
        if time_range is not None and self.as_of is not None:
            t0, t1 = time_range
            time_range = (t0, self.as_of if t1 is None else min(t1, self.as_of))
        return search(self._store, self._vectors, self._embedder, self.text_embedder, text=text, image=image, top_k=top_k,
                      time_range=time_range, cameras=self.cameras, sources=tuple(sources), as_of=self.as_of,
                      labels=labels).evidence

    def camera_signals(self, text: str, since: float | None = None) -> list[CameraSignal]:
        """Per camera in view: how its documents, transcripts, text read and detected things
        ending in [since, as_of] match ``text``'s words, its newest alert, moment and documented
        event by ``as_of`` (memory/cameras.py: what a question's budget ranks cameras by)."""
        return camera_signals(self._store, text, self.camera_ids(), as_of=self.as_of, since=since)

    # -- what perception found (memory/entities.py) ----------------------------------------------
    def entities(self, label=None, time_range=None, limit: int | None = None) -> list[EntityRecord]:
        """Entities in view (first seen by ``as_of`` on a camera in view), as known then."""
        t0, t1 = time_range if time_range is not None else (None, None)
        return self._store.entities.list(label=label, cameras=self.cameras, t0=t0, t1=t1, as_of=self.as_of,
                                         limit=limit)

    def entity(self, entity_id: int) -> EntityTimeline | None:
        return self._store.entities.timeline(entity_id, cameras=self.cameras, as_of=self.as_of)

    def last_seen(self, query: str) -> LastSeen | None:
        """Where something matching ``query`` (label, colours, text) was last seen in view."""
        return self._store.entities.last_seen(query, cameras=self.cameras, as_of=self.as_of)

    def default_sources(self) -> tuple[str, ...]:
        """What a search covers when it names no sources: frames, events, summaries, text read
        and detected things, and speech when transcript segments are in view."""
        if self.cameras is None and self.as_of is None:
            return SOURCES + (SPEECH,) if self._store.transcripts.exists() else SOURCES
        return SOURCES + (SPEECH,) if self.transcripts(limit=1) else SOURCES

    def transcripts(self, t0: float | None = None, t1: float | None = None, camera: str | None = None,
                    limit: int | None = None) -> list[Transcript]:
        """Transcript segments in view (of ``camera``, or every camera in view) overlapping
        [t0, t1] and ending by ``as_of``, in time order."""
        if camera is not None and self.cameras and camera not in self.cameras:
            return []
        cams = [camera] if camera is not None else self.cameras
        return self._store.transcripts.list(cams, t0, t1, as_of=self.as_of, limit=limit)

    def frames(self, t0: float, t1: float, max_frames: int, camera: str | None = None) -> list[Moment]:
        """Up to ``max_frames`` moments of [t0, t1] (clipped to ``as_of``), spread evenly in
        time, per camera in view (or one camera), in time order."""
        if self.as_of is not None:
            t1 = min(t1, self.as_of)
        if t1 < t0 or max_frames < 1:
            return []
        out = []
        for cam in [camera] if camera else self.camera_ids():
            if self.cameras and cam not in self.cameras:
                continue
            ms = self._store.moments.on_axis(cam, t0, math.nextafter(t1, math.inf))
            out += [ms[i] for i in spread_evenly(len(ms), max_frames)]
        return out

    def moments_by_id(self, ids) -> dict[int, Moment]:
        """The moments of ``ids`` that are in view."""
        return {i: m for i, m in self._store.moments.by_id(ids).items() if self._in_view(m.camera_id, m.t)}

    def summaries(self) -> list[Summary]:
        """Summary documents in view (their window ends by ``as_of``), by time."""
        return [s for s in self._store.summaries.list() if self._in_view(s.camera_id, s.t1)]

    def summary_kinds(self) -> list[SummaryKind]:
        """The (structure, granularity) kinds of the summary documents in view, most
        documents first."""
        return summary_kinds(self.summaries())

    # -- the forest ----------------------------------------------------------------------------
    def forest_roots(self) -> list[ForestNode]:
        """Root nodes of every camera in view that end by ``as_of``."""
        if self._forest is None:
            return []
        return [n for cam in self.camera_ids() for n in self._forest.roots(cam) if self._in_view(cam, n.t_end)]

    def forest_retrieve(self, text: str, k: int = 2, *, query=None) -> list[tuple[ForestNode, float]]:
        """(node, score) of the k best forest nodes for ``text`` (or its embedding ``query``, when
        the caller has it already), no two in one lineage."""
        if self._forest is None or self.text_embedder is None or not len(self._forest):
            return []
        q = self.text_embedder.embed_texts([text])[0] if query is None else query
        if self.cameras and len(self.cameras) == 1:
            return self._forest.retrieve(q, k=k, camera_id=self.cameras[0], as_of=self.as_of)
        hits = self._forest.retrieve(q, k=k, as_of=self.as_of)
        return [(n, s) for n, s in hits if not self.cameras or n.camera_id in self.cameras]

    # -- events the forest does not hold yet (memory/provisional.py) ---------------------------
    def _leaf_in_view(self, event_id: int) -> bool:
        """Whether the event is a forest leaf this view shows (documented, ending by ``as_of``)."""
        leaf = None if self._forest is None else self._forest.leaf_for_event(event_id)
        return leaf is not None and (self.as_of is None or leaf.t_end <= self.as_of)

    def provisional_nodes(self, keyframes: int = 4, *, before: Mapping[str, float] | None = None,
                          limit: int = PER_CAMERA_LIMIT) -> list[ProvisionalNode]:
        """The events in view that no forest leaf in view stands for (the open event, closed
        events waiting for their document), by camera and time, as they stood at ``as_of``;
        ``keyframes`` spread over each (only from moments at or before ``before[camera]``, when
        given); the newest ``limit`` per camera."""
        reader = ProvisionalReader(self._store.db, self._store.frames.root)
        return reader.nodes(self.camera_ids(), self._leaf_in_view, as_of=self.as_of, keyframes=keyframes,
                            before=before, limit=limit)

    def event_memory(self, keyframes: int = 4, *, before: Mapping[str, float] | None = None,
                     limit: int = PER_CAMERA_LIMIT) -> EventMemory:
        """The forest's roots in view and the provisional nodes, never one event in both: an
        event whose leaf lands while they are read is dropped from the provisional nodes and
        the roots are read again (they change with every leaf the forest takes)."""
        provisional = self.provisional_nodes(keyframes, before=before, limit=limit)
        for _ in range(8):
            roots = self.forest_roots()
            keep = [p for p in provisional if not self._leaf_in_view(p.event_id)]
            if len(keep) == len(provisional):
                break
            provisional = keep
        return EventMemory(tuple(roots), tuple(provisional))

    def rank_provisional(self, text: str, nodes, k: int, *, query=None) -> list[tuple[ProvisionalNode, float]]:
        """(node, cosine) of the ``k`` provisional nodes whose mean frame embedding is closest to
        ``text`` through the image embedder's text side (or to ``query``, a vector of that
        space), best first. Empty when the image embedder has no text side: those cosines are
        never compared with the forest's, which live in the text embedder's space."""
        nodes = [n for n in nodes if n.embedding is not None]
        if k < 1 or not nodes:
            return []
        if query is None:
            if self._embedder is None or not getattr(self._embedder, "has_text", False):
                return []
            query = self._embedder.embed_texts([text])[0]
        q = np.asarray(query, np.float32).ravel()
        norm = float(np.linalg.norm(q))
        if not (norm > 0 and math.isfinite(norm)):
            return []
        q = q / norm
        scored = [(n, float(np.dot(n.embedding, q))) for n in nodes if n.embedding.shape == q.shape]
        scored.sort(key=lambda ns: (-ns[1], -ns[0].t_end))
        return scored[:k]

    # -- the QA history ------------------------------------------------------------------------
    # Only this view's own history (its exact cameras and session: memory/qa.py), never another's.
    def similar_answers(self, query_emb, k: int = 1) -> list[QARecord]:
        """The ``k`` earlier answered questions of this history most similar to the query,
        asked by ``as_of``."""
        return self._store.qa.retrieve(query_emb, k, as_of=self.as_of, cameras=self.cameras, session=self.session)

    def dialogue(self, n: int = 3) -> list[QARecord]:
        """The last ``n`` answered questions of this history (asked by ``as_of``), oldest first:
        what a follow-up question refers to."""
        return self._store.qa.recent(n, as_of=self.as_of, cameras=self.cameras, session=self.session)

    def set_answer_embedding(self, qa_id: int, embedding) -> None:
        self._store.qa.set_embedding(qa_id, embedding)

    def release_thread(self) -> None:
        """Close the calling thread's store connection (a worker thread that is done with the
        view calls this)."""
        self._store.db.close()

    def qa_summary(self, at: float | None = None) -> str:
        """The rolling summary of this history's earlier questions as it stood at ``as_of`` (or
        at ``at``, when that is earlier)."""
        t = self.as_of if at is None else (at if self.as_of is None else min(at, self.as_of))
        return self._store.qa.summary(as_of=t, cameras=self.cameras, session=self.session)

    def remember_answer(self, t: float, question: str, answer: str, embedding) -> int:
        """Record an answered question at the question's time ``t`` in this history."""
        return self._store.qa.add(t, question, answer, embedding, cameras=self.cameras, session=self.session)

    def set_qa_summary(self, t: float, text: str) -> None:
        self._store.qa.update_summary(t, text, cameras=self.cameras, session=self.session)

    # -- writes through the memory writer ------------------------------------------------------
    def summarize(self, t0: float, t1: float, granularity_s: float, prompt: str,
                  structure: str | None = None) -> list[Summary]:
        """Write summary documents (clipped to ``as_of``) for each camera in view, labelled
        ``structure`` (kept with each document: a later search may filter on it)."""
        if self._summarizer is None:
            return []
        if self.as_of is not None:
            t1 = min(t1, self.as_of)
        if t1 <= t0:
            return []
        return [d for cam in self.camera_ids() for d in self._summarizer(cam, t0, t1, granularity_s, prompt, structure)]


def summary_kinds(summaries) -> list[SummaryKind]:
    """The (structure, granularity) kinds of ``summaries``, most documents first."""
    counts: dict = {}
    for s in summaries:
        key = (s.structure, float(s.granularity_s))
        counts[key] = counts.get(key, 0) + 1
    return [SummaryKind(st, g, c) for (st, g), c in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))]
