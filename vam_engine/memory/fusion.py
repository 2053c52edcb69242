"""The rank rule of a search: ranked lists fused by reciprocal rank, on one store or over shards.

A search (memory/search.py) builds its ranked lists in a fixed order: one per (query, vector
space), ranked by cosine, then one per full-text kind, ranked by words (bm25), then speech by
words. ``fuse`` merges the lists of several parts (a cluster's shards; one store is one part)
list by list, the i-th list of every part being the same query in the same space:

1. each list's hits from every part are merged by their order key (a cosine, or a words tier and
   bm25 score) into the list one store holding all of it would rank, cut to ``fetch``
   (each part's best ``fetch`` hold every hit of the merged best ``fetch`` from it);
2. the merged lists are fused by rank, score = sum of 1 / (RRF_K + rank);
3. a vector list's hits are calibrated against the pooled background of its parts (the query's
   cosines with each part's sample of its scope): z = (c - mean) / spread, relevance = Phi(z).
   A hit found by words only takes its cosine and z from its own vector where the part gave one
   (speech segments), so one threshold cuts it as it cuts the others.

With one part this is exactly the single store's search. Over shards the vector lists are the
single store's (cosines are comparable: every shard embeds with one model); the words lists
differ only where bm25's document frequencies differ between shards (a word common on one
shard and rare on another), and the pooled background is a larger sample of the same
distribution once the scope holds more than BACKGROUND_SAMPLE vectors.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

RRF_K = 60
MIN_BACKGROUND = 2       # fewer: no spread to compare with (relevance None)
SPREAD_FLOOR = 1e-3      # cosine units; far under any real space's spread (CLIP text-image ~0.02-0.05)


@dataclass(frozen=True)
class RankedList:
    """One ranked list of a search, best first. ``order``: each hit's merge key (smaller is
    better): ``(-cosine,)`` for a vector list, ``(tier, -bm25 score)`` for a words list.
    ``cosines``: each hit's cosine with the query, NaN where not known (empty: none known)."""

    kind: str                          # the evidence its hits are: frame | event | summary | speech | ocr | object
    ids: tuple[int, ...]               # the part's own ids (moment, event, summary, segment, span, track)
    order: tuple[tuple[float, ...], ...]
    cosines: tuple[float, ...] = ()
    background: np.ndarray = field(default_factory=lambda: np.zeros(0), compare=False, repr=False)
    by_vector: bool = True             # False: words rank it; its cosines only fill in hits no vector list found


@dataclass(frozen=True)
class FusedHit:
    part: str            # the part (shard) it came from; "" for one store
    kind: str
    ref: int             # the part's own id
    score: float         # the fused rank score
    cosine: float | None
    z: float | None      # the background z-score (relevance is its normal CDF); None: nothing to compare


def spread_of(background: np.ndarray) -> tuple[float, float] | None:
    """(mean, spread) of a background's cosines (ddof 1, floored); None with fewer than MIN_BACKGROUND."""
    bg = np.asarray(background, np.float64)
    if len(bg) < MIN_BACKGROUND:
        return None
    mean = float(bg.sum()) / len(bg)
    dev = bg - mean
    return mean, max(math.sqrt(float(dev @ dev) / (len(bg) - 1)), SPREAD_FLOOR)  # np.std costs 3x


def fuse(parts: dict[str, list[RankedList]], fetch: int, keep: int) -> list[FusedHit]:
    """The best ``keep`` hits of the parts' lists (``parts`` in a fixed part order: ties between
    equal keys break by it, then by each part's own rank). See the module doc."""
    n_lists = max((len(lists) for lists in parts.values()), default=0)
    fused: dict[tuple[str, str, int], float] = {}
    cosine: dict[tuple[str, str, int], float] = {}
    zscore: dict[tuple[str, str, int], float] = {}
    fill: dict[tuple[str, str, int], tuple[float, float | None]] = {}  # words hits' own cosine and z
    for i in range(n_lists):
        lists = [(p_no, part, ps[i]) for p_no, (part, ps) in enumerate(parts.items()) if i < len(ps)]
        cands = sorted((rl.order[r], p_no, r, part, rl) for p_no, part, rl in lists for r in range(len(rl.ids)))
        if not cands:
            continue
        stats = spread_of(np.concatenate([rl.background for _, _, rl in lists]))
        for rank, (_, _, r, part, rl) in enumerate(cands[:fetch]):
            key = (rl.kind, part, rl.ids[r])
            fused[key] = fused.get(key, 0.0) + 1.0 / (RRF_K + rank + 1)
            if not rl.cosines:
                continue
            c = rl.cosines[r]
            if math.isnan(c):
                continue
            z = None if stats is None else (c - stats[0]) / stats[1]
            if rl.by_vector:
                cosine[key] = max(cosine.get(key, -1.0), c)
                if z is not None:
                    zscore[key] = max(zscore.get(key, -math.inf), z)
            else:
                fill.setdefault(key, (c, z))
    for key, (c, z) in fill.items():
        if key not in cosine:
            cosine[key] = c
            if z is not None:
                zscore[key] = z
    best = sorted(fused.items(), key=lambda kv: -kv[1])[:keep]
    return [FusedHit(part, kind, ref, score, cosine.get((kind, part, ref)), zscore.get((kind, part, ref)))
            for (kind, part, ref), score in best]
