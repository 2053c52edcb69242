"""The memory bench_reason.py's parts answer from: a synthetic store of 1-fps moments with a
forest over its events, the questions asked of it, and hashing embedders that cost microseconds
(so the tables show the engine's own work)."""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np

from vam_engine.memory import Store
from vam_engine.memory.commit import CommitBatch
from vam_engine.memory.forest import EventForest, ForestNodeRepository
from vam_engine.memory.records import GateRecord, PendingMoment

TEXT_DIM = 384
FRAME_DIM = 64  # the synthetic frame vectors (and so the event vectors, their means)
QUESTIONS = ["Who came through the door?", "What is on the table now?", "Did the lights change?",
             "Where did the person with the bag go?", "How many cars are parked outside?"]
INTENTS = ["person at the door", "objects on the table", "lights turning on or off",
           "person carrying a bag", "cars in the parking lot"]


class HashEmbedder:
    """Deterministic bag-of-words text vectors (each word a seeded random direction): costs
    microseconds, so the overhead table is the engine's own."""

    def __init__(self, dim: int = TEXT_DIM):
        self.dim = dim
        self.name = self.model_id = "hash-bow" if dim == TEXT_DIM else f"hash-bow-{dim}"
        self._words: dict[str, np.ndarray] = {}

    def _word(self, w: str) -> np.ndarray:
        v = self._words.get(w)
        if v is None:
            seed = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            self._words[w] = v
        return v

    def embed_texts(self, texts) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split()[:64]:
                out[i] += self._word(w)
            n = np.linalg.norm(out[i])
            out[i] = out[i] / n if n > 0 else self._word("<empty>") / np.linalg.norm(self._word("<empty>"))
        return out


class HashImageEmbedder:
    """A stand-in image embedder for the frame/event spaces (FRAME_DIM, like the synthetic frame
    vectors): its text side is the hashing bag-of-words in FRAME_DIM (microseconds, deterministic),
    images map to a seeded random direction of their bytes (no query here uses one). The
    synthetic frame vectors are random, so what a query finds is arbitrary, but every source
    returns top_k hits and every stage downstream runs on them."""

    has_text = True

    def __init__(self, dim: int = FRAME_DIM):
        self.dim = dim
        self.name = self.model_id = f"hash-image-{dim}"
        self._text = HashEmbedder(dim)

    def embed_texts(self, texts) -> np.ndarray:
        return self._text.embed_texts(texts)

    def embed_images(self, frames) -> np.ndarray:
        out = np.zeros((len(frames), self.dim), np.float32)
        for i, f in enumerate(frames):
            seed = int.from_bytes(hashlib.blake2b(np.ascontiguousarray(f).tobytes(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(self.dim)
            out[i] = v / np.linalg.norm(v)
        return out


def unit_rows(rng, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def picture(i: int, h: int = 252, w: int = 448) -> np.ndarray:
    """A cheap distinct frame per index (blocks of colour), so images differ by content."""
    rng = np.random.default_rng(i)
    small = rng.integers(0, 256, (9, 16, 3), dtype=np.uint8)
    return np.repeat(np.repeat(small, h // 9 + 1, 0), w // 16 + 1, 1)[:h, :w]


WORDS = ["door", "table", "person", "car", "bag", "light", "dog", "window", "chair", "screen"]


def event_text(k: int) -> str:
    """The synthetic document of the k-th event (forest leaf summary and event document)."""
    return f"event {k}: " + " ".join(WORDS[(k * 7 + j) % len(WORDS)] for j in range(12))


def build_memory(root: Path, n: int, *, event_len: int, files: bool, seed: int = 0):
    """A store of ``n`` 1-fps moments of camera "cam" in events of ``event_len``, and a forest
    over the events. Returns (store, forest, seconds to build)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    store = Store(root)
    src = store.sources.open("cam", "synthetic://cam", "synthetic", "fps=1").source_id
    gate = GateRecord(lap_var=120.0, mad=25.0, ssim=0.5, hist_corr=None, dropped_by=None)
    chunk = 5000
    for start in range(0, n, chunk):
        vecs = unit_rows(rng, min(chunk, n - start), FRAME_DIM)
        batch = CommitBatch()
        for j, v in enumerate(vecs):
            i = start + j
            ref = store.frames.ref("cam", src, float(i))
            if files:
                store.frames.write(ref, picture(i), 80)
            batch.moments.append(PendingMoment("cam", src, float(i), None, i, ref, 448, 252, gate, v,
                                               event_start=(i % event_len == 0)))
        batch.progress[src] = float(start + len(vecs) - 1)
        store.commit(batch)
    store.commit(CommitBatch(close_events={"cam"}))
    forest = EventForest(ForestNodeRepository(store.db))
    rows = store.db.conn().execute("SELECT event_id, moment_id, t FROM moments ORDER BY t").fetchall()
    by_event: dict = {}
    for ev, mid, t in rows:
        by_event.setdefault(ev, []).append((mid, t))
    embs = unit_rows(rng, len(by_event), TEXT_DIM)
    for k, (ev, ms) in enumerate(sorted(by_event.items())):
        idx = np.linspace(0, len(ms) - 1, min(16, len(ms))).round().astype(int)
        kf = [ms[i] for i in sorted(set(idx.tolist()))]
        summary = event_text(k)
        forest.insert_event("cam", ev, ms[0][1], ms[-1][1], kf, summary, embs[k])
    return store, forest, time.perf_counter() - t0
