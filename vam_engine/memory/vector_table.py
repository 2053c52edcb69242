"""Vectors in SQLite: the source of truth for the in-memory indexes (memory/vector_memory.py).

A vector is written in the same transaction as the row it belongs to, with an entry in
``vector_log``; the indexes replay the log from their last snapshot on open, so every row has
its vector and every vector its row after a crash. ``allowed_ids`` resolves search filters
(cameras, time range, ``as_of``) into the ids a space may return.
"""
from __future__ import annotations

import threading

import numpy as np

from .db import Database, placeholders, select_in

VectorChange = tuple[str, int, "np.ndarray | None"]  # (space, id, vector) added, or (space, id, None) removed


def put_vector(conn, space: str, vid: int, cam: str, t0: float, t1: float, vec: np.ndarray,
               changes: list) -> None:
    """Inside a transaction: add or replace one vector and log it."""
    vec = np.ascontiguousarray(vec, np.float32)
    conn.execute("INSERT OR REPLACE INTO vectors VALUES (?,?,?,?,?,?)", (space, vid, cam, t0, t1, vec.tobytes()))
    conn.execute("INSERT INTO vector_log (space, id, op) VALUES (?,?,1)", (space, vid))
    changes.append((space, vid, vec))


def drop_vectors(conn, space: str, ids, changes: list) -> None:
    """Inside a transaction: remove vectors (those that exist) and log it."""
    for i in ids:
        if conn.execute("DELETE FROM vectors WHERE space=? AND id=?", (space, i)).rowcount:
            conn.execute("INSERT INTO vector_log (space, id, op) VALUES (?,?,-1)", (space, i))
            changes.append((space, i, None))


def vectors_by_id(conn, space: str, ids) -> dict[int, np.ndarray]:
    """By primary key: no scan of the space."""
    return {i: np.frombuffer(v, np.float32)
            for i, v in select_in(conn, "SELECT id, vec FROM vectors WHERE space=? AND id IN ({ids})", ids, space)}


class VectorTable:
    def __init__(self, db: Database):
        self.db = db
        self._allowed: dict = {}  # recent allowed_ids results (insertion order: oldest first)
        self._allowed_lock = threading.Lock()

    def by_id(self, space: str, ids) -> dict[int, np.ndarray]:
        return vectors_by_id(self.db.conn(), space, ids)

    def rows(self, space: str) -> list[tuple[int, np.ndarray]]:
        """Every vector of a space: (id, vector), by id. The vector memory rebuilds from these."""
        return [(i, np.frombuffer(v, np.float32)) for i, v in
                self.db.conn().execute("SELECT id, vec FROM vectors WHERE space=? ORDER BY id", (space,))]

    def log_since(self, space: str, after_seq: int) -> list[tuple[int, int, int, np.ndarray | None]]:
        """The change log of a space after ``after_seq``: (seq, id, op, vector or None)."""
        rows = self.db.conn().execute(
            "SELECT l.seq, l.id, l.op, v.vec FROM vector_log l LEFT JOIN vectors v "
            "ON v.space=l.space AND v.id=l.id WHERE l.space=? AND l.seq>? ORDER BY l.seq", (space, after_seq)).fetchall()
        return [(seq, i, op, None if v is None else np.frombuffer(v, np.float32)) for seq, i, op, v in rows]

    def seq(self) -> int:
        return self.db.conn().execute("SELECT COALESCE(MAX(seq), 0) FROM vector_log").fetchone()[0]

    def prune_log(self, upto_seq: int) -> None:
        """Forget log entries every snapshot already covers."""
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM vector_log WHERE seq<=?", (upto_seq,))

    def counts(self) -> dict[str, int]:
        return dict(self.db.conn().execute("SELECT space, COUNT(*) FROM vectors GROUP BY space").fetchall())

    def allowed_ids(self, space: str, cameras=None, t0=None, t1=None, as_of=None) -> np.ndarray | None:
        """Ids of a space that pass the filters (None: no filter). Intervals must lie in
        [t0, t1] overlap-wise; with as_of, nothing that ends after it."""
        # the same filter is asked for again by each query and turn of a question: remember the
        # last few, keyed by the vector log's last sequence number (every add or removal takes a
        # new one, and pruning the log never lowers it)
        conn = self.db.conn()
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name='vector_log'").fetchone()
        key = (space, tuple(sorted(cameras)) if cameras else None, t0, t1, as_of, row and row[0])
        with self._allowed_lock:
            hit = self._allowed.get(key, False)
        if hit is not False:
            return hit
        out = self._allowed_ids(conn, space, cameras, t0, t1, as_of)
        with self._allowed_lock:
            self._allowed[key] = out
            while len(self._allowed) > 32:
                self._allowed.pop(next(iter(self._allowed)))
        return out

    @staticmethod
    def _allowed_ids(conn, space: str, cameras, t0, t1, as_of) -> np.ndarray | None:
        if cameras and set(cameras) >= {r[0] for r in conn.execute("SELECT camera_id FROM cameras")}:
            cameras = None  # every camera: no filter to build
        if as_of is not None and t1 is None:
            newest = max((r[0] for r in conn.execute(
                "SELECT (SELECT MAX(t1) FROM vectors WHERE space=? AND camera_id=c.camera_id) FROM cameras c",
                (space,)) if r[0] is not None), default=None)
            if newest is None or newest <= as_of:
                as_of = None  # nothing ends after it
        where, args = ["space=?"], [space]
        if cameras:
            where.append(f"camera_id IN ({placeholders(cameras)})")
            args += list(cameras)
        if t0 is not None:
            where.append("t1>=?")
            args.append(float(t0))
        if t1 is not None:
            where.append("t0<=?")
            args.append(float(t1))
        if as_of is not None:
            where.append("t1<=?")
            args.append(float(as_of))
        if len(where) == 1:
            return None
        cur = conn.execute(f"SELECT id FROM vectors INDEXED BY vectors_filter WHERE {' AND '.join(where)}", args)
        return np.fromiter((r[0] for r in cur), np.int64)
