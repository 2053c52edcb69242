"""Summary documents: one per camera (or every camera) per time window and prompt."""
from __future__ import annotations

import json
import time

import numpy as np

from . import fulltext
from .db import Database, select_in
from .deletion import DeleteRange, Removed
from .records import Summary
from .vector_table import drop_vectors, put_vector

_COLUMNS = "summary_id, camera_id, t0, t1, granularity_s, prompt, structure, text, moments"


def _summary(r) -> Summary:
    return Summary(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], tuple(json.loads(r[8])))


class SummaryRepository:
    tables = ("summaries",)

    def __init__(self, db: Database):
        self.db = db

    def delete_range(self, conn, changes: list, scope: DeleteRange) -> Removed:
        """Summaries overlapping the range (of the cameras, or of every camera: either may
        describe what is deleted), with their vectors and full-text rows."""
        where, args = scope.where("t0", "t1", every_camera_rows=True)
        summaries = [r[0] for r in conn.execute(f"SELECT summary_id FROM summaries{where}", args)]
        drop_vectors(conn, "summary", summaries, changes)
        fulltext.drop(conn, "summary", summaries)
        conn.executemany("DELETE FROM summaries WHERE summary_id=?", [(i,) for i in summaries])
        return Removed({"summaries": len(summaries)})

    def add(self, camera_id: str | None, t0: float, t1: float, granularity_s: float, prompt: str,
            structure: str | None, text: str, moment_ids, vec) -> int:
        """Store (or replace) the summary document of one window; its vector goes to the
        "summary" space. Returns its id."""
        with self.db.write() as (conn, changes):
            old = conn.execute("SELECT summary_id FROM summaries WHERE camera_id IS ? AND t0=? AND t1=? AND prompt=?",
                               (camera_id, t0, t1, prompt)).fetchone()
            if old is not None:
                drop_vectors(conn, "summary", [old[0]], changes)
                fulltext.drop(conn, "summary", [old[0]])
                conn.execute("DELETE FROM summaries WHERE summary_id=?", (old[0],))
            sid = conn.execute(
                "INSERT INTO summaries (camera_id, t0, t1, granularity_s, prompt, structure, text, moments,"
                " created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (camera_id, t0, t1, granularity_s, prompt, structure, text,
                 json.dumps([int(m) for m in moment_ids]), time.time())).lastrowid
            if vec is not None:
                put_vector(conn, "summary", sid, camera_id or "*", t0, t1, np.asarray(vec, np.float32), changes)
            fulltext.put(conn, "summary", sid, camera_id or "*", t0, t1, text)  # found by its words too
        return sid

    def by_id(self, ids) -> dict[int, Summary]:
        rows = select_in(self.db.conn(), f"SELECT {_COLUMNS} FROM summaries WHERE summary_id IN ({{ids}})", ids)
        return {r[0]: _summary(r) for r in rows}

    def list(self, camera_id: str | None = None) -> list[Summary]:
        """Summaries of one camera (those over every camera: camera_id None is not a filter), by time."""
        sql = f"SELECT {_COLUMNS} FROM summaries" + (" WHERE camera_id IS ?" if camera_id else "")
        return [_summary(r) for r in self.db.conn().execute(sql + " ORDER BY t0", (camera_id,) if camera_id else ())]

    def count(self) -> int:
        return self.db.conn().execute("SELECT COUNT(*) FROM summaries").fetchone()[0]
