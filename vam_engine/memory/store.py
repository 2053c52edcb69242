"""The store: one directory holding the SQLite file (memory/db.py) and the frame files.

``Store`` only groups the repositories, each of one concern, and the two operations that span
several of them (an ingest commit; a deletion, which each part implements: memory/deletion.py). Readers open their own connections (one per
thread) and query while a writer commits.
"""
from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

from ..errors import StoreError
from ..numerics import time_range as check_range
from .commit import CommitBatch, Committer
from .db import SCHEMA_VERSION, Database
from .deletion import DeleteRange, Deletes
from .doc_queue import DocumentQueue
from .entities import EntityRepository
from .events import EventRepository
from .frames import FrameFiles
from .fulltext import FullTextIndex
from .gaps import GapRepository
from .moments import MomentRepository
from .monitors import MonitorRepository
from .pages import Pages
from .qa import QAHistory
from .records import Deletion
from .sessions import SessionRepository
from .sources import SourceRepository
from .summaries import SummaryRepository
from .transcripts import TranscriptRepository
from .vector_table import VectorTable


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
        self.gaps = GapRepository(self.db)
        self.pages = Pages(self.db, self.moments, self.events, self.transcripts)
        self.committer = Committer(self.db, self.frames, keyframes_per_event)
        # what Store.delete runs, in order: the sources first (they read which cameras lose
        # moments), then every other part that keeps rows of a camera's time
        self.deleters: tuple[Deletes, ...] = (self.sources, self.gaps, self.moments, self.events, self.summaries,
                                              self.monitors, self.transcripts, self.entities)
        self.frames.sweep_temporaries()

    def commit(self, batch: CommitBatch):
        """One ingest transaction (memory/commit.py)."""
        return self.committer.commit(batch)

    def delete(self, cameras=None, t0: float | None = None, t1: float | None = None) -> Deletion:
        """Remove what the memory keeps of the given cameras (all when None) in [t0, t1] on the
        camera axis (everything when both None): each part in ``deleters`` deletes its own rows
        (memory/deletion.py), all in one transaction, and the files they name go after it. Among
        them: moments (rows, files, vectors), overlapping events, summaries and transcript
        segments (with their full-text rows and vectors), samples and alerts; deleting whole
        cameras also ends the monitors that watched only them; what perception found there is
        trimmed to what lies outside the range (memory/sightings.py)."""
        scope = DeleteRange(None if cameras is None else tuple(cameras), t0, t1)
        with self.db.write() as (conn, changes):
            parts = [part.delete_range(conn, changes, scope) for part in self.deleters]
        for part in parts:
            for ref in part.files:
                self.frames.unlink(ref)
        counts = {f.name: sum(p.counts.get(f.name, 0) for p in parts) for f in fields(Deletion)
                  if f.name not in ("vectors", "cameras")}
        cams = set().union(*(p.cameras for p in parts))
        return Deletion(vectors=len(changes), cameras=tuple(sorted(cams)), **counts)

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
    return check_range(time_range, "delete: the time range", open_ends=True)
