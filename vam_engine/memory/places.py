"""Filters by place: where the moments were taken (their poses, memory/records.py ``Moment.pose``).

A ``Place`` keeps the moments whose pose is within ``radius`` of ``near`` (x, y) (inside:
dx*dx + dy*dy <= radius*radius, computed the same way in SQL and here), inside a region (an
axis-aligned box (x0, y0, x1, y1), or a polygon of three or more (x, y) corners), both when both
are given, and only in one map frame when ``map_frame`` is given. Moments without a pose never
pass. The filter runs in SQL before anything is ranked, like the time filters: a box's bounds
(and a polygon's or a circle's bounding box) use the ``moments_place`` index, the circle's
distance is exact in SQL, and a polygon is tested exactly on the rows its bounding box let
through, vectorised (``in_polygon_many``: numpy over every row at once, one pass per edge; the
scalar ``in_polygon`` is its reference). A polygon has at most ``MAX_CORNERS`` corners, so a
request's cost is bounded: rows x corners array operations (benchmarks/bench_places.py).

What passes, per search space (``allowed_ids``): a frame whose moment passes; an event
(``event``, ``event_doc``) with a moment that passes; a summary document one of whose moments
(those its writer saw) passes; a speech segment with a moment of its camera in its interval
that passes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import VamError
from ..ingest import Pose

MAX_CORNERS = 256  # of a region polygon: bounds the exact test's work per row
POSE_COLUMNS = "m.pose_x, m.pose_y, m.pose_z, m.pose_yaw, m.pose_frame"  # a moment's pose (alias m)


def pose_of(cols) -> Pose | None:
    """The Pose of a row's ``POSE_COLUMNS`` (None: the moment has none)."""
    return None if cols[0] is None else Pose(*cols)


@dataclass(frozen=True)
class Place:
    near: tuple[float, float] | None = None
    radius: float | None = None
    box: tuple[float, float, float, float] | None = None  # x0, y0, x1, y1
    polygon: tuple[tuple[float, float], ...] | None = None
    map_frame: str | None = None

    def bounds(self) -> tuple[float, float, float, float]:
        """The bounding box of every condition together (x0, y0, x1, y1)."""
        x0 = y0 = -math.inf
        x1 = y1 = math.inf
        parts = []
        if self.near is not None:
            (cx, cy), r = self.near, self.radius
            parts.append((cx - r, cy - r, cx + r, cy + r))
        if self.box is not None:
            parts.append(self.box)
        if self.polygon is not None:
            xs, ys = [p[0] for p in self.polygon], [p[1] for p in self.polygon]
            parts.append((min(xs), min(ys), max(xs), max(ys)))
        for a, b, c, d in parts:
            x0, y0, x1, y1 = max(x0, a), max(y0, b), min(x1, c), min(y1, d)
        return x0, y0, x1, y1

    def sql(self, alias: str = "") -> tuple[str, list]:
        """The SQL condition on a moments row (``alias``: its table alias) and its parameters;
        a polygon is exact only after ``contains``."""
        a = f"{alias}." if alias else ""
        x0, y0, x1, y1 = self.bounds()
        where = [f"{a}pose_x IS NOT NULL"]
        args: list = []
        for col, lo, hi in (("pose_x", x0, x1), ("pose_y", y0, y1)):
            if math.isfinite(lo):
                where.append(f"{a}{col} >= ?")
                args.append(lo)
            if math.isfinite(hi):
                where.append(f"{a}{col} <= ?")
                args.append(hi)
        if self.near is not None:
            cx, cy = self.near
            where.append(f"({a}pose_x - ?) * ({a}pose_x - ?) + ({a}pose_y - ?) * ({a}pose_y - ?) <= ?")
            args += [cx, cx, cy, cy, self.radius * self.radius]
        if self.map_frame is not None:
            where.append(f"{a}pose_frame = ?")
            args.append(self.map_frame)
        return " AND ".join(where), args

    def contains(self, x: float, y: float) -> bool:
        """Whether a pose at (x, y) passes (the map frame aside)."""
        if self.near is not None:
            dx, dy = x - self.near[0], y - self.near[1]
            if dx * dx + dy * dy > self.radius * self.radius:
                return False
        if self.box is not None:
            bx0, by0, bx1, by1 = self.box
            if not (bx0 <= x <= bx1 and by0 <= y <= by1):
                return False
        return self.polygon is None or in_polygon(self.polygon, x, y)

    def contains_many(self, xs, ys) -> np.ndarray:
        """``contains`` for arrays of positions at once (a bool array; the map frame aside)."""
        xs, ys = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
        keep = np.ones(xs.shape, bool)
        if self.near is not None:
            dx, dy = xs - self.near[0], ys - self.near[1]
            keep &= dx * dx + dy * dy <= self.radius * self.radius
        if self.box is not None:
            bx0, by0, bx1, by1 = self.box
            keep &= (bx0 <= xs) & (xs <= bx1) & (by0 <= ys) & (ys <= by1)
        if self.polygon is not None:
            keep &= in_polygon_many(self.polygon, xs, ys)
        return keep


def in_polygon(corners, x: float, y: float) -> bool:
    """Whether (x, y) lies inside the polygon (even-odd rule)."""
    inside = False
    n = len(corners)
    for i in range(n):
        (ax, ay), (bx, by) = corners[i], corners[(i + 1) % n]
        if (ay > y) != (by > y) and x < ax + (y - ay) * (bx - ax) / (by - ay):
            inside = not inside
    return inside


