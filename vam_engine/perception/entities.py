"""Tracks of the same thing joined into entities, across cameras and across long gaps on one.

A new track joins the entity of the same label whose appearance (a running mean of its
sightings' appearance vectors) is most similar to the track's first sighting, when that
similarity is at least ``min_similarity`` and the entity is not seen at that very time on the
track's camera (two things in one frame are two things). Otherwise it starts an entity. The
decision is made once, on the track's first sighting, so entity ids are stable for the caller to
store; a thing first seen half outside the frame may start an entity of its own.

An entity keeps when and where it was seen (first and last per camera), a representative crop
(the sighting with the highest score x sqrt(area); the crop is shrunk to at most ``crop_long``
px), the dominant colour names of that crop, and the strings OCR read inside its boxes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .appearance import colour_names, crop, shrink
from .records import MAX_TEXTS, Detection, Entity, Track


@dataclass(frozen=True)
class LinkParams:
    min_similarity: float = 0.7   # least appearance similarity for a track to join an entity (one
    # thing seen by two cameras, mirrored and at another scale: 0.8; two people: 0.55-0.6)
    smoothing: float = 0.2        # weight of a new sighting in the entity's appearance mean
    crop_long: int = 256          # the representative crop's long side at most
    max_entities: int = 4096      # entities held for linking; the least recently seen go first

    def __post_init__(self):
        if (not -1.0 <= self.min_similarity <= 1.0 or not 0 < self.smoothing <= 1 or self.crop_long < 8
                or self.max_entities < 1):
            raise ValueError(f"LinkParams: need -1 <= min_similarity <= 1, 0 < smoothing <= 1, crop_long >= 8, "
                             f"max_entities >= 1; got {self.min_similarity}, {self.smoothing}, {self.crop_long}, "
                             f"{self.max_entities}")


@dataclass(frozen=True)
class LinkedEntity:
    """An entity as the linker saves it (``EntityLinker.export_changes``): the entity (a copy; its crop
    only when it changed since the last export), its running appearance and the rank of its
    representative crop."""

    entity: Entity
    appearance: np.ndarray
    crop_rank: float


class EntityLinker:
    """See the module docstring. Not thread-safe: the perception stage's worker owns it.
    ``changed`` / ``crops_changed``: ids of the entities (and of their crops) changed since
    the last ``take_changes``."""

    def __init__(self, params: LinkParams | None = None):
        self.params = params or LinkParams()
        self.entities: dict[int, Entity] = {}
        self._appearance: dict[int, np.ndarray] = {}
        self._best: dict[int, float] = {}           # entity id -> its representative crop's rank
        self._tracks: dict[int, Track] = {}          # track id -> track (of every entity)
        self._next = 1
        self.changed: set[int] = set()
        self.crops_changed: set[int] = set()
        self._gone: dict[int, LinkedEntity] = {}  # changed, then evicted: still to export

    @property
    def next_id(self) -> int:
        return self._next

    def export_changes(self) -> list[LinkedEntity]:
        """Copies of the entities changed since the last call (their crops when those changed;
        entities evicted meanwhile included), by id; resets the record of changes."""
        out = {eid: le for eid, le in self._gone.items()}
        for eid in self.changed:
            if eid in self.entities:
                out[eid] = self._linked(eid, eid in self.crops_changed)
        self.changed, self.crops_changed, self._gone = set(), set(), {}
        return [out[k] for k in sorted(out)]

    def _linked(self, eid: int, with_crop: bool) -> LinkedEntity:
        e = self.entities[eid]
        copy = Entity(e.entity_id, e.label, list(e.track_ids), dict(e.seen), tuple(e.colours),
                      e.crop if with_crop else None, e.crop_from, list(e.texts))
        return LinkedEntity(copy, self._appearance[eid].copy(), float(self._best[eid]))

    def load(self, entities: list[LinkedEntity], tracks: dict[int, Track], next_id: int) -> None:
        """Continue from saved state: the entities to hold (the most recently seen first wins
        when over ``max_entities``), the tracks they are made of (track id -> Track, shared
        with the trackers for the active ones) and the next id to hand out."""
        held = sorted(entities, key=lambda le: -max((b for _, b in le.entity.seen.values()), default=-math.inf))
        self.entities, self._appearance, self._best, self._tracks = {}, {}, {}, {}
        for le in held[:self.params.max_entities]:
            e = le.entity
            self.entities[e.entity_id] = e
            self._appearance[e.entity_id] = np.asarray(le.appearance, np.float32).copy()
            self._best[e.entity_id] = float(le.crop_rank)
            for tid in e.track_ids:
                if tid in tracks:
                    self._tracks[tid] = tracks[tid]
        self._next = max([int(next_id), *(eid + 1 for eid in self.entities)])

    def _candidates(self, track: Track, t: float):
        for eid, e in self.entities.items():
            if e.label != track.label:
                continue
            if not self._busy(e, track, t):
                yield eid

    def _link(self, track: Track, appearance: np.ndarray, t: float) -> Entity:
        best, best_sim = None, self.params.min_similarity
        for eid in self._candidates(track, t):
            sim = float(np.dot(self._appearance[eid], appearance))
            if sim >= best_sim:
                best, best_sim = eid, sim
        if best is None:
            self._evict()
            best = self._next
            self._next += 1
            self.entities[best] = Entity(best, track.label)
            self._appearance[best] = appearance.astype(np.float32).copy()
            self._best[best] = -math.inf
        e = self.entities[best]
        e.track_ids.append(track.track_id)
        track.entity_id = best
        return e

    def _busy(self, e: Entity, track: Track, t: float) -> bool:
        return any(tid in self._tracks and self._tracks[tid].camera_id == track.camera_id
                   and self._tracks[tid].last_t >= t for tid in e.track_ids if tid != track.track_id)

    def _evict(self) -> None:
        """Room for one more entity: forget the least recently seen (the caller has its copy)."""
        while len(self.entities) >= self.params.max_entities:
            old = min(self.entities.values(), key=lambda e: e.last_t if e.seen else -math.inf)
            if old.entity_id in self.changed:
                self._gone[old.entity_id] = self._linked(old.entity_id, old.entity_id in self.crops_changed)
            for tid in old.track_ids:
                self._tracks.pop(tid, None)
            for d in (self.entities, self._appearance, self._best):
                d.pop(old.entity_id, None)

    def observe(self, track: Track, new: bool, appearance: np.ndarray, frame: np.ndarray, det: Detection,
                t: float, texts: list[str] = ()) -> Entity:
        """Record ``track``'s sighting ``det`` at ``t`` in ``frame`` (its appearance vector given);
        ``new``: the track's first sighting, when its entity is chosen. ``texts``: OCR strings read
        inside the detection's box. Returns the entity (changed in place)."""
        self._tracks[track.track_id] = track
        if new or track.entity_id not in self.entities:  # (an evicted entity: linked afresh)
            e = self._link(track, appearance, t)
        else:
            e = self.entities[track.entity_id]
            m = (1 - self.params.smoothing) * self._appearance[e.entity_id] + self.params.smoothing * appearance
            self._appearance[e.entity_id] = (m / max(float(np.linalg.norm(m)), 1e-12)).astype(np.float32)
        self.changed.add(e.entity_id)
        first, last = e.seen.get(track.camera_id, (t, t))
        e.seen[track.camera_id] = (min(first, t), max(last, t))
        x0, y0, x1, y1 = det.box
        rank = det.score * math.sqrt(max(x1 - x0, 0) * max(y1 - y0, 0))
        if rank > self._best[e.entity_id]:
            self._best[e.entity_id] = rank
            c = crop(frame, det.box)
            e.crop = shrink(c, self.params.crop_long)
            e.crop_from = (track.camera_id, t, det.box, track.sightings[-1].key)
            e.colours = colour_names(c)
            self.crops_changed.add(e.entity_id)
        for s in texts:
            if s not in track.texts and len(track.texts) < MAX_TEXTS:
                track.texts.append(s)
            if s not in e.texts and len(e.texts) < MAX_TEXTS:
                e.texts.append(s)
        return e
