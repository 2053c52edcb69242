"""The event forest's nodes in SQLite (the forest itself lives in memory: forest/tree.py)."""
from __future__ import annotations

import json

import numpy as np

from ..db import Database
from ..records import ForestNode


class ForestNodeRepository:
    def __init__(self, db: Database):
        self.db = db

    def load(self) -> tuple[int, list[ForestNode]]:
        """(next node id, every node)."""
        conn = self.db.conn()
        row = conn.execute("SELECT value FROM forest_meta WHERE key='next_node_id'").fetchone()
        next_id = 1 if row is None else int(row[0])
        rows = conn.execute(
            "SELECT node_id, camera_id, t_start, t_end, keyframes, summary, embedding, height, n_leaves,"
            " leaf_lo, leaf_hi, parent, left_child, right_child, event_id, summary_version, written_version"
            " FROM forest_nodes").fetchall()
        nodes = []
        for (nid, cam, t0, t1, kf, summ, blob, h, nl, lo, hi, par, lc, rc, ev, sv, wv) in rows:
            pairs = json.loads(kf)
            emb = None
            if blob is not None:
                emb = np.frombuffer(blob, dtype=np.float32).copy()
                emb.flags.writeable = False
            nodes.append(ForestNode(nid, cam, t0, t1, [int(p[0]) for p in pairs], [float(p[1]) for p in pairs],
                                    summ, emb, h, nl, par, () if lc is None else (lc, rc), ev, sv, wv, lo, hi))
        return next_id, nodes

    def save(self, deleted_cameras, nodes: list[ForestNode], next_id: int) -> None:
        """One transaction: drop the cameras' nodes, then write the given nodes."""
        with self.db.transaction() as conn:
            self._write(conn, deleted_cameras, nodes, next_id)

    @staticmethod
    def _write(conn, deleted_cameras, nodes: list[ForestNode], next_id: int) -> None:
        rows = []
        for n in nodes:
            kf = json.dumps([[m, t] for m, t in zip(n.keyframes, n.keyframe_times)])
            blob = None if n.embedding is None else n.embedding.astype(np.float32).tobytes()
            lc, rc = n.children if n.children else (None, None)
            rows.append((n.node_id, n.camera_id, n.t_start, n.t_end, kf, n.summary, blob, n.height, n.n_leaves,
                         n.leaf_lo, n.leaf_hi, n.parent, lc, rc, n.event_id, n.summary_version, n.written_version))
        for cam in sorted(deleted_cameras):
            conn.execute("DELETE FROM forest_nodes WHERE camera_id=?", (cam,))
        conn.executemany("INSERT OR REPLACE INTO forest_nodes VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        conn.execute("INSERT OR REPLACE INTO forest_meta VALUES ('next_node_id', ?)", (next_id,))
