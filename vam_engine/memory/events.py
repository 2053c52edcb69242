"""Events (contiguous moments of one camera) and their link to the forest."""
from __future__ import annotations

import json
import math

from . import fulltext
from .db import Database, select_in
from .deletion import DeleteRange, Removed
from .records import Event
from .vector_table import drop_vectors, vectors_by_id

EVENT_COLUMNS = "event_id, camera_id, t_start, t_end, keyframes, doc, closed"


def event_from_row(r, doc_vector=None) -> Event:
    return Event(r[0], r[1], r[2], r[3], tuple(json.loads(r[4])) if r[4] else (), r[5], bool(r[6]), doc_vector)


class EventRepository:
    tables = ("events",)

    def __init__(self, db: Database):
        self.db = db

    def delete_range(self, conn, changes: list, scope: DeleteRange) -> Removed:
        """Events overlapping the range, with their vectors and full-text rows; moments outside
        it that belonged to one lose the link."""
        where, args = scope.where("t_start", "t_end")
        events = [r[0] for r in conn.execute(f"SELECT event_id FROM events{where}", args)]
        drop_vectors(conn, "event", events, changes)
        drop_vectors(conn, "event_doc", events, changes)
        fulltext.drop(conn, "event", events)
        conn.executemany("DELETE FROM events WHERE event_id=?", [(e,) for e in events])
        conn.executemany("UPDATE moments SET event_id=NULL WHERE event_id=?", [(e,) for e in events])
        return Removed({"events": len(events)})

    def by_id(self, ids) -> dict[int, Event]:
        rows = select_in(self.db.conn(), f"SELECT {EVENT_COLUMNS} FROM events WHERE event_id IN ({{ids}})", ids)
        return {r[0]: event_from_row(r) for r in rows}

    def list(self, camera_id: str | None = None) -> list[Event]:
        """Events by camera and start time."""
        sql = f"SELECT {EVENT_COLUMNS} FROM events" + (" WHERE camera_id=?" if camera_id else "")
        rows = self.db.conn().execute(sql + " ORDER BY camera_id, t_start", (camera_id,) if camera_id else ())
        return [event_from_row(r) for r in rows]

    def documented(self, camera_id: str, *, unlinked_only: bool = False) -> list[Event]:
        """A camera's closed events with a document, in time order, with their document vectors;
        ``unlinked_only``: only those starting at or after the last one linked to a forest leaf."""
        conn = self.db.conn()
        after = -math.inf
        if unlinked_only:
            row = conn.execute("SELECT MAX(t_start) FROM events WHERE camera_id=? AND forest_node_id IS NOT NULL",
                               (camera_id,)).fetchone()
            after = -math.inf if row[0] is None else row[0]
        rows = conn.execute(f"SELECT {EVENT_COLUMNS} FROM events WHERE camera_id=? AND closed=1 AND doc IS NOT NULL "
                            "AND t_start>=? ORDER BY t_start", (camera_id, after)).fetchall()
        vecs = vectors_by_id(conn, "event_doc", [r[0] for r in rows])
        return [event_from_row(r, vecs.get(r[0])) for r in rows]

    def set_forest_nodes(self, pairs) -> None:
        """``pairs``: (event_id, forest node id) of newly linked leaves."""
        with self.db.transaction() as conn:
            conn.executemany("UPDATE events SET forest_node_id=? WHERE event_id=?", [(n, e) for e, n in pairs])

    def counts(self) -> tuple[int, int]:
        """(events, events with a document)."""
        return self.db.conn().execute("SELECT COUNT(*), COUNT(doc) FROM events").fetchone()
