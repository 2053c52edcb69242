"""The store's vector indexes, kept consistent with SQLite.

SQLite's ``vectors`` table is the source of truth, written in the same transaction as the rows
the vectors belong to. The in-memory indexes (vectors/: one VectorSpace per space) follow it: on open each space
loads its last snapshot and replays ``vector_log`` entries after the snapshot's position; a
missing or unreadable snapshot is rebuilt from the table (with a warning naming the file), so
nothing committed is ever lost to an index file. Snapshots are written every
``snapshot_every`` changes and on close, never on each insert.
"""
from __future__ import annotations

import threading
import warnings
from pathlib import Path

import numpy as np

from ..config import VectorConfig
from ..vectors import VectorError, VectorSpace
from .vector_table import VectorTable

SPACES = ("frame", "event", "event_doc", "summary", "speech", "entity")  # event_doc, summary, speech: the
# text embedder's; entity: perception's appearance vectors of entities (memory/sightings.py)


class VectorMemory:
    def __init__(self, table: VectorTable, directory: Path, cfg: VectorConfig, *, device: str = "cpu"):
        """``table``: the store's vectors (the source of truth); ``directory``: the snapshots."""
        self.table = table
        self.cfg = cfg
        self.device = device
        self.dir = Path(directory)
        self.dir.mkdir(exist_ok=True)
        self._spaces: dict[str, VectorSpace] = {}
        self._lock = threading.Lock()
        self._changes_since_snapshot = 0
        self.warnings: list[str] = []
        for name in SPACES:
            self._open(name)
        table.db.on_vectors = self.apply

    def _path(self, name: str) -> Path:
        return self.dir / f"{name}.index"

    def _open(self, name: str) -> None:
        path = self._path(name)
        space, seq = None, None
        if path.exists():
            try:
                space, seq = VectorSpace.load(path, self.cfg, device=self.device)
            except VectorError as e:
                msg = f"vector index {path} is unreadable ({e}); rebuilding it from the store"
                warnings.warn(msg, stacklevel=3)
                self.warnings.append(msg)
        if space is not None:
            for _, vid, op, vec in self.table.log_since(name, seq):
                self._apply_one(space, name, vid, vec if op > 0 else None)
            self._spaces[name] = space
            return
        rows = self.table.rows(name)
        if rows:
            space = VectorSpace(name, len(rows[0][1]), self.cfg, device=self.device)
            space.add(np.array([r[0] for r in rows], np.int64), np.stack([r[1] for r in rows]))
            self._spaces[name] = space
            self._changes_since_snapshot += len(rows)

    def _apply_one(self, space: VectorSpace, name: str, vid: int, vec) -> None:
        space.remove(np.array([vid], np.int64))
        if vec is not None:
            space.add(np.array([vid], np.int64), vec[None, :])

    def space(self, name: str) -> VectorSpace | None:
        """The index of one space (None: nothing stored in it yet), for reads beside ``search``:
        memory/search.py samples it to calibrate scores."""
        return self._spaces.get(name)

    def apply(self, changes) -> None:
        """Called after each transaction that added or removed vectors (memory/db.py: ``write``)."""
        with self._lock:
            for name, vid, vec in changes:
                space = self._spaces.get(name)
                if space is None:
                    if vec is None:
                        continue
                    space = self._spaces[name] = VectorSpace(name, len(vec), self.cfg, device=self.device)
                self._apply_one(space, name, vid, vec)
            self._changes_since_snapshot += len(changes)
            due = self._changes_since_snapshot >= self.cfg.snapshot_every
        if due:
            self.snapshot()

    def snapshot(self) -> None:
        # the store's write lock: no transaction commits (or is half-applied here) meanwhile
        with self.table.db.write_lock, self._lock:
            seq = self.table.seq()
            for name, space in self._spaces.items():
                space.save(self._path(name), seq)
            self._changes_since_snapshot = 0
        self.table.prune_log(seq)

    def dim(self, name: str) -> int | None:
        space = self._spaces.get(name)
        return None if space is None else space.dim

    def size(self, name: str) -> int:
        space = self._spaces.get(name)
        return 0 if space is None else len(space)

    def search(self, name: str, query: np.ndarray, k: int, allowed: np.ndarray | None = None):
        """(scores, ids) of the k nearest in one space; empty when the space is empty."""
        space = self._spaces.get(name)
        if space is None or len(space) == 0 or (allowed is not None and len(allowed) == 0):
            return np.empty(0, np.float32), np.empty(0, np.int64)
        if query.shape[-1] != space.dim:
            raise VectorError(f"{name} space holds {space.dim}-d vectors; the query has {query.shape[-1]}")
        scores, ids = space.search(query[None, :].astype(np.float32), k, allowed)
        keep = ids[0] >= 0
        return scores[0][keep], ids[0][keep]

    def close(self) -> None:
        if self._changes_since_snapshot:
            self.snapshot()
