"""Live cameras' gaps: the intervals of a camera's axis with no video because its connection was
lost (memory/db.py's ``gaps`` table). A gap is opened when the video stops and closed by the
first frame after it (or by the camera's removal), so an outage in progress shows as an open
gap; nothing is synthesized inside it."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from .db import Database
from .deletion import DeleteRange, Removed, whole_cameras

ENDED_BY = ("frame", "removed", "gave_up", "closed")


@dataclass(frozen=True)
class Gap:
    """An interval of one camera's axis without video."""

    gap_id: int
    camera_id: str
    source_id: int | None
    t_start: float  # camera axis: the last frame before it
    t_end: float | None  # the first frame after it; None while it lasts (or if it never came)
    reason: str
    ended_by: str | None  # see ENDED_BY; None while it lasts
    created_at: float
    closed_at: float | None

    @property
    def open(self) -> bool:
        return self.ended_by is None

    def to_json(self) -> dict:
        return asdict(self)


_COLS = "gap_id, camera_id, source_id, t_start, t_end, reason, ended_by, created_at, closed_at"


class GapRepository:
    tables = ("gaps",)

    def __init__(self, db: Database):
        self.db = db

    def delete_range(self, conn, changes: list, scope: DeleteRange) -> Removed:
        """A whole camera goes with its record of outages; a time range keeps them (they stay true)."""
        if scope.whole:
            conn.executemany("DELETE FROM gaps WHERE camera_id=?", [(c,) for c in whole_cameras(conn, scope)])
        return Removed()

    def open(self, camera_id: str, source_id: int | None, t_start: float, reason: str) -> int:
        with self.db.transaction() as conn:
            cur = conn.execute("INSERT INTO gaps (camera_id, source_id, t_start, reason, created_at) "
                               "VALUES (?, ?, ?, ?, ?)", (camera_id, source_id, float(t_start), reason, time.time()))
            return int(cur.lastrowid)

    def add_closed(self, camera_id: str, source_id: int | None, t_start: float, t_end: float, reason: str) -> int:
        """A gap known only once it is over (between two runs of a camera)."""
        now = time.time()
        with self.db.transaction() as conn:
            cur = conn.execute("INSERT INTO gaps (camera_id, source_id, t_start, t_end, reason, ended_by, created_at, "
                               "closed_at) VALUES (?, ?, ?, ?, ?, 'frame', ?, ?)",
                               (camera_id, source_id, float(t_start), float(t_end), reason, now, now))
            return int(cur.lastrowid)

    def close(self, gap_id: int, t_end: float | None, ended_by: str) -> None:
        if ended_by not in ENDED_BY:
            raise ValueError(f"gap {gap_id}: ended_by must be one of {ENDED_BY}, got {ended_by!r}")
        with self.db.transaction() as conn:
            conn.execute("UPDATE gaps SET t_end=?, ended_by=?, closed_at=? WHERE gap_id=? AND ended_by IS NULL",
                         (None if t_end is None else float(t_end), ended_by, time.time(), gap_id))

    def list(self, camera_id: str | None = None, t0: float | None = None, t1: float | None = None) -> list[Gap]:
        """Gaps overlapping [t0, t1] (an open gap extends to now), oldest first."""
        sql, args = f"SELECT {_COLS} FROM gaps WHERE 1=1", []
        if camera_id is not None:
            sql += " AND camera_id=?"
            args.append(camera_id)
        if t1 is not None:
            sql += " AND t_start <= ?"
            args.append(float(t1))
        if t0 is not None:
            sql += " AND (t_end IS NULL OR t_end >= ?)"
            args.append(float(t0))
        rows = self.db.conn().execute(sql + " ORDER BY t_start, gap_id", args).fetchall()
        return [Gap(*r) for r in rows]
