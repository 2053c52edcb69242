"""What perception found, written with the moments it was found on (the write side of
memory/entities.py).

An ingest transaction (memory/commit.py) that carries a ``PerceptionCommit`` writes, after the
moment rows it inserts: each kept frame's detections (with their track and entity) and OCR
lines; the spans of text they show (a string shown on a camera from one kept frame to the next
without a break is one span, indexed in the full-text index as kind "ocr"); the tracks and
entities the stage changed, from its snapshot taken right after those frames (tracks indexed as
kind "object": label, the entity's colour names and the strings read on it; each entity's
running appearance in the "entity" vector space; its representative crop as a JPEG under
``entities/``); and the stage's saved state per camera (perception/state.py). All of it commits
with the moments or not at all, so a run resumed after a crash loads exactly the state the
committed rows were made with.

Deletion (``delete_range``) takes a range's rows and trims what spans it: text spans and tracks
keep the part outside the range that still has a stored frame, an entity's first/last seen per
camera keeps what lies outside the range, an entity with nothing left goes (row, vector, crop,
its tracks' full-text rows), and a surviving entity's crop cut in the range goes. Retention
(``drop_moments``) takes only the thinned moments' detections and OCR lines: spans, tracks and
entities keep their extents.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from ..perception import PerceptionState, normalise_text
from . import fulltext
from .db import select_in
from .deletion import DeleteRange, Removed
from .vector_table import drop_vectors, put_vector

OCR, OBJECT, ENTITY = "ocr", "object", "entity"  # full-text kinds and the vector space
# the camera-timed tables perception keeps (a deletion trims them all)
TABLES = ("detections", "ocr_lines", "text_spans", "tracks", "entity_seen", "perception_state")
CROP_QUALITY = 85


@dataclass
class PerceptionCommit:
    """Perception's part of one ingest transaction. ``frames``: FramePerception of kept frames,
    each ``key`` the (source_id, t_rel) of its moment; ``state``: the stage's snapshot right
    after them; ``ocr``: whether text was read (spans follow the lines only then)."""

    frames: list
    state: PerceptionState | None = None
    ocr: bool = False


def crop_ref(entity_id: int) -> str:
    return f"entities/{int(entity_id)}.jpg"


def _box(b) -> tuple[float, float, float, float]:
    return float(b[0]), float(b[1]), float(b[2]), float(b[3])


def object_text(label: str, colours, texts) -> str:
    """An object's full-text document: its label, colour names and the strings read on it."""
    return " ".join([label, *colours, *texts])


# -- writes ------------------------------------------------------------------------------------
def write(conn, changes: list, pc: PerceptionCommit, inserted: dict) -> None:
    """Inside the ingest transaction, after its moments: ``inserted`` maps (source_id, t_rel)
    of the moments this transaction inserted to (moment_id, camera_id, t, width, height)."""
    state = pc.state
    track_entity = {tid: t.entity_id for tid, t in (state.tracks if state else {}).items()}
    frames = [fp for fp in pc.frames if fp.kind == "kept" and tuple(fp.key) in inserted]
    for fp in sorted(frames, key=lambda f: (inserted[tuple(f.key)][1], inserted[tuple(f.key)][2])):
        mid, cam, t, w, h = inserted[tuple(fp.key)]
        missing = [tid for tid in fp.track_ids if tid not in track_entity]
        if missing:  # a track of an earlier transaction
            track_entity.update(select_in(conn, "SELECT track_id, entity_id FROM tracks WHERE track_id IN ({ids})",
                                          missing))
        conn.executemany(
            "INSERT INTO detections (moment_id, camera_id, t, x0, y0, x1, y1, w, h, label, score, track_id, entity_id)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(mid, cam, t, *_box(d.box), w, h, d.label, float(d.score), tid, track_entity.get(tid))
             for d, tid in zip(fp.detections, list(fp.track_ids) + [None] * len(fp.detections))])
        conn.executemany("INSERT INTO ocr_lines (moment_id, camera_id, t, x0, y0, x1, y1, w, h, text, confidence, "
                         "read) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                         [(mid, cam, t, *_box(ln.box), w, h, ln.text, float(ln.confidence), int(fp.ocr_read))
                          for ln in fp.ocr])
        if pc.ocr:
            _extend_spans(conn, cam, t, fp.ocr)
    if state is not None:
        _write_state(conn, changes, state)


