"""Working memory of the present (OASIS 3.1): per camera, a short window (8 s at 2 fps) and a
medium buffer (32 s at 1 fps) of recent frames kept from ingest; and the QA history (every
question asked with its answer, plus a rolling summary of them), persisted in the store.

The ring buffers hold what ingest saw: the pushed frames (``Engine.push`` feeds every pushed
frame), and for files the frames that passed the gates (the sampler's rate and the blur /
change gates come first). So with a base sampling rate below 2 fps, or a scene the gates thin
out, the short window is sparser than 2 fps. They live in memory only: after a restart they are
empty and the two-phase answerer reads the same spans from the store instead.
"""
from __future__ import annotations

import json
import math
import threading
import time
from collections import deque

import numpy as np

from ..numerics import unit

# Frames that arrive this close to the rate's interval count as on time (float time stamps:
# 0.1 * 5 is not exactly 0.5).
_RATE_SLACK = 1e-6


class _Ring:
    """Frames of one camera at one rate over one span: (t, array), oldest first."""

    def __init__(self, span_s: float, fps: float):
        self.span_s = span_s
        self.interval = 1.0 / fps
        self.frames: deque = deque()
        self.last_kept = -math.inf   # time of the newest kept frame
        self.evicted_t = -math.inf   # time of the newest frame dropped for age

    def wants(self, t: float) -> bool:
        return t - self.last_kept >= self.interval - _RATE_SLACK

    def add(self, t: float, arr: np.ndarray) -> None:
        self.frames.append((t, arr))
        self.last_kept = t
        # keep (newest - span, newest]: 8 s at 2 fps is 16 frames
        while self.frames and self.frames[0][0] <= t - self.span_s:
            self.evicted_t = self.frames.popleft()[0]

    def window(self, now: float) -> list:
        return [(a, t) for t, a in self.frames if now - self.span_s < t <= now]


class WorkingMemory:
    """Per camera ring buffers of recent frames, fed by ``observe`` from ingest threads."""

    def __init__(self, short_s: float = 8.0, short_fps: float = 2.0, medium_s: float = 32.0,
                 medium_fps: float = 1.0, max_side: int = 448):
        for name, v in (("short_s", short_s), ("short_fps", short_fps), ("medium_s", medium_s),
                        ("medium_fps", medium_fps)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"WorkingMemory: {name} must be a positive number, got {v!r}")
        if not isinstance(max_side, int) or max_side < 1:
            raise ValueError(f"WorkingMemory: max_side must be a positive int, got {max_side!r}")
        self.short_s, self.short_fps = float(short_s), float(short_fps)
        self.medium_s, self.medium_fps = float(medium_s), float(medium_fps)
        self.max_side = max_side
        self._cams: dict[str, tuple[_Ring, _Ring]] = {}  # camera -> (short, medium)
        self._lock = threading.Lock()  # observe runs on ingest threads, window on question threads

    def observe(self, camera_id: str, t: float, rgb: np.ndarray) -> None:
        """Offer one frame (H x W x 3 uint8) seen at time ``t`` (the camera's axis). Kept by a
        buffer only if it comes at least 1/fps after that buffer's last kept frame; stored
        downscaled by integer striding to at most ``max_side`` and copied (callers reuse their
        buffers). A frame at or before the buffer's newest is dropped: two feeders may offer the
        same frames late (``Engine.push`` offers every pushed frame, the index pipeline the
        gated ones, possibly far behind under backpressure), and restarting on a backward jump
        would make them thrash. A source on a new clock calls ``reset`` first."""
        if not (isinstance(rgb, np.ndarray) and rgb.ndim == 3 and rgb.shape[2] == 3 and rgb.dtype == np.uint8):
            got = f"{rgb.dtype} array of shape {rgb.shape}" if isinstance(rgb, np.ndarray) else type(rgb).__name__
            raise ValueError(f"WorkingMemory.observe({camera_id!r}): expected an H x W x 3 uint8 array, got {got}")
        t = float(t)
        if not math.isfinite(t):
            raise ValueError(f"WorkingMemory.observe({camera_id!r}): time must be finite, got {t}")
        with self._lock:
            rings = self._cams.get(camera_id)
            if rings is None:
                rings = (_Ring(self.short_s, self.short_fps), _Ring(self.medium_s, self.medium_fps))
                self._cams[camera_id] = rings
            takers = [r for r in rings if r.wants(t)]
            if not takers:
                return  # the common case at high frame rates: nothing to copy
            k = max(1, math.ceil(max(rgb.shape[0], rgb.shape[1]) / self.max_side))
            small = np.array(rgb[::k, ::k], copy=True, order="C")
            small.flags.writeable = False  # shared by both buffers and handed to readers
            for r in takers:
                r.add(t, small)

    def reset(self, camera_id: str) -> None:
        """Forget a camera's frames (a new source whose clock restarts, a deleted camera)."""
        with self._lock:
            self._cams.pop(camera_id, None)

    def window(self, camera_id: str, now: float) -> tuple[list, list]:
        """(short, medium): lists of (array, t), oldest first, with now - span < t <= now (never
        a frame after ``now``). The arrays are read-only and shared: do not modify them."""
        with self._lock:
            rings = self._cams.get(camera_id)
            if rings is None:
                return [], []
            return rings[0].window(now), rings[1].window(now)

    def covers(self, camera_id: str, now: float) -> bool:
        """Whether the buffers hold everything ingest kept of the medium span before ``now``:
        some frame at or before ``now``, and no frame of (now - medium_s, now] dropped for age.
        False after a restart (empty) or for a ``now`` well before the newest frame."""
        with self._lock:
            rings = self._cams.get(camera_id)
            if rings is None:
                return False
            short, medium = rings
            has = any(t <= now for t, _ in medium.frames) or any(t <= now for t, _ in short.frames)
            return has and medium.evicted_t <= now - self.medium_s and short.evicted_t <= now - self.short_s

    def latest(self, camera_id: str) -> float | None:
        """Time of the newest frame kept for the camera (None: none)."""
        with self._lock:
            rings = self._cams.get(camera_id)
            if rings is None:
                return None
            t = max(rings[0].last_kept, rings[1].last_kept)
            return t if math.isfinite(t) else None

    def cameras(self) -> list[str]:
        with self._lock:
            return sorted(self._cams)


