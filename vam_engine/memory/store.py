"""The moment store: SQLite (WAL) for metadata, one JPEG file per retained frame.

Crash safety rests on one ordering: a frame file is written to a temporary name and renamed
into place before the transaction that inserts its row commits, and each transaction also
records how far every source has been gated (``sources.progress_t``) together with the
camera's gate reference. So after a kill -9 at any point every row has its file, and resuming
from ``progress_t`` repeats no moment (file names are deterministic, rows are unique per
source and time).

Vectors live in SQLite too (``vectors``, the source of truth, written in the same transaction as
their rows) and in memory indexes that replay ``vector_log`` from their last snapshot on open
(see vector_memory.py), so every row has its vector and every vector its row after a crash.

Each moment has a time on its camera's own axis, ``t``: absolute (unix seconds) when known,
else relative to its source's start. Searches, ``as_of`` and retention use that axis.

Readers open their own connections (one per thread) and query while a writer commits.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import StoreError
from .records import GateRecord, GateReference, GateSample, Moment

if TYPE_CHECKING:
    from ..index.online import CommitterState

SCHEMA_VERSION = 2

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
    t REAL NOT NULL,             -- the camera's axis: t_abs when known, else t_rel
    tier TEXT NOT NULL DEFAULT 'recent',
    protected INTEGER NOT NULL DEFAULT 0,   -- first/last of a camera, event keyframes: never thinned
    nbytes INTEGER,
    event_id INTEGER,
    embedding_id INTEGER,        -- id in the "frame" vector space (= moment_id), NULL without one
    UNIQUE (source_id, t_rel)
);
CREATE INDEX IF NOT EXISTS moments_camera_t ON moments (camera_id, t_rel);
CREATE INDEX IF NOT EXISTS moments_camera_axis ON moments (camera_id, t);
CREATE INDEX IF NOT EXISTS moments_event ON moments (event_id);
CREATE TABLE IF NOT EXISTS events (
    event_id INTEGER PRIMARY KEY,
    camera_id TEXT NOT NULL,
    t_start REAL NOT NULL,       -- camera axis
    t_end REAL NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0,
    keyframes TEXT,              -- JSON list of moment ids, spread over the event
    doc TEXT,                    -- the writer's retrieval document, NULL until written
    doc_embedding_id INTEGER,    -- id in the "event" vector space (= event_id)
    forest_node_id INTEGER,
    doc_attempts INTEGER NOT NULL DEFAULT 0,
    doc_next_try REAL,           -- wall time before which a failed write is not retried
    doc_error TEXT,              -- why the last attempt failed
    closed_at REAL               -- wall time of the close: the writer's lag is measured from it
);
CREATE INDEX IF NOT EXISTS events_camera_t ON events (camera_id, t_start);
CREATE INDEX IF NOT EXISTS events_open ON events (camera_id, closed);
CREATE INDEX IF NOT EXISTS events_undocumented ON events (closed, doc) WHERE doc IS NULL;
CREATE TABLE IF NOT EXISTS summaries (
    summary_id INTEGER PRIMARY KEY,
    camera_id TEXT,              -- NULL: every camera
    t0 REAL NOT NULL, t1 REAL NOT NULL,   -- the window, camera axis
    granularity_s REAL NOT NULL,
    prompt TEXT NOT NULL,
    structure TEXT,              -- optional label the planner can filter on
    text TEXT NOT NULL,
    moments TEXT NOT NULL,       -- JSON list of the moment ids whose frames the writer saw
    created_at REAL NOT NULL,
    UNIQUE (camera_id, t0, t1, prompt)
);
CREATE TABLE IF NOT EXISTS vectors (
    space TEXT NOT NULL,         -- "frame" | "event" | "summary"
    id INTEGER NOT NULL,         -- moment_id / event_id / summary id
    camera_id TEXT NOT NULL,
    t0 REAL NOT NULL, t1 REAL NOT NULL,   -- the interval it covers, camera axis
    vec BLOB NOT NULL,           -- float32
    PRIMARY KEY (space, id)
) WITHOUT ROWID;
-- filters (camera, time, as_of) read this index alone, never the vectors
CREATE INDEX IF NOT EXISTS vectors_filter ON vectors (space, camera_id, t1, t0);
CREATE TABLE IF NOT EXISTS vector_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    space TEXT NOT NULL, id INTEGER NOT NULL,
    op INTEGER NOT NULL          -- +1 added, -1 removed
);
CREATE TABLE IF NOT EXISTS commit_state (camera_id TEXT PRIMARY KEY, state TEXT NOT NULL);
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


_MAX_VARS = 900  # host parameters per statement: SQLite's default bound is 999


def _select_in(conn, sql: str, ids, *head) -> list:
    """All rows of ``sql`` for ``ids``, queried in chunks; ``{ids}`` in ``sql`` stands for the
    IN list, ``head`` for the parameters before it."""
    ids = [int(i) for i in ids]
    rows: list = []
    for k in range(0, len(ids), _MAX_VARS):
        part = ids[k:k + _MAX_VARS]
        rows += conn.execute(sql.format(ids=",".join("?" * len(part))), [*head, *part]).fetchall()
    return rows


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
    embedding: np.ndarray | None = None  # float32, L2-normalized: goes to the "frame" space
    event_start: bool = False  # opens a new event of its camera (closing the open one)

    @property
    def t(self) -> float:
        return self.t_abs if self.t_abs is not None else self.t_rel


VectorChange = tuple[str, int, "np.ndarray | None"]  # (space, id, vector) added, or (space, id, None) removed


@dataclass
class CommitBatch:
    moments: list[PendingMoment] = field(default_factory=list)
    samples: list[GateSample] = field(default_factory=list)
    progress: dict[int, float] = field(default_factory=dict)  # source_id -> progress_t
    refs: dict[str, GateReference] = field(default_factory=dict)  # camera -> its gate reference
    finished: set[int] = field(default_factory=set)  # sources that reached their end
    commit_states: dict[str, CommitterState] = field(default_factory=dict)  # camera -> online committer state
    close_events: set[str] = field(default_factory=set)  # cameras whose open event ends here
    discard_files: list[str] = field(default_factory=list)  # files of held frames later dropped

    def __bool__(self) -> bool:
        return bool(self.moments or self.samples or self.progress or self.refs or self.finished
                    or self.commit_states or self.close_events or self.discard_files)


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
        self._write_lock = threading.RLock()  # held across a commit and its vector notification
        self._allowed: dict = {}  # recent allowed_ids results (insertion order: oldest first)
        self._allowed_lock = threading.Lock()
        conn = self._conn()
        with self._write_lock, conn:
            conn.executescript(_SCHEMA)
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) == 1:  # version 2 added the writer's bookkeeping (tables come from _SCHEMA)
                for col in ("doc_attempts INTEGER NOT NULL DEFAULT 0", "doc_next_try REAL", "doc_error TEXT",
                            "closed_at REAL"):
                    conn.execute(f"ALTER TABLE events ADD COLUMN {col}")
                conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
            elif int(row[0]) != SCHEMA_VERSION:
                raise StoreError(f"{self.root}: store schema version {row[0]}, this vam_engine reads {SCHEMA_VERSION}")
        self._sweep_temp_files()

    # -- connections ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self):
        """A write transaction on this thread's connection, serialized with the store's commits."""
        conn = self._conn()
        with self._write_lock, conn:
            yield conn

    def reader(self) -> sqlite3.Connection:
        """This thread's connection, for reads."""
        return self._conn()

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

    def sweep_source_files(self, source_id: int) -> int:
        """Before resuming a source: remove its frame files that no row and no held frame
        references. A kill can leave them between a file's write and the commit recording it, or
        between a commit that drops a held frame and the removal of its file. Returns how many."""
        conn = self._conn()
        row = conn.execute("SELECT camera_id FROM sources WHERE source_id=?", (source_id,)).fetchone()
        if row is None:
            return 0
        cam = row[0]
        folder = (self.root / self.frame_ref(cam, source_id, 0.0)).parent
        if not folder.is_dir():
            return 0
        keep = {r[0] for r in conn.execute("SELECT frame_ref FROM moments WHERE source_id=?", (source_id,))}
        state = self.load_commit_state(cam)
        held = state.held if state is not None else None
        if held is not None and held.key.source_id == source_id:
            keep.add(self.frame_ref(cam, source_id, held.key.t_rel))
        removed = 0
        for p in folder.glob("*.jpg"):
            ref = f"{folder.relative_to(self.root).as_posix()}/{p.name}"
            if ref not in keep:
                self._unlink(ref)
                removed += 1
        return removed

    def check_model(self, role: str, model_id: str) -> None:
        """A store keeps one embedding model per role: vectors of two models do not compare."""
        key = f"model:{role}"
        conn = self._conn()
        with self._write_lock, conn:
            row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
            if row is None:
                conn.execute("INSERT INTO meta VALUES (?, ?)", (key, model_id))
            elif row[0] != model_id:
                raise StoreError(f"{self.root}: this store's {role.replace('_', ' ')} is {row[0]!r}; the config asks "
                                 f"for {model_id!r} (vectors of different models cannot be searched together)")

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
    def commit(self, batch: CommitBatch) -> list[VectorChange]:
        """One transaction: rows of moments whose files exist, their vectors and events, samples,
        progress, gate references and committer states. Returns the vector changes for the
        in-memory indexes (also passed to ``on_vectors``)."""
        if not batch:
            return []
        conn = self._conn()
        changes: list[VectorChange] = []
        with self._write_lock:
            with conn:
                self._commit_rows(conn, batch, changes)
            self._notify(changes)  # under the lock: a snapshot never sees a commit half-applied
        for ref in batch.discard_files:
            self._unlink(ref)
        return changes

    def _commit_rows(self, conn, batch: CommitBatch, changes: list) -> None:
        for m in batch.moments:
            cur = conn.execute(
                "INSERT OR IGNORE INTO moments (camera_id, source_id, t_rel, t_abs, pts, frame_ref, width, height,"
                " lap_var, mad, ssim, hist_corr, t, nbytes) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (m.camera_id, m.source_id, m.t_rel, m.t_abs, m.pts, m.frame_ref, m.width, m.height,
                 _nan_to_none(m.gate.lap_var), _nan_to_none(m.gate.mad), _nan_to_none(m.gate.ssim),
                 _nan_to_none(m.gate.hist_corr), m.t, self._file_size(m.frame_ref)))
            if cur.rowcount == 0:
                continue  # committed before (a resumed run repeats nothing)
            self._link_moment(conn, cur.lastrowid, m, changes)
        conn.executemany("INSERT OR REPLACE INTO samples VALUES (?,?,?,?,?,?,?,?)",
                         [(s.camera_id, s.source_id, s.t_rel, _nan_to_none(s.gate.lap_var), _nan_to_none(s.gate.mad),
                           _nan_to_none(s.gate.ssim), _nan_to_none(s.gate.hist_corr), s.gate.dropped_by)
                          for s in batch.samples])
        for cam, ref in batch.refs.items():
            conn.execute("UPDATE cameras SET ref_t=?, ref_shape=?, ref_gray=? WHERE camera_id=?",
                         (ref.t, json.dumps(list(ref.gray.shape)), np.ascontiguousarray(ref.gray).tobytes(), cam))
        for cam, state in batch.commit_states.items():
            conn.execute("INSERT OR REPLACE INTO commit_state VALUES (?, ?)", (cam, json.dumps(state.to_json())))
        for cam in batch.close_events:
            self._close_open_event(conn, cam, changes)
        for sid, t in batch.progress.items():
            conn.execute("UPDATE sources SET progress_t=MAX(COALESCE(progress_t, -1e300), ?) WHERE source_id=?",
                         (t, sid))
        for sid in batch.finished:
            conn.execute("UPDATE sources SET done=1, finished_at=? WHERE source_id=?", (time.time(), sid))

    def _link_moment(self, conn, mid: int, m: PendingMoment, changes: list) -> None:
        """Event membership, first-moment protection and the frame vector of a new moment."""
        first = conn.execute("SELECT 1 FROM moments WHERE camera_id=? AND moment_id<>? LIMIT 1",
                             (m.camera_id, mid)).fetchone() is None
        open_ev = conn.execute("SELECT event_id FROM events WHERE camera_id=? AND closed=0", (m.camera_id,)).fetchone()
        if open_ev is not None and m.event_start:
            self._close_open_event(conn, m.camera_id, changes)
            open_ev = None
        if open_ev is None:
            eid = conn.execute("INSERT INTO events (camera_id, t_start, t_end) VALUES (?,?,?)",
                               (m.camera_id, m.t, m.t)).lastrowid
        else:
            eid = open_ev[0]
            conn.execute("UPDATE events SET t_end=MAX(t_end, ?) WHERE event_id=?", (m.t, eid))
        emb_id = None
        if m.embedding is not None:
            vec = np.ascontiguousarray(m.embedding, np.float32)
            self._put_vector(conn, "frame", mid, m.camera_id, m.t, m.t, vec, changes)
            emb_id = mid
        conn.execute("UPDATE moments SET event_id=?, embedding_id=?, protected=? WHERE moment_id=?",
                     (eid, emb_id, 1 if first else 0, mid))

    def _put_vector(self, conn, space: str, vid: int, cam: str, t0: float, t1: float, vec: np.ndarray,
                    changes: list) -> None:
        conn.execute("INSERT OR REPLACE INTO vectors VALUES (?,?,?,?,?,?)", (space, vid, cam, t0, t1, vec.tobytes()))
        conn.execute("INSERT INTO vector_log (space, id, op) VALUES (?,?,1)", (space, vid))
        changes.append((space, vid, vec))

    def _drop_vectors(self, conn, space: str, ids: list[int], changes: list) -> None:
        for i in ids:
            if conn.execute("DELETE FROM vectors WHERE space=? AND id=?", (space, i)).rowcount:
                conn.execute("INSERT INTO vector_log (space, id, op) VALUES (?,?,-1)", (space, i))
                changes.append((space, i, None))

    def _close_open_event(self, conn, cam: str, changes: list) -> None:
        """Close the camera's open event: pick up to 8 keyframes spread over it (protected from
        retention for good) and index its mean frame embedding in the "event" space."""
        row = conn.execute("SELECT event_id, t_start, t_end FROM events WHERE camera_id=? AND closed=0",
                           (cam,)).fetchone()
        if row is None:
            return
        eid, t0, t1 = row
        members = conn.execute("SELECT moment_id, embedding_id FROM moments WHERE event_id=? ORDER BY t",
                               (eid,)).fetchall()
        n = len(members)
        picks = sorted({round(i * (n - 1) / max(1, min(8, n) - 1)) for i in range(min(8, n))}) if n else []
        keyframes = [members[i][0] for i in picks]
        conn.executemany("UPDATE moments SET protected=1 WHERE moment_id=?", [(k,) for k in keyframes])
        conn.execute("UPDATE events SET closed=1, keyframes=?, closed_at=? WHERE event_id=?",
                     (json.dumps(keyframes), time.time(), eid))
        with_vec = [m[0] for m in members if m[1] is not None]
        vecs = [np.frombuffer(r[0], np.float32) for r in _select_in(  # by primary key: no scan of the space
            conn, "SELECT vec FROM vectors WHERE space='frame' AND id IN ({ids})", with_vec)]
        if vecs:
            mean = np.mean(vecs, axis=0)
            norm = float(np.linalg.norm(mean))
            if norm > 0:
                self._put_vector(conn, "event", eid, cam, t0, t1, (mean / norm).astype(np.float32), changes)

    # -- vectors, retention and deletion -------------------------------------------------------
    on_vectors = None  # callable(list[VectorChange]): the engine's vector memory listens here

    def _notify(self, changes: list) -> None:
        if changes and self.on_vectors is not None:
            self.on_vectors(changes)

    def _file_size(self, frame_ref: str) -> int | None:
        try:
            return (self.root / frame_ref).stat().st_size
        except OSError:
            return None

    def _unlink(self, frame_ref: str) -> None:
        try:
            (self.root / frame_ref).unlink()
        except OSError:
            pass

    def vector_rows(self, space: str, after_seq: int | None = None):
        """All vectors of a space ((id, vec) pairs), or the log since ``after_seq``:
        (seq, id, op, vec-or-None). The vector memory rebuilds and replays from these."""
        c = self._conn()
        if after_seq is None:
            return [(i, np.frombuffer(v, np.float32)) for i, v in
                    c.execute("SELECT id, vec FROM vectors WHERE space=? ORDER BY id", (space,))]
        rows = c.execute("SELECT l.seq, l.id, l.op, v.vec FROM vector_log l LEFT JOIN vectors v "
                         "ON v.space=l.space AND v.id=l.id WHERE l.space=? AND l.seq>? ORDER BY l.seq",
                         (space, after_seq)).fetchall()
        return [(seq, i, op, None if v is None else np.frombuffer(v, np.float32)) for seq, i, op, v in rows]

    def vector_seq(self) -> int:
        return self._conn().execute("SELECT COALESCE(MAX(seq), 0) FROM vector_log").fetchone()[0]

    def prune_vector_log(self, upto_seq: int) -> None:
        """Forget log entries every snapshot already covers."""
        with self._write_lock, self._conn() as conn:
            conn.execute("DELETE FROM vector_log WHERE seq<=?", (upto_seq,))

    def allowed_ids(self, space: str, cameras=None, t0=None, t1=None, as_of=None) -> np.ndarray | None:
        """Ids of a space that pass the filters (None: no filter). Intervals must lie in
        [t0, t1] overlap-wise; with as_of, nothing that ends after it."""
        # the same filter is asked for again by each query and turn of a question: remember the
        # last few, keyed by the vector log's last sequence number (every add or removal takes a
        # new one, and pruning the log never lowers it)
        row = self._conn().execute("SELECT seq FROM sqlite_sequence WHERE name='vector_log'").fetchone()
        key = (space, tuple(sorted(cameras)) if cameras else None, t0, t1, as_of, row and row[0])
        with self._allowed_lock:
            hit = self._allowed.get(key, False)
        if hit is not False:
            return hit
        out = self._allowed_ids(space, cameras, t0, t1, as_of)
        with self._allowed_lock:
            self._allowed[key] = out
            while len(self._allowed) > 32:
                self._allowed.pop(next(iter(self._allowed)))
        return out

    def _allowed_ids(self, space: str, cameras, t0, t1, as_of) -> np.ndarray | None:
        conn = self._conn()
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
            where.append(f"camera_id IN ({','.join('?' * len(cameras))})")
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

    def load_commit_state(self, camera_id: str) -> CommitterState | None:
        from ..index.stage import read_state  # the committer's record (index/ imports this module)

        row = self._conn().execute("SELECT state FROM commit_state WHERE camera_id=?", (camera_id,)).fetchone()
        return None if row is None else read_state(json.loads(row[0]))

    def moments_by_id(self, ids) -> dict[int, Moment]:
        ids = [int(i) for i in ids]
        out = {}
        for k in range(0, len(ids), _MAX_VARS):
            part = ids[k:k + _MAX_VARS]
            out.update((m.moment_id, m) for m in self._select_moments(f"moment_id IN ({','.join('?' * len(part))})", part))
        return out

    def events_by_id(self, ids) -> dict[int, dict]:
        return {eid: {"event_id": eid, "camera_id": cam, "t_start": t0, "t_end": t1,
                      "keyframes": json.loads(kf) if kf else [], "doc": doc}
                for eid, cam, t0, t1, kf, doc in _select_in(
                    self._conn(), "SELECT event_id, camera_id, t_start, t_end, keyframes, doc FROM events "
                                  "WHERE event_id IN ({ids})", ids)}

    def events(self, camera_id: str | None = None) -> list[dict]:
        sql = "SELECT event_id FROM events" + (" WHERE camera_id=?" if camera_id else "") + " ORDER BY camera_id, t_start"
        ids = [r[0] for r in self._conn().execute(sql, (camera_id,) if camera_id else ())]
        found = self.events_by_id(ids)
        return [found[i] for i in ids]

    # -- the memory writer's interface (reason/writer.py) ---------------------------------------
    def undocumented_events(self, limit: int, now: float | None = None) -> list[dict]:
        """Closed events without a document whose retry time has come, oldest first, with their
        keyframes as (frame path, t) pairs."""
        rows = self._conn().execute(
            "SELECT event_id, closed_at FROM events WHERE closed=1 AND doc IS NULL"
            " AND (doc_next_try IS NULL OR doc_next_try<=?) ORDER BY t_end LIMIT ?",
            (time.time() if now is None else now, int(limit))).fetchall()
        events = self.events_by_id([r[0] for r in rows])
        moments = self.moments_by_id([k for e in events.values() for k in e["keyframes"]])
        out = []
        for eid, closed_at in rows:
            e = events[eid]
            e["closed_at"] = closed_at
            e["frames"] = [(moments[k].frame_path, moments[k].t_abs if moments[k].t_abs is not None
                            else moments[k].t_rel) for k in e["keyframes"] if k in moments]
            out.append(e)
        return out

    def writer_backlog(self) -> tuple[int, float | None]:
        """(closed events without a document, wall time the oldest of them closed)."""
        n, oldest = self._conn().execute(
            "SELECT COUNT(*), MIN(closed_at) FROM events WHERE closed=1 AND doc IS NULL").fetchone()
        return int(n), oldest

    def set_event_docs(self, docs) -> int:
        """``docs``: (event_id, text, vector or None). One transaction; the vector goes to the
        "event_doc" space. Events deleted meanwhile are skipped. Returns how many were stored."""
        changes: list = []
        stored = 0
        conn = self._conn()
        with self._write_lock:
            with conn:
                for eid, text, vec in docs:
                    row = conn.execute("SELECT camera_id, t_start, t_end FROM events WHERE event_id=?",
                                       (eid,)).fetchone()
                    if row is None:
                        continue
                    conn.execute("UPDATE events SET doc=?, doc_embedding_id=?, doc_error=NULL WHERE event_id=?",
                                 (text, None if vec is None else eid, eid))
                    if vec is not None:
                        self._put_vector(conn, "event_doc", eid, row[0], row[1], row[2],
                                         np.ascontiguousarray(vec, np.float32), changes)
                    stored += 1
            self._notify(changes)
        return stored

    def fail_event_docs(self, failures) -> None:
        """``failures``: (event_id, error text, next try wall time)."""
        with self.transaction() as conn:
            conn.executemany("UPDATE events SET doc_attempts=doc_attempts+1, doc_error=?, doc_next_try=? "
                             "WHERE event_id=?", [(err[:500], nxt, eid) for eid, err, nxt in failures])

    def doc_attempts(self, event_id: int) -> int:
        row = self._conn().execute("SELECT doc_attempts FROM events WHERE event_id=?", (event_id,)).fetchone()
        return 0 if row is None else int(row[0])

    def set_event_forest_node(self, pairs) -> None:
        with self.transaction() as conn:
            conn.executemany("UPDATE events SET forest_node_id=? WHERE event_id=?", [(n, e) for e, n in pairs])

    def first_undocumented_start(self, camera_id: str) -> float | None:
        """Start of the camera's earliest closed event still without a document."""
        row = self._conn().execute("SELECT MIN(t_start) FROM events WHERE camera_id=? AND closed=1 AND doc IS NULL",
                                   (camera_id,)).fetchone()
        return row[0]

    def moment_times(self, ids) -> dict[int, float]:
        """Moment id -> time on its camera's axis."""
        return dict(_select_in(self._conn(), "SELECT moment_id, t FROM moments WHERE moment_id IN ({ids})", ids))

    def moments_on_axis(self, camera_id: str, t0: float, t1: float) -> list[Moment]:
        """A camera's moments with t0 <= t < t1 on its axis (absolute seconds when known)."""
        return self._select_moments("camera_id = ? AND t >= ? AND t < ?", [camera_id, float(t0), float(t1)],
                                    " ORDER BY t, moment_id")

    def documented_events(self, camera_id: str, *, unlinked_only: bool = False) -> list[dict]:
        """A camera's closed events with a document, in time order, with their document vectors;
        ``unlinked_only``: only those starting at or after the last one linked to a forest leaf."""
        conn = self._conn()
        after = -math.inf
        if unlinked_only:
            row = conn.execute("SELECT MAX(t_start) FROM events WHERE camera_id=? AND forest_node_id IS NOT NULL",
                               (camera_id,)).fetchone()
            after = -math.inf if row[0] is None else row[0]
        rows = conn.execute("SELECT event_id FROM events WHERE camera_id=? AND closed=1 AND doc IS NOT NULL "
                            "AND t_start>=? ORDER BY t_start", (camera_id, after)).fetchall()
        events = self.events_by_id([r[0] for r in rows])
        vecs = {i: v for i, v in self.vector_rows_by_id("event_doc", [r[0] for r in rows])}
        out = []
        for (eid,) in rows:
            e = events[eid]
            e["vec"] = vecs.get(eid)
            out.append(e)
        return out

    def vector_rows_by_id(self, space: str, ids) -> list[tuple[int, np.ndarray]]:
        return [(i, np.frombuffer(v, np.float32)) for i, v in _select_in(
            self._conn(), "SELECT id, vec FROM vectors WHERE space=? AND id IN ({ids})", ids, space)]

    def add_summary(self, camera_id: str | None, t0: float, t1: float, granularity_s: float, prompt: str,
                    structure: str | None, text: str, moment_ids, vec) -> int:
        """Store (or replace) the summary document of one window; its vector goes to the
        "summary" space. Returns its id."""
        changes: list = []
        conn = self._conn()
        with self._write_lock:
            with conn:
                old = conn.execute("SELECT summary_id FROM summaries WHERE camera_id IS ? AND t0=? AND t1=? AND prompt=?",
                                   (camera_id, t0, t1, prompt)).fetchone()
                if old is not None:
                    self._drop_vectors(conn, "summary", [old[0]], changes)
                    conn.execute("DELETE FROM summaries WHERE summary_id=?", (old[0],))
                sid = conn.execute(
                    "INSERT INTO summaries (camera_id, t0, t1, granularity_s, prompt, structure, text, moments,"
                    " created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                    (camera_id, t0, t1, granularity_s, prompt, structure, text,
                     json.dumps([int(m) for m in moment_ids]), time.time())).lastrowid
                if vec is not None:
                    self._put_vector(conn, "summary", sid, camera_id or "*", t0, t1,
                                     np.ascontiguousarray(vec, np.float32), changes)
            self._notify(changes)
        return sid

    def summaries_by_id(self, ids) -> dict[int, dict]:
        return {r[0]: {"summary_id": r[0], "camera_id": r[1], "t0": r[2], "t1": r[3], "granularity_s": r[4],
                       "prompt": r[5], "structure": r[6], "text": r[7], "moments": json.loads(r[8])}
                for r in _select_in(self._conn(), "SELECT summary_id, camera_id, t0, t1, granularity_s, prompt, "
                                                  "structure, text, moments FROM summaries WHERE summary_id IN ({ids})",
                                    ids)}

    def summaries(self, camera_id: str | None = None) -> list[dict]:
        sql = "SELECT summary_id FROM summaries" + (" WHERE camera_id IS ?" if camera_id else "") + " ORDER BY t0"
        ids = [r[0] for r in self._conn().execute(sql, (camera_id,) if camera_id else ())]
        found = self.summaries_by_id(ids)
        return [found[i] for i in ids]

    def delete(self, cameras=None, t0: float | None = None, t1: float | None = None) -> dict:
        """Remove moments (rows, files, vectors), overlapping events and samples of the given
        cameras (all when None) in [t0, t1] on the camera axis (everything when both None)."""
        where, args = [], []
        if cameras:
            where.append(f"camera_id IN ({','.join('?' * len(cameras))})")
            args += list(cameras)
        mw, ew = list(where), list(where)
        margs, eargs = list(args), list(args)
        if t0 is not None:
            mw.append("t>=?"); margs.append(float(t0))
            ew.append("t_end>=?"); eargs.append(float(t0))
        if t1 is not None:
            mw.append("t<=?"); margs.append(float(t1))
            ew.append("t_start<=?"); eargs.append(float(t1))
        mq = " WHERE " + " AND ".join(mw) if mw else ""
        eq = " WHERE " + " AND ".join(ew) if ew else ""
        changes: list = []
        conn = self._conn()
        with self._write_lock:
            with conn:
                rows = conn.execute(f"SELECT moment_id, frame_ref, camera_id, source_id, t_rel FROM moments{mq}", margs).fetchall()
                events = [r[0] for r in conn.execute(f"SELECT event_id FROM events{eq}", eargs)]
                self._drop_vectors(conn, "frame", [r[0] for r in rows], changes)
                self._drop_vectors(conn, "event", events, changes)
                self._drop_vectors(conn, "event_doc", events, changes)
                # a summary overlapping the range may describe what is deleted: it goes too
                sw, sargs = [], []
                if cameras:
                    sw.append(f"(camera_id IS NULL OR camera_id IN ({','.join('?' * len(cameras))}))")
                    sargs += list(cameras)
                if t0 is not None:
                    sw.append("t1>=?"); sargs.append(float(t0))
                if t1 is not None:
                    sw.append("t0<=?"); sargs.append(float(t1))
                sq = " WHERE " + " AND ".join(sw) if sw else ""
                summaries = [r[0] for r in conn.execute(f"SELECT summary_id FROM summaries{sq}", sargs)]
                self._drop_vectors(conn, "summary", summaries, changes)
                conn.executemany("DELETE FROM summaries WHERE summary_id=?", [(i,) for i in summaries])
                conn.executemany("DELETE FROM moments WHERE moment_id=?", [(r[0],) for r in rows])
                conn.executemany("DELETE FROM events WHERE event_id=?", [(e,) for e in events])
                conn.executemany("UPDATE moments SET event_id=NULL WHERE event_id=?", [(e,) for e in events])
                conn.executemany("DELETE FROM samples WHERE source_id=? AND t_rel=?", [(r[3], r[4]) for r in rows])
                # the gate reference and the committer's reference embedding may derive from a
                # deleted frame: they go too (the camera restarts its references)
                cams = {r[2] for r in rows}
                if t0 is None and t1 is None:
                    cams |= set(cameras) if cameras else {r[0] for r in conn.execute("SELECT camera_id FROM cameras")}
                    conn.executemany("DELETE FROM samples WHERE camera_id=?", [(c,) for c in cams])
                conn.executemany("DELETE FROM commit_state WHERE camera_id=?", [(c,) for c in cams])
                conn.executemany("UPDATE cameras SET ref_t=NULL, ref_shape=NULL, ref_gray=NULL WHERE camera_id=?",
                                 [(c,) for c in cams])
            self._notify(changes)
        for r in rows:
            self._unlink(r[1])
        return {"moments": len(rows), "events": len(events), "summaries": len(summaries), "vectors": len(changes),
                "cameras": sorted(cams)}

    # the retention pass's interface (memory/retention.py: RetentionStore)
    def cameras(self) -> list[str]:
        return [r[0] for r in self._conn().execute("SELECT DISTINCT camera_id FROM moments ORDER BY camera_id")]

    def retention_rows(self, camera_id: str):
        """A moment of the camera's open event counts as protected: its event's keyframes (which
        are protected for good) are picked only when the event closes, so thinning it before then
        could delete a future keyframe, and a resumed run (whose retention pass runs at once)
        would keep fewer moments than an uninterrupted one."""
        from .retention import RetentionRow

        rows = self._conn().execute(
            "SELECT m.moment_id, m.t, m.tier, m.protected OR COALESCE(e.closed=0, 0), m.frame_ref, m.nbytes"
            " FROM moments m LEFT JOIN events e ON e.event_id=m.event_id WHERE m.camera_id=? ORDER BY m.t",
            (camera_id,)).fetchall()
        last = len(rows) - 1
        return [RetentionRow(r[0], r[1], r[2], bool(r[3]) or i == last, self.root / r[4], r[5] or 0)
                for i, r in enumerate(rows)]

    def delete_moments(self, ids: list[int]) -> None:
        changes: list = []
        conn = self._conn()
        with self._write_lock:
            with conn:
                rows = _select_in(conn, "SELECT moment_id, frame_ref FROM moments WHERE protected=0 "  # never those
                                        "AND moment_id IN ({ids})", ids)
                refs = [r[1] for r in rows]
                self._drop_vectors(conn, "frame", [r[0] for r in rows], changes)
                conn.executemany("DELETE FROM moments WHERE moment_id=?", [(r[0],) for r in rows])
            self._notify(changes)
        for r in refs:
            self._unlink(r)

    def set_tier(self, ids_and_tiers: list[tuple[int, str]]) -> None:
        conn = self._conn()
        with self._write_lock, conn:
            for mid, tier in ids_and_tiers:
                ref = conn.execute("SELECT frame_ref FROM moments WHERE moment_id=?", (mid,)).fetchone()
                if ref is None:
                    continue
                size, wh = self._file_size(ref[0]), (None, None)
                try:  # re-encoding may have downscaled it: the header has the new size
                    from PIL import Image

                    with Image.open(self.root / ref[0]) as im:
                        wh = im.size
                except OSError:
                    pass
                conn.execute("UPDATE moments SET tier=?, nbytes=COALESCE(?, nbytes), width=COALESCE(?, width),"
                             " height=COALESCE(?, height) WHERE moment_id=?", (tier, size, wh[0], wh[1], mid))

    def frame_bytes(self) -> int:
        return int(self._conn().execute("SELECT COALESCE(SUM(nbytes), 0) FROM moments").fetchone()[0])

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
        order = " ORDER BY camera_id, t_rel, moment_id" + (f" LIMIT {int(limit)}" if limit is not None else "")
        return self._select_moments(" AND ".join(where) if where else None, args, order)

    def _select_moments(self, where: str | None, args, order: str = "") -> list[Moment]:
        sql = ("SELECT moment_id, camera_id, t_rel, t_abs, frame_ref, width, height, lap_var, mad, ssim, hist_corr,"
               " tier, event_id, embedding_id FROM moments" + (f" WHERE {where}" if where else "") + order)
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
        events, documented = c.execute("SELECT COUNT(*), COUNT(doc) FROM events").fetchone()
        summaries = c.execute("SELECT COUNT(*) FROM summaries").fetchone()[0]
        vectors = dict(c.execute("SELECT space, COUNT(*) FROM vectors GROUP BY space").fetchall())
        tiers = dict(c.execute("SELECT tier, COUNT(*) FROM moments GROUP BY tier").fetchall())
        return {"root": str(self.root), "schema_version": SCHEMA_VERSION, "cameras": cams,
                "moments": sum(v["moments"] for v in cams.values()), "samples": drops, "events": events,
                "documented_events": documented, "summaries": summaries,
                "vectors": vectors, "tiers": tiers, "sources": sources, "frame_bytes": self.frame_bytes()}