def _extend_spans(conn, cam: str, t: float, lines) -> None:
    """The camera's open spans go on with the strings this frame shows; the others close;
    a string shown anew opens a span."""
    shown = {}
    for ln in lines:
        text = normalise_text(ln.text)
        if text:
            shown.setdefault(text.casefold(), text)
    for span_id, norm in conn.execute("SELECT span_id, norm FROM text_spans WHERE camera_id=? AND open=1",
                                      (cam,)).fetchall():
        if norm in shown:
            shown.pop(norm)
            conn.execute("UPDATE text_spans SET t_end=MAX(t_end, ?) WHERE span_id=?", (t, span_id))
            fulltext.set_end(conn, OCR, span_id, t)
        else:
            conn.execute("UPDATE text_spans SET open=0 WHERE span_id=?", (span_id,))
    for norm, text in shown.items():
        sid = conn.execute("INSERT INTO text_spans (camera_id, text, norm, t_start, t_end) VALUES (?,?,?,?,?)",
                           (cam, text, norm, t, t)).lastrowid
        fulltext.put(conn, OCR, sid, cam, t, t, text)


def _write_state(conn, changes: list, state: PerceptionState) -> None:
    colours = {le.entity.entity_id: tuple(le.entity.colours) for le in state.entities}
    for le in state.entities:
        _write_entity(conn, changes, le)
    for tid, tr in state.tracks.items():
        conn.execute("INSERT OR REPLACE INTO tracks (track_id, camera_id, entity_id, label, first_t, last_t, count, "
                     "texts) VALUES (?,?,?,?,?,?,?,?)", (tid, tr.camera_id, tr.entity_id, tr.label, tr.first_t,
                                                         tr.last_t, tr.count, json.dumps(list(tr.texts))))
        cols = colours.get(tr.entity_id)
        if cols is None and tr.entity_id is not None:
            row = conn.execute("SELECT colours FROM entities WHERE entity_id=?", (tr.entity_id,)).fetchone()
            cols = tuple(json.loads(row[0])) if row else ()
        fulltext.put(conn, OBJECT, tid, tr.camera_id, tr.first_t, tr.last_t, object_text(tr.label, cols or (),
                                                                                          tr.texts))
    for cam, cs in state.cameras.items():
        conn.execute("INSERT OR REPLACE INTO perception_state VALUES (?, ?)", (cam, json.dumps(cs.to_json())))
    conn.execute("INSERT OR REPLACE INTO perception_state VALUES ('*', ?)",
                 (json.dumps({"next_track": state.next_track, "next_entity": state.next_entity}),))


