"""A vector space: normalized float32 vectors under the caller's stable int64 ids.

Scores are inner products of L2-normalized float32 vectors (cosine). Vectors are normalized on
the way in, queries too.

Layout of one space:

- The rows: a contiguous float32 array ``(n, dim)`` in host memory, the ids of the rows, and an
  id -> row map (a direct-address table while the ids are dense, as SQLite row ids are; a dict
  otherwise). Removal is a swap-remove (the last rows fill the holes), so the rows stay
  contiguous and an exact search is one matrix product. This is the only copy of the vectors
  on the CPU path; exact search is a blocked matmul + argpartition over it (2x faster than
  ``faiss.IndexFlatIP`` in benchmarks/bench_search.py, without a second copy of the vectors).
  Scans under ~4M multiply-adds use numpy's single-threaded einsum rather than BLAS, whose
  threads cost a scheduler slice (~8 ms) per call on a busy machine.
- Optionally an ANN index (``Ann``): faiss ``IndexHNSWFlat`` (M=32) or ``IndexIVFFlat`` (nlist
  ~ 4 sqrt(n), spherical k-means) over the same rows. Its labels are insertion positions; a
  removed row's label becomes a tombstone, filtered out of every search with an
  ``IDSelectorBitmap`` of the live labels, and the index is rebuilt (in a background thread,
  while the old one keeps serving) once tombstones exceed 20% of it. The index is built when
  the space reaches ``cfg.ann_min_size`` vectors; below that every search is exact.
- Optionally a device mirror of the rows for exact search (``device="cuda"``): a resident torch
  tensor (fp16 on CUDA, results re-scored in fp32 on the host) updated with the same
  swap-removes, or, without a CUDA torch, a faiss-gpu ``GpuIndexFlatIP``. ``device="torch-cpu"``
  runs the torch body on the CPU (float32), which is how the tests check it without a GPU.

``cfg.index``: "flat" (exact only), "ivf", "hnsw" (ANN from ``ann_min_size`` on), "auto" (HNSW
from ``ann_min_size`` on the CPU; exact brute force on a GPU, where 1e6 x 512 fp16 takes well
under a millisecond to scan).

Filtering: ``search(..., allowed=ids)`` returns only ids of ``allowed`` (absent ones ignored).
A small allowed set (at most max(20 000, 2% of the space)) is searched exactly: its rows are
gathered block by block and multiplied, or, when it is an eighth of the space or more, the whole
space is scanned with a row mask. A larger set goes through the ANN index with a bitmap selector
of its labels, looking wider (efSearch / nprobe up to 4x) the more selective it is; queries that
come back short fall back to the exact masked scan. Without an ANN index every filtered search
is exact.

Snapshots (``save``/``load``): one file per space, written atomically (vectors/snapshot.py).
The exact top-k bodies live in vectors/bodies.py (one chosen at construction, behind
``RowsBody``), the ANN index and the id map in vectors/index.py.

Thread safety: mutations (add, remove, save, index swaps) are serialized by one mutex; searches
take the read side of a readers-writer lock and run concurrently with each other, and with the
parts of a mutation that do not touch what a search reads (validation, copies, snapshot
writing, ANN building).
"""
from __future__ import annotations

import logging
import threading
import time

import numpy as np

from ..config import VectorConfig
from ..errors import VectorError
from . import snapshot
from .bodies import make_rows_body, pad_rows, top_sorted
from .index import Ann, IdMap, RWLock, format_ids, ivf_nlist
from .snapshot import SpaceContents

log = logging.getLogger(__name__)

__all__ = ["VectorSpace", "VectorError"]

# ANN parameters (benchmarks/bench_search.py measures them on 512-d clustered vectors)
HNSW_EF_SEARCH = 128              # recall@10 0.967 at 1e6 x 512 (bench_search.py); 96 gave 0.947
SMALL_ALLOWED_MAX = 20_000        # an allowed set this small is searched exactly ...
SMALL_ALLOWED_FRACTION = 0.02     # ... or one this small relative to the space
TOMBSTONE_REBUILD_FRACTION = 0.2  # rebuild the ANN index when this share of it is removed
IVF_REBUILD_GROWTH = 4.0          # retrain IVF when the space has grown this much since
BUILD_CHUNK = 16_384              # rows copied per lock hold while building an ANN index
GATHER_FRACTION = 8               # gathering a row costs ~8x scanning it: subsets above n/8 are scanned


