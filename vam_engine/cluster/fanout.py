"""Search over shards, fused exactly as one engine fuses its spaces (memory/search.py).

One engine ranks each (query, space) list by cosine and fuses the lists by reciprocal rank
(score = sum of 1 / (RRF_K + rank)). Cosines within one space are comparable across shards (every
shard embeds with the same model), ranks are not: a shard's rank 1 may be the cluster's rank 9.
So a shard returns, per space, its best ``fetch`` hits with their cosines and the query's
background cosines (the calibration sample of its scope), and the router

1. merges each space's lists by cosine into the list one engine holding all of it would rank
   (each shard's best ``fetch`` contain every hit of the cluster's best ``fetch`` from it),
2. fuses those lists by rank with the same RRF_K, space order and tie order as search.py,
3. calibrates relevance against the pooled background (the union of the shards' samples: with
   at most BACKGROUND_SAMPLE vectors in scope over the whole cluster this is exactly the single
   engine's background; beyond that it is a larger sample of the same distribution).

With exact per-space search (every space under ``vectors.ann_min_size``), the router's list is
the single engine's list: same evidence, order, scores, cosines and relevance (up to float
summation order). Under ANN each shard's list is approximate as one engine's would be.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import VectorError
from ..memory import (BACKGROUND_SAMPLE, MIN_BACKGROUND, RRF_K, SOURCES, SPREAD_FLOOR, Evidence, check_search,
                      relevance, space_of, space_queries, whole_space_sample)


@dataclass(frozen=True)
class SpaceHits:
    """One shard's best hits in one (query, space) list, best first, and the query's background."""

    space: str            # frame | event | event_doc | summary
    sims: tuple[float, ...]
    ids: tuple[int, ...]  # the shard's local ids (moment, event or summary)
    background: np.ndarray = field(compare=False, repr=False)  # float64 cosines of the scope sample


@dataclass
class ShardHits:
    spaces: list[SpaceHits]
    evidence: dict[tuple[str, int], Evidence]  # (kind, local id) -> evidence with the shard's local ids
    notes: list[str]
    seconds: float = 0.0  # the shard's own time for it (the rest of a search is transport and merge)


def fetch_size(top_k: int) -> int:
    return max(top_k * 3, top_k + 10)  # as search.py: each space's list is this long


def shard_hits(engine, *, text=None, image=None, top_k=10, time_range=None, cameras=None, sources=SOURCES,
               as_of=None) -> ShardHits:
    """A shard's part of a search (runs in the shard): per space, its best hits and background."""
    started = time.perf_counter()
    check_search(text, image, top_k, sources)
    store, vectors, embedder = engine.store, engine.vectors, engine.embedder
    text_embedder = engine.text_embedder() if text is not None and {"event", "summary"} & set(sources) else None
    t0, t1 = time_range if time_range is not None else (None, None)
    queries, notes = space_queries(embedder, text_embedder, text, image, sources)  # as one engine's
    fetch = fetch_size(top_k)
    spaces, keys = [], set()
    for space, q in queries:
        allowed = store.vector_table.allowed_ids(space, cameras, t0, t1, as_of)
        sims, ids = vectors.search(space, q, fetch, allowed)
        if not len(ids):
            spaces.append(SpaceHits(space, (), (), np.zeros(0)))
            continue
        scope = allowed if t0 is None and t1 is None else store.vector_table.allowed_ids(space, cameras, None, None,
                                                                                         as_of)
        bg = _background(space_of(vectors, space), q, scope)
        spaces.append(SpaceHits(space, tuple(map(float, sims.tolist())), tuple(map(int, ids.tolist())), bg))
        kind = "event" if space == "event_doc" else space
        keys.update((kind, int(v)) for v in ids.tolist())
    return ShardHits(spaces, _materialize(store, keys), notes, time.perf_counter() - started)


def _background(space, query: np.ndarray, scope) -> np.ndarray:
    """The query's cosines with the calibration sample search.py would draw on this shard (the
    whole space's cached sample, or a sample of the scope), as float64; empty when none."""
    if space is None:
        return np.zeros(0)
    q = np.asarray(query, np.float32).reshape(-1)
    norm = float(np.linalg.norm(q))
    if q.shape[0] != space.dim or not math.isfinite(norm) or norm == 0.0:
        return np.zeros(0)
    q = q / norm
    if scope is None:
        rows = whole_space_sample(space)
        if rows is None:  # one vector (or none): the pooled background may still have enough
            ids = space.ids()
            rows = space.get(ids) if len(ids) else None
        return np.zeros(0) if rows is None else (rows @ q).astype(np.float64)
    ids = np.asarray(scope, np.int64)
    if len(ids) > BACKGROUND_SAMPLE:  # the same seeded draw as search.py's scoped sample
        ids = ids[np.random.default_rng(len(ids)).choice(len(ids), BACKGROUND_SAMPLE, replace=False)]
    if not len(ids):
        return np.zeros(0)
    try:
        return (space.get(ids) @ q).astype(np.float64)
    except VectorError:  # some not in the index yet (SQLite leads it by a transaction)
        scores, got = space.search(q[None, :], len(ids), allowed=ids)
        return scores[0][got[0] >= 0].astype(np.float64)


