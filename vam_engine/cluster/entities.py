"""Entities across shards: each shard's entities with cluster ids, linked by appearance.

One engine links a new track to an entity of its label when their appearance vectors are at
least ``LinkParams.min_similarity`` alike, whatever the camera. Cameras of different shards are
linked at the router the same way: two shards' entities of one label whose appearance is that
alike are one entity (linked transitively), so a thing seen on cameras of two shards is one
entity. The merged entity's id is its members' smallest cluster id; it was seen where any member
was; it carries the strings read on any member, and the representative crop (with its colours)
of the member whose crop ranks highest.

Where it differs from one node: one node links online, each track against the entities known
at its first sighting; the router links whole entities after the fact, so two things one node
kept apart because they were first seen before their appearance converged may be one here.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..memory import EntityRecord, EntityTimeline, LastSeen
from ..perception import LinkParams
from .catalogue import cluster_id, split_id


@dataclass(frozen=True)
class ShardEntity:
    """A shard's entity as the router links it (ids are cluster ids)."""

    record: EntityRecord
    appearance: np.ndarray | None   # unit vector; None: none stored (then it links to nothing)
    crop_rank: float = 0.0


def linked_groups(entities: list[ShardEntity], shard_of, min_similarity: float | None = None) -> list[list[ShardEntity]]:
    """The entities grouped into things: members of one group are of one label, and each is at
    least ``min_similarity`` alike to another member of another shard. Groups by their smallest id."""
    thr = LinkParams().min_similarity if min_similarity is None else float(min_similarity)
    parent = list(range(len(entities)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_label: dict[str, list[int]] = {}
    for i, e in enumerate(entities):
        by_label.setdefault(e.record.label, []).append(i)
    for idx in by_label.values():
        have = [i for i in idx if entities[i].appearance is not None]
        if len(have) < 2:
            continue
        vecs = np.stack([np.asarray(entities[i].appearance, np.float32) for i in have])
        sims = vecs @ vecs.T
        shards = [shard_of(entities[i].record.entity_id) for i in have]
        for a in range(len(have)):
            for b in range(a + 1, len(have)):
                if shards[a] != shards[b] and sims[a, b] >= thr:
                    parent[root(have[a])] = root(have[b])
    groups: dict[int, list[ShardEntity]] = {}
    for i, e in enumerate(entities):
        groups.setdefault(root(i), []).append(e)
    out = [sorted(g, key=lambda e: e.record.entity_id) for g in groups.values()]
    return sorted(out, key=lambda g: g[0].record.entity_id)


def entity_candidates(store, label=None, cameras=None, t0=None, t1=None, as_of=None) -> list:
    """A shard's part (runs in the shard): [(EntityRecord, appearance or None, crop rank)] of the
    entities of its store in scope, by id."""
    recs = store.entities.list(label=label, cameras=cameras, t0=t0, t1=t1, as_of=as_of)
    app = store.entities.appearances([r.entity_id for r in recs])
    return [(r, *app.get(r.entity_id, (None, 0.0))) for r in recs]


def things_of(candidates: dict[int, list]) -> list[list[ShardEntity]]:
    """The shards' candidates (``{shard number: entity_candidates(...)}``) as things, by id."""
    ents = [ShardEntity(local_entity(r, no), app, rank) for no, got in candidates.items() for r, app, rank in got]
    return linked_groups(ents, lambda cid: split_id(cid)[0])


def merged(group: list[ShardEntity]) -> EntityRecord:
    """One thing's record from its members (see the module doc)."""
    first = group[0].record
    if len(group) == 1:
        return first
    cropped = [e for e in group if e.record.crop_path is not None]
    best = max(cropped, key=lambda e: (e.crop_rank, -e.record.entity_id)).record if cropped else None
    seen: dict = {}
    texts: list[str] = []
    for e in group:
        seen.update(e.record.seen)  # shards hold different cameras
        texts += [t for t in e.record.texts if t not in texts]
    return replace(first, colours=best.colours if best else first.colours, texts=tuple(texts), seen=seen,
                   crop_path=best.crop_path if best else None, crop_camera=best.crop_camera if best else None)


def local_entity(record: EntityRecord, no: int) -> EntityRecord:
    return replace(record, entity_id=cluster_id(no, record.entity_id))


def global_timeline(line: EntityTimeline, no: int) -> EntityTimeline:
    """A shard's timeline with cluster ids (its entity, sightings' moments, tracks, look-alikes)."""
    g = lambda i: None if i is None else cluster_id(no, i)  # noqa: E731
    return EntityTimeline(local_entity(line.entity, no),
                          tuple(replace(s, entity_id=g(s.entity_id), track_id=g(s.track_id), moment_id=g(s.moment_id))
                                for s in line.sightings),
                          tuple(replace(t, track_id=g(t.track_id), entity_id=g(t.entity_id)) for t in line.tracks),
                          tuple((g(i), sim) for i, sim in line.similar))


def joined_timeline(entity: EntityRecord, lines: list[EntityTimeline], limit: int = 1000) -> EntityTimeline:
    """The timelines of one thing's members (cluster ids) as one: sightings in time order (the
    latest ``limit``), tracks by first time, look-alikes outside the thing, best first."""
    members = {ln.entity.entity_id for ln in lines}
    sightings = sorted((s for ln in lines for s in ln.sightings), key=lambda s: (s.t, s.moment_id))[-limit:]
    tracks = sorted((t for ln in lines for t in ln.tracks), key=lambda t: (t.first_t, t.track_id))
    near: dict[int, float] = {}
    for ln in lines:
        for i, sim in ln.similar:
            if i not in members:
                near[i] = max(near.get(i, -1.0), sim)
    return EntityTimeline(entity, tuple(sightings), tuple(tracks),
                          tuple(sorted(near.items(), key=lambda kv: -kv[1])))


def global_last_seen(seen: LastSeen, no: int, entity: EntityRecord | None) -> LastSeen:
    """A shard's LastSeen with cluster ids; ``entity``: the thing it belongs to (merged)."""
    return replace(seen, entity=entity, moment_id=None if seen.moment_id is None else cluster_id(no, seen.moment_id))

