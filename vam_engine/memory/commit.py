"""The write path of ingest: one transaction per batch of gated frames.

A batch holds the rows of kept frames whose files exist, their vectors and event membership,
the gate samples, how far each source is gated, the cameras' gate references and the online
committers' states. All of it commits together, so a resume from ``sources.progress_t`` finds
exactly the state the uninterrupted run had at that point.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..numerics import spread_evenly, unit
from .db import Database
from .frames import FrameFiles
from . import sightings
from .records import GateReference, GateSample, PendingMoment
from .sightings import PerceptionCommit
from .vector_table import VectorChange, put_vector, vectors_by_id


class SavedState(Protocol):
    def to_json(self) -> dict: ...


def _nan_to_none(x: float | None) -> float | None:
    return None if x is None or x != x else float(x)


def _pose_row(pose) -> tuple:
    """A moment's pose columns (pose_x, pose_y, pose_z, pose_yaw, pose_frame)."""
    return (None,) * 5 if pose is None else (pose.x, pose.y, pose.z, pose.yaw, pose.frame)


@dataclass
class CommitBatch:
    moments: list[PendingMoment] = field(default_factory=list)
    samples: list[GateSample] = field(default_factory=list)
    progress: dict[int, float] = field(default_factory=dict)  # source_id -> progress_t
    refs: dict[str, GateReference] = field(default_factory=dict)  # camera -> its gate reference
    finished: set[int] = field(default_factory=set)  # sources that reached their end
    # camera -> the online committer's state (index/online.py: anything with ``to_json()``)
    commit_states: dict[str, "SavedState"] = field(default_factory=dict)
    close_events: set[str] = field(default_factory=set)  # cameras whose open event ends here
    discard_files: list[str] = field(default_factory=list)  # files of held frames later dropped
    perception: PerceptionCommit | None = None  # what perception found on these moments (memory/sightings.py)

    def __bool__(self) -> bool:
        return bool(self.moments or self.samples or self.progress or self.refs or self.finished
                    or self.commit_states or self.close_events or self.discard_files or self.perception)


class Committer:
    def __init__(self, db: Database, frames: FrameFiles, keyframes_per_event: int = 8):
        self.db = db
        self.frames = frames
        self.keyframes_per_event = int(keyframes_per_event)

    def commit(self, batch: CommitBatch) -> list[VectorChange]:
        """One transaction; returns the vector changes (also passed to the vector memory)."""
        if not batch:
            return []
        for ref, rgb in sightings.crops_to_write(batch.perception):  # files before the rows naming them
            self.frames.write(ref, rgb, sightings.CROP_QUALITY)
        with self.db.write() as (conn, changes):
            self._rows(conn, batch, changes)
        for ref in batch.discard_files:
            self.frames.unlink(ref)
        return changes

    def _rows(self, conn, batch: CommitBatch, changes: list) -> None:
        inserted = {}  # (source_id, t_rel) -> (moment_id, camera, t, width, height) of the moments inserted now
        for m in batch.moments:
            cur = conn.execute(
                "INSERT OR IGNORE INTO moments (camera_id, source_id, t_rel, t_abs, pts, frame_ref, width, height,"
                " lap_var, mad, ssim, hist_corr, tile_mad, tiles_changed, t, nbytes,"
                " pose_x, pose_y, pose_z, pose_yaw, pose_frame, blurred)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (m.camera_id, m.source_id, m.t_rel, m.t_abs, m.pts, m.frame_ref, m.width, m.height,
                 _nan_to_none(m.gate.lap_var), _nan_to_none(m.gate.mad), _nan_to_none(m.gate.ssim),
                 _nan_to_none(m.gate.hist_corr), _nan_to_none(m.gate.tile_mad), m.gate.tiles_changed, m.t,
                 self.frames.size(m.frame_ref), *_pose_row(m.pose), int(bool(m.gate.blurred))))
            if cur.rowcount == 0:
                continue  # committed before (a resumed run repeats nothing)
            self._link_moment(conn, cur.lastrowid, m, changes)
            inserted[(m.source_id, m.t_rel)] = (cur.lastrowid, m.camera_id, m.t, m.width, m.height)
        if batch.perception is not None:
            sightings.write(conn, changes, batch.perception, inserted)
        conn.executemany("INSERT OR REPLACE INTO samples (camera_id, source_id, t_rel, lap_var, mad, ssim, hist_corr,"
                         " dropped_by, tile_mad, tiles_changed, blurred) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                         [(s.camera_id, s.source_id, s.t_rel, _nan_to_none(s.gate.lap_var), _nan_to_none(s.gate.mad),
                           _nan_to_none(s.gate.ssim), _nan_to_none(s.gate.hist_corr), s.gate.dropped_by,
                           _nan_to_none(s.gate.tile_mad), s.gate.tiles_changed, int(bool(s.gate.blurred)))
                          for s in batch.samples])
        for cam, ref in batch.refs.items():
            conn.execute("UPDATE cameras SET ref_t=?, ref_shape=?, ref_gray=?, ref_sharpness=? WHERE camera_id=?",
                         (ref.t, json.dumps(list(ref.gray.shape)), np.ascontiguousarray(ref.gray).tobytes(),
                          json.dumps([float(x) for x in ref.sharpness]), cam))
        for cam, state in batch.commit_states.items():
            conn.execute("INSERT OR REPLACE INTO commit_state VALUES (?, ?)", (cam, json.dumps(state.to_json())))
        for cam in batch.close_events:
            self.close_open_event(conn, cam, changes)
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
            self.close_open_event(conn, m.camera_id, changes)
            open_ev = None
        if open_ev is None:
            eid = conn.execute("INSERT INTO events (camera_id, t_start, t_end) VALUES (?,?,?)",
                               (m.camera_id, m.t, m.t)).lastrowid
        else:
            eid = open_ev[0]
            conn.execute("UPDATE events SET t_end=MAX(t_end, ?) WHERE event_id=?", (m.t, eid))
        emb_id = None
        if m.embedding is not None:
            put_vector(conn, "frame", mid, m.camera_id, m.t, m.t, m.embedding, changes)
            emb_id = mid
        conn.execute("UPDATE moments SET event_id=?, embedding_id=?, protected=? WHERE moment_id=?",
                     (eid, emb_id, 1 if first else 0, mid))

    def close_open_event(self, conn, cam: str, changes: list) -> None:
        """Close the camera's open event: pick its keyframes spread over it (protected from
        retention for good) and index its mean frame embedding in the "event" space."""
        row = conn.execute("SELECT event_id, t_start, t_end FROM events WHERE camera_id=? AND closed=0",
                           (cam,)).fetchone()
        if row is None:
            return
        eid, t0, t1 = row
        members = conn.execute("SELECT moment_id, embedding_id FROM moments WHERE event_id=? ORDER BY t",
                               (eid,)).fetchall()
        keyframes = [members[i][0] for i in spread_evenly(len(members), self.keyframes_per_event)]
        conn.executemany("UPDATE moments SET protected=1 WHERE moment_id=?", [(k,) for k in keyframes])
        conn.execute("UPDATE events SET closed=1, keyframes=?, closed_at=? WHERE event_id=?",
                     (json.dumps(keyframes), time.time(), eid))
        vecs = list(vectors_by_id(conn, "frame", [m[0] for m in members if m[1] is not None]).values())
        if vecs:
            mean = np.mean(vecs, axis=0)
            if float(np.linalg.norm(mean)) > 0:
                put_vector(conn, "event", eid, cam, t0, t1, unit(mean, f"event {eid}"), changes)
