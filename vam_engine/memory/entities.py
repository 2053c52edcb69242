"""What perception found, read back (memory/sightings.py writes it): detections and OCR lines of
moments, entities with their first/last seen per camera, an entity's timeline, where something
was last seen, and the state a perception stage restores from.

Every read takes a camera scope and ``as_of`` (the causal bound): an entity is in view when it
was first seen on a camera in scope by ``as_of``; what the view shows of it is what was known
then: each camera's last sighting at or before ``as_of``, the strings of tracks that ended by
then, and its colours and crop only when that crop was cut by then.
"""
from __future__ import annotations

import json
import math

import numpy as np

from ..perception import CameraPerceptionState, Entity, LinkedEntity, PerceptionState, Track
from . import fulltext
from .db import Database, placeholders, select_in
from .places import POSE_COLUMNS, pose_of
from .records import (DetectionRecord, EntityRecord, EntitySighting, EntityTimeline, LastSeen, TextLineRecord,
                      TrackRecord)
from . import sightings
from .deletion import DeleteRange, Removed
from .sightings import ENTITY, OBJECT, OCR
from .vector_table import vectors_by_id

_ENTITY_COLUMNS = "entity_id, label, colours, texts, crop_ref, crop_camera, crop_t"


def _scope(cameras, col: str = "camera_id") -> tuple[str, list]:
    if not cameras:
        return "", []
    return f" AND {col} IN ({placeholders(cameras)})", list(cameras)