def in_polygon_many(corners, xs, ys) -> np.ndarray:
    """``in_polygon`` for arrays of points (even-odd rule, the same arithmetic per point), one
    vectorised pass per edge."""
    xs, ys = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    inside = np.zeros(xs.shape, bool)
    n = len(corners)
    with np.errstate(divide="ignore", invalid="ignore"):  # horizontal edges never cross: masked below
        for i in range(n):
            (ax, ay), (bx, by) = corners[i], corners[(i + 1) % n]
            crosses = (ay > ys) != (by > ys)
            if not crosses.any():
                continue
            inside ^= crosses & (xs < ax + (ys - ay) * (bx - ax) / (by - ay))
    return inside


def _finite(name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not math.isfinite(v):
        raise VamError(f"{name} must be a finite number, got {v!r:.60}")
    return float(v)


def _point(name: str, p) -> tuple[float, float]:
    if isinstance(p, (str, bytes)) or not hasattr(p, "__len__") or len(p) != 2:
        raise VamError(f"{name} must be a point (x, y), got {p!r:.60}")
    return _finite(f"{name} x", p[0]), _finite(f"{name} y", p[1])


def make_place(near=None, radius=None, region=None, map_frame=None) -> Place | None:
    """The filter of ``near`` (x, y) with ``radius`` (> 0), ``region`` (a box (x0, y0, x1, y1)
    or a polygon [(x, y), ...]) and ``map_frame``; None when none is given. VamError naming the
    argument when one is malformed."""
    if near is None and radius is None and region is None and map_frame is None:
        return None
    if (near is None) != (radius is None):
        raise VamError("near and radius go together: give both (a point (x, y) and a distance in metres) or neither")
    pt = r = box = poly = None
    if near is not None:
        pt, r = _point("near", near), _finite("radius", radius)
        if r <= 0:
            raise VamError(f"radius must be positive, got {r:g}")
    if region is not None:
        if isinstance(region, (str, bytes)) or not hasattr(region, "__len__"):
            raise VamError(f"region must be a box (x0, y0, x1, y1) or a polygon [(x, y), ...], got {region!r:.60}")
        if len(region) == 4 and all(not hasattr(v, "__len__") for v in region):
            box = tuple(_finite(f"region[{i}]", v) for i, v in enumerate(region))
            if box[0] > box[2] or box[1] > box[3]:
                raise VamError(f"region box (x0, y0, x1, y1) needs x0 <= x1 and y0 <= y1, got {box}")
        else:
            if not 3 <= len(region) <= MAX_CORNERS:
                raise VamError(f"a region polygon needs 3..{MAX_CORNERS} corners, got {len(region)}")
            poly = tuple(_point(f"region corner {i}", p) for i, p in enumerate(region))
    if map_frame is not None and (not isinstance(map_frame, str) or not 0 < len(map_frame) <= 64):
        raise VamError(f"map_frame must be a map frame name of 1..64 characters, got {map_frame!r:.60}")
    return Place(pt, r, box, poly, map_frame)


# Entity sightings (the perception tables, not in this schema yet) take their place from their
# moment: when they land, their hits get an entry here joining moments on moment_id, and a
# sighting's pose is its moment's (no column of their own is needed).
_SPACE_SQL = {  # (id, pose_x, pose_y) of each space's rows whose moments pass ``{where}`` (on alias m)
    "frame": "SELECT m.moment_id, m.pose_x, m.pose_y FROM moments m WHERE {where}",
    "event": "SELECT m.event_id, m.pose_x, m.pose_y FROM moments m WHERE m.event_id IS NOT NULL AND {where}",
    "summary": "SELECT s.summary_id, m.pose_x, m.pose_y FROM summaries s, json_each(s.moments) j "
               "JOIN moments m ON m.moment_id = j.value WHERE {where}",
    "speech": "SELECT tr.segment_id, m.pose_x, m.pose_y FROM transcripts tr JOIN moments m "
              "ON m.camera_id = tr.camera_id AND m.t >= tr.t_start AND m.t <= tr.t_end WHERE {where}",
    "ocr": "SELECT sp.span_id, m.pose_x, m.pose_y FROM text_spans sp JOIN moments m "
           "ON m.camera_id = sp.camera_id AND m.t >= sp.t_start AND m.t <= sp.t_end WHERE {where}",
    "object": "SELECT d.track_id, m.pose_x, m.pose_y FROM detections d JOIN moments m "
              "ON m.moment_id = d.moment_id WHERE d.track_id IS NOT NULL AND {where}",
}


def allowed_ids(conn, space: str, place: Place) -> np.ndarray:
    """The ids of ``space`` ("frame", "event", "event_doc", "summary", "speech", and the
    full-text kinds "ocr" and "object") whose rows pass ``place`` (module doc), sorted."""
    where, args = place.sql("m")
    sql = _SPACE_SQL["event" if space == "event_doc" else space].format(where=where)
    rows = conn.execute(sql, args).fetchall()
    if not rows:
        return np.zeros(0, np.int64)
    ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    if place.polygon is not None:  # the bounding box ran in SQL; the exact test on what it let through
        xs = np.fromiter((r[1] for r in rows), np.float64, len(rows))
        ys = np.fromiter((r[2] for r in rows), np.float64, len(rows))
        ids = ids[in_polygon_many(place.polygon, xs, ys)]
    return np.unique(ids)
