"""Search over shards by the one rank rule of memory/fusion.py, in two rounds.

1. Each shard builds the ranked lists one engine builds (memory.search_lists: per vector space
   its best hits by cosine with its background sample; per full-text kind its best documents by
   words; speech by words), with every filter applied where the data is: cameras, time range,
   ``as_of``, ``labels`` and the place.
2. The router fuses them as one store fuses its own lists (memory.fuse, the shards as parts in
   the catalogue's order), so vector hits rank as on one node and relevance is calibrated
   against the pooled background.
3. Each shard turns its share of the fused hits into evidence (memory.keyed_evidence: documents,
   boxes, poses, the ``labels`` check of hits not filtered before ranking), and the router puts
   them back in the fused order with cluster ids.

Where it can differ from one node holding everything (docs/cluster.md): words lists merge by
each shard's bm25 score, whose document frequencies are the shard's own, and with more than
BACKGROUND_SAMPLE vectors in scope the pooled background is a larger sample of the same
distribution.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from ..memory import SPEECH, Evidence, FusedHit, RankedList, fetch_size, fuse, keep_size, keyed_evidence, search_lists


@dataclass
class ShardLists:
    lists: list[RankedList]
    notes: list[str]
    seconds: float = 0.0  # the shard's own time for it (the rest of a search is transport and merge)


def shard_lists(engine, *, text=None, image=None, top_k=10, time_range=None, cameras=None, sources=(),
                as_of=None, place=None, labels=None) -> ShardLists:
    """A shard's ranked lists for a search (runs in the shard)."""
    started = time.perf_counter()
    wants_texts = text is not None and {"event", "summary", SPEECH} & set(sources)
    lists, notes = search_lists(engine.store, engine.vectors, engine.embedder,
                                engine.text_embedder() if wants_texts else None, text=text, image=image,
                                top_k=top_k, time_range=time_range, cameras=cameras, sources=tuple(sources),
                                as_of=as_of, place=place, labels=labels)
    return ShardLists(lists, notes, time.perf_counter() - started)


def shard_evidence(engine, hits: list[FusedHit], labels=None) -> list:
    """The evidence of a shard's share of the fused hits: [((kind, local id), Evidence)] in their
    order (hits gone from the store, or failing ``labels``, left out)."""
    return keyed_evidence(engine.store, hits, labels)


def fuse_shards(parts: dict[str, ShardLists], top_k: int, labels=None) -> list[FusedHit]:
    """The fused hits of the shards' lists (``parts`` in the catalogue's order), as many as
    become evidence (more with ``labels``: some may fail the check)."""
    return fuse({s: p.lists for s, p in parts.items()}, fetch_size(top_k), keep_size(top_k, labels))


def by_shard(best: list[FusedHit]) -> dict[str, list[FusedHit]]:
    """Each shard's share of the fused hits, in their order."""
    out: dict[str, list[FusedHit]] = {}
    for h in best:
        out.setdefault(h.part, []).append(h)
    return out


def in_fused_order(best: list[FusedHit], got: dict[str, list], top_k: int) -> list[tuple[str, Evidence]]:
    """(shard, evidence) of the shards' answers (``shard_evidence``) in the fused order, the
    first ``top_k`` (hits a shard left out, or of a shard that did not answer, skipped)."""
    found = {(s, key): ev for s, pairs in got.items() for key, ev in pairs}
    out = [(h.part, found[(h.part, (h.kind, h.ref))]) for h in best if (h.part, (h.kind, h.ref)) in found]
    return out[:int(top_k)]