def _write_entity(conn, changes: list, le) -> None:
    e = le.entity
    eid = e.entity_id
    first, last = e.first_t, e.last_t
    old = conn.execute("SELECT crop_ref, crop_camera, crop_t, crop_box FROM entities WHERE entity_id=?",
                       (eid,)).fetchone()
    crop = old if old is not None else (None, None, None, None)
    if e.crop is not None and e.crop_from is not None:  # its file was written before this transaction
        cam, t, box, _ = e.crop_from
        crop = (crop_ref(eid), cam, float(t), json.dumps(list(_box(box))))
    rank = le.crop_rank if math.isfinite(le.crop_rank) else -1.0
    conn.execute("INSERT OR REPLACE INTO entities (entity_id, label, colours, texts, first_t, last_t, crop_ref, "
                 "crop_camera, crop_t, crop_box, crop_rank) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                 (eid, e.label, json.dumps(list(e.colours)), json.dumps(list(e.texts)), first, last, *crop, rank))
    conn.executemany("INSERT OR REPLACE INTO entity_seen (entity_id, camera_id, first_t, last_t) VALUES (?,?,?,?)",
                     [(eid, cam, float(a), float(b)) for cam, (a, b) in e.seen.items()])
    home = crop[1] or min(e.seen, key=lambda c: e.seen[c][0])
    put_vector(conn, ENTITY, eid, home, first, last, le.appearance, changes)


def crops_to_write(pc: PerceptionCommit | None) -> list[tuple[str, object]]:
    """(file ref, RGB crop) of the representative crops that changed: written before the
    transaction that records them."""
    if pc is None or pc.state is None:
        return []
    return [(crop_ref(le.entity.entity_id), le.entity.crop) for le in pc.state.entities
            if le.entity.crop is not None and le.entity.crop_from is not None]


# -- retention and deletion --------------------------------------------------------------------
def drop_moments(conn, moment_ids) -> None:
    """Retention thinned these moments: their detections and OCR lines go with them."""
    ids = [(int(i),) for i in moment_ids]
    conn.executemany("DELETE FROM detections WHERE moment_id=?", ids)
    conn.executemany("DELETE FROM ocr_lines WHERE moment_id=?", ids)


def delete_range(conn, changes: list, scope: DeleteRange) -> Removed:
    """Inside the store's deletion: perception's rows of ``cameras`` (None: all) in [t0, t1]
    (camera axis; None: unbounded), trimmed as the module docstring says; the crops of entities
    gone are the files to remove once the transaction commits."""
    cameras, t0, t1 = scope.cameras, scope.t0, scope.t1
    cams = list(cameras) if cameras else [r[0] for r in conn.execute(
        "SELECT camera_id FROM entity_seen UNION SELECT camera_id FROM detections UNION "
        "SELECT camera_id FROM text_spans UNION SELECT camera_id FROM perception_state WHERE camera_id<>'*'")]
    lo = -math.inf if t0 is None else float(t0)
    hi = math.inf if t1 is None else float(t1)
    detections = ocr_lines = 0
    touched: set[int] = set()
    for cam in cams:
        detections += conn.execute("DELETE FROM detections WHERE camera_id=? AND t>=? AND t<=?",
                                   (cam, lo, hi)).rowcount
        ocr_lines += conn.execute("DELETE FROM ocr_lines WHERE camera_id=? AND t>=? AND t<=?",
                                  (cam, lo, hi)).rowcount
        _trim_spans(conn, cam, lo, hi)
        touched |= _trim_tracks(conn, cam, lo, hi)
        touched |= _trim_seen(conn, cam, lo, hi)
        conn.execute("DELETE FROM perception_state WHERE camera_id=?", (cam,))  # its trackers restart
    gone, files = _settle_entities(conn, changes, touched, cams, lo, hi)
    return Removed({"detections": detections, "ocr_lines": ocr_lines, "entities": gone}, files)


def _parts(times_before, times_after, a: float, b: float, lo: float, hi: float):
    """The parts of [a, b] left outside [lo, hi]: (a, last remaining time before lo) and (first
    remaining time after hi, b), each None when nothing of it remains."""
    before = (a, max(times_before, default=a)) if a < lo else None
    after = (min(times_after, default=b), b) if b > hi else None
    return before, after


def _trim_spans(conn, cam: str, lo: float, hi: float) -> None:
    rows = conn.execute("SELECT span_id, text, norm, t_start, t_end, open FROM text_spans WHERE camera_id=? "
                        "AND t_end>=? AND t_start<=?", (cam, lo, hi)).fetchall()
    for sid, text, norm, a, b, is_open in rows:
        shown = [t for t, s in conn.execute("SELECT t, text FROM ocr_lines WHERE camera_id=? AND t>=? AND t<=?",
                                            (cam, a, b)) if normalise_text(s).casefold() == norm]
        before, after = _parts([t for t in shown if t < lo], [t for t in shown if t > hi], a, b, lo, hi)
        fulltext.drop(conn, OCR, [sid])
        conn.execute("DELETE FROM text_spans WHERE span_id=?", (sid,))
        for part, still_open in ((before, 0), (after, is_open)):
            if part is not None:
                new = conn.execute("INSERT INTO text_spans (camera_id, text, norm, t_start, t_end, open) "
                                   "VALUES (?,?,?,?,?,?)", (cam, text, norm, part[0], part[1], still_open)).lastrowid
                fulltext.put(conn, OCR, new, cam, part[0], part[1], text)


def _trim_tracks(conn, cam: str, lo: float, hi: float) -> set[int]:
    """Tracks of the range keep their part before it (else after it) that has a stored
    detection, or go. Returns their entities."""
    touched = set()
    rows = conn.execute("SELECT track_id, entity_id, first_t, last_t, label, texts FROM tracks WHERE camera_id=? "
                        "AND last_t>=? AND first_t<=?", (cam, lo, hi)).fetchall()
    for tid, eid, a, b, label, texts in rows:
        touched.add(eid)
        ts = [r[0] for r in conn.execute("SELECT t FROM detections WHERE track_id=?", (tid,))]
        before, after = _parts([t for t in ts if t < lo], [t for t in ts if t > hi], a, b, lo, hi)
        part = before or after
        if part is None:
            conn.execute("DELETE FROM tracks WHERE track_id=?", (tid,))
            fulltext.drop(conn, OBJECT, [tid])
            continue
        conn.execute("UPDATE tracks SET first_t=?, last_t=? WHERE track_id=?", (part[0], part[1], tid))
        row = conn.execute("SELECT colours FROM entities WHERE entity_id=?", (eid,)).fetchone()
        fulltext.put(conn, OBJECT, tid, cam, part[0], part[1],
                     object_text(label, json.loads(row[0]) if row else (), json.loads(texts)))
    return touched


def _trim_seen(conn, cam: str, lo: float, hi: float) -> set[int]:
    touched = set()
    rows = conn.execute("SELECT entity_id, first_t, last_t FROM entity_seen WHERE camera_id=? AND last_t>=? "
                        "AND first_t<=?", (cam, lo, hi)).fetchall()
    for eid, a, b in rows:
        touched.add(eid)
        ts = [r[0] for r in conn.execute("SELECT t FROM detections WHERE entity_id=? AND camera_id=?", (eid, cam))]
        before, after = _parts([t for t in ts if t < lo], [t for t in ts if t > hi], a, b, lo, hi)
        if before is None and after is None:
            conn.execute("DELETE FROM entity_seen WHERE entity_id=? AND camera_id=?", (eid, cam))
        else:
            conn.execute("UPDATE entity_seen SET first_t=?, last_t=? WHERE entity_id=? AND camera_id=?",
                         ((before or after)[0], (after or before)[1], eid, cam))
    return touched


def _settle_entities(conn, changes: list, touched: set, cams: list, lo: float, hi: float):
    """Entities with no sighting left go; the others get their extent, texts and crop again."""
    gone, files = 0, []
    for eid in sorted(e for e in touched if e is not None):
        row = conn.execute("SELECT MIN(first_t), MAX(last_t) FROM entity_seen WHERE entity_id=?", (eid,)).fetchone()
        crop = conn.execute("SELECT crop_ref, crop_camera, crop_t FROM entities WHERE entity_id=?", (eid,)).fetchone()
        if row[0] is None:
            conn.execute("DELETE FROM entities WHERE entity_id=?", (eid,))
            drop_vectors(conn, ENTITY, [eid], changes)
            for (tid,) in conn.execute("SELECT track_id FROM tracks WHERE entity_id=?", (eid,)).fetchall():
                fulltext.drop(conn, OBJECT, [tid])
            conn.execute("DELETE FROM tracks WHERE entity_id=?", (eid,))
            files += [crop[0]] if crop and crop[0] else []
            gone += 1
            continue
        texts = list(dict.fromkeys(s for (tx,) in conn.execute("SELECT texts FROM tracks WHERE entity_id=? "
                                                                "ORDER BY first_t", (eid,)) for s in json.loads(tx)))
        conn.execute("UPDATE entities SET first_t=?, last_t=?, texts=? WHERE entity_id=?",
                     (row[0], row[1], json.dumps(texts), eid))
        if crop and crop[0] and crop[1] in cams and crop[2] is not None and lo <= crop[2] <= hi:
            conn.execute("UPDATE entities SET crop_ref=NULL, crop_camera=NULL, crop_t=NULL, crop_box=NULL, "
                         "crop_rank=-1 WHERE entity_id=?", (eid,))
            files.append(crop[0])
    return gone, files