QA_SCHEMA = """
CREATE TABLE IF NOT EXISTS qa_history (
    qa_id INTEGER PRIMARY KEY,
    t REAL NOT NULL,            -- the question's present (its as_of, or the newest moment)
    cameras TEXT NOT NULL,      -- the camera scope asked about: JSON list, or "*" for all
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    embedding BLOB,             -- float32, L2-normalized, of the question and answer
    created_at REAL NOT NULL    -- wall clock
);
CREATE INDEX IF NOT EXISTS qa_history_t ON qa_history (t);
CREATE TABLE IF NOT EXISTS qa_summary (
    key TEXT NOT NULL,          -- which rolling summary ("rolling")
    text TEXT NOT NULL,
    t REAL NOT NULL,            -- the summary as it stood from this time on
    PRIMARY KEY (key, t)
);
"""

_SUMMARY_KEY = "rolling"


class QAHistory:
    """Questions and answers, and the rolling QA summary s_qa (OASIS 3.1), in the store's
    SQLite. Every read takes ``as_of``: only records and summaries at or before it."""

    def __init__(self, store):
        self.store = store
        with store.transaction() as conn:
            conn.executescript(QA_SCHEMA)

    def add(self, t: float, question: str, answer: str, embedding, cameras=None) -> int:
        """Record one answered question at time ``t``; ``embedding`` may be None (the record is
        then never retrieved, only kept). Returns its id."""
        t = float(t)
        if not math.isfinite(t):
            raise ValueError(f"QAHistory.add: t must be finite, got {t}")
        blob = None if embedding is None else unit(embedding, "QAHistory.add").tobytes()
        scope = "*" if not cameras else json.dumps(sorted([cameras] if isinstance(cameras, str) else cameras))
        with self.store.transaction() as conn:
            cur = conn.execute("INSERT INTO qa_history (t, cameras, question, answer, embedding, created_at)"
                               " VALUES (?,?,?,?,?,?)", (t, scope, str(question), str(answer), blob, time.time()))
            return int(cur.lastrowid)

    def retrieve(self, query_emb, k: int = 1, as_of: float | None = None) -> list[dict]:
        """The ``k`` records most similar (cosine) to the query among those with t <= as_of,
        best first: dicts with qa_id, t, cameras, question, answer, score. Records embedded in
        another dimension (a different text model) are skipped."""
        if k < 1:
            return []
        q = unit(query_emb, "QAHistory.retrieve query")
        sql = "SELECT qa_id, t, cameras, question, answer, embedding FROM qa_history WHERE embedding IS NOT NULL"
        args: tuple = ()
        if as_of is not None:
            sql += " AND t <= ?"
            args = (float(as_of),)
        rows = [r for r in self.store.reader().execute(sql, args).fetchall() if len(r[5]) == 4 * len(q)]
        if not rows:
            return []
        m = np.frombuffer(b"".join(r[5] for r in rows), dtype=np.float32).reshape(len(rows), len(q))
        scores = m @ q
        order = np.argsort(-scores, kind="stable")[:k]
        return [{"qa_id": rows[i][0], "t": rows[i][1], "cameras": rows[i][2], "question": rows[i][3],
                 "answer": rows[i][4], "score": float(scores[i])} for i in order]

    def records(self, as_of: float | None = None) -> list[dict]:
        """Every record with t <= as_of, in time order (for inspection and tests)."""
        sql, args = "SELECT qa_id, t, cameras, question, answer FROM qa_history", ()
        if as_of is not None:
            sql, args = sql + " WHERE t <= ?", (float(as_of),)
        return [{"qa_id": r[0], "t": r[1], "cameras": r[2], "question": r[3], "answer": r[4]}
                for r in self.store.reader().execute(sql + " ORDER BY t, qa_id", args).fetchall()]

    def summary(self, as_of: float | None = None) -> str:
        """The rolling QA summary as it stood at ``as_of`` (the latest one when None); "" when
        there is none yet."""
        sql, args = "SELECT text FROM qa_summary WHERE key=?", (_SUMMARY_KEY,)
        if as_of is not None:
            sql, args = sql + " AND t <= ?", args + (float(as_of),)
        row = self.store.reader().execute(sql + " ORDER BY t DESC LIMIT 1", args).fetchone()
        return "" if row is None else row[0]

    def update_summary(self, t: float, text: str) -> None:
        """Set the summary from time ``t`` on. Earlier versions stay, so ``summary(as_of)`` of an
        earlier time reads what was known then."""
        t = float(t)
        if not math.isfinite(t):
            raise ValueError(f"QAHistory.update_summary: t must be finite, got {t}")
        if not isinstance(text, str):
            raise ValueError(f"QAHistory.update_summary: text must be a str, got {type(text).__name__}")
        with self.store.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO qa_summary (key, text, t) VALUES (?,?,?)", (_SUMMARY_KEY, text, t))
