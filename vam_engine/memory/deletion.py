"""Deletion as one protocol: every part of the memory that keeps rows of a camera's time
implements ``Deletes`` and is registered in ``Store.deleters``; ``Store.delete`` runs them in
that order inside one transaction, then unlinks the files they name. A new kind of record gets
deleted by giving its repository a ``delete_range`` and registering it: tests/memory/
test_deletion.py fails while any table with a ``camera_id`` column is claimed by no registered
part (its ``tables``) and not listed in ``NOT_DELETED`` with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .db import placeholders


@dataclass(frozen=True)
class DeleteRange:
    """What a deletion covers: the rows of ``cameras`` (None, or empty: every camera) in [t0, t1]
    on the camera axis (None: unbounded on that side)."""

    cameras: tuple[str, ...] | None
    t0: float | None
    t1: float | None

    @property
    def whole(self) -> bool:
        """No time bound: the cameras go as a whole."""
        return self.t0 is None and self.t1 is None

    def where(self, start: str, end: str | None = None, *, every_camera_rows: bool = False) -> tuple[str, list]:
        """The WHERE clause (with its leading space; "" for none) and its arguments selecting rows
        of the cameras whose interval [``start``, ``end``] (columns; a point when ``end`` is None)
        overlaps [t0, t1]; ``every_camera_rows``: rows of no camera (NULL: about every camera)
        are of any cameras too."""
        where, args = [], []
        if self.cameras:
            cams = f"camera_id IN ({placeholders(self.cameras)})"
            where.append(f"(camera_id IS NULL OR {cams})" if every_camera_rows else cams)
            args += list(self.cameras)
        if self.t0 is not None:
            where.append(f"{end or start}>=?")
            args.append(float(self.t0))
        if self.t1 is not None:
            where.append(f"{start}<=?")
            args.append(float(self.t1))
        return (" WHERE " + " AND ".join(where) if where else ""), args


@dataclass
class Removed:
    """What one part removed: counts under ``Deletion``'s field names, files to unlink once the
    transaction commits (store-relative), and cameras whose references restart."""

    counts: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    cameras: frozenset[str] = frozenset()


def whole_cameras(conn, scope: DeleteRange) -> list[str]:
    """The cameras a deletion without a time bound removes as a whole: those named, or every one
    the store knows (run it before the moments go)."""
    if scope.cameras:
        return list(scope.cameras)
    return [r[0] for r in conn.execute("SELECT camera_id FROM cameras UNION SELECT camera_id FROM moments")]


@runtime_checkable
class Deletes(Protocol):
    """A part of the memory that deletes its camera-timed rows with ``Store.delete``."""

    tables: tuple[str, ...]  # the tables with a camera_id column whose rows it deletes or trims

    def delete_range(self, conn, changes: list, scope: DeleteRange) -> Removed:
        """Inside the deletion's transaction (``changes``: the vector changes it collects)."""


# tables with a camera_id column that no part deletes by range, and why
NOT_DELETED = {
    "cameras": "a camera's row stays: SourceRepository resets its gate references",
    "sources": "the record of what was indexed from where stays",
    "forest_nodes": "the engine rebuilds the camera's forest from the events left (engine/documents.py: forget)",
    "vectors": "dropped by each part with the rows they belong to",
    "fulltext_docs": "dropped by each part with the rows they index",
}
