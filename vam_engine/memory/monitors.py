"""Monitors and their alerts, durable in the store: a monitor survives a restart (active ones
start checking again when the engine next runs them) and an alert keeps the frames its check
observed. Both go with their camera or time range (``Store.delete`` calls ``delete_range``).

Files: a monitor's reference images are ``monitors/<id>/ref_<k>.jpg``, an alert's observed
frames ``alerts/<monitor id>/<alert key>_<k>.jpg`` (store-relative refs in the rows; written
before the row that names them, like moments' frames). The committed moments of an alert's
observed span are flagged protected in the same transaction, so retention never thins them.
"""
from __future__ import annotations

import json
import math
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..errors import VamError
from ..ingest import camera_list
from .db import Database, placeholders
from .deletion import DeleteRange, Removed
from .frames import FrameFiles
from .records import MONITOR_MODES, Alert, Monitor

_ID = re.compile(r"^c?mon_[0-9a-f]{12}$")  # cmon_: a cluster router's monitor (cluster/catalogue.py)
_ALERT_COLS = ("alert_id, monitor_id, camera_id, t, t_abs, confidence, observed, moment_ids, frame_refs, "
               "created_at")
_MONITOR_COLS = ("monitor_id, condition, cameras, mode, min_confidence, every_s, frames, repeat_gap_s, images, "
                 "active, created_at, ended_at")
MAX_CONDITION_CHARS = 1000


class MonitorLimit(VamError):
    """As many monitors are active as may be (``monitors.max_active``; the service answers 429)."""


@dataclass(frozen=True)
class MonitorSpec:
    """What ``watch`` asks for, validated (``check_spec``) before anything is stored."""

    condition: str
    cameras: tuple[str, ...] | None = None
    mode: str = "once"
    min_confidence: float = 0.6
    every_s: float = 2.0
    frames: int = 4
    repeat_gap_s: float = 3.0