def _materialize(store, keys) -> dict[tuple[str, int], Evidence]:
    """Evidence for each (kind, local id) still in the store (score and relevance filled by the router)."""
    moments = store.moments.by_id([v for k, v in keys if k == "frame"])
    events = store.events.by_id([v for k, v in keys if k == "event"])
    summaries = store.summaries.by_id([v for k, v in keys if k == "summary"])
    key_moments = store.moments.by_id([k for e in events.values() for k in e.keyframes] +
                                      [k for s in summaries.values() for k in s.moment_ids])
    out = {}
    for vid, m in moments.items():
        out[("frame", vid)] = Evidence(m.camera_id, m.t, m.t, (vid,), (m.frame_path,), 0.0, "frame")
    for vid, e in events.items():
        kms = [key_moments[k] for k in e.keyframes if k in key_moments]
        out[("event", vid)] = Evidence(e.camera_id, e.t_start, e.t_end, tuple(m.moment_id for m in kms),
                                       tuple(m.frame_path for m in kms), 0.0, "event", e.doc)
    for vid, sm in summaries.items():
        kms = [key_moments[k] for k in sm.moment_ids if k in key_moments]
        out[("summary", vid)] = Evidence(sm.camera_id or "*", sm.t0, sm.t1, tuple(m.moment_id for m in kms),
                                         tuple(m.frame_path for m in kms), 0.0, "summary", sm.text)
    return out


@dataclass(frozen=True)
class FusedHit:
    shard: str
    evidence: Evidence  # score, similarity and relevance are the cluster's; ids still the shard's


def fuse(per_shard: dict[str, ShardHits], top_k: int) -> list[FusedHit]:
    """The cluster's fused list from the shards' parts (``per_shard`` in the catalogue's shard
    order: ties between equal cosines break by it)."""
    fetch = fetch_size(top_k)
    order: list[str] = []  # spaces in query order (every shard builds the same queries)
    for hits in per_shard.values():
        for sh in hits.spaces:
            if sh.space not in order:
                order.append(sh.space)
    fused: dict[tuple[str, str, int], float] = {}
    cosine: dict[tuple[str, str, int], float] = {}
    zscore: dict[tuple[str, str, int], float] = {}
    for space in order:
        cands, bgs = [], []
        for s_no, (shard, hits) in enumerate(per_shard.items()):
            for sh in hits.spaces:
                if sh.space == space:
                    cands += [(-sim, s_no, rank, shard, vid) for rank, (sim, vid) in enumerate(zip(sh.sims, sh.ids))]
                    bgs.append(sh.background)
        if not cands:
            continue
        cands.sort()
        cands = cands[:fetch]
        bg = np.concatenate(bgs) if bgs else np.zeros(0)
        mean = spread = None
        if len(bg) >= MIN_BACKGROUND:
            mean = float(bg.sum()) / len(bg)
            dev = bg - mean
            spread = max(math.sqrt(float(dev @ dev) / (len(bg) - 1)), SPREAD_FLOOR)
        kind = "event" if space == "event_doc" else space
        for rank, (neg, _, _, shard, vid) in enumerate(cands):
            key, sim = (kind, shard, vid), -neg
            fused[key] = fused.get(key, 0.0) + 1.0 / (RRF_K + rank + 1)
            cosine[key] = max(cosine.get(key, -1.0), sim)
            if mean is not None:
                zscore[key] = max(zscore.get(key, -math.inf), (sim - mean) / spread)
    best = sorted(fused.items(), key=lambda kv: -kv[1])[:top_k]
    out = []
    for (kind, shard, vid), score in best:
        ev = per_shard[shard].evidence.get((kind, vid))
        if ev is None:
            continue  # removed between its vector search and its rows' read, as search.py skips it
        key = (kind, shard, vid)
        out.append(FusedHit(shard, replace(ev, score=score, similarity=cosine[key],
                                           relevance=relevance(zscore.get(key)))))
    return out
