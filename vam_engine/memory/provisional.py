"""Provisional nodes: the events the forest does not hold yet, read causally from the store.

An event becomes a forest leaf only once the writer has documented it, and the forest takes
leaves in time order, so the camera's open event (up to ``commit.max_event_s``), the closed
events waiting for the writer, and documented events waiting behind an earlier undocumented
one are in no root. This module turns each of them into a ``ProvisionalNode`` from what ingest
committed: the open event is the ``events`` row with ``closed=0`` and the moments linked to it
(the committer's held frame is not a moment yet and is not seen); a closed event has its
keyframes and its mean frame embedding (the "event" vector space) from its close.

Causality. With ``as_of``, an event starting after it is not seen, and one ending after it is
seen as it stood then: open, with only its moments at or before ``as_of`` (its keyframes spread
over those, its embedding their mean, its document withheld: it was written later).
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping

import numpy as np

from ..numerics import spread_evenly
from .db import Database, select_in
from .records import ProvisionalNode
from .vector_table import vectors_by_id

# events per camera a view reads, newest first: the writer's backpressure keeps the backlog
# near ``writer.queue_events`` (256 by default), so this bounds a question's work, not the memory
PER_CAMERA_LIMIT = 512


def _unit_mean(vecs) -> np.ndarray | None:
    if not vecs:
        return None
    mean = np.mean(np.stack(vecs), axis=0).astype(np.float32)
    n = float(np.linalg.norm(mean))
    if not (n > 0 and math.isfinite(n)):
        return None
    out = mean / n
    out.flags.writeable = False
    return out


class ProvisionalReader:
    def __init__(self, db: Database, root):
        self.db = db
        # frame refs are relative to the store directory; joined as strings (pathlib per
        # keyframe was most of the time of a question over a long writer backlog)
        self._prefix = str(root) + os.sep

    def nodes(self, cameras, is_leaf: Callable[[int], bool], *, as_of: float | None = None, keyframes: int = 4,
              before: Mapping[str, float] | None = None, limit: int = PER_CAMERA_LIMIT) -> list[ProvisionalNode]:
        """The provisional nodes of ``cameras``, by camera and time: the events (the newest
        ``limit`` per camera) that start by ``as_of`` and are no forest leaf in view (a leaf
        ends by ``as_of``; linked to a forest node in its row, or ``is_leaf(event_id)``, the
        in-memory forest, which takes a leaf before its row is linked). ``keyframes``: up to
        that many moments spread evenly over the event, taken only from those at or before
        ``before[camera]`` when given (the caller shows the later seconds otherwise)."""
        if isinstance(keyframes, bool) or not isinstance(keyframes, int) or keyframes < 0:
            raise ValueError(f"provisional nodes: keyframes must be an int >= 0, got {keyframes!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"provisional nodes: limit must be an int >= 1, got {limit!r}")
        conn = self.db.conn()
        rows = []
        for cam in cameras:
            # a leaf's row has its forest node id (set once the forest took it): those are
            # skipped here, unless ``as_of`` cuts them (then the leaf is not in view)
            sql = ("SELECT event_id, camera_id, t_start, t_end, keyframes, doc, closed FROM events WHERE camera_id=?"
                   " AND (forest_node_id IS NULL OR closed=0 OR doc IS NULL")
            args: list = [cam]
            if as_of is not None:
                sql += " OR t_end>?) AND t_start<=?"
                args += [float(as_of), float(as_of)]
            else:
                sql += ")"
            got = conn.execute(sql + " ORDER BY t_start DESC, event_id DESC LIMIT ?", args + [limit]).fetchall()
            rows += reversed(got)
        whole, partial = [], []  # closed and wholly in view / open or clipped by as_of
        for r in rows:
            clipped = as_of is not None and r[3] > as_of
            if not clipped and is_leaf(r[0]):
                continue  # documented and in the forest: the forest shows it
            (partial if clipped or not r[6] else whole).append(r)
        out = {r[0]: n for r in partial if (n := self._partial(conn, r, as_of, keyframes, before)) is not None}
        out.update({n.event_id: n for n in self._whole(conn, whole, keyframes, before)})
        return [out[r[0]] for r in rows if r[0] in out]

    def _picks(self, members: list, keyframes: int, cutoff: float | None) -> list:
        """Up to ``keyframes`` of ``members`` ((moment id, t, frame ref), by time) spread evenly
        over those at or before ``cutoff``."""
        pool = members if cutoff is None else [m for m in members if m[1] <= cutoff]
        return [pool[i] for i in spread_evenly(len(pool), keyframes)]

    def _node(self, r, t_end: float, n: int, is_open: bool, picks: list, emb, doc) -> ProvisionalNode:
        return ProvisionalNode(r[0], r[1], float(r[2]), float(t_end), n, is_open, tuple(int(p[0]) for p in picks),
                               tuple(float(p[1]) for p in picks), tuple(self._prefix + p[2] for p in picks),
                               emb, doc)

    def _partial(self, conn, r, as_of, keyframes, before) -> ProvisionalNode | None:
        """An open event, or one ``as_of`` cuts: built from its moments in view."""
        sql, args = "SELECT moment_id, t, frame_ref, embedding_id FROM moments WHERE event_id=?", [r[0]]
        if as_of is not None:
            sql += " AND t<=?"
            args.append(float(as_of))
        members = conn.execute(sql + " ORDER BY t, moment_id", args).fetchall()
        if not members:
            return None
        vecs = vectors_by_id(conn, "frame", [m[0] for m in members if m[3] is not None])
        picks = self._picks(members, keyframes, None if before is None else before.get(r[1]))
        return self._node(r, members[-1][1], len(members), True, picks, _unit_mean(list(vecs.values())), None)

    def _whole(self, conn, rows, keyframes, before) -> list[ProvisionalNode]:
        """Closed events wholly in view: their keyframes and mean frame embedding from the close."""
        if not rows:
            return []
        ids = [r[0] for r in rows]
        counts = dict(select_in(conn, "SELECT event_id, COUNT(*) FROM moments WHERE event_id IN ({ids})"
                                      " GROUP BY event_id", ids))
        vecs = vectors_by_id(conn, "event", ids)
        kf = {r[0]: [int(k) for k in json.loads(r[4])] if r[4] else [] for r in rows}
        found = {m[0]: m for m in select_in(conn, "SELECT moment_id, t, frame_ref FROM moments"
                                                 " WHERE moment_id IN ({ids})", [k for v in kf.values() for k in v])}
        out = []
        for r in rows:
            members = sorted((found[k] for k in kf[r[0]] if k in found), key=lambda m: (m[1], m[0]))
            picks = self._picks(members, keyframes, None if before is None else before.get(r[1]))
            emb = vecs.get(r[0])
            if emb is not None:
                emb = emb.copy()
                emb.flags.writeable = False
            out.append(self._node(r, r[3], int(counts.get(r[0], 0)), False, picks, emb, r[5]))
        return out
