"""The read queries the API pages through: moments, events and transcript segments by camera and
time (the camera axis), with ``as_of`` and keyset cursors.

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
from pathlib import Path

from ..numerics import finite_time, time_range


class BadQuery(ValueError):
    """A query parameter is malformed: the message names it (the API answers 422)."""


MAX_ID = 2 ** 63 - 1  # SQLite's integers: an id past it names no row (and could not be bound)


def check_id(value: int, name: str) -> int:
    """``value`` when it can be a row id (0..2^63-1); BadQuery naming ``name`` otherwise."""
    if not 0 <= value <= MAX_ID:
        raise BadQuery(f"{name} must be an id in 0..{MAX_ID}, got {str(value)[:30]}")
    return value


def parse_position(text, what: str) -> int | None:
    """A stream position given as text (``since``, Last-Event-ID): a row id; None when absent;
    BadQuery naming ``what`` (e.g. "an alert position (a non-negative alert id)") when malformed."""
    if text is None or str(text).strip() == "":
        return None
    try:
        v = int(str(text).strip()[:40])
    except ValueError:
        v = -1
    if not 0 <= v <= MAX_ID:
        raise BadQuery(f"{str(text)[:40]!r} is not {what}")
    return v


@dataclass(frozen=True)
class Page:
    items: list  # of Moment or Event
    next_cursor: str | None
    # a cluster's page names the cameras and shards that did not answer (None: one engine)
    missing_cameras: tuple[str, ...] | None = None
    missing_shards: tuple[str, ...] | None = None


def encode_cursor(key) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None, kinds: tuple) -> tuple | None:
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
        ok = isinstance(key, list) and len(key) == len(kinds) and all(
            isinstance(v, k) and not isinstance(v, bool) and _in_range(v) for v, k in zip(key, kinds))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        ok = False
    if not ok:
        raise BadQuery(f"cursor {cursor[:40]!r} is not one this server handed out (pass next_cursor back unchanged)")
    return tuple(key)


def _in_range(v) -> bool:
    if isinstance(v, int):
        return abs(v) <= MAX_ID
    if isinstance(v, float):
        return math.isfinite(v)
    return len(v) <= 1024 if isinstance(v, str) else True


def check_range(t0, t1, as_of) -> None:
    time_range((t0, t1), "the time range (t0, t1)", open_ends=True, error=BadQuery)
    finite_time(as_of, "as_of", optional=True, error=BadQuery)


def place_filter(near, radius, region, map_frame):
    """The place filter of a query (memory make_place: a point and a radius in metres, a box or
    polygon region, a map frame); None when none is given; BadQuery naming the bad part."""
    from ..errors import VamError
    from ..memory import make_place

    try:
        return make_place(near, radius, region, map_frame)
    except VamError as e:
        raise BadQuery(str(e)) from None


@dataclass(frozen=True)
class RowKey:
    """A page's sort key: camera, time on its axis, id (the keyset a cursor carries)."""

    camera_id: str
    t: float
    row_id: int


def page_after(store, kind: str, *, cameras, t0=None, t1=None, as_of=None, after: RowKey | None = None,
               limit: int = 200, place=None) -> tuple[list, bool]:
    """Up to ``limit`` moments, events or transcript segments (``kind``) strictly after the key
    ``after``, by (camera, time, id), and whether more follow (memory/pages.py). Moments: t0 <= t
    <= t1; events and segments: overlapping [t0, t1]; all ending by ``as_of``. ``place``
    (memory/places.py; moments and events only): moments whose pose is there, events with such a
    moment."""
    check_range(t0, t1, as_of)
    if place is not None and kind not in ("moments", "events"):
        raise BadQuery(f"a place filter applies to moments and events, not {kind}")
    key = None if after is None else (after.camera_id, after.t, after.row_id)
    return store.pages.after(kind, cameras=cameras, t0=t0, t1=t1, as_of=as_of, after=key, limit=limit, place=place)


def row_key(kind: str, row) -> RowKey:
    if kind == "moments":
        return RowKey(row.camera_id, row.t, row.moment_id)
    return RowKey(row.camera_id, row.t_start, row.segment_id if kind == "transcripts" else row.event_id)


def decode_row_key(cursor: str | None) -> RowKey | None:
    key = decode_cursor(cursor, (str, (int, float), int))
    return None if key is None else RowKey(*key)


def encode_row_key(key: RowKey) -> str:
    return encode_cursor((key.camera_id, key.t, key.row_id))


def page(store, kind: str, *, cameras, t0=None, t1=None, as_of=None, cursor=None, limit=200, place=None) -> Page:
    items, more = page_after(store, kind, cameras=cameras, t0=t0, t1=t1, as_of=as_of,
                             after=decode_row_key(cursor), limit=limit, place=place)
    return Page(items, encode_row_key(row_key(kind, items[-1])) if more and items else None)


def moments_page(store, **query) -> Page:
    """Moments with t0 <= t <= t1 (camera axis), t <= as_of, by camera and time."""
    return page(store, "moments", **query)


def events_page(store, **query) -> Page:
    """Events overlapping [t0, t1] that end by ``as_of``, by camera and start time."""
    return page(store, "events", **query)


@dataclass(frozen=True)
class StoreStats:
    """Per-camera figures of a store (``/api/cameras``, ``/metrics``)."""

    extents: dict[str, dict]  # camera -> its entry of memory Pages.camera_extents
    events: dict[str, int]  # camera -> events
    outcomes: dict[tuple[str, str], int]  # (camera, outcome) -> gated samples
    bytes_by_part: dict[str, int]  # frames / database / vectors -> bytes on disk


def store_stats(store) -> StoreStats:
    root = Path(store.root)
    db = sum(p.stat().st_size for p in root.glob("store.sqlite*") if p.is_file())
    vec = sum(p.stat().st_size for p in (root / "vectors").glob("*") if p.is_file()) \
        if (root / "vectors").is_dir() else 0
    pages = store.pages
    return StoreStats(pages.camera_extents(), pages.events_count(), pages.sample_outcomes(),
                      {"frames": store.moments.frame_bytes(), "database": db, "vectors": vec})
