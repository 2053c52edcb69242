"""The memory writer's queue: closed events without a document are the work items, so the
queue is the store itself and a crash loses none of them."""
from __future__ import annotations

import time

import numpy as np

from . import fulltext
from .db import Database
from .events import EVENT_COLUMNS, event_from_row
from .moments import MomentRepository
from .records import DocumentJob, WriterBacklog
from .vector_table import put_vector


class DocumentQueue:
    def __init__(self, db: Database, moments: MomentRepository):
        self.db = db
        self.moments = moments

    def jobs(self, limit: int, now: float | None = None) -> list[DocumentJob]:
        """Closed events without a document whose retry time has come, oldest first, with their
        keyframes' files and times."""
        rows = self.db.conn().execute(
            f"SELECT {EVENT_COLUMNS}, closed_at FROM events WHERE closed=1 AND doc IS NULL"
            " AND (doc_next_try IS NULL OR doc_next_try<=?) ORDER BY t_end LIMIT ?",
            (time.time() if now is None else now, int(limit))).fetchall()
        events = [event_from_row(r) for r in rows]
        moments = self.moments.by_id([k for e in events for k in e.keyframes])
        return [DocumentJob(e, tuple((moments[k].frame_path, moments[k].t) for k in e.keyframes if k in moments),
                            r[-1]) for e, r in zip(events, rows)]

    def backlog(self) -> WriterBacklog:
        n, oldest = self.db.conn().execute(
            "SELECT COUNT(*), MIN(closed_at) FROM events WHERE closed=1 AND doc IS NULL").fetchone()
        return WriterBacklog(int(n), oldest)

    def attempts(self, event_id: int) -> int:
        row = self.db.conn().execute("SELECT doc_attempts FROM events WHERE event_id=?", (event_id,)).fetchone()
        return 0 if row is None else int(row[0])

    def first_undocumented_start(self, camera_id: str) -> float | None:
        """Start of the camera's earliest closed event still without a document."""
        return self.db.conn().execute("SELECT MIN(t_start) FROM events WHERE camera_id=? AND closed=1 AND doc IS NULL",
                                      (camera_id,)).fetchone()[0]

    def set_docs(self, docs) -> int:
        """``docs``: (event_id, text, vector or None). One transaction; the vector goes to the
        "event_doc" space. Events deleted meanwhile are skipped. Returns how many were stored."""
        stored = 0
        with self.db.write() as (conn, changes):
            for eid, text, vec in docs:
                row = conn.execute("SELECT camera_id, t_start, t_end FROM events WHERE event_id=?", (eid,)).fetchone()
                if row is None:
                    continue
                conn.execute("UPDATE events SET doc=?, doc_embedding_id=?, doc_error=NULL WHERE event_id=?",
                             (text, None if vec is None else eid, eid))
                fulltext.put(conn, "event", eid, row[0], row[1], row[2], text)  # found by its words too
                if vec is not None:
                    put_vector(conn, "event_doc", eid, row[0], row[1], row[2], np.asarray(vec, np.float32), changes)
                stored += 1
        return stored

    def fail(self, failures) -> None:
        """``failures``: (event_id, error text, next try wall time)."""
        with self.db.transaction() as conn:
            conn.executemany("UPDATE events SET doc_attempts=doc_attempts+1, doc_error=?, doc_next_try=? "
                             "WHERE event_id=?", [(err[:500], nxt, eid) for eid, err, nxt in failures])
