"""Moments (retained frames) and the gate log: reads, and retention's side of the store.

Times: ``t_rel`` bounds in ``list`` (the source's own clock, what a user indexing one file
thinks in); everything else on the camera's axis ``t`` (absolute seconds when known).
"""
from __future__ import annotations

import math
from pathlib import Path

from .db import Database, placeholders, select_in
from .deletion import DeleteRange, Removed, whole_cameras
from .frames import FrameFiles
from .places import Place, pose_of
from .records import CameraExtent, ClipFrame, GateRecord, GateSample, Moment
from .sightings import drop_moments as drop_perceived
from .vector_table import drop_vectors

_COLUMNS = ("moment_id, camera_id, t_rel, t_abs, frame_ref, width, height, lap_var, mad, ssim, hist_corr,"
            " tier, event_id, embedding_id, tile_mad, tiles_changed, pose_x, pose_y, pose_z, pose_yaw, pose_frame,"
            " blurred")


class MomentRepository:
    """Also what retention needs of the store (memory/retention.py: ``RetentionStore``)."""

    tables = ("moments", "samples")

    def __init__(self, db: Database, frames: FrameFiles):
        self.db = db
        self.frames = frames
        self.root: Path = frames.root

    # -- reads ---------------------------------------------------------------------------------
    def list(self, camera_id: str | None = None, t0: float | None = None, t1: float | None = None,
             limit: int | None = None, place: Place | None = None) -> list[Moment]:
        """Moments ordered by camera and time; t0/t1 bound t_rel (inclusive); ``place``: only
        those whose pose passes it (memory/places.py)."""
        where, args = [], []
        if place is not None:
            sql, more = place.sql()
            where.append(sql)
            args += more
        if camera_id is not None:
            where.append("camera_id = ?")
            args.append(camera_id)
        if t0 is not None:
            where.append("t_rel >= ?")
            args.append(float(t0))
        if t1 is not None:
            where.append("t_rel <= ?")
            args.append(float(t1))
        exact = place is None or place.polygon is None  # a polygon is exact only after contains()
        order = " ORDER BY camera_id, t_rel, moment_id"
        if limit is not None and exact:
            order += f" LIMIT {int(limit)}"
        out = self._select(" AND ".join(where) if where else None, args, order)
        if not exact:
            inside = place.contains_many([m.pose.x for m in out], [m.pose.y for m in out])
            out = [m for m, ok in zip(out, inside) if ok][:limit]
        return out

    def on_axis(self, camera_id: str, t0: float, t1: float) -> list[Moment]:
        """A camera's moments with t0 <= t < t1 on its axis, in time order."""
        return self._select("camera_id = ? AND t >= ? AND t < ?", [camera_id, float(t0), float(t1)],
                            " ORDER BY t, moment_id")

    def clip_frames(self, camera_id: str, t0: float, t1: float, limit: int = 100_000) -> list[ClipFrame]:
        """What a clip of [t0, t1] on the camera's axis is made of: the camera's moments with
        t0 <= t <= t1 and the last one before t0 (what showed at t0), in time order."""
        conn = self.db.conn()
        cols = "moment_id, t, t_rel, source_id, frame_ref"
        before = conn.execute(f"SELECT {cols} FROM moments WHERE camera_id = ? AND t < ? ORDER BY t DESC, "
                              "moment_id DESC LIMIT 1", (camera_id, float(t0))).fetchall()
        rows = conn.execute(f"SELECT {cols} FROM moments WHERE camera_id = ? AND t >= ? AND t <= ? ORDER BY t, "
                            "moment_id LIMIT ?", (camera_id, float(t0), float(t1), int(limit))).fetchall()
        return [ClipFrame(r[0], r[1], r[2], r[3], str(self.root / r[4])) for r in before + rows]

    def by_id(self, ids) -> dict[int, Moment]:
        rows = select_in(self.db.conn(), f"SELECT {_COLUMNS} FROM moments WHERE moment_id IN ({{ids}})", ids)
        return {m.moment_id: m for m in map(self._moment, rows)}

    def times(self, ids) -> dict[int, float]:
        """Moment id -> time on its camera's axis."""
        return dict(select_in(self.db.conn(), "SELECT moment_id, t FROM moments WHERE moment_id IN ({ids})", ids))

    def cameras(self) -> list[str]:
        return [r[0] for r in self.db.conn().execute("SELECT DISTINCT camera_id FROM moments ORDER BY camera_id")]

    def latest_time(self, camera_id: str, as_of: float | None = None) -> float | None:
        """Time of the camera's newest moment (at or before ``as_of``)."""
        sql, args = "SELECT MAX(t) FROM moments WHERE camera_id=?", [camera_id]
        if as_of is not None:
            sql += " AND t <= ?"
            args.append(float(as_of))
        return self.db.conn().execute(sql, args).fetchone()[0]

    def latest(self, camera_id: str, as_of: float | None = None) -> list[Moment]:
        """The camera's newest moments (all those at its latest time)."""
        t = self.latest_time(camera_id, as_of)
        return [] if t is None else self.on_axis(camera_id, t, math.nextafter(t, math.inf))

    def extent(self, cameras, as_of: float | None = None) -> CameraExtent:
        """First and last time of the cameras' moments (at or before ``as_of``)."""
        cams = list(cameras)
        if not cams:
            return CameraExtent(None, None, False)
        sql = f"SELECT MIN(t), MAX(t), MAX(t_abs IS NOT NULL) FROM moments WHERE camera_id IN ({placeholders(cams)})"
        args: list = list(cams)
        if as_of is not None:
            sql += " AND t <= ?"
            args.append(float(as_of))
        first, last, absolute = self.db.conn().execute(sql, args).fetchone()
        return CameraExtent(first, last, bool(absolute))

    def gate_log(self, camera_id: str | None = None) -> list[GateSample]:
        """Every gated sample, by camera and time: its statistics and what dropped it."""
        sql = ("SELECT camera_id, source_id, t_rel, lap_var, mad, ssim, hist_corr, dropped_by, tile_mad, tiles_changed,"
               " blurred FROM samples")
        args: tuple = ()
        if camera_id is not None:
            sql += " WHERE camera_id = ?"
            args = (camera_id,)
        return [GateSample(r[0], r[1], r[2], GateRecord(*r[3:10], bool(r[10])))
                for r in self.db.conn().execute(sql + " ORDER BY camera_id, t_rel", args)]

    def counts(self) -> dict:
        """Per camera moment counts and t_rel extents, samples per outcome, moments per tier."""
        c = self.db.conn()
        cams = {cam: {"moments": n, "t_first": t0, "t_last": t1} for cam, n, t0, t1 in
                c.execute("SELECT camera_id, COUNT(*), MIN(t_rel), MAX(t_rel) FROM moments GROUP BY camera_id")}
        samples = dict(c.execute("SELECT COALESCE(dropped_by, 'kept'), COUNT(*) FROM samples GROUP BY 1").fetchall())
        tiers = dict(c.execute("SELECT tier, COUNT(*) FROM moments GROUP BY tier").fetchall())
        return {"cameras": cams, "samples": samples, "tiers": tiers}

    def _select(self, where: str | None, args, order: str = "") -> list[Moment]:
        sql = f"SELECT {_COLUMNS} FROM moments" + (f" WHERE {where}" if where else "") + order
        return [self._moment(r) for r in self.db.conn().execute(sql, args)]

    def _moment(self, r) -> Moment:
        return Moment(r[0], r[1], r[2], r[3], str(self.root / r[4]), r[5], r[6],
                      GateRecord(r[7], r[8], r[9], r[10], None, r[14], r[15], bool(r[21])), r[11], r[12], r[13],
                      pose_of(r[16:21]))

    # -- retention -----------------------------------------------------------------------------
    def retention_rows(self, camera_id: str):
        """Every moment of the camera by time. A moment of the camera's open event counts as
        protected: its event's keyframes are picked when it closes, and a pass that thinned it
        first (a resumed ``index`` runs one at once) would keep less than an uninterrupted run."""
        from .retention import RetentionRow

        rows = self.db.conn().execute(
            "SELECT m.moment_id, m.t, m.tier, m.protected OR COALESCE(e.closed=0, 0), m.frame_ref, m.nbytes"
            " FROM moments m LEFT JOIN events e ON e.event_id=m.event_id WHERE m.camera_id=? ORDER BY m.t",
            (camera_id,)).fetchall()
        last = len(rows) - 1
        return [RetentionRow(r[0], r[1], r[2], bool(r[3]) or i == last, self.root / r[4], r[5] or 0)
                for i, r in enumerate(rows)]

    def delete_moments(self, ids: list[int]) -> None:
        """Rows, frame files and vectors of unprotected moments (a keyframe linked after the
        caller read the rows is skipped)."""
        with self.db.write() as (conn, changes):
            rows = select_in(conn, "SELECT moment_id, frame_ref FROM moments WHERE protected=0 "
                                   "AND moment_id IN ({ids})", ids)
            drop_vectors(conn, "frame", [r[0] for r in rows], changes)
            drop_perceived(conn, [r[0] for r in rows])  # their detections and OCR lines go with them
            conn.executemany("DELETE FROM moments WHERE moment_id=?", [(r[0],) for r in rows])
        for r in rows:
            self.frames.unlink(r[1])

    def delete_range(self, conn, changes: list, scope: DeleteRange) -> Removed:
        """Moments in the range (rows, vectors; their frame files once committed) and their gate
        samples; a camera deleted as a whole loses all its samples (dropped frames too)."""
        where, args = scope.where("t")
        rows = conn.execute(f"SELECT moment_id, frame_ref, source_id, t_rel FROM moments{where}", args).fetchall()
        whole = whole_cameras(conn, scope) if scope.whole else []
        drop_vectors(conn, "frame", [r[0] for r in rows], changes)
        conn.executemany("DELETE FROM moments WHERE moment_id=?", [(r[0],) for r in rows])
        conn.executemany("DELETE FROM samples WHERE source_id=? AND t_rel=?", [(r[2], r[3]) for r in rows])
        conn.executemany("DELETE FROM samples WHERE camera_id=?", [(c,) for c in whole])
        return Removed({"moments": len(rows)}, [r[1] for r in rows])

    def set_tier(self, ids_and_tiers: list[tuple[int, str]]) -> None:
        """After the files were re-encoded: their tier, size and (downscaled) dimensions."""
        from PIL import Image

        with self.db.transaction() as conn:
            for mid, tier in ids_and_tiers:
                ref = conn.execute("SELECT frame_ref FROM moments WHERE moment_id=?", (mid,)).fetchone()
                if ref is None:
                    continue
                size, wh = self.frames.size(ref[0]), (None, None)
                try:  # re-encoding may have downscaled it: the header has the new size
                    with Image.open(self.frames.path(ref[0])) as im:
                        wh = im.size
                except OSError:
                    pass
                conn.execute("UPDATE moments SET tier=?, nbytes=COALESCE(?, nbytes), width=COALESCE(?, width),"
                             " height=COALESCE(?, height) WHERE moment_id=?", (tier, size, wh[0], wh[1], mid))

    def frame_bytes(self) -> int:
        return int(self.db.conn().execute("SELECT COALESCE(SUM(nbytes), 0) FROM moments").fetchone()[0])
