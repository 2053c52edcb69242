"""The store: one directory holding the SQLite file (memory/db.py) and the frame files.

``Store`` only groups the repositories, each of one concern, and the two operations that span
several of them (an ingest commit, a deletion). Readers open their own connections (one per
thread) and query while a writer commits.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from ..errors import StoreError, VamError
from . import fulltext, sightings
from .commit import CommitBatch, Committer
from .db import SCHEMA_VERSION, Database, placeholders
from .doc_queue import DocumentQueue
from .entities import EntityRepository
from .events import EventRepository
from .frames import FrameFiles
from .fulltext import FullTextIndex
from .moments import MomentRepository
from .monitors import MonitorRepository
from .qa import QAHistory
from .records import Deletion
from .sessions import SessionRepository
from .sources import SourceRepository
from .summaries import SummaryRepository
from .transcripts import TranscriptRepository
from .vector_table import VectorTable, drop_vectors


class Store:
    def __init__(self, root: str | os.PathLike, *, create: bool = True, keyframes_per_event: int = 8):
        # absolute: a frame's path must resolve the same whatever the working directory later is
        # or however the caller spelled the store (a service serves frames by these paths)
        self.root = Path(root).resolve()
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"{self.root}: store path exists and is not a directory")
        path = self.root / "store.sqlite"
        if not path.exists():
            if not create:
                raise StoreError(f"{self.root}: not a vam_engine store (no store.sqlite)")
            self.root.mkdir(parents=True, exist_ok=True)
        self.db = Database(path)
        self.frames = FrameFiles(self.root)
        self.vector_table = VectorTable(self.db)
        self.sources = SourceRepository(self.db, self.frames)
        self.moments = MomentRepository(self.db, self.frames)
        self.events = EventRepository(self.db)
        self.doc_queue = DocumentQueue(self.db, self.moments)
        self.summaries = SummaryRepository(self.db)
        self.qa = QAHistory(self.db)
        self.monitors = MonitorRepository(self.db, self.frames)
        self.sessions = SessionRepository(self.db)
        self.transcripts = TranscriptRepository(self.db)
        self.fulltext = FullTextIndex(self.db)
        self.entities = EntityRepository(self.db, self.root)
        self.committer = Committer(self.db, self.frames, keyframes_per_event)
        self.frames.sweep_temporaries()

    def commit(self, batch: CommitBatch):
        """One ingest transaction (memory/commit.py)."""
        return self.committer.commit(batch)

    def delete(self, cameras=None, t0: float | None = None, t1: float | None = None) -> Deletion:
        """Remove moments (rows, files, vectors), overlapping events, summaries and transcript
        segments (with their full-text rows and vectors), samples and alerts of the given cameras
        (all when None) in [t0, t1] on the camera axis (everything when both None; then also the
        monitors that watched only those cameras), and what perception found there
        (memory/sightings.py: detections, OCR lines, text spans, tracks and entities trimmed to
        what lies outside the range, with their full-text rows, vectors and crops)."""
        where, args = [], []
        if cameras:
            where.append(f"camera_id IN ({placeholders(cameras)})")
            args += list(cameras)
        mw, ew, margs, eargs = list(where), list(where), list(args), list(args)
        # a summary overlapping the range may describe what is deleted: it goes too
        sw = [f"(camera_id IS NULL OR camera_id IN ({placeholders(cameras)}))"] if cameras else []
        sargs = list(cameras or [])
        if t0 is not None:
            mw.append("t>=?"); margs.append(float(t0))
            ew.append("t_end>=?"); eargs.append(float(t0))
            sw.append("t1>=?"); sargs.append(float(t0))
        if t1 is not None:
            mw.append("t<=?"); margs.append(float(t1))
            ew.append("t_start<=?"); eargs.append(float(t1))
            sw.append("t0<=?"); sargs.append(float(t1))

        def clause(w):
            return " WHERE " + " AND ".join(w) if w else ""

        with self.db.write() as (conn, changes):
            rows = conn.execute(f"SELECT moment_id, frame_ref, camera_id, source_id, t_rel FROM moments{clause(mw)}",
                                margs).fetchall()
            events = [r[0] for r in conn.execute(f"SELECT event_id FROM events{clause(ew)}", eargs)]
            summaries = [r[0] for r in conn.execute(f"SELECT summary_id FROM summaries{clause(sw)}", sargs)]
            drop_vectors(conn, "frame", [r[0] for r in rows], changes)
            drop_vectors(conn, "event", events, changes)
            drop_vectors(conn, "event_doc", events, changes)
            drop_vectors(conn, "summary", summaries, changes)
            fulltext.drop(conn, "event", events)
            fulltext.drop(conn, "summary", summaries)
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
                # a whole camera goes with its record of outages (a range keeps them: they stay true)
                conn.executemany("DELETE FROM gaps WHERE camera_id=?", [(c,) for c in cams])
            conn.executemany("DELETE FROM commit_state WHERE camera_id=?", [(c,) for c in cams])
            conn.executemany("UPDATE cameras SET ref_t=NULL, ref_shape=NULL, ref_gray=NULL, ref_sharpness=NULL"
                             " WHERE camera_id=?",
                             [(c,) for c in cams])
            gone = self.monitors.delete_in(conn, cameras, t0, t1)
            said = self.transcripts.delete_in(conn, changes, cameras, t0, t1)
            seen = sightings.delete_in(conn, changes, cameras, t0, t1)
        for ref in [r[1] for r in rows] + gone.files + list(seen.files):
            self.frames.unlink(ref)
        return Deletion(len(rows), len(events), len(summaries), len(changes), tuple(sorted(cams)), gone.alerts,
                        gone.monitors, said, seen.detections, seen.ocr_lines, seen.entities)

    def info(self) -> dict:
        """What the store holds, for reports (``vam-engine info``)."""
        counts = self.moments.counts()
        events, documented = self.events.counts()
        return {"root": str(self.root), "schema_version": SCHEMA_VERSION, "cameras": counts["cameras"],
                "moments": sum(v["moments"] for v in counts["cameras"].values()), "samples": counts["samples"],
                "events": events, "documented_events": documented, "summaries": self.summaries.count(),
                "monitors": self.monitors.count_active(), "alerts": self.monitors.count_alerts(),
                "transcripts": self.transcripts.count(), "entities": self.entities.count(),
                "vectors": self.vector_table.counts(), "tiers": counts["tiers"], "sources": self.sources.all(),
                "frame_bytes": self.moments.frame_bytes()}

    def close(self) -> None:
        self.db.close()


def check_delete_range(time_range) -> tuple[float | None, float | None]:
    """(t0, t1) of a deletion's ``time_range`` (None: unbounded), checked before anything is touched."""
    t0, t1 = time_range if time_range is not None else (None, None)
    for name, t in (("start", t0), ("end", t1)):
        if t is not None and not (isinstance(t, (int, float)) and math.isfinite(t)):
            raise VamError(f"delete: the time range's {name} must be a finite time in seconds, got {t!r}")
    if t0 is not None and t1 is not None and t0 > t1:
        raise VamError(f"delete: the time range starts after it ends (t0={t0:g} > t1={t1:g}): nothing "
                       f"would be deleted; give t0 <= t1")
    return t0, t1
