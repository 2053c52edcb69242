"""The moment store: SQLite (WAL) for metadata, one JPEG file per retained frame.

Crash safety rests on one ordering: a frame file is written to a temporary name and renamed
into place before the transaction that inserts its row commits, and each transaction also
records how far every source has been gated (``sources.progress_t``) together with the
camera's gate reference. So after a kill -9 at any point every row has its file, and resuming
from ``progress_t`` repeats no moment (file names are deterministic, rows are unique per
source and time).

Readers open their own connections (one per thread) and query while a writer commits.
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import StoreError
from .records import GateRecord, Moment

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cameras (
    camera_id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    ref_t REAL,            -- time of the last kept frame: the gates compare against it
    ref_shape TEXT,
    ref_gray BLOB          -- raw luma of that frame (compressing it costs more than writing it)
);
CREATE TABLE IF NOT EXISTS sources (
    source_id INTEGER PRIMARY KEY,
    camera_id TEXT NOT NULL REFERENCES cameras(camera_id),
    uri TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    sampling TEXT NOT NULL,      -- e.g. "fps=0.5" or "fps=0.5,keyframes": resume needs the same
    progress_t REAL,             -- every sample with t_rel <= progress_t is gated and committed
    done INTEGER NOT NULL DEFAULT 0,
    started_at REAL NOT NULL,
    finished_at REAL,
    info TEXT,
    UNIQUE (camera_id, fingerprint, sampling)
);
CREATE TABLE IF NOT EXISTS moments (
    moment_id INTEGER PRIMARY KEY,
    camera_id TEXT NOT NULL,
    source_id INTEGER NOT NULL REFERENCES sources(source_id),
    t_rel REAL NOT NULL,
    t_abs REAL,
    pts INTEGER,
    frame_ref TEXT NOT NULL,     -- path relative to the store root
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    lap_var REAL, mad REAL, ssim REAL, hist_corr REAL,
    tier TEXT NOT NULL DEFAULT 'recent',
    event_id INTEGER,
    embedding_id INTEGER,
    UNIQUE (source_id, t_rel)
);
CREATE INDEX IF NOT EXISTS moments_camera_t ON moments (camera_id, t_rel);
CREATE TABLE IF NOT EXISTS samples (
    camera_id TEXT NOT NULL,
    source_id INTEGER NOT NULL,
    t_rel REAL NOT NULL,
    lap_var REAL, mad REAL, ssim REAL, hist_corr REAL,
    dropped_by TEXT,             -- NULL when kept
    PRIMARY KEY (source_id, t_rel)
) WITHOUT ROWID;
"""

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by another user
        return True
    return True


def _nan_to_none(x: float | None) -> float | None:
    return None if x is None or x != x else float(x)


@dataclass
class SourceState:
    source_id: int
    camera_id: str
    progress_t: float | None
    done: bool


@dataclass
class PendingMoment:
    """A kept frame whose JPEG is already on disk, waiting for its row."""

    camera_id: str
    source_id: int
    t_rel: float
    t_abs: float | None
    pts: int | None
    frame_ref: str
    width: int
    height: int
    gate: GateRecord


@dataclass
class CommitBatch:
    moments: list[PendingMoment] = field(default_factory=list)
    samples: list[tuple] = field(default_factory=list)  # (camera, source, t_rel, lap, mad, ssim, hist, dropped_by)
    progress: dict[int, float] = field(default_factory=dict)  # source_id -> progress_t
    refs: dict[str, tuple[float, np.ndarray]] = field(default_factory=dict)  # camera -> (t, gray)
    finished: set[int] = field(default_factory=set)  # sources that reached their end

    def __bool__(self) -> bool:
        return bool(self.moments or self.samples or self.progress or self.refs or self.finished)