class EntityRepository:
    tables = sightings.TABLES

    def __init__(self, db: Database, root):
        self.db = db
        self.root = root

    def delete_range(self, conn, changes: list, scope: DeleteRange) -> Removed:
        """Perception's rows in the range, trimmed by its write side (memory/sightings.py)."""
        return sightings.delete_range(conn, changes, scope)

    # -- moments' detections and text ---------------------------------------------------------
    def detections(self, moment_ids) -> dict[int, list[DetectionRecord]]:
        """Moment id -> its detections, best score first."""
        out: dict[int, list[DetectionRecord]] = {}
        rows = select_in(self.db.conn(), "SELECT detection_id, moment_id, camera_id, t, x0, y0, x1, y1, label, score,"
                                         " track_id, entity_id, w, h FROM detections WHERE moment_id IN ({ids})"
                                         " ORDER BY score DESC", moment_ids)
        for r in rows:
            out.setdefault(r[1], []).append(DetectionRecord(r[0], r[1], r[2], r[3], tuple(r[4:8]), r[8], r[9], r[10],
                                                            r[11], (r[12], r[13])))
        return out

    def ocr_lines(self, moment_ids) -> dict[int, list[TextLineRecord]]:
        """Moment id -> its OCR lines, top to bottom."""
        out: dict[int, list[TextLineRecord]] = {}
        rows = select_in(self.db.conn(), "SELECT line_id, moment_id, camera_id, t, x0, y0, x1, y1, text, confidence,"
                                         " read, w, h FROM ocr_lines WHERE moment_id IN ({ids}) ORDER BY y0, x0",
                         moment_ids)
        for r in rows:
            out.setdefault(r[1], []).append(TextLineRecord(r[0], r[1], r[2], r[3], tuple(r[4:8]), r[8], r[9],
                                                           bool(r[10]), (r[11], r[12])))
        return out

    def labels(self, cameras=None, as_of: float | None = None) -> dict[str, int]:
        """Label -> entities of it in view."""
        sql, args = _scope(cameras, "s.camera_id")
        if as_of is not None:
            sql += " AND s.first_t <= ?"
            args.append(float(as_of))
        rows = self.db.conn().execute("SELECT e.label, COUNT(DISTINCT e.entity_id) FROM entities e JOIN entity_seen s "
                                      f"ON s.entity_id = e.entity_id WHERE 1{sql} GROUP BY e.label", args)
        return dict(rows.fetchall())

    def count(self) -> int:
        return self.db.conn().execute("SELECT COUNT(*) FROM entities").fetchone()[0]

    # -- entities -------------------------------------------------------------------------------
    def list(self, *, label=None, cameras=None, t0: float | None = None, t1: float | None = None,
             as_of: float | None = None, after: int | None = None, limit: int | None = None) -> list[EntityRecord]:
        """Entities in view seen in [t0, t1] (overlap, on a camera in scope), of ``label`` (a
        name or a list), by id, those after ``after``."""
        where, args = [], []
        labels = [label] if isinstance(label, str) else list(label or [])
        if labels:
            where.append(f"e.label IN ({placeholders(labels)})")
            args += labels
        cam_sql, cam_args = _scope(cameras, "s.camera_id")
        seen = ["1" + cam_sql]
        args_seen = list(cam_args)
        if as_of is not None:
            seen.append("s.first_t <= ?")
            args_seen.append(float(as_of))
        if t0 is not None:
            seen.append("s.last_t >= ?")
            args_seen.append(float(t0))
        if t1 is not None:
            seen.append("s.first_t <= ?")
            args_seen.append(float(t1))
        where.append(f"EXISTS (SELECT 1 FROM entity_seen s WHERE s.entity_id = e.entity_id AND {' AND '.join(seen)})")
        args += args_seen
        if after is not None:
            where.append("e.entity_id > ?")
            args.append(int(after))
        sql = f"SELECT {_ENTITY_COLUMNS} FROM entities e WHERE {' AND '.join(where)} ORDER BY e.entity_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self.db.conn().execute(sql, args).fetchall()
        return self._records(rows, cameras, as_of)

    def get(self, entity_id: int, *, cameras=None, as_of: float | None = None) -> EntityRecord | None:
        """The entity as the view sees it (None: no such entity, or not in view)."""
        rows = self.db.conn().execute(f"SELECT {_ENTITY_COLUMNS} FROM entities WHERE entity_id=?",
                                      (int(entity_id),)).fetchall()
        out = self._records(rows, cameras, as_of)
        return out[0] if out else None

    def _records(self, rows, cameras, as_of) -> list[EntityRecord]:
        ids = [r[0] for r in rows]
        seen = self._seen(ids, cameras, as_of)
        # a view limited in cameras or time knows only the text read on its cameras by then, and
        # the colours of a crop it may see (the entity row holds what every camera taught)
        scoped = as_of is not None or bool(cameras)
        texts = self._texts(ids, cameras, as_of) if scoped else {}
        out = []
        for eid, label, colours, txt, crop, crop_cam, crop_t in rows:
            if not seen.get(eid):
                continue
            visible = crop is not None and (as_of is None or (crop_t is not None and crop_t <= as_of)) and (
                not cameras or crop_cam in cameras)
            out.append(EntityRecord(eid, label, tuple(json.loads(colours)) if visible or not scoped else (),
                                    tuple(texts.get(eid, ())) if scoped else tuple(json.loads(txt)),
                                    seen[eid], str(self.root / crop) if visible else None,
                                    crop_cam if visible else None))
        return out

    def _seen(self, ids, cameras, as_of) -> dict[int, dict[str, tuple[float, float]]]:
        cams = list(cameras or [])
        cam_sql = f"camera_id IN ({placeholders(cams)}) AND " if cams else ""
        rows = select_in(self.db.conn(), "SELECT entity_id, camera_id, first_t, last_t FROM entity_seen WHERE "
                                         f"{cam_sql}entity_id IN ({{ids}})", ids, *cams)
        out: dict[int, dict] = {}
        for eid, cam, a, b in rows:
            if as_of is not None:
                if a > as_of:
                    continue
                if b > as_of:  # its last sighting by as_of: the latest stored detection then
                    got = self.db.conn().execute("SELECT MAX(t) FROM detections WHERE entity_id=? AND camera_id=? "
                                                 "AND t <= ?", (eid, cam, float(as_of))).fetchone()[0]
                    b = max(a, got) if got is not None else a
            out.setdefault(eid, {})[cam] = (a, b)
        return out

    def _texts(self, ids, cameras, as_of: float | None) -> dict[int, list[str]]:
        """The text read on each entity by tracks on ``cameras`` (None: all) ended by ``as_of``."""
        out: dict[int, list[str]] = {}
        cams = list(cameras or [])
        where = (f"camera_id IN ({placeholders(cams)}) AND " if cams else "") + ("last_t <= ? AND " if as_of is not None
                                                                                 else "")
        head = [*cams, *([float(as_of)] if as_of is not None else [])]
        rows = select_in(self.db.conn(), f"SELECT entity_id, texts FROM tracks WHERE {where}entity_id IN ({{ids}}) "
                                         "ORDER BY first_t", ids, *head)
        for eid, tx in rows:
            for s in json.loads(tx):
                if s not in out.setdefault(eid, []):
                    out[eid].append(s)
        return out

    def timeline(self, entity_id: int, *, cameras=None, as_of: float | None = None, limit: int = 1000,
                 vectors=None, similar: int = 5) -> EntityTimeline | None:
        """The entity's sightings on stored frames in view, in time order (at most ``limit``,
        the latest kept when more), its tracks, and with ``vectors`` (the store's vector memory)
        up to ``similar`` entities of its label that look alike (read-time links)."""
        ent = self.get(entity_id, cameras=cameras, as_of=as_of)
        if ent is None:
            return None
        cam_sql, cam_args = _scope(cameras, "d.camera_id")
        sql = ("SELECT d.track_id, d.camera_id, d.t, d.moment_id, m.frame_ref, d.x0, d.y0, d.x1, d.y1, d.label, d.score,"
               f" d.w, d.h, {POSE_COLUMNS} FROM detections d JOIN moments m ON m.moment_id = d.moment_id"
               f" WHERE d.entity_id = ?{cam_sql}")
        args: list = [int(entity_id), *cam_args]
        if as_of is not None:
            sql += " AND d.t <= ?"
            args.append(float(as_of))
        rows = self.db.conn().execute(sql + " ORDER BY d.t DESC, d.detection_id DESC LIMIT ?", [*args, int(limit)])
        sightings = [EntitySighting(int(entity_id), r[0], r[1], r[2], r[3], str(self.root / r[4]), tuple(r[5:9]),
                                    r[9], r[10], (r[11], r[12]), pose_of(r[13:18])) for r in rows.fetchall()][::-1]
        t_sql, t_args = _scope(cameras)
        if as_of is not None:
            t_sql += " AND first_t <= ?"
            t_args.append(float(as_of))
        tracks = [TrackRecord(r[0], r[1], r[2], r[3], r[4], min(r[5], as_of) if as_of is not None else r[5], r[6],
                              tuple(json.loads(r[7])) if as_of is None or r[5] <= as_of else ())
                  for r in self.db.conn().execute("SELECT track_id, camera_id, entity_id, label, first_t, last_t, "
                                                  f"count, texts FROM tracks WHERE entity_id = ?{t_sql} ORDER BY "
                                                  "first_t", [int(entity_id), *t_args])]
        near = self.similar(ent, vectors, similar, cameras=cameras, as_of=as_of) if vectors is not None else ()
        return EntityTimeline(ent, tuple(sightings), tuple(tracks), tuple(near))

    def similar(self, ent: EntityRecord, vectors, k: int, *, cameras=None, as_of=None,
                min_similarity: float = 0.7) -> list[tuple[int, float]]:
        """Other entities of ``ent``'s label in view whose appearance (the "entity" space) is at
        least ``min_similarity`` alike, best first."""
        mine = vectors_by_id(self.db.conn(), ENTITY, [ent.entity_id]).get(ent.entity_id)
        if mine is None or k < 1:
            return []
        others = [e.entity_id for e in self.list(label=ent.label, cameras=cameras, as_of=as_of)
                  if e.entity_id != ent.entity_id]
        if not others:
            return []
        sims, ids = vectors.search(ENTITY, np.asarray(mine, np.float32), k, np.asarray(others, np.int64))
        return [(int(i), float(s)) for s, i in zip(sims.tolist(), ids.tolist()) if s >= min_similarity]

    def appearances(self, ids) -> dict[int, tuple[np.ndarray, float]]:
        """Each entity's running appearance (its "entity" vector) and the rank of its
        representative crop (score x sqrt(area)): what a cluster's router links shards' entities by."""
        conn = self.db.conn()
        vecs = vectors_by_id(conn, ENTITY, list(ids))
        ranks = dict(select_in(conn, "SELECT entity_id, crop_rank FROM entities WHERE entity_id IN ({ids})", list(ids)))
        return {i: (v, float(ranks.get(i) or 0.0)) for i, v in vecs.items()}

    # -- last seen -----------------------------------------------------------------------------
    def last_seen(self, query: str, *, cameras=None, as_of: float | None = None) -> LastSeen | None:
        """The latest sighting of something matching ``query``: things whose label, colours or
        strings read on them hold every word of it (else the most words), then text shown on
        screen; among the best matches, the one seen last."""
        ranked = self.last_seen_ranked(query, cameras=cameras, as_of=as_of)
        return None if ranked is None else ranked[1]

    def last_seen_ranked(self, query: str, *, cameras=None, as_of: float | None = None) -> tuple[int, LastSeen] | None:
        """``last_seen`` with the tier of its match: 0 a thing holding every word, 1 a thing
        holding some, 2 text on screen holding every word, 3 some (a cluster's router takes the
        best tier over its shards, then the latest)."""
        index = fulltext.FullTextIndex(self.db)
        for k, kinds in enumerate(((OBJECT,), (OCR,))):
            for j, mode in enumerate(("all", "any")):
                hits = index.search(query, mode=mode, kinds=kinds, cameras=cameras, limit=200)
                hits = [h for h in hits if as_of is None or h.t_start <= as_of]
                if as_of is not None and kinds == (OBJECT,):  # matched on what was known by then
                    hits = [h for h in hits if self._known_then(h.ref_id, query, mode, cameras, as_of)]
                if mode == "any" and hits:  # the hits holding the most words
                    top = max(h.score for h in hits)
                    hits = [h for h in hits if h.score >= top - 1e-9]
                if hits:
                    return 2 * k + j, self._latest(query, kinds[0], hits, cameras, as_of)
        return None

    def _known_then(self, track_id: int, query: str, mode: str, cameras, as_of: float) -> bool:
        """Whether a thing's label, colours and text as known at ``as_of`` hold the query's
        words (every one in mode "all", one at least in "any"): the full-text row holds what
        was learnt later too."""
        row = self.db.conn().execute("SELECT entity_id FROM tracks WHERE track_id=?", (track_id,)).fetchone()
        ent = self.get(row[0], cameras=cameras, as_of=as_of) if row and row[0] is not None else None
        if ent is None:
            return False
        have = set(fulltext.terms(" ".join([ent.label, *ent.colours, *ent.texts])))
        words = fulltext.terms(query)
        return all(w in have for w in words) if mode == "all" else any(w in have for w in words)

    def _latest(self, query: str, kind: str, hits, cameras, as_of) -> LastSeen | None:
        clip = (lambda t: t) if as_of is None else (lambda t: min(t, as_of))  # noqa: E731
        hit = max(hits, key=lambda h: (clip(h.t_end), h.ref_id))
        t = clip(hit.t_end)
        if kind == OBJECT:
            row = self.db.conn().execute("SELECT entity_id FROM tracks WHERE track_id=?", (hit.ref_id,)).fetchone()
            ent = self.get(row[0], cameras=cameras, as_of=as_of) if row and row[0] is not None else None
            det = self.db.conn().execute(
                f"SELECT d.moment_id, m.frame_ref, d.x0, d.y0, d.x1, d.y1, d.t, {POSE_COLUMNS} FROM detections d "
                "JOIN moments m ON m.moment_id = d.moment_id WHERE d.track_id = ? AND d.t <= ? ORDER BY d.t DESC "
                "LIMIT 1",
                (hit.ref_id, t)).fetchone()
            if as_of is not None:  # the thing as known then (the full-text row holds what was learnt later)
                text = (" ".join([ent.label, *ent.colours, *ent.texts]),) if ent is not None else None
            else:
                text = self.db.conn().execute("SELECT text FROM fulltext_docs d JOIN fulltext f ON f.rowid = "
                                              "d.doc_id WHERE d.kind=? AND d.ref_id=?", (OBJECT, hit.ref_id)).fetchone()
        else:
            ent = None
            span = self.db.conn().execute("SELECT norm, text FROM text_spans WHERE span_id=?", (hit.ref_id,)).fetchone()
            det = None
            for row in self.db.conn().execute(
                    f"SELECT l.moment_id, m.frame_ref, l.x0, l.y0, l.x1, l.y1, l.t, {POSE_COLUMNS}, l.text FROM "
                    "ocr_lines l JOIN moments m ON m.moment_id = l.moment_id WHERE l.camera_id = ? AND l.t >= ? AND "
                    "l.t <= ? ORDER BY l.t DESC", (hit.camera_id, hit.t_start, t)):
                if span is not None and " ".join(row[-1].split()).casefold() == span[0]:
                    det = row[:-1]
                    break
            text = (span[1],) if span else None
        if det is None:
            return LastSeen(query, kind, hit.camera_id, t, ent, text[0] if text else "")
        if as_of is not None:  # the time of the frame found, not as_of itself (which would say it went on)
            t = det[6]
        return LastSeen(query, kind, hit.camera_id, t, ent, text[0] if text else "", det[0], str(self.root / det[1]),
                        tuple(det[2:6]), pose_of(det[7:12]))

    # -- the state a perception stage restores from -------------------------------------------------
    def stage_state(self, max_entities: int = 4096) -> PerceptionState | None:
        """What the stage saved (None: nothing yet): each camera's state, the counters, and the
        ``max_entities`` most recently seen entities with their appearance and tracks."""
        conn = self.db.conn()
        saved = dict(conn.execute("SELECT camera_id, state FROM perception_state").fetchall())
        if not saved and conn.execute("SELECT 1 FROM entities LIMIT 1").fetchone() is None:
            return None
        counters = json.loads(saved.pop("*", "{}"))
        cams = {cam: CameraPerceptionState.from_json(json.loads(s)) for cam, s in saved.items()}
        rows = conn.execute("SELECT entity_id, label, colours, texts, crop_camera, crop_t, crop_box, crop_rank "
                            "FROM entities ORDER BY last_t DESC LIMIT ?", (int(max_entities),)).fetchall()
        ids = [r[0] for r in rows]
        apps = vectors_by_id(conn, ENTITY, ids)
        seen: dict[int, dict] = {}
        for eid, cam, a, b in select_in(conn, "SELECT entity_id, camera_id, first_t, last_t FROM entity_seen WHERE "
                                              "entity_id IN ({ids})", ids):
            seen.setdefault(eid, {})[cam] = (a, b)
        tracks: dict[int, Track] = {}
        members: dict[int, list[int]] = {}
        for tid, cam, eid, label, a, b, n, tx in select_in(conn, "SELECT track_id, camera_id, entity_id, label, "
                                                                 "first_t, last_t, count, texts FROM tracks WHERE "
                                                                 "entity_id IN ({ids}) ORDER BY track_id", ids):
            tracks[tid] = Track(tid, cam, label, a, b, n, [], eid, json.loads(tx))
            members.setdefault(eid, []).append(tid)
        held = []
        for eid, label, colours, texts, ccam, ct, cbox, rank in rows:
            if eid not in apps or eid not in seen:
                continue
            crop_from = (ccam, ct, tuple(json.loads(cbox)), None) if cbox else None
            e = Entity(eid, label, members.get(eid, []), seen[eid], tuple(json.loads(colours)), None, crop_from,
                       json.loads(texts))
            held.append(LinkedEntity(e, np.asarray(apps[eid], np.float32), rank if rank >= 0 else -math.inf))
        top_e = conn.execute("SELECT COALESCE(MAX(entity_id), 0) FROM entities").fetchone()[0]
        top_t = conn.execute("SELECT COALESCE(MAX(track_id), 0) FROM tracks").fetchone()[0]
        return PerceptionState(max(int(counters.get("next_track", 1)), top_t + 1),
                               max(int(counters.get("next_entity", 1)), top_e + 1), cams, tuple(held), tracks)
