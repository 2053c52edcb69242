"""Sources (files, streams, pushed cameras), how far each is committed, the cameras' gate
references and the committers' saved states: what a resumed run needs to continue exactly."""
from __future__ import annotations

import json
import time

import numpy as np

from ..errors import StoreError
from .db import Database
from .deletion import DeleteRange, Removed, whole_cameras
from .frames import FrameFiles
from .records import GateReference, SourceState


class SourceRepository:
    tables = ("commit_state",)  # deletion: a camera's references restart (its cameras row stays)

    def __init__(self, db: Database, frames: FrameFiles):
        self.db = db
        self.frames = frames

    def open(self, camera_id: str, uri: str, fingerprint: str, sampling: str, info: dict | None = None) -> SourceState:
        """The source's state, registering the camera and the source on first sight."""
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute("INSERT OR IGNORE INTO cameras (camera_id, created_at) VALUES (?, ?)", (camera_id, now))
            conn.execute(
                "INSERT OR IGNORE INTO sources (camera_id, uri, fingerprint, sampling, started_at, info) "
                "VALUES (?, ?, ?, ?, ?, ?)", (camera_id, uri, fingerprint, sampling, now, json.dumps(info or {})))
        return self.find(camera_id, fingerprint, sampling)

    def find(self, camera_id: str, fingerprint: str, sampling: str) -> SourceState | None:
        row = self.db.conn().execute(
            "SELECT source_id, progress_t, done FROM sources WHERE camera_id=? AND fingerprint=? AND sampling=?",
            (camera_id, fingerprint, sampling)).fetchone()
        return None if row is None else SourceState(row[0], camera_id, row[1], bool(row[2]))

    def latest(self, camera_id: str, sampling_suffix: str) -> SourceState | None:
        """The camera's most recent source whose sampling ends with ``sampling_suffix`` (a live
        camera's runs end with ",live")."""
        row = self.db.conn().execute(
            "SELECT source_id, progress_t, done FROM sources WHERE camera_id=? AND substr(sampling, -?) = ? "
            "ORDER BY source_id DESC LIMIT 1", (camera_id, len(sampling_suffix), sampling_suffix)).fetchone()
        return None if row is None else SourceState(row[0], camera_id, row[1], bool(row[2]))

    def uri(self, source_id: int) -> tuple[str, str] | None:
        """(uri, fingerprint) of a source; None when there is no such source."""
        row = self.db.conn().execute("SELECT uri, fingerprint FROM sources WHERE source_id=?", (source_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def info(self, source_id: int) -> dict:
        row = self.db.conn().execute("SELECT info FROM sources WHERE source_id=?", (source_id,)).fetchone()
        return json.loads(row[0]) if row is not None and row[0] else {}

    def update_info(self, source_id: int, **fields) -> None:
        """Add fields to a source's info (a live run's epoch, known at its first frame)."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT info FROM sources WHERE source_id=?", (source_id,)).fetchone()
            info = {**(json.loads(row[0]) if row is not None and row[0] else {}), **fields}
            conn.execute("UPDATE sources SET info=? WHERE source_id=?", (json.dumps(info), source_id))

    def all(self) -> list[dict]:
        """Every source, for reports: id, camera, uri, sampling, progress, done."""
        rows = self.db.conn().execute("SELECT source_id, camera_id, uri, sampling, progress_t, done FROM sources")
        return [{"source_id": r[0], "camera_id": r[1], "uri": r[2], "sampling": r[3], "progress_t": r[4],
                 "done": bool(r[5])} for r in rows]

    def camera_ref(self, camera_id: str) -> GateReference | None:
        """The camera's last kept frame and the blur gate's history: the gates compare against them."""
        row = self.db.conn().execute("SELECT ref_t, ref_shape, ref_gray, ref_sharpness FROM cameras WHERE camera_id=?",
                                     (camera_id,)).fetchone()
        if row is None or row[2] is None:
            return None
        h, w = json.loads(row[1])
        sharpness = tuple(float(x) for x in json.loads(row[3])) if row[3] else ()
        return GateReference(row[0], np.frombuffer(row[2], np.uint8).reshape(h, w).copy(), sharpness)

    def commit_state(self, camera_id: str) -> dict | None:
        """The camera's online committer state as last committed, in its JSON form (decoded by
        index/semantic.py: the committer's records belong to index/)."""
        row = self.db.conn().execute("SELECT state FROM commit_state WHERE camera_id=?", (camera_id,)).fetchone()
        return None if row is None else json.loads(row[0])

    def delete_range(self, conn, changes: list, scope: DeleteRange) -> Removed:
        """The gate reference and the committer's reference embedding may derive from a deleted
        frame: cameras that lose kept frames (every camera deleted as a whole) restart them. Runs
        before the moments go (it reads which cameras lose some)."""
        where, args = scope.where("t")
        cams = {r[0] for r in conn.execute(f"SELECT DISTINCT camera_id FROM moments{where}", args)}
        if scope.whole:
            cams |= set(whole_cameras(conn, scope))
        conn.executemany("DELETE FROM commit_state WHERE camera_id=?", [(c,) for c in cams])
        conn.executemany("UPDATE cameras SET ref_t=NULL, ref_shape=NULL, ref_gray=NULL, ref_sharpness=NULL"
                         " WHERE camera_id=?", [(c,) for c in cams])
        return Removed(cameras=frozenset(cams))

    def check_model(self, role: str, model_id: str) -> None:
        """A store keeps one embedding model per role: vectors of two models do not compare."""
        key = f"model:{role}"
        with self.db.transaction() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
            if row is None:
                conn.execute("INSERT INTO meta VALUES (?, ?)", (key, model_id))
            elif row[0] != model_id:
                raise StoreError(f"{self.frames.root}: this store's {role.replace('_', ' ')} is {row[0]!r}; the config "
                                 f"asks for {model_id!r} (vectors of different models cannot be searched together)")

    def sweep_files(self, source_id: int, keep=()) -> int:
        """Before resuming a source: remove its frame files that no row references, except
        ``keep`` (the camera's held frame, which the committer decides later). A kill can leave
        such files between a file's write and the commit recording it, or between a commit that
        drops a held frame and the removal of its file. Returns how many."""
        conn = self.db.conn()
        row = conn.execute("SELECT camera_id FROM sources WHERE source_id=?", (source_id,)).fetchone()
        if row is None:
            return 0
        keep = set(keep) | {r[0] for r in conn.execute("SELECT frame_ref FROM moments WHERE source_id=?",
                                                      (source_id,))}
        removed = 0
        for ref in self.frames.source_files(row[0], source_id):
            if ref not in keep:
                self.frames.unlink(ref)
                removed += 1
        return removed
