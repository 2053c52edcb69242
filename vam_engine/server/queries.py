"""The read queries the API pages through: moments and events by camera and time (the camera
axis), with ``as_of`` and keyset cursors.

A cursor is the last row's sort key, opaque to the client (base64 JSON): the next page starts
strictly after it, so rows committed meanwhile never shift or repeat a page. The rows come back
as the memory's records (``by_id``), never as raw tuples.
"""
from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass

from ..memory.db import placeholders


class BadQuery(ValueError):
    """A query parameter is malformed: the message names it (the API answers 422)."""


@dataclass(frozen=True)
class Page:
    items: list  # of Moment or Event
    next_cursor: str | None


def encode_cursor(key) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None, kinds: tuple) -> tuple | None:
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
        ok = isinstance(key, list) and len(key) == len(kinds) and all(
            isinstance(v, k) and not isinstance(v, bool) for v, k in zip(key, kinds))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        ok = False
    if not ok:
        raise BadQuery(f"cursor {cursor[:40]!r} is not one this server handed out (pass next_cursor back unchanged)")
    return tuple(key)


def check_range(t0, t1, as_of) -> None:
    for name, v in (("t0", t0), ("t1", t1), ("as_of", as_of)):
        if v is not None and not math.isfinite(v):
            raise BadQuery(f"{name} must be a finite time in seconds, got {v}")
    if t0 is not None and t1 is not None and t0 > t1:
        raise BadQuery(f"t0 ({t0:g}) is after t1 ({t1:g}): give t0 <= t1")


def _page(conn, table, id_col, t_col, end_col, cameras, t0, t1, as_of, cursor, limit, kinds):
    where, args = [], []
    if cameras is not None:
        if not cameras:
            return [], None
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
    key = decode_cursor(cursor, kinds)
    if key is not None:
        where.append(f"(camera_id, {t_col}, {id_col}) > (?, ?, ?)")
        args += list(key)
    sql = (f"SELECT {id_col}, camera_id, {t_col} FROM {table}" + (" WHERE " + " AND ".join(where) if where else "")
           + f" ORDER BY camera_id, {t_col}, {id_col} LIMIT ?")
    rows = conn.execute(sql, args + [int(limit) + 1]).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    nxt = encode_cursor((rows[-1][1], rows[-1][2], rows[-1][0])) if more and rows else None
    return [r[0] for r in rows], nxt


def moments_page(store, *, cameras, t0=None, t1=None, as_of=None, cursor=None, limit=200) -> Page:
    """Moments with t0 <= t <= t1 (camera axis), t <= as_of, by camera and time."""
    check_range(t0, t1, as_of)
    ids, nxt = _page(store.db.conn(), "moments", "moment_id", "t", "t", cameras, t0, t1, as_of, cursor, limit,
                     (str, (int, float), int))
    found = store.moments.by_id(ids)
    return Page([found[i] for i in ids if i in found], nxt)


def events_page(store, *, cameras, t0=None, t1=None, as_of=None, cursor=None, limit=200) -> Page:
    """Events overlapping [t0, t1] that end by ``as_of``, by camera and start time."""
    check_range(t0, t1, as_of)
    ids, nxt = _page(store.db.conn(), "events", "event_id", "t_start", "t_end", cameras, t0, t1, as_of, cursor,
                     limit, (str, (int, float), int))
    found = store.events.by_id(ids)
    return Page([found[i] for i in ids if i in found], nxt)


def camera_extents(store) -> dict[str, dict]:
    """Per camera: moments, first and last time on its axis, whether that axis is absolute."""
    rows = store.db.conn().execute(
        "SELECT camera_id, COUNT(*), MIN(t), MAX(t), MAX(t_abs IS NOT NULL) FROM moments GROUP BY camera_id")
    return {r[0]: {"moments": r[1], "t_first": r[2], "t_last": r[3], "absolute": bool(r[4])} for r in rows}


def events_count(store) -> dict[str, int]:
    return dict(store.db.conn().execute("SELECT camera_id, COUNT(*) FROM events GROUP BY camera_id").fetchall())


def sample_outcomes(store) -> dict[tuple[str, str], int]:
    """(camera, outcome) -> gated samples: 'kept' or the gate that dropped them."""
    sql = "SELECT camera_id, COALESCE(dropped_by, 'kept'), COUNT(*) FROM samples GROUP BY 1, 2"
    return {(r[0], r[1]): r[2] for r in store.db.conn().execute(sql)}