def check_spec(spec: MonitorSpec) -> MonitorSpec:
    """The spec with its condition trimmed; ValueError naming the field that is wrong."""
    cond = spec.condition.strip() if isinstance(spec.condition, str) else None
    if not cond:
        raise ValueError(f"watch: condition must be a non-empty string, got {spec.condition!r}")
    if len(cond) > MAX_CONDITION_CHARS:
        raise ValueError(f"watch: condition is {len(cond)} characters, at most {MAX_CONDITION_CHARS}")
    if spec.mode not in MONITOR_MODES:
        raise ValueError(f"watch: mode must be one of {', '.join(MONITOR_MODES)}, got {spec.mode!r}")

    def number(name, lo, hi, lo_open=False):
        v = getattr(spec, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v < lo or v > hi or (lo_open and v == lo):
            raise ValueError(f"watch: {name} must be a number in {'(' if lo_open else '['}{lo}, {hi}], got {v!r}")

    number("min_confidence", 0.0, 1.0)
    number("every_s", 0.0, 3600.0, lo_open=True)
    number("repeat_gap_s", 0.0, 86400.0)
    if isinstance(spec.frames, bool) or not isinstance(spec.frames, int) or not 1 <= spec.frames <= 32:
        raise ValueError(f"watch: frames must be an integer in [1, 32], got {spec.frames!r}")
    cams = spec.cameras
    if cams is not None:
        cams = tuple(sorted(set(camera_list(cams, "watch: cameras", nonempty=True))))
    return MonitorSpec(cond, cams, spec.mode, float(spec.min_confidence), float(spec.every_s), spec.frames,
                       float(spec.repeat_gap_s))


def _monitor(r) -> Monitor:
    return Monitor(r[0], r[1], None if r[2] == "*" else tuple(json.loads(r[2])), r[3], r[4], r[5], r[6], r[7],
                   len(json.loads(r[8])), bool(r[9]), r[10], r[11])


@dataclass(frozen=True)
class ObservedFrame:
    """One frame a check looked at: the image as the model saw it and its camera-axis time."""

    rgb: object  # H x W x 3 uint8
    t: float


class MonitorRepository:
    tables = ("alerts",)  # and the monitors that watched only deleted cameras

    def __init__(self, db: Database, frames: FrameFiles, jpeg_quality: int = 90):
        self.db = db
        self.files = frames
        self.root = Path(frames.root)
        self.jpeg_quality = jpeg_quality

    # -- monitors ------------------------------------------------------------------------------
    def add(self, spec: MonitorSpec, images=(), *, monitor_id: str | None = None) -> Monitor:
        """Store a checked spec with its reference images (H x W x 3 uint8 arrays), under a new
        id or ``monitor_id`` (a cluster router's record of a monitor its shards run)."""
        monitor_id = monitor_id or f"mon_{uuid.uuid4().hex[:12]}"
        refs = []
        for k, img in enumerate(images):
            ref = f"monitors/{monitor_id}/ref_{k}.jpg"
            self.files.write(ref, img, self.jpeg_quality)
            refs.append(ref)
        cams = "*" if spec.cameras is None else json.dumps(list(spec.cameras))
        with self.db.transaction() as conn:
            conn.execute(f"INSERT INTO monitors ({_MONITOR_COLS}) VALUES (?,?,?,?,?,?,?,?,?,1,?,NULL)",
                         (monitor_id, spec.condition, cams, spec.mode, spec.min_confidence, spec.every_s,
                          spec.frames, spec.repeat_gap_s, json.dumps(refs), time.time()))
        return self.get(monitor_id)

    def get(self, monitor_id: str) -> Monitor | None:
        if not isinstance(monitor_id, str) or not _ID.match(monitor_id):
            return None
        r = self.db.conn().execute(f"SELECT {_MONITOR_COLS} FROM monitors WHERE monitor_id=?",
                                   (monitor_id,)).fetchone()
        return None if r is None else _monitor(r)

    def list(self, include_ended: bool = False) -> list[Monitor]:
        sql = f"SELECT {_MONITOR_COLS} FROM monitors" + ("" if include_ended else " WHERE active=1")
        return [_monitor(r) for r in self.db.conn().execute(sql + " ORDER BY created_at, monitor_id")]

    def count_active(self) -> int:
        return self.db.conn().execute("SELECT COUNT(*) FROM monitors WHERE active=1").fetchone()[0]

    def last_alert_id(self) -> int:
        """The newest alert's id (0: none yet)."""
        return self.db.conn().execute("SELECT COALESCE(MAX(alert_id), 0) FROM alerts").fetchone()[0]

    def count_alerts(self) -> int:
        return self.db.conn().execute("SELECT COUNT(*) FROM alerts").fetchone()[0]

    def end(self, monitor_id: str) -> bool:
        """Deactivate an active monitor (kept with its alerts). False: none such was active."""
        with self.db.transaction() as conn:
            cur = conn.execute("UPDATE monitors SET active=0, ended_at=? WHERE monitor_id=? AND active=1",
                               (time.time(), monitor_id))
            return cur.rowcount > 0

    def reference_images(self, monitor_id: str) -> list[Path]:
        r = self.db.conn().execute("SELECT images FROM monitors WHERE monitor_id=?", (monitor_id,)).fetchone()
        return [] if r is None else [self.root / ref for ref in json.loads(r[0])]

    # -- alerts --------------------------------------------------------------------------------
    def fire(self, monitor: Monitor, camera_id: str, t: float, t_abs: float | None, confidence: float,
             observed: str, frames: list[ObservedFrame], *, end_monitor: bool) -> Alert | None:
        """Record one alert: the observed frames' files first, then in one transaction the row,
        the protection of the span's committed moments and (``end_monitor``: a ``once``
        monitor) the monitor's end. None when the monitor was ended or deleted meanwhile
        (an ``unwatch`` racing the check: it wins)."""
        key = f"{int(round(t * 1e6)):015d}_{uuid.uuid4().hex[:6]}"
        refs = []
        for k, f in enumerate(frames):
            ref = f"alerts/{monitor.monitor_id}/{key}_{k}.jpg"
            self.files.write(ref, f.rgb, self.jpeg_quality)
            refs.append(ref)
        t_first = min((f.t for f in frames), default=t)
        with self.db.transaction() as conn:
            active = conn.execute("SELECT active FROM monitors WHERE monitor_id=?", (monitor.monitor_id,)).fetchone()
            ok = active is not None and bool(active[0])
            if ok:
                moment_ids = [r[0] for r in conn.execute(
                    "SELECT moment_id FROM moments WHERE camera_id=? AND t>=? AND t<=? ORDER BY t",
                    (camera_id, t_first, t))]
                conn.executemany("UPDATE moments SET protected=1 WHERE moment_id=?", [(m,) for m in moment_ids])
                cur = conn.execute(f"INSERT INTO alerts ({_ALERT_COLS}) VALUES (NULL,?,?,?,?,?,?,?,?,?)",
                                   (monitor.monitor_id, camera_id, float(t), t_abs, float(confidence),
                                    str(observed), json.dumps(moment_ids), json.dumps(refs), time.time()))
                alert_id = int(cur.lastrowid)
                if end_monitor:
                    conn.execute("UPDATE monitors SET active=0, ended_at=? WHERE monitor_id=?",
                                 (time.time(), monitor.monitor_id))
        if not ok:
            for ref in refs:
                self.files.unlink(ref)
            return None
        return self.alert(alert_id)

    def alert(self, alert_id: int) -> Alert | None:
        r = self.db.conn().execute(f"SELECT {_ALERT_COLS} FROM alerts WHERE alert_id=?", (int(alert_id),)).fetchone()
        return None if r is None else self._alert(r)

    def alerts(self, since: int | None = None, monitor_id: str | None = None, camera=None,
               limit: int | None = None) -> list[Alert]:
        """Alerts with alert_id > ``since``, oldest first; ``camera``: one id or several."""
        where, args = [], []
        if since is not None:
            where.append("alert_id>?"); args.append(int(since))
        if monitor_id is not None:
            where.append("monitor_id=?"); args.append(str(monitor_id))
        if camera is not None:
            cams = camera_list(camera, "camera")
            where.append(f"camera_id IN ({placeholders(cams)})"); args += cams
        sql = f"SELECT {_ALERT_COLS} FROM alerts" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY alert_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [self._alert(r) for r in self.db.conn().execute(sql, args)]

    def _alert(self, r) -> Alert:
        return Alert(r[0], r[1], r[2], r[3], r[4], r[5], r[6], tuple(json.loads(r[7])),
                     tuple(str(self.root / ref) for ref in json.loads(r[8])), r[9])

    # -- deletion ------------------------------------------------------------------------------
    def delete_range(self, conn, changes: list, scope: DeleteRange) -> Removed:
        """Inside ``Store.delete``'s transaction: the alerts of ``cameras`` (all: None) in
        [t0, t1], and when whole cameras go (no range), the monitors that watched only them
        (monitors watching others too forget the deleted ones)."""
        cameras, t0, t1 = scope.cameras, scope.t0, scope.t1
        where, args = [], []
        if cameras:
            where.append(f"camera_id IN ({placeholders(cameras)})"); args += list(cameras)
        if t0 is not None:
            where.append("t>=?"); args.append(float(t0))
        if t1 is not None:
            where.append("t<=?"); args.append(float(t1))
        clause = " WHERE " + " AND ".join(where) if where else ""
        files = []
        rows = conn.execute(f"SELECT alert_id, frame_refs FROM alerts{clause}", args).fetchall()
        for _, refs in rows:
            files += json.loads(refs)
        conn.execute(f"DELETE FROM alerts{clause}", args)
        gone = 0
        if t0 is None and t1 is None:
            for mid, cams, images in conn.execute("SELECT monitor_id, cameras, images FROM monitors").fetchall():
                if cameras is None:
                    keep = None  # everything is deleted: every monitor goes
                elif cams == "*":
                    continue
                else:
                    keep = [c for c in json.loads(cams) if c not in set(cameras)]
                if keep:
                    conn.execute("UPDATE monitors SET cameras=? WHERE monitor_id=?", (json.dumps(keep), mid))
                    continue
                for _, refs in conn.execute("SELECT alert_id, frame_refs FROM alerts WHERE monitor_id=?", (mid,)):
                    files += json.loads(refs)
                conn.execute("DELETE FROM alerts WHERE monitor_id=?", (mid,))
                conn.execute("DELETE FROM monitors WHERE monitor_id=?", (mid,))
                files += json.loads(images)
                gone += 1
        return Removed({"alerts": len(rows), "monitors": gone}, files)
