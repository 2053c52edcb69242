"""The planner's actions over what perception found (reason/agent.py runs them): ``find_entity``
(things detected, tracked and linked across cameras, by class name and/or words matched against
their colour names and the text read on them) and ``last_seen`` (where and when something was
seen last). Both read through the question's MemoryView (its ``as_of`` and cameras) and need no
model; their results cite the boxes on the frames that show the thing.
"""
from __future__ import annotations

from ..llm import FindEntityAction, LastSeenAction
from ..memory import BoxRef, EntityRecord, Evidence, MemoryView, last_pose
from ..numerics import spread_evenly
from .planner_context import evidence_key

FRAMES_PER_HIT = 4  # frames cited per entity and camera, spread over its sightings


def _words(text: str) -> list[str]:
    return [w for w in "".join(c if c.isalnum() else " " for c in text.casefold()).split() if w]


def matches(ent: EntityRecord, query: str | None) -> bool:
    """Every word of ``query`` is in the entity's label, colour names or text read on it."""
    if not query:
        return True
    have = set(_words(" ".join([ent.label, *ent.colours, *ent.texts])))
    return all(w in have for w in _words(query))


def describe(ent: EntityRecord) -> str:
    parts = [f"entity {ent.entity_id}: {ent.label}"]
    if ent.colours:
        parts.append("colours " + ", ".join(ent.colours))
    if ent.texts:
        parts.append("text read on it: " + "; ".join(ent.texts[:8]))
    seen = "; ".join(f"{cam} {a:.2f}-{b:.2f} s" for cam, (a, b) in sorted(ent.seen.items(), key=lambda kv: kv[1][0]))
    return ", ".join(parts) + f"; seen on {seen}"


def find_entity(view: MemoryView, action: FindEntityAction, time_range) -> list[Evidence]:
    """Evidence per entity and camera (its interval there, a few frames with their boxes),
    most recently seen first."""
    ents = [e for e in view.entities(label=action.label, time_range=time_range) if matches(e, action.query)]
    ents.sort(key=lambda e: -e.last_t)
    out = []
    for ent in ents[:action.limit]:
        line = view.entity(ent.entity_id)
        sightings = list(line.sightings) if line is not None else []
        for cam, (a, b) in sorted(ent.seen.items(), key=lambda kv: -kv[1][1]):
            mine = [s for s in sightings if s.camera_id == cam]
            mine = [mine[i] for i in spread_evenly(len(mine), FRAMES_PER_HIT)]
            out.append(Evidence(cam, a, b, tuple(s.moment_id for s in mine), tuple(s.frame_path for s in mine), 0.0,
                                "object", describe(ent), pose=last_pose(mine),
                                boxes=tuple(BoxRef(s.moment_id, s.box, s.label, s.score, "object", s.frame_size)
                                            for s in mine)))
    return out


def last_seen(view: MemoryView, action: LastSeenAction) -> list[Evidence]:
    """The latest sighting as evidence (empty when nothing matches)."""
    got = view.last_seen(action.query)
    if got is None:
        return []
    what = describe(got.entity) if got.entity is not None else f"text {got.text!r} on screen"
    text = f"last seen at {got.t:.2f} s on {got.camera_id}: {what}"
    if got.moment_id is None:
        return [Evidence(got.camera_id, got.t, got.t, (), (), 0.0, got.source, text)]
    box = BoxRef(got.moment_id, got.box, got.entity.label if got.entity is not None else got.text,
                 kind="object" if got.source == "object" else "text")
    return [Evidence(got.camera_id, got.t, got.t, (got.moment_id,), (got.frame_path,), 0.0, got.source, text,
                     pose=got.pose, boxes=(box,))]


def results(view: MemoryView, action, time_range, seen: set, notes: list) -> list[tuple]:
    """The planner's new results of one entity action (``time_range``: resolved, or None):
    (evidence, "search", None, its key) not in ``seen``; a note when nothing matches."""
    if not hasattr(view, "entities"):  # a cluster's view keeps no entities
        notes.append("this memory keeps no detected things")
        return []
    evidence = find_entity(view, action, time_range) if isinstance(action, FindEntityAction) else \
        last_seen(view, action)
    if not evidence:
        notes.append("nothing detected matches")
    out = []
    for ev in evidence:
        key = evidence_key(ev, action.action, ev.text or "")
        if key not in seen:
            out.append((ev, "search", None, key))
    return out