class VectorSpace:
    """One space of normalized float32 vectors under stable int64 ids (see the module doc)."""

    def __init__(self, name: str, dim: int, cfg: VectorConfig | None = None, *, device: str = "cpu",
                 model_id: str = "", background_build: bool = True, torch_dtype=None):
        if not isinstance(name, str) or not name:
            raise VectorError(f"vector space name must be a non-empty string, got {name!r}")
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
            raise VectorError(f"vector space {name!r}: dim must be a positive integer, got {dim!r}")
        self.name = name
        self.dim = int(dim)
        self.cfg = cfg if cfg is not None else VectorConfig()
        self.device = str(device)
        self.model_id = str(model_id or "")
        self.background_build = bool(background_build)
        self._body = make_rows_body(self.device, self.dim, torch_dtype)
        idx = self.cfg.index
        self._ann_kind = None if idx == "flat" else ("hnsw" if idx == "auto" else idx)
        if idx == "auto" and self._body.on_device:
            self._ann_kind = None
        self.ef_search = HNSW_EF_SEARCH
        self.nprobe: int | None = None  # None: ivf_nprobe(nlist)
        # rows
        self._n = 0
        self._vecs = np.empty((0, self.dim), np.float32)
        self._ids = np.empty(0, np.int64)
        self._seqno = np.empty(0, np.int64)  # a number unique to each add of a row (builds match on it)
        self._label = np.empty(0, np.int64)  # the row's label in self._ann (valid while _ann is set)
        self._next_seqno = 0
        self._map = IdMap()
        self._ann: Ann | None = None
        # concurrency
        self._mut = threading.RLock()
        self._rw = RWLock()
        self._building = False
        self._build_thread: threading.Thread | None = None
        self._closing = False
        self.build_error: BaseException | None = None

    # -- small accessors -----------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    def __contains__(self, vid) -> bool:
        with self._rw.read():
            return bool(self._n) and int(self._map.get(np.array([int(vid)], np.int64))[0]) >= 0

    def __repr__(self) -> str:
        return (f"VectorSpace({self.name!r}, dim={self.dim}, n={self._n}, index={self.index_kind!r}, "
                f"device={self.device!r})")

    @property
    def ann_kind(self) -> str | None:
        """The ANN index this space builds from ``cfg.ann_min_size`` on ("ivf", "hnsw"; None:
        exact search only)."""
        return self._ann_kind

    @property
    def index_kind(self) -> str:
        """The index searches use now: "flat", "ivf" or "hnsw"."""
        ann = self._ann
        return "flat" if ann is None else ann.kind

    def ids(self) -> np.ndarray:
        """All ids, in row order (a copy)."""
        with self._rw.read():
            return self._ids[:self._n].copy()

    def get(self, ids) -> np.ndarray:
        """The stored (normalized) vectors of ``ids``; VectorError naming any that are absent."""
        ids = self._as_ids(ids, "ids")
        with self._rw.read():
            rows = self._map.get(ids) if self._n else np.full(len(ids), -1, np.int64)
            if (rows < 0).any():
                raise VectorError(f"vector space {self.name!r}: ids not present: {format_ids(ids[rows < 0])}")
            return self._vecs[rows].copy()

    def stats(self) -> dict:
        with self._rw.read():
            ann = self._ann
            return {
                "name": self.name, "dim": self.dim, "n": self._n, "model_id": self.model_id,
                "device": self.device,
                "exact_body": self._body.name,
                "index": self.index_kind, "index_setting": self.cfg.index,
                "ann_ntotal": 0 if ann is None else ann.ntotal,
                "tombstones": 0 if ann is None else ann.tombstones,
                "nlist": None if ann is None or ann.kind != "ivf" else ann.nlist,
                "building": self._building,
                "vector_bytes": self._n * self.dim * 4,
                "idmap": self._map.kind,
                "idmap_bytes": self._map.nbytes(),
            }

    def check(self) -> None:
        """Verify the ANN index against the rows (a test and debugging aid): each row's label
        holds its id, every other label is a tombstone. AssertionError naming the first broken
        invariant; nothing to check without an index."""
        with self._rw.read():
            ann, n = self._ann, self._n
            if ann is None:
                return
            labels = self._label[:n]
            if (labels < 0).any():
                raise AssertionError(f"vector space {self.name!r}: rows without an index label")
            if not np.array_equal(ann.label_id[labels], self._ids[:n]):
                raise AssertionError(f"vector space {self.name!r}: index labels name other ids than their rows")
            if (ann.label_id[:ann.ntotal] >= 0).sum() != n or ann.tombstones != ann.ntotal - n:
                raise AssertionError(f"vector space {self.name!r}: {ann.tombstones} tombstones, "
                                     f"{ann.ntotal} labels for {n} rows")

    # -- validation ----------------------------------------------------------------------------
    def _err(self, msg: str) -> VectorError:
        return VectorError(f"vector space {self.name!r}: {msg}")

    def _as_ids(self, ids, what: str) -> np.ndarray:
        if isinstance(ids, (set, frozenset)):
            ids = list(ids)
        a = np.asarray(ids)
        if a.ndim == 0:
            a = a.reshape(1)
        if a.size == 0:
            return np.empty(0, np.int64)
        if a.ndim != 1:
            raise self._err(f"{what} must be a 1-D array of integers, got shape {a.shape}")
        if a.dtype.kind not in "iu":
            raise self._err(f"{what} must be integers, got dtype {a.dtype}")
        if a.dtype.kind == "u" and a.dtype.itemsize == 8 and (a > np.iinfo(np.int64).max).any():
            raise self._err(f"{what} do not fit in int64: {format_ids(a[a > np.iinfo(np.int64).max])}")
        return a.astype(np.int64, copy=False)

    def _as_vecs(self, vecs, what: str, labels=None) -> np.ndarray:
        """2-D float32 (m x dim), finite, non-zero, L2-normalized (a new array)."""
        a = np.asarray(vecs)
        if a.dtype.kind not in "fiub":
            raise self._err(f"{what} must be numeric, got dtype {a.dtype}")
        if a.ndim != 2:
            raise self._err(f"{what} must be a 2-D array (n, {self.dim}), got shape {a.shape}")
        if a.shape[1] != self.dim:
            raise self._err(f"{what} dim mismatch: expected {self.dim}, got {a.shape[1]}")
        with np.errstate(over="ignore", invalid="ignore"):
            a = a.astype(np.float32)  # always a copy: normalized in place below
        names = labels if labels is not None else np.arange(len(a))
        kind = "ids" if labels is not None else "rows"
        bad = ~np.isfinite(a).all(axis=1)
        if bad.any():
            raise self._err(f"{what} not finite (NaN or inf, after conversion to float32) at {kind} "
                            f"{format_ids(names[bad])}")
        scale = np.abs(a).max(axis=1) if a.shape[1] else np.zeros(len(a), np.float32)
        zero = ~(scale > 0)
        if zero.any():
            raise self._err(f"{what} of zero norm cannot be normalized, at {kind} {format_ids(names[zero])}")
        a /= scale[:, None]  # scaled first: huge components do not overflow the norm
        a /= np.linalg.norm(a, axis=1)[:, None]
        return a

    # -- mutations -----------------------------------------------------------------------------
    def add(self, ids, vecs) -> None:
        """Add vectors under new ids. Validates everything before changing anything: vecs 2-D
        numeric with this space's dim, finite and non-zero; ids integers >= 0, unique, not
        present. Raises VectorError naming the space and the offending ids."""
        ids = self._as_ids(ids, "ids")
        a = np.asarray(vecs)
        if a.ndim == 2 and a.shape[0] != len(ids):
            raise self._err(f"{len(ids)} ids for {a.shape[0]} vectors")
        if (ids < 0).any():
            raise self._err(f"ids must be >= 0 (-1 pads search results): {format_ids(ids[ids < 0])}")
        uniq, counts = np.unique(ids, return_counts=True)
        if len(uniq) != len(ids):
            raise self._err(f"duplicate ids in one add: {format_ids(uniq[counts > 1])}")
        v = self._as_vecs(a, "vectors", labels=ids)
        if not len(ids):
            return
        with self._mut:
            if self._n:
                present = self._map.get(ids) >= 0
                if present.any():
                    raise self._err(f"ids already present: {format_ids(ids[present])}")
            n, m = self._n, len(ids)
            grown = self._grown(n + m)  # new arrays (rows 0..n copied) or None
            arrs = grown or (self._vecs, self._ids, self._seqno, self._label)
            arrs[0][n:n + m] = v  # rows >= n are not read by searches: no write lock needed
            arrs[1][n:n + m] = ids
            arrs[2][n:n + m] = np.arange(self._next_seqno, self._next_seqno + m)
            arrs[3][n:n + m] = -1
            self._next_seqno += m
            with self._rw.write():
                if grown:
                    self._vecs, self._ids, self._seqno, self._label = grown
                if self._ann is not None:
                    self._label[n:n + m] = self._ann.add(v, ids)
                self._body.write(n, v)
                self._map.put(ids, np.arange(n, n + m, dtype=np.int64), self._ids[:n + m])
                self._n = n + m
            build = self._claim_build()
        if build:
            self._run_build()

    def _grown(self, need: int):
        cap = len(self._ids)
        if need <= cap:
            return None
        cap = max(need, 2 * cap, 1024)
        n = self._n
        out = (np.empty((cap, self.dim), np.float32), np.empty(cap, np.int64),
               np.empty(cap, np.int64), np.empty(cap, np.int64))
        for new, old in zip(out, (self._vecs, self._ids, self._seqno, self._label)):
            new[:n] = old[:n]
        return out

    def remove(self, ids) -> int:
        """Remove ids; absent ones are ignored. Returns how many were present."""
        ids = np.unique(self._as_ids(ids, "ids"))
        if not len(ids):
            return 0
        with self._mut:
            if not self._n:
                return 0
            rows = self._map.get(ids)
            rows = rows[rows >= 0]
            r = len(rows)
            if not r:
                return 0
            n = self._n
            new_n = n - r
            holes = np.sort(rows[rows < new_n])
            tail = np.arange(new_n, n, dtype=np.int64)
            movers = tail[~np.isin(tail, rows)]
            removed = self._ids[rows].copy()
            with self._rw.write():
                if self._ann is not None:
                    self._ann.kill(self._label[rows])
                self._map.drop(removed)
                if len(holes):
                    for arr in (self._vecs, self._ids, self._seqno, self._label):
                        arr[holes] = arr[movers]
                    self._body.move(holes, movers)
                    self._map.put(self._ids[holes], holes, self._ids[:new_n])
                self._n = new_n
                self._body.truncate(new_n)
            build = self._claim_build()
        if build:
            self._run_build()
        return r

    # -- ANN building --------------------------------------------------------------------------
    def _wants_build(self) -> bool:
        if self._ann_kind is None or self._building or self._closing:
            return False
        ann = self._ann
        if ann is None or ann.kind != self._ann_kind:
            return self._n >= self.cfg.ann_min_size
        if ann.tombstones > TOMBSTONE_REBUILD_FRACTION * max(ann.ntotal, 1):
            return True
        return ann.kind == "ivf" and self._n > IVF_REBUILD_GROWTH * max(ann.n_built, 1)

    def _claim_build(self) -> bool:
        """Under _mut: whether to start a build now (then marks one as running)."""
        if self._wants_build():
            self._building = True
            return True
        return False

    def _run_build(self) -> None:
        if self.background_build:
            t = threading.Thread(target=self._build_loop, name=f"vam-vectors-{self.name}-index", daemon=True)
            self._build_thread = t
            t.start()
        else:
            self._build_loop()

    def _build_loop(self) -> None:
        while True:
            try:
                self._build()
                self.build_error = None
            except Exception as e:  # noqa: BLE001 - searches stay exact / on the old index
                self.build_error = e
                log.warning("vector space %r: building the %s index failed: %s", self.name, self._ann_kind, e)
                with self._mut:
                    self._building = False
                return
            with self._mut:
                self._building = False
                if not self._claim_build():
                    return

    def wait_index(self, timeout: float | None = None) -> bool:
        """Wait for a background index build; True when none is running."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._building:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            t = self._build_thread
            if t is not None and t.is_alive():
                t.join(left)
            else:  # claimed, thread not started yet (or a synchronous build in another thread)
                time.sleep(0.002)
        return True

    def _build(self) -> None:
        kind = self._ann_kind
        t0 = time.perf_counter()
        train, nlist = None, 0
        with self._mut:
            n0 = self._n
            if kind == "ivf":
                nlist = ivf_nlist(n0)
                m = min(n0, max(39 * nlist, min(64 * nlist, 262_144)))
                pick = np.sort(np.random.default_rng(n0).choice(n0, m, replace=False)) if m < n0 else slice(0, n0)
                train = self._vecs[pick].copy()
        if n0 == 0:
            return
        ann = Ann.create(kind, self.dim, train, nlist)
        del train
        seqs = []
        pos = 0
        while True:
            with self._mut:
                if self._closing:
                    return
                end = min(pos + BUILD_CHUNK, self._n, n0)
                if pos >= end:
                    break
                v = self._vecs[pos:end].copy()
                ids = self._ids[pos:end].copy()
                seqs.append(self._seqno[pos:end].copy())
            ann.add(v, ids)  # the slow part, without any lock
            pos = end
        with self._mut:  # swap in: match rows to labels by seqno, index what is missing
            n = self._n
            built = np.concatenate(seqs) if seqs else np.empty(0, np.int64)
            order = np.argsort(built, kind="stable")
            sb = built[order]
            cur = self._seqno[:n]
            j = np.searchsorted(sb, cur)
            found = j < len(sb)
            found[found] = sb[j[found]] == cur[found]
            labels = np.full(n, -1, np.int64)
            labels[found] = order[j[found]]
            live = np.zeros(ann.ntotal, bool)
            live[labels[found]] = True
            ann.kill(np.flatnonzero(~live))
            missing = np.flatnonzero(~found)
            if len(missing):
                labels[missing] = ann.add(self._vecs[missing], self._ids[missing])
            ann.n_built = n
            with self._rw.write():
                self._label[:n] = labels
                self._ann = ann
        log.info("vector space %r: %s index over %d vectors built in %.1f s", self.name, kind, n,
                 time.perf_counter() - t0)

    def close(self) -> None:
        """Stop a background index build (the space stays usable)."""
        self._closing = True
        t = self._build_thread
        if t is not None:
            t.join()
        self._closing = False

    # -- search --------------------------------------------------------------------------------
    def search(self, queries, k: int, allowed=None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k by cosine for each query. Returns (scores M x k float32, ids M x k int64),
        best first, padded with -inf / -1. ``allowed``: the only ids that may be returned
        (absent ones are ignored; None = no filter)."""
        q = np.asarray(queries)
        if q.ndim == 1:
            q = q.reshape(1, -1)
        q = self._as_vecs(q, "queries")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise self._err(f"k must be a positive integer, got {k!r}")
        k = int(k)
        m = len(q)
        out_s = np.full((m, k), -np.inf, np.float32)
        out_i = np.full((m, k), -1, np.int64)
        allowed_ids = None if allowed is None else self._as_ids(allowed, "allowed")
        if not m:
            return out_s, out_i
        with self._rw.read():
            n = self._n
            if not n:
                return out_s, out_i
            if allowed_ids is None:
                s, i = self._search_all(q, k)
            else:
                rows = self._map.get(allowed_ids)
                rows = rows[rows >= 0]  # may repeat: the paths below do not mind
                if not len(rows):
                    return out_s, out_i
                s, i = self._search_rows(q, k, rows)
        kk = min(k, s.shape[1])
        out_s[:, :kk] = s[:, :kk]
        out_i[:, :kk] = i[:, :kk]
        return out_s, out_i

    def _search_all(self, q, k):
        n = self._n
        if self._ann is None:
            s, r = self._exact(q, k)
            return s, self._row_ids(r)
        s, ids = self._ann_search(q, k, None)
        short = (ids >= 0).sum(1) < min(k, n)
        if short.any():
            es, er = pad_rows(*self._exact(q[short], k), k)
            s[short], ids[short] = es, self._row_ids(er)
        return s, ids

    def _search_rows(self, q, k, rows):
        n = self._n
        small = len(rows) <= max(SMALL_ALLOWED_MAX, SMALL_ALLOWED_FRACTION * n)
        if small and GATHER_FRACTION * len(rows) < n:  # gather those rows, exact matmul
            s, r = self._exact(q, k, rows=np.unique(rows))
            return s, self._row_ids(r)
        if self._ann is None or small:  # an eighth of the space or more: masked exact scan
            mask = np.zeros(n, bool)
            mask[rows] = True
            s, r = self._exact(q, k, mask=mask)
            return s, self._row_ids(r)
        lmask = np.zeros(self._ann.ntotal, bool)
        lmask[self._label[rows]] = True
        s, ids = self._ann_search(q, k, lmask)
        short = (ids >= 0).sum(1) < min(k, int(lmask.sum()))
        if short.any():  # too few found through the index: exact for those queries
            mask = np.zeros(n, bool)
            mask[rows] = True
            es, er = pad_rows(*self._exact(q[short], k, mask=mask), k)
            s[short], ids[short] = es, self._row_ids(er)
        return s, ids

    def _row_ids(self, r: np.ndarray) -> np.ndarray:
        return np.where(r >= 0, self._ids[np.maximum(r, 0)], -1)

    def _ann_search(self, q, k, label_mask):
        ann = self._ann
        kk = min(k, ann.ntotal)
        s, lab = ann.search(q, kk, label_mask=label_mask, ef_search=self.ef_search, nprobe=self.nprobe)
        ids = np.where(lab >= 0, ann.label_id[np.maximum(lab, 0)], -1)  # tombstones -> -1 too
        s = np.where(ids >= 0, s, -np.inf).astype(np.float32)
        return pad_rows(*top_sorted(s, ids, kk), k)

    def _exact(self, q, k, rows=None, mask=None):
        """Exact (scores, rows) over all rows, ``rows``, or the rows in ``mask``."""
        n = self._n
        be = self._body
        if not be.approx:
            return be.topk(q, self._vecs, n, k, rows, mask)
        # reduced precision on the device: over-fetch, then re-score the candidates in fp32
        cols = n if rows is None else len(rows)
        kk = min(cols, 2 * k + 8)
        _, cand = be.topk(q, self._vecs, n, kk, rows, mask)
        v = self._vecs[np.maximum(cand, 0)]
        s = np.einsum("mkd,md->mk", v, q).astype(np.float32)
        s[cand < 0] = -np.inf
        return top_sorted(s, cand, min(k, cols))

    # -- snapshots (vectors/snapshot.py) ------------------------------------------------------
    def save(self, path, seq: int) -> None:
        """Write a snapshot covering change-log position ``seq`` to ``path`` atomically (a
        temporary file, fsynced, renamed into place). Mutations wait; searches do not."""
        if isinstance(seq, bool) or not isinstance(seq, (int, np.integer)) or seq < 0:
            raise self._err(f"snapshot seq must be an integer >= 0, got {seq!r}")
        with self._mut:
            n, ann = self._n, self._ann
            snapshot.save(SpaceContents(self.name, self.dim, self.model_id, self.cfg.index, self._ids[:n],
                                        self._vecs[:n], ann, None if ann is None else self._label[:n]), path, seq)
        snapshot.sync_directory(path)

    @staticmethod
    def snapshot_info(path) -> dict:
        """The JSON header of a snapshot (seq, dim, model_id, kind, n, ...), read cheaply."""
        return snapshot.snapshot_info(path)

    @classmethod
    def load(cls, path, cfg: VectorConfig | None = None, *, device: str = "cpu", name: str | None = None,
             dim: int | None = None, model_id: str | None = None,
             background_build: bool = True) -> tuple["VectorSpace", int]:
        """Read a snapshot written by ``save``. Returns (space, seq). VectorError naming the
        file when it is missing, truncated or corrupt, or when ``name``/``dim``/``model_id``
        are given and differ from the snapshot's."""
        def new_space(space_name: str, space_dim: int, space_model: str) -> VectorSpace:
            return cls(space_name, space_dim, cfg, device=device, model_id=space_model,
                       background_build=background_build)

        space, contents, seq = snapshot.load(path, new_space, name=name, dim=dim, model_id=model_id)
        space._restore(contents)
        return space, seq

    def _restore(self, c: SpaceContents) -> None:
        """Take a snapshot's rows (and its ANN index) into this new, empty space."""
        n = len(c.ids)
        self._vecs, self._ids = c.vectors, c.ids
        self._seqno = np.arange(n, dtype=np.int64)
        self._next_seqno = n
        self._label = c.row_labels if c.ann is not None else np.full(n, -1, np.int64)
        self._n = n
        self._map.rebuild(c.ids)
        self._body.reset(c.vectors)
        if c.ann is not None:
            self._ann = c.ann
        with self._mut:
            build = self._claim_build()
        if build:
            self._run_build()
