"""Transcript segments: what was said on each camera and when (the ``transcripts`` table), with
their full-text documents (kind "speech", memory/fulltext.py) and their text-embedder vectors
(the "speech" space), all written in one transaction.

Appending is idempotent, so a run resumed after a crash that transcribes the same audio again
never duplicates a segment: a segment is skipped when its camera already has one starting at
the same millisecond (the table's key), or one that covers more than half of it (the resumed
run cut its chunks elsewhere; the transcriber never emits overlapping segments within a run).
Retention never touches these rows: it thins moments only.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from ..audio import TranscriptSegment
from ..errors import VamError
from ..ingest import camera_list
from ..numerics import finite_time, time_range
from . import fulltext
from .db import Database, placeholders, select_in
from .deletion import DeleteRange, Removed
from .records import Transcript
from .vector_table import drop_vectors, put_vector

KIND = "speech"  # the segments' kind in the full-text index and their vector space's name
_COLUMNS = "segment_id, camera_id, t_start, t_end, text, language, confidence"


def _record(r) -> Transcript:
    return Transcript(r[0], r[1], r[2], r[3], r[4], r[5], r[6])


def _filter(cameras, t0: float | None, t1: float | None, as_of: float | None = None) -> tuple[str, list]:
    """The WHERE clause (with its leading space; "" for none) and arguments selecting segments of
    ``cameras`` overlapping [t0, t1] and ending by ``as_of``."""
    where, args = [], []
    cams = _cameras(cameras)
    if cams:
        where.append(f"camera_id IN ({placeholders(cams)})")
        args += cams
    for clause, value in (("t_end >= ?", t0), ("t_start <= ?", t1), ("t_end <= ?", as_of)):
        if value is not None:
            where.append(clause)
            args.append(float(value))
    return (" WHERE " + " AND ".join(where) if where else ""), args


def _cameras(cameras) -> list[str] | None:
    return camera_list(cameras)


def _check(seg: TranscriptSegment) -> None:
    if not isinstance(seg.camera_id, str) or not seg.camera_id:
        raise VamError(f"transcript segment needs a camera id, got {seg.camera_id!r}")
    for name in ("t_start", "t_end"):
        v = getattr(seg, name)
        finite_time(v, f"camera {seg.camera_id!r}: transcript segment {name}")
    if seg.t_end < seg.t_start:
        raise VamError(f"camera {seg.camera_id!r}: transcript segment ends before it starts "
                       f"({seg.t_start} > {seg.t_end})")
    if not isinstance(seg.text, str):
        raise VamError(f"camera {seg.camera_id!r}: transcript text must be a string, got {type(seg.text).__name__}")
    if seg.confidence is not None and not (0.0 <= seg.confidence <= 1.0):
        raise VamError(f"camera {seg.camera_id!r}: transcript confidence must be in [0, 1], got {seg.confidence!r}")


class TranscriptRepository:
    tables = ("transcripts",)

    def __init__(self, db: Database):
        self.db = db

    # -- writes --------------------------------------------------------------------------------
    def append(self, segments: Sequence[TranscriptSegment], vectors=None) -> list[Transcript]:
        """Store segments (``vectors``: one row per segment, the text embedder's, or None) with
        their full-text rows and vectors in one transaction; returns those stored (a segment
        already there, or empty text, is skipped: module doc)."""
        segments = list(segments)
        for seg in segments:
            _check(seg)
        if vectors is not None:
            vectors = np.asarray(vectors, np.float32)
            if vectors.ndim != 2 or len(vectors) != len(segments) or not np.isfinite(vectors).all():
                raise VamError(f"transcript vectors must be finite, one row per segment ({len(segments)}), got "
                               f"shape {vectors.shape}")
        stored: list[Transcript] = []
        now = time.time()
        with self.db.write() as (conn, changes):
            # every camera with rows is in ``cameras``: the vector filters read their camera list there
            conn.executemany("INSERT OR IGNORE INTO cameras (camera_id, created_at) VALUES (?, ?)",
                             [(c, now) for c in dict.fromkeys(seg.camera_id for seg in segments)])
            for i, seg in enumerate(segments):
                text = seg.text.strip()
                if not text or self._present(conn, seg):
                    continue
                t0, t1 = float(seg.t_start), float(seg.t_end)
                sid = conn.execute(
                    "INSERT INTO transcripts (camera_id, t_start, t_end, start_ms, text, language, confidence, "
                    "created_at) VALUES (?,?,?,?,?,?,?,?)",
                    (seg.camera_id, t0, t1, round(t0 * 1000), text, seg.language,
                     None if seg.confidence is None else float(seg.confidence), now)).lastrowid
                fulltext.put(conn, KIND, sid, seg.camera_id, t0, t1, text)
                if vectors is not None:
                    put_vector(conn, KIND, sid, seg.camera_id, t0, t1, vectors[i], changes)
                stored.append(Transcript(sid, seg.camera_id, t0, t1, text, seg.language, seg.confidence))
        return stored

    @staticmethod
    def _present(conn, seg: TranscriptSegment) -> bool:
        t0, t1 = float(seg.t_start), float(seg.t_end)
        if conn.execute("SELECT 1 FROM transcripts WHERE camera_id=? AND start_ms=?",
                        (seg.camera_id, round(t0 * 1000))).fetchone():
            return True
        if t1 <= t0:
            return False
        return conn.execute(
            "SELECT 1 FROM transcripts WHERE camera_id=? AND t_start<? AND t_end>? AND min(t_end, ?) - max(t_start, ?) > ?",
            (seg.camera_id, t1, t0, t1, t0, 0.5 * (t1 - t0))).fetchone() is not None

    def set_vectors(self, ids_and_vectors: Sequence[tuple[int, np.ndarray]]) -> int:
        """Give stored segments their vectors (segments stored without: a later backfill)."""
        n = 0
        with self.db.write() as (conn, changes):
            for sid, vec in ids_and_vectors:
                row = conn.execute("SELECT camera_id, t_start, t_end FROM transcripts WHERE segment_id=?",
                                   (int(sid),)).fetchone()
                if row is not None:
                    put_vector(conn, KIND, int(sid), row[0], row[1], row[2], np.asarray(vec, np.float32), changes)
                    n += 1
        return n

    def delete(self, cameras=None, t0: float | None = None, t1: float | None = None) -> int:
        """Remove the segments of ``cameras`` (all when None) overlapping [t0, t1], with their
        full-text rows and vectors. Returns how many."""
        with self.db.write() as (conn, changes):
            return self._delete(conn, changes, cameras, t0, t1)

    def delete_range(self, conn, changes: list, scope: DeleteRange) -> Removed:
        """``delete`` inside the store's deletion (which spans every table)."""
        return Removed({"transcripts": self._delete(conn, changes, scope.cameras, scope.t0, scope.t1)})

    @staticmethod
    def _delete(conn, changes: list, cameras, t0: float | None, t1: float | None) -> int:
        where, args = _filter(cameras, t0, t1)
        ids = [r[0] for r in conn.execute("SELECT segment_id FROM transcripts" + where, args)]
        if not ids:
            return 0
        drop_vectors(conn, KIND, ids, changes)
        fulltext.drop(conn, KIND, ids)
        conn.executemany("DELETE FROM transcripts WHERE segment_id=?", [(i,) for i in ids])
        return len(ids)

    # -- reads ---------------------------------------------------------------------------------
    def list(self, cameras=None, t0: float | None = None, t1: float | None = None, as_of: float | None = None,
             limit: int | None = None) -> list[Transcript]:
        """Segments in time order (by camera, then start): of ``cameras`` (a camera id or a list;
        None: all), overlapping [t0, t1], and with ``as_of`` none that ends after it."""
        time_range((t0, t1), "transcripts: the time range", open_ends=True)
        finite_time(as_of, "transcripts: as_of", optional=True)
        where, args = _filter(cameras, t0, t1, as_of)
        sql = f"SELECT {_COLUMNS} FROM transcripts" + where
        sql += " ORDER BY t_start, camera_id, segment_id" + (f" LIMIT {int(limit)}" if limit is not None else "")
        return [_record(r) for r in self.db.conn().execute(sql, args)]

    def by_id(self, ids) -> dict[int, Transcript]:
        rows = select_in(self.db.conn(), f"SELECT {_COLUMNS} FROM transcripts WHERE segment_id IN ({{ids}})", ids)
        return {r[0]: _record(r) for r in rows}

    def without_vectors(self, limit: int = 1000) -> list[Transcript]:
        """Segments that have no "speech" vector yet (stored while no text embedder was set)."""
        rows = self.db.conn().execute(
            f"SELECT {_COLUMNS} FROM transcripts t WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.space=? "
            "AND v.id=t.segment_id) ORDER BY segment_id LIMIT ?", (KIND, int(limit))).fetchall()
        return [_record(r) for r in rows]

    def progress(self, camera_id: str) -> float | None:
        """The end of a camera's latest segment (camera axis): where a resumed run may start."""
        return self.db.conn().execute("SELECT MAX(t_end) FROM transcripts WHERE camera_id=?",
                                      (camera_id,)).fetchone()[0]

    def exists(self) -> bool:
        """Whether any segment is stored (cheap: what decides whether a search covers speech)."""
        return self.db.conn().execute("SELECT 1 FROM transcripts LIMIT 1").fetchone() is not None

    def counts(self) -> dict[str, int]:
        """Segments per camera."""
        return dict(self.db.conn().execute("SELECT camera_id, COUNT(*) FROM transcripts GROUP BY camera_id"))

    def count(self, camera_id: str | None = None) -> int:
        if camera_id is None:
            return self.db.conn().execute("SELECT COUNT(*) FROM transcripts").fetchone()[0]
        return self.db.conn().execute("SELECT COUNT(*) FROM transcripts WHERE camera_id=?", (camera_id,)).fetchone()[0]


class TranscriptWriter:
    """What an engine hands ``AudioHub`` as ``on_segments``: embeds each batch's texts with the
    text embedder (None: stored without vectors, found by words only until ``backfill``) and
    appends them. Runs on the transcriber's thread; an embedder failure stores the segments
    without vectors (counted in ``embed_failures``, the error kept in ``last_error``)."""

    def __init__(self, transcripts: TranscriptRepository, text_embedder=None):
        self.transcripts = transcripts
        self.text_embedder = text_embedder
        self.stored = 0
        self.embed_failures = 0
        self.last_error: str | None = None

    def __call__(self, segments: Sequence[TranscriptSegment]) -> list[Transcript]:
        segments = [s for s in segments if s.text.strip()]
        if not segments:
            return []
        vectors = None
        if self.text_embedder is not None:
            try:
                vectors = self.text_embedder.embed_texts([s.text for s in segments])
            except Exception as e:  # noqa: BLE001 - the text is kept; its vector can come later
                self.embed_failures += 1
                self.last_error = f"{type(e).__name__}: {e}"
        stored = self.transcripts.append(segments, vectors)
        self.stored += len(stored)
        return stored

    def backfill(self, limit: int = 1000) -> int:
        """Embed stored segments that have no vector yet; returns how many got one."""
        if self.text_embedder is None:
            return 0
        todo = self.transcripts.without_vectors(limit)
        if not todo:
            return 0
        vecs = self.text_embedder.embed_texts([t.text for t in todo])
        return self.transcripts.set_vectors(list(zip([t.segment_id for t in todo], vecs)))