class MomentStore:
    def __init__(self, root: str | os.PathLike, *, create: bool = True):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"{self.root}: store path exists and is not a directory")
        db = self.root / "store.sqlite"
        if not db.exists():
            if not create:
                raise StoreError(f"{self.root}: not a vam_engine store (no store.sqlite)")
            self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "frames").mkdir(exist_ok=True)
        self._db_path = str(db)
        self._local = threading.local()
        self._write_lock = threading.Lock()
        conn = self._conn()
        with self._write_lock, conn:
            conn.executescript(_SCHEMA)
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) != SCHEMA_VERSION:
                raise StoreError(f"{self.root}: store schema version {row[0]}, this vam_engine reads {SCHEMA_VERSION}")
        self._sweep_temp_files()

    # -- connections ---------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self._db_path, timeout=30.0, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA foreign_keys=ON")
            except sqlite3.DatabaseError as e:
                raise StoreError(f"{self._db_path}: not a readable SQLite database ({e})") from None
            conn.isolation_level = "DEFERRED"
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _sweep_temp_files(self) -> None:
        """Temporary JPEGs left by a crash before their rename are never referenced. A temporary
        name carries its writer's pid: those of a live writer (another process indexing into
        this store while this one opens it to read) are in flight and stay."""
        for p in (self.root / "frames").rglob("*.tmp"):
            pid = p.name.rsplit(".", 2)[-2] if p.name.count(".") >= 3 else ""
            if pid.isdigit() and _alive(int(pid)):
                continue
            try:
                p.unlink()
            except OSError:
                pass

    # -- sources and cameras -------------------------------------------------------------------
    def open_source(self, camera_id: str, uri: str, fingerprint: str, sampling: str,
                    info: dict | None = None) -> SourceState:
        conn = self._conn()
        now = time.time()
        with self._write_lock, conn:
            conn.execute("INSERT OR IGNORE INTO cameras (camera_id, created_at) VALUES (?, ?)", (camera_id, now))
            conn.execute(
                "INSERT OR IGNORE INTO sources (camera_id, uri, fingerprint, sampling, started_at, info) "
                "VALUES (?, ?, ?, ?, ?, ?)", (camera_id, uri, fingerprint, sampling, now, json.dumps(info or {})))
        return self.find_source(camera_id, fingerprint, sampling)

    def find_source(self, camera_id: str, fingerprint: str, sampling: str) -> SourceState | None:
        row = self._conn().execute(
            "SELECT source_id, progress_t, done FROM sources WHERE camera_id=? AND fingerprint=? AND sampling=?",
            (camera_id, fingerprint, sampling)).fetchone()
        return None if row is None else SourceState(row[0], camera_id, row[1], bool(row[2]))

    def camera_ref(self, camera_id: str) -> tuple[float, np.ndarray] | None:
        row = self._conn().execute("SELECT ref_t, ref_shape, ref_gray FROM cameras WHERE camera_id=?",
                                   (camera_id,)).fetchone()
        if row is None or row[2] is None:
            return None
        h, w = json.loads(row[1])
        return row[0], np.frombuffer(row[2], np.uint8).reshape(h, w).copy()

    # -- frame files ---------------------------------------------------------------------------
    def frame_ref(self, camera_id: str, source_id: int, t_rel: float) -> str:
        cam = _SAFE.sub("_", camera_id)[:64] or "camera"
        return f"frames/{cam}/{source_id}/{int(round(t_rel * 1e6)):015d}.jpg"

    def write_frame(self, frame_ref: str, rgb, quality: int) -> None:
        """Write a JPEG under a temporary name, then rename it into place. ``rgb`` is an
        H x W x 3 uint8 array or a callable returning one (so conversion runs here)."""
        from PIL import Image

        rgb = rgb() if callable(rgb) else rgb
        path = self.root / frame_ref
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # pid: see _sweep_temp_files
        Image.fromarray(rgb).save(tmp, format="JPEG", quality=quality)
        os.replace(tmp, path)

    # -- commits -------------------------------------------------------------------------------
    def commit(self, batch: CommitBatch) -> None:
        """One transaction: rows of moments whose files exist, samples, progress, references."""
        if not batch:
            return
        conn = self._conn()
        with self._write_lock, conn:
            conn.executemany(
                "INSERT OR IGNORE INTO moments (camera_id, source_id, t_rel, t_abs, pts, frame_ref, width, height,"
                " lap_var, mad, ssim, hist_corr) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                [(m.camera_id, m.source_id, m.t_rel, m.t_abs, m.pts, m.frame_ref, m.width, m.height,
                  m.gate.lap_var, m.gate.mad, m.gate.ssim, m.gate.hist_corr) for m in batch.moments])
            conn.executemany("INSERT OR REPLACE INTO samples VALUES (?,?,?,?,?,?,?,?)",
                             [s[:3] + tuple(_nan_to_none(x) for x in s[3:7]) + s[7:] for s in batch.samples])
            for cam, (t, gray) in batch.refs.items():
                conn.execute("UPDATE cameras SET ref_t=?, ref_shape=?, ref_gray=? WHERE camera_id=?",
                             (t, json.dumps(list(gray.shape)), np.ascontiguousarray(gray).tobytes(), cam))
            for sid, t in batch.progress.items():
                conn.execute("UPDATE sources SET progress_t=MAX(COALESCE(progress_t, -1e300), ?) WHERE source_id=?",
                             (t, sid))
            for sid in batch.finished:
                conn.execute("UPDATE sources SET done=1, finished_at=? WHERE source_id=?", (time.time(), sid))

    # -- reads ---------------------------------------------------------------------------------
    def moments(self, camera_id: str | None = None, t0: float | None = None, t1: float | None = None,
                limit: int | None = None) -> list[Moment]:
        """Moments ordered by camera and time; t0/t1 bound t_rel (inclusive)."""
        where, args = [], []
        if camera_id is not None:
            where.append("camera_id = ?")
            args.append(camera_id)
        if t0 is not None:
            where.append("t_rel >= ?")
            args.append(float(t0))
        if t1 is not None:
            where.append("t_rel <= ?")
            args.append(float(t1))
        sql = ("SELECT moment_id, camera_id, t_rel, t_abs, frame_ref, width, height, lap_var, mad, ssim, hist_corr,"
               " tier, event_id, embedding_id FROM moments")
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY camera_id, t_rel, moment_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [Moment(r[0], r[1], r[2], r[3], str(self.root / r[4]), r[5], r[6],
                       GateRecord(r[7], r[8], r[9], r[10], None), r[11], r[12], r[13])
                for r in self._conn().execute(sql, args)]

    def gate_log(self, camera_id: str | None = None) -> list[tuple]:
        """Every gated sample: (camera, t_rel, lap_var, mad, ssim, hist_corr, dropped_by)."""
        sql = "SELECT camera_id, t_rel, lap_var, mad, ssim, hist_corr, dropped_by FROM samples"
        args: tuple = ()
        if camera_id is not None:
            sql += " WHERE camera_id = ?"
            args = (camera_id,)
        return list(self._conn().execute(sql + " ORDER BY camera_id, t_rel", args))

    def info(self) -> dict:
        c = self._conn()
        cams = {}
        for cam, n, t0, t1 in c.execute("SELECT camera_id, COUNT(*), MIN(t_rel), MAX(t_rel) FROM moments GROUP BY camera_id"):
            cams[cam] = {"moments": n, "t_first": t0, "t_last": t1}
        drops = dict(c.execute("SELECT COALESCE(dropped_by, 'kept'), COUNT(*) FROM samples GROUP BY 1").fetchall())
        sources = [dict(zip(("source_id", "camera_id", "uri", "sampling", "progress_t", "done"), r))
                   for r in c.execute("SELECT source_id, camera_id, uri, sampling, progress_t, done FROM sources")]
        for s in sources:
            s["done"] = bool(s["done"])
        size = sum(p.stat().st_size for p in (self.root / "frames").rglob("*.jpg"))
        return {"root": str(self.root), "schema_version": SCHEMA_VERSION, "cameras": cams,
                "moments": sum(v["moments"] for v in cams.values()), "samples": drops,
                "sources": sources, "frame_bytes": size}
