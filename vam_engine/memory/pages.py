"""Keyset pages of moments, events and transcript segments, by (camera, time on its axis, id):
the rows the API pages through (server/queries.py holds the cursors and the checks), and the
per-camera counts the API and its metrics show. A page starts strictly after the last key of the
one before, so rows committed meanwhile never shift or repeat a page."""
from __future__ import annotations

import json

from .db import Database, placeholders
from .events import EventRepository
from .moments import MomentRepository
from .places import Place, allowed_ids
from .transcripts import TranscriptRepository

# kind -> (id column, time column the pages sort on, end column)
PAGED = {"moments": ("moment_id", "t", "t"), "events": ("event_id", "t_start", "t_end"),
         "transcripts": ("segment_id", "t_start", "t_end")}


class Pages:
    def __init__(self, db: Database, moments: MomentRepository, events: EventRepository,
                 transcripts: TranscriptRepository):
        self.db = db
        self._by_kind = {"moments": moments, "events": events, "transcripts": transcripts}

    def after(self, kind: str, *, cameras, t0=None, t1=None, as_of=None, after: tuple | None = None,
              limit: int = 200, place: Place | None = None) -> tuple[list, bool]:
        """Up to ``limit`` records of ``kind`` strictly after the key ``after`` (camera, time,
        id), and whether more follow. Moments: t0 <= t <= t1; events and segments: overlapping
        [t0, t1]; all ending by ``as_of``; ``cameras`` None: all. ``place`` (moments and events):
        moments whose pose is there, events with such a moment."""
        id_col, t_col, end_col = PAGED[kind]
        where, args = [], []
        conn = self.db.conn()
        if place is not None:
            ids = allowed_ids(conn, "frame" if kind == "moments" else "event", place)
            if not len(ids):
                return [], False
            where.append(f"{id_col} IN (SELECT value FROM json_each(?))")
            args.append(json.dumps(ids.tolist()))
        if cameras is not None:
            if not cameras:
                return [], False
            where.append(f"camera_id IN ({placeholders(cameras)})")
            args += list(cameras)
        if t0 is not None:
            where.append(f"{end_col} >= ?")
            args.append(float(t0))
        if t1 is not None:
            where.append(f"{t_col} <= ?")
            args.append(float(t1))
        if as_of is not None:  # the causal bound: nothing that ends after it
            where.append(f"{end_col} <= ?")
            args.append(float(as_of))
        if after is not None:
            where.append(f"(camera_id, {t_col}, {id_col}) > (?, ?, ?)")
            args += list(after)
        sql = (f"SELECT {id_col} FROM {kind}" + (" WHERE " + " AND ".join(where) if where else "")
               + f" ORDER BY camera_id, {t_col}, {id_col} LIMIT ?")
        ids = [r[0] for r in conn.execute(sql, args + [int(limit) + 1])]
        more = len(ids) > limit
        ids = ids[:limit]
        found = self._by_kind[kind].by_id(ids)
        return [found[i] for i in ids if i in found], more

    def camera_extents(self) -> dict[str, dict]:
        """Per camera: moments, first and last time on its axis, whether that axis is absolute."""
        rows = self.db.conn().execute(
            "SELECT camera_id, COUNT(*), MIN(t), MAX(t), MAX(t_abs IS NOT NULL) FROM moments GROUP BY camera_id")
        return {r[0]: {"moments": r[1], "t_first": r[2], "t_last": r[3], "absolute": bool(r[4])} for r in rows}

    def events_count(self) -> dict[str, int]:
        """Per camera: its events."""
        return dict(self.db.conn().execute("SELECT camera_id, COUNT(*) FROM events GROUP BY camera_id").fetchall())

    def sample_outcomes(self) -> dict[tuple[str, str], int]:
        """(camera, outcome) -> gated samples: 'kept' or the gate that dropped them."""
        sql = "SELECT camera_id, COALESCE(dropped_by, 'kept'), COUNT(*) FROM samples GROUP BY 1, 2"
        return {(r[0], r[1]): r[2] for r in self.db.conn().execute(sql)}
