"""What a question may see of the memory: one causal, read-only view per question.

Every reasoning stage reads the memory through a ``MemoryView``, which applies the question's
``as_of`` bound (nothing that ends after it) and camera filter itself, so no stage can forget
them. Times are on each camera's axis (absolute seconds when known, else relative).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..memory.records import Evidence, Moment, camera_time
from ..memory.search import SOURCES, search
from ..numerics import spread_evenly
from .turn import TraceEntry


@dataclass
class Answer:
    """What ``Engine.ask`` returns."""
    text: str
    found: bool                      # False: a clear "not found" (no evidence supports an answer)
    evidence: list[Evidence]         # the cited evidence, best first
    mode: str                        # "two_phase" | "agentic"
    trace: list[TraceEntry] = field(default_factory=list)  # every step: stage, replies, action, model calls
    tokens: dict = field(default_factory=lambda: {"prompt": 0, "completion": 0, "cached": 0})
    timings: dict = field(default_factory=dict)        # seconds per stage, and "total"

    def add_usage(self, response) -> None:
        self.tokens["prompt"] += response.prompt_tokens
        self.tokens["completion"] += response.completion_tokens
        self.tokens["cached"] += response.cached_tokens

    def add_time(self, stage: str, seconds: float) -> None:
        self.timings[stage] = self.timings.get(stage, 0.0) + seconds


def moment_evidence(moments: list[Moment], score: float = 0.0, text: str | None = None) -> Evidence | None:
    """One camera's moments as one cited interval."""
    if not moments:
        return None
    ts = [camera_time(m.t_rel, m.t_abs) for m in moments]
    return Evidence(moments[0].camera_id, min(ts), max(ts), tuple(m.moment_id for m in moments),
                    tuple(m.frame_path for m in moments), score, "frame", text)


class MemoryView:
    def __init__(self, store, vectors, embedder, text_embedder, forest=None, writer=None, *,
                 as_of: float | None = None, cameras=None):
        self.store = store
        self.vectors = vectors
        self.embedder = embedder
        self.text_embedder = text_embedder
        self.forest = forest
        self.writer = writer
        self.as_of = None if as_of is None else float(as_of)
        self.cameras = [cameras] if isinstance(cameras, str) else (list(cameras) if cameras else None)

    # -- time ----------------------------------------------------------------------------------
    def now(self) -> float | None:
        """The question's present: ``as_of``, else the newest moment in view (None: empty)."""
        if self.as_of is not None:
            return self.as_of
        ts = [camera_time(m.t_rel, m.t_abs) for m in self._latest()]
        return max(ts) if ts else None

    def _latest(self) -> list[Moment]:
        out = []
        for cam in self.cameras or self.store.cameras():
            row = self.store.reader().execute("SELECT MAX(t) FROM moments WHERE camera_id=?", (cam,)).fetchone()
            if row[0] is not None:
                out += self.store.moments_on_axis(cam, row[0], math.nextafter(row[0], math.inf))
        return out

    def camera_ids(self) -> list[str]:
        return list(self.cameras or self.store.cameras())

    # -- reads ---------------------------------------------------------------------------------
    def search(self, text: str, top_k: int = 10, time_range=None, sources=SOURCES) -> list[Evidence]:
        """Fused search, clipped to the view (``as_of``: nothing that ends after it)."""
        if time_range is not None and self.as_of is not None:
            t0, t1 = time_range
            time_range = (t0, self.as_of if t1 is None else min(t1, self.as_of))
        return search(self.store, self.vectors, self.embedder, self.text_embedder, text=text, top_k=top_k,
                      time_range=time_range, cameras=self.cameras, sources=tuple(sources), as_of=self.as_of).evidence

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
            ms = self.store.moments_on_axis(cam, t0, math.nextafter(t1, math.inf))
            if len(ms) > max_frames:
                ms = [ms[i] for i in spread_evenly(len(ms), max_frames)]
            out += ms
        return out

    def forest_roots(self) -> list:
        """Root nodes of every camera in view that end by ``as_of``."""
        if self.forest is None:
            return []
        return [n for cam in self.camera_ids() for n in self.forest.roots(cam)
                if self.as_of is None or n.t_end <= self.as_of]

    def forest_retrieve(self, text: str, k: int = 2, *, query=None) -> list[tuple]:
        """(node, score) of the k best forest nodes for ``text`` (or its embedding ``query``, when
        the caller has it already), no two in one lineage."""
        if self.forest is None or self.text_embedder is None or not len(self.forest):
            return []
        q = self.text_embedder.embed_texts([text])[0] if query is None else query
        if self.cameras and len(self.cameras) == 1:
            return self.forest.retrieve(q, k=k, camera_id=self.cameras[0], as_of=self.as_of)
        hits = self.forest.retrieve(q, k=k, as_of=self.as_of)
        return [(n, s) for n, s in hits if not self.cameras or n.camera_id in self.cameras]

    def summarize(self, t0: float, t1: float, granularity_s: float, prompt: str) -> list[dict]:
        """Write summary documents (clipped to ``as_of``) for each camera in view."""
        if self.writer is None:
            return []
        if self.as_of is not None:
            t1 = min(t1, self.as_of)
        if t1 <= t0:
            return []
        ids = [i for cam in self.camera_ids() for i in self.writer.summarize(cam, t0, t1, granularity_s, prompt)]
        found = self.store.summaries_by_id(ids)
        return [found[i] for i in ids]
