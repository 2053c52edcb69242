"""Vector memory: one ``VectorSpace`` per space ("frame", "event", "summary").

Ids are the int64 stable ids of the SQLite rows (moment_id, event_id, summary id); scores are
inner products of L2-normalized float32 vectors (cosine). Vectors are normalized on the way in,
queries too.

Layout of one space:

- The rows: a contiguous float32 array ``(n, dim)`` in host memory, the ids of the rows, and an
  id -> row map (a direct-address table while the ids are dense, as SQLite row ids are; a dict
  otherwise). Removal is a swap-remove (the last rows fill the holes), so the rows stay
  contiguous and an exact search is one matrix product. This is the only copy of the vectors
  on the CPU path; exact search is a blocked matmul + argpartition over it (2x faster than
  ``faiss.IndexFlatIP`` in benchmarks/bench_search.py, without a second copy of the vectors).
  Scans under ~4M multiply-adds use numpy's single-threaded einsum rather than BLAS, whose
  threads cost a scheduler slice (~8 ms) per call on a busy machine.
- Optionally an ANN index (``_Ann``): faiss ``IndexHNSWFlat`` (M=32) or ``IndexIVFFlat`` (nlist
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

Snapshots (``save``/``load``) are one file: the sections (ids, vectors, ANN labels, the
serialized faiss index), then a JSON trailer with seq, dim, model_id, kind and each section's
offset, size and CRC32. It is written to a temporary name, fsynced and renamed into place, so
a reader sees either the old file or the new one, never a mix; ``snapshot_info`` reads only
the trailer.

Thread safety: mutations (add, remove, save, index swaps) are serialized by one mutex; searches
take the read side of a readers-writer lock and run concurrently with each other, and with the
parts of a mutation that do not touch what a search reads (validation, copies, snapshot
writing, ANN building).
"""
from __future__ import annotations

import json
import logging
import math
import os
import struct
import threading
import time
import zlib
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..config import VectorConfig
from ..errors import VectorError

log = logging.getLogger(__name__)

__all__ = ["VectorSpace", "VectorError"]

# ANN parameters (benchmarks/bench_search.py measures them on 512-d clustered vectors)
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 128              # recall@10 0.967 at 1e6 x 512 (bench_search.py); 96 gave 0.947
IVF_NITER = 10
SMALL_ALLOWED_MAX = 20_000        # an allowed set this small is searched exactly ...
SMALL_ALLOWED_FRACTION = 0.02     # ... or one this small relative to the space
TOMBSTONE_REBUILD_FRACTION = 0.2  # rebuild the ANN index when this share of it is removed
IVF_REBUILD_GROWTH = 4.0          # retrain IVF when the space has grown this much since
BUILD_CHUNK = 16_384              # rows copied per lock hold while building an ANN index
SINGLE_THREAD_MAX = 1 << 22       # exact scans up to this many multiply-adds skip BLAS threads
SCORE_BLOCK = 1 << 24             # exact scans: scores computed per block (floats)
GATHER_BLOCK = 1 << 22            # exact scans of a row subset: bytes gathered per block
MIN_BLOCK = 2048
GATHER_FRACTION = 8               # gathering a row costs ~8x scanning it: subsets above n/8 are scanned

_MAGIC = b"VAMVEC\x01\n"
_END = b"VAMVEND1"
_FORMAT = 1
_TRAILER = struct.Struct("<Q8s")


def _faiss():
    try:
        import faiss  # noqa: PLC0415
    except ImportError as e:  # pragma: no cover - faiss-cpu is a dependency of the vector memory
        raise VectorError(f"the vector memory needs faiss (pip install faiss-cpu): {e}") from None
    return faiss


def ivf_nlist(n: int) -> int:
    """Lists of an IVF index over n vectors: ~4 sqrt(n), at least 39 training points each."""
    return int(max(1, min(round(4 * math.sqrt(max(n, 1))), n // 39)))


def ivf_nprobe(nlist: int) -> int:
    """Default lists probed per query (recall >= 0.95 in bench_search.py on clustered data)."""
    return int(max(1, min(nlist, max(16, round(nlist / 64)))))


def _fmt_ids(ids, limit: int = 10) -> str:
    ids = [int(i) for i in np.asarray(ids).ravel()[: limit + 1]]
    more = len(ids) > limit
    return "[" + ", ".join(map(str, ids[:limit])) + (", ...]" if more else "]")


class _RWLock:
    """Readers-writer lock, writer preferring (a waiting writer holds off new readers)."""

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextmanager
    def read(self):
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self):
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._writer or self._readers:
                    self._cond.wait()
            finally:
                self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class _IdMap:
    """id -> row, looked up a whole array at a time.

    Dense mode: a table over [base, base + len(table)), -1 where absent; it is rebuilt around
    the live ids (capacity doubled) when an id falls outside, so monotonically growing SQLite
    ids with old ones retired keep it small. When the live ids are too sparse for a table
    (span > 8 x count + 65 536) it becomes a dict for good.
    """

    SLACK = 8
    MIN_SPAN = 1 << 16

    def __init__(self):
        self.base = 0
        self.table = np.empty(0, np.int64)
        self.d: dict | None = None

    def get(self, ids: np.ndarray) -> np.ndarray:
        if self.d is not None:
            g = self.d.get
            return np.fromiter((g(i, -1) for i in ids.tolist()), np.int64, count=len(ids))
        off = ids - self.base
        ok = (off >= 0) & (off < len(self.table))
        out = np.full(len(ids), -1, np.int64)
        out[ok] = self.table[off[ok]]
        return out

    def put(self, ids: np.ndarray, rows: np.ndarray, live_ids: np.ndarray) -> None:
        """Map ``ids`` to ``rows``; ``live_ids`` are all ids by row afterwards (for a rebuild)."""
        if not len(ids):
            return
        if self.d is not None:
            self.d.update(zip(ids.tolist(), rows.tolist()))
            return
        lo, hi = int(ids.min()), int(ids.max())
        if lo >= self.base and hi < self.base + len(self.table):
            self.table[ids - self.base] = rows
        else:
            self.rebuild(live_ids)

    def drop(self, ids: np.ndarray) -> None:
        if self.d is not None:
            for i in ids.tolist():
                self.d.pop(i, None)
        elif len(ids):
            self.table[ids - self.base] = -1

    def rebuild(self, live_ids: np.ndarray) -> None:
        count = len(live_ids)
        if not count:
            self.base, self.table, self.d = 0, np.empty(0, np.int64), None
            return
        lo, hi = int(live_ids.min()), int(live_ids.max())
        span = hi - lo + 1
        if self.d is not None or span > self.SLACK * count + self.MIN_SPAN:
            self.d = dict(zip(live_ids.tolist(), range(count)))
            self.table = np.empty(0, np.int64)
            return
        cap = max(2 * span, self.MIN_SPAN)
        table = np.full(cap, -1, np.int64)
        table[live_ids - lo] = np.arange(count, dtype=np.int64)
        self.base, self.table = lo, table

    def nbytes(self) -> int:
        return self.table.nbytes if self.d is None else 100 * len(self.d)


# ---------------------------------------------------------------------------------------------
# exact top-k bodies

def _top_sorted(s: np.ndarray, i: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Best k of each row of (scores, indices), sorted by score descending; -1 where -inf."""
    if s.shape[1] > k:
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        s = np.take_along_axis(s, part, axis=1)
        i = np.take_along_axis(i, part, axis=1)
    order = np.argsort(-s, axis=1, kind="stable")
    s = np.take_along_axis(s, order, axis=1)
    i = np.take_along_axis(i, order, axis=1)
    i[~np.isfinite(s)] = -1
    return s, i


def _pad(s: np.ndarray, i: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Widen (scores, indices) to k columns with -inf / -1."""
    if s.shape[1] >= k:
        return s, i
    ps = np.full((len(s), k), -np.inf, np.float32)
    pi = np.full((len(s), k), -1, np.int64)
    ps[:, :s.shape[1]] = s
    pi[:, :s.shape[1]] = i
    return ps, pi


def _np_topk(q: np.ndarray, v: np.ndarray, k: int, mask: np.ndarray | None = None,
             rows: np.ndarray | None = None):
    """Exact top-k inner products of each query against the rows of ``v``, or only the rows
    ``rows`` (gathered a cache-sized block at a time), or only those where ``mask`` is set.
    Returns (scores, row indices into v), each (M x min(k, candidates)), best first."""
    m = len(q)
    n = len(v) if rows is None else len(rows)
    kk = min(k, n)
    block = max(MIN_BLOCK, SCORE_BLOCK // max(1, m))  # scores of one block: at most 64 MiB
    if rows is not None:  # a 4 MiB gather stays in cache
        block = min(block, max(MIN_BLOCK // 8, GATHER_BLOCK // (4 * v.shape[1])))
    best_s = best_i = None
    for b0 in range(0, n, block):
        if rows is None:
            idx = np.arange(b0, min(n, b0 + block), dtype=np.int64)
            vb = v[b0:b0 + block]
        else:
            idx = rows[b0:b0 + block]
            vb = v[idx]
        if m * len(vb) * vb.shape[1] <= SINGLE_THREAD_MAX:
            # numpy's own loop, one thread: BLAS would wake its threads for a sub-millisecond
            # matvec and, on a busy machine, wait a scheduler slice (~8 ms) for one of them
            s = np.einsum("md,nd->mn", q, vb)
        else:
            s = q @ vb.T
        if mask is not None:
            s[:, ~mask[b0:b0 + block]] = -np.inf
        i = np.broadcast_to(idx, s.shape)
        if s.shape[1] > kk:
            part = np.argpartition(-s, kk - 1, axis=1)[:, :kk]
            s, i = np.take_along_axis(s, part, axis=1), np.take_along_axis(i, part, axis=1)
        if best_s is None:
            best_s, best_i = s, np.array(i)
        else:
            best_s, best_i = np.concatenate([best_s, s], 1), np.concatenate([best_i, i], 1)
    return _top_sorted(best_s, best_i, kk)


class _TorchRows:
    """A resident torch copy of the rows, kept in the same order (same swap-removes), searched
    with a matmul + torch.topk. fp16 on CUDA (the caller re-scores candidates in fp32)."""

    def __init__(self, dim: int, device: str, dtype=None):
        import torch  # noqa: PLC0415

        self.torch = torch
        self.dim = dim
        self.device = torch.device(device)
        self.dtype = dtype or (torch.float16 if self.device.type == "cuda" else torch.float32)
        self.approx = self.dtype != torch.float32
        self.name = f"torch-{self.device}-{str(self.dtype).replace('torch.', '')}"
        self.t = torch.empty((0, dim), dtype=self.dtype, device=self.device)

    def _reserve(self, n: int) -> None:
        cap = self.t.shape[0]
        if n > cap:
            new = self.torch.empty((max(n, 2 * cap, 1024), self.dim), dtype=self.dtype, device=self.device)
            new[:cap] = self.t
            self.t = new

    def write(self, start: int, vecs: np.ndarray) -> None:
        self._reserve(start + len(vecs))
        self.t[start:start + len(vecs)] = self.torch.from_numpy(vecs).to(self.device, self.dtype)

    def move(self, dst: np.ndarray, src: np.ndarray) -> None:
        d = self.torch.from_numpy(dst).to(self.device)
        s = self.torch.from_numpy(src).to(self.device)
        self.t[d] = self.t[s]

    def truncate(self, n: int) -> None:
        pass  # rows >= n are never read

    def reset(self, vecs: np.ndarray) -> None:
        self.t = self.torch.empty((0, self.dim), dtype=self.dtype, device=self.device)
        if len(vecs):
            self.write(0, vecs)

    def topk(self, q: np.ndarray, host: np.ndarray, n: int, k: int, rows=None, mask=None):
        torch = self.torch
        with torch.no_grad():
            qt = torch.from_numpy(q).to(self.device, self.dtype)
            if rows is not None:
                v = self.t.index_select(0, torch.from_numpy(rows).to(self.device))
            else:
                v = self.t[:n]
            cols = v.shape[0]
            kk = min(k, cols)
            mt = None if mask is None else torch.from_numpy(~mask[:cols]).to(self.device)
            step = max(1, (1 << 26) // max(cols, 1))
            ss, ii = [], []
            for q0 in range(0, len(qt), step):
                s = qt[q0:q0 + step] @ v.T
                if mt is not None:
                    s.masked_fill_(mt, float("-inf"))
                s, i = torch.topk(s, kk, dim=1)
                ss.append(s.float())
                ii.append(i)
            s = torch.cat(ss).cpu().numpy()
            i = torch.cat(ii).cpu().numpy().astype(np.int64)
        if rows is not None:
            i = rows[i]
        i[~np.isfinite(s)] = -1
        return s, i


class _FaissGpuRows:
    """faiss-gpu exact body: a GpuIndexFlatIP holding the rows in the same order. Appends are
    mirrored; a swap-remove marks it stale and the next search re-uploads the rows. Subsets
    and masked searches run on the host (numpy)."""

    approx = False
    name = "faiss-gpu"

    def __init__(self, dim: int):
        faiss = _faiss()
        self.dim = dim
        self.res = faiss.StandardGpuResources()
        self.index = faiss.GpuIndexFlatIP(self.res, dim)
        self.stale = False
        self.lock = threading.Lock()  # GPU resources are not thread-safe; readers share the space

    def write(self, start: int, vecs: np.ndarray) -> None:
        if not self.stale and start == self.index.ntotal:
            self.index.add(np.ascontiguousarray(vecs))
        else:
            self.stale = True

    def move(self, dst, src) -> None:
        self.stale = True

    def truncate(self, n: int) -> None:
        if n != self.index.ntotal:
            self.stale = True

    def reset(self, vecs: np.ndarray) -> None:
        self.index.reset()
        self.stale = False
        if len(vecs):
            self.index.add(np.ascontiguousarray(vecs))

    def topk(self, q, host, n, k, rows=None, mask=None):
        if rows is not None:
            return _np_topk(q, host, k, rows=rows)
        if mask is not None:
            return _np_topk(q, host[:n], k, mask)
        with self.lock:
            if self.stale or self.index.ntotal != n:
                self.reset(host[:n])
            s, i = self.index.search(q, min(k, n))
        i = i.astype(np.int64)
        i[~np.isfinite(s)] = -1
        return s, i


def _make_backend(device: str, dim: int, torch_dtype=None):
    """None (numpy on the host) or a device body for exact search."""
    dev = str(device or "cpu")
    if dev == "cpu":
        return None
    if dev == "torch-cpu":
        return _TorchRows(dim, "cpu", torch_dtype)
    if dev == "auto" or dev.startswith("cuda"):
        from ..device import cuda_available  # noqa: PLC0415

        if cuda_available():
            return _TorchRows(dim, "cuda" if dev == "auto" else dev, torch_dtype)
        try:
            import faiss  # noqa: PLC0415

            faiss_gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
        except ImportError:
            faiss_gpus = 0
        if faiss_gpus > 0:
            return _FaissGpuRows(dim)
        if dev == "auto":
            return None
        raise VectorError(f"vector device {dev!r}: neither a CUDA torch nor faiss-gpu is available")
    raise VectorError(f"unknown vector device {dev!r} (expected cpu, cuda, cuda:N, auto or torch-cpu)")


# ---------------------------------------------------------------------------------------------
# ANN index

class _Ann:
    """A faiss ANN index whose labels are insertion positions, with label -> id and a bitmap
    of live labels (removed ones are tombstones until the next rebuild)."""

    def __init__(self, kind: str, dim: int, index, nlist: int = 0):
        self.kind = kind
        self.dim = dim
        self.index = index
        self.nlist = nlist
        self.label_id = np.empty(0, np.int64)
        self.bits = np.empty(0, np.uint8)
        self.ntotal = 0
        self.tombstones = 0
        self.n_built = 0

    @classmethod
    def create(cls, kind: str, dim: int, train: np.ndarray | None = None, nlist: int = 0) -> "_Ann":
        faiss = _faiss()
        if kind == "hnsw":
            index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
            return cls("hnsw", dim, index)
        if kind != "ivf":
            raise ValueError(kind)
        nlist = int(min(nlist or ivf_nlist(len(train)), len(train)))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.spherical = True
        index.cp.niter = IVF_NITER
        index.cp.max_points_per_centroid = 64
        index.cp.seed = 1234
        index.train(train)
        ann = cls("ivf", dim, index, nlist)
        ann._quantizer = quantizer  # the IVF index borrows it
        return ann

    def _grow(self, n: int) -> None:
        if n > len(self.label_id):
            cap = max(n, 2 * len(self.label_id), 1024)
            self.label_id = np.concatenate([self.label_id, np.full(cap - len(self.label_id), -1, np.int64)])
        nb = (n + 7) // 8
        if nb > len(self.bits):
            cap = max(nb, 2 * len(self.bits), 128)
            self.bits = np.concatenate([self.bits, np.zeros(cap - len(self.bits), np.uint8)])

    def add(self, vecs: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Index vecs (rows of ids); returns their labels."""
        m = len(vecs)
        start = self.ntotal
        self.index.add(np.ascontiguousarray(vecs, np.float32))
        self._grow(start + m)
        labels = np.arange(start, start + m, dtype=np.int64)
        self.label_id[labels] = ids
        np.bitwise_or.at(self.bits, labels >> 3, (1 << (labels & 7)).astype(np.uint8))
        self.ntotal = start + m
        return labels

    def kill(self, labels: np.ndarray) -> None:
        labels = labels[labels >= 0]
        if not len(labels):
            return
        self.label_id[labels] = -1
        np.bitwise_and.at(self.bits, labels >> 3, (~(1 << (labels & 7))).astype(np.uint8))
        self.tombstones += len(labels)

    def search(self, q: np.ndarray, k: int, *, label_mask: np.ndarray | None, ef_search: int,
               nprobe: int | None):
        """Top-k (scores, labels) among the labels set in ``label_mask`` (None: all live ones).
        A filtered search looks wider (efSearch / nprobe x min(4, 1/sqrt(selectivity))): its
        answers rank lower among all vectors than an unfiltered search's."""
        faiss = _faiss()
        widen = 1.0
        if label_mask is not None:
            live = max(1, self.ntotal - self.tombstones)
            widen = min(4.0, 1.0 / math.sqrt(max(int(label_mask.sum()), 1) / live))
        if self.kind == "hnsw":
            params = faiss.SearchParametersHNSW()
            params.efSearch = int(max(ef_search * widen, k))
        else:
            params = faiss.SearchParametersIVF()
            params.nprobe = int(min(self.nlist, round((nprobe or ivf_nprobe(self.nlist)) * widen)))
        bits = None
        if label_mask is not None:
            bits = np.packbits(label_mask, bitorder="little")
        elif self.tombstones:
            bits = self.bits
        if bits is not None:
            sel = faiss.IDSelectorBitmap(len(bits), faiss.swig_ptr(bits))
            params.sel = sel  # `sel` and `bits` stay referenced until the search returns
        s, i = self.index.search(np.ascontiguousarray(q), int(k), params=params)
        return s, i


# ---------------------------------------------------------------------------------------------

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
        self._backend = _make_backend(self.device, self.dim, torch_dtype)
        be = self._backend
        on_gpu = isinstance(be, _FaissGpuRows) or (isinstance(be, _TorchRows) and be.device.type == "cuda")
        idx = self.cfg.index
        self._ann_kind = None if idx == "flat" else ("hnsw" if idx == "auto" else idx)
        if idx == "auto" and on_gpu:
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
        self._map = _IdMap()
        self._ann: _Ann | None = None
        # concurrency
        self._mut = threading.RLock()
        self._rw = _RWLock()
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
                raise VectorError(f"vector space {self.name!r}: ids not present: {_fmt_ids(ids[rows < 0])}")
            return self._vecs[rows].copy()

    def stats(self) -> dict:
        with self._rw.read():
            ann = self._ann
            return {
                "name": self.name, "dim": self.dim, "n": self._n, "model_id": self.model_id,
                "device": self.device,
                "exact_body": "numpy" if self._backend is None else self._backend.name,
                "index": self.index_kind, "index_setting": self.cfg.index,
                "ann_ntotal": 0 if ann is None else ann.ntotal,
                "tombstones": 0 if ann is None else ann.tombstones,
                "nlist": None if ann is None or ann.kind != "ivf" else ann.nlist,
                "building": self._building,
                "vector_bytes": self._n * self.dim * 4,
                "idmap_bytes": self._map.nbytes(),
            }

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
            raise self._err(f"{what} do not fit in int64: {_fmt_ids(a[a > np.iinfo(np.int64).max])}")
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
                            f"{_fmt_ids(names[bad])}")
        scale = np.abs(a).max(axis=1) if a.shape[1] else np.zeros(len(a), np.float32)
        zero = ~(scale > 0)
        if zero.any():
            raise self._err(f"{what} of zero norm cannot be normalized, at {kind} {_fmt_ids(names[zero])}")
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
            raise self._err(f"ids must be >= 0 (-1 pads search results): {_fmt_ids(ids[ids < 0])}")
        uniq, counts = np.unique(ids, return_counts=True)
        if len(uniq) != len(ids):
            raise self._err(f"duplicate ids in one add: {_fmt_ids(uniq[counts > 1])}")
        v = self._as_vecs(a, "vectors", labels=ids)
        if not len(ids):
            return
        with self._mut:
            if self._n:
                present = self._map.get(ids) >= 0
                if present.any():
                    raise self._err(f"ids already present: {_fmt_ids(ids[present])}")
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
                if self._backend is not None:
                    self._backend.write(n, v)
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
                    if self._backend is not None:
                        self._backend.move(holes, movers)
                    self._map.put(self._ids[holes], holes, self._ids[:new_n])
                self._n = new_n
                if self._backend is not None:
                    self._backend.truncate(new_n)
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

    def build_index(self) -> None:
        """Build (or rebuild) the ANN index now, in this thread, whatever the size."""
        if self._ann_kind is None:
            return
        self.wait_index()
        with self._mut:
            if self._building or not self._n:
                return
            self._building = True
        try:
            self._build()
        finally:
            with self._mut:
                self._building = False

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
        ann = _Ann.create(kind, self.dim, train, nlist)
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
            es, er = _pad(*self._exact(q[short], k), k)
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
            es, er = _pad(*self._exact(q[short], k, mask=mask), k)
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
        return _pad(*_top_sorted(s, ids, kk), k)

    def _exact(self, q, k, rows=None, mask=None):
        """Exact (scores, rows) over all rows, ``rows``, or the rows in ``mask``."""
        n = self._n
        be = self._backend
        if be is None:
            if rows is not None:
                return _np_topk(q, self._vecs, k, rows=rows)
            return _np_topk(q, self._vecs[:n], k, mask)
        if not be.approx:
            return be.topk(q, self._vecs, n, k, rows, mask)
        # reduced precision on the device: over-fetch, then re-score the candidates in fp32
        cols = n if rows is None else len(rows)
        kk = min(cols, 2 * k + 8)
        _, cand = be.topk(q, self._vecs, n, kk, rows, mask)
        v = self._vecs[np.maximum(cand, 0)]
        s = np.einsum("mkd,md->mk", v, q).astype(np.float32)
        s[cand < 0] = -np.inf
        return _top_sorted(s, cand, min(k, cols))

    # -- snapshots -----------------------------------------------------------------------------
    def save(self, path, seq: int) -> None:
        """Write a snapshot covering change-log position ``seq`` to ``path`` atomically (a
        temporary file, fsynced, renamed into place). Mutations wait; searches do not."""
        path = Path(path)
        if isinstance(seq, bool) or not isinstance(seq, (int, np.integer)) or seq < 0:
            raise self._err(f"snapshot seq must be an integer >= 0, got {seq!r}")
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        with self._mut:
            n = self._n
            ann = self._ann
            sections: list[dict] = []
            try:
                with open(tmp, "wb") as f:
                    f.write(_MAGIC)

                    def put(name: str, arr: np.ndarray) -> None:
                        mv = memoryview(np.ascontiguousarray(arr)).cast("B")
                        sections.append({"name": name, "offset": f.tell(), "nbytes": mv.nbytes,
                                         "crc32": zlib.crc32(mv)})
                        f.write(mv)

                    put("ids", self._ids[:n])
                    put("vectors", self._vecs[:n])
                    meta = None
                    if ann is not None:
                        put("row_labels", self._label[:n])
                        put("label_ids", ann.label_id[:ann.ntotal])
                        off, crc = f.tell(), [0]

                        def write(b: bytes) -> int:
                            crc[0] = zlib.crc32(b, crc[0])
                            f.write(b)
                            return len(b)

                        faiss = _faiss()
                        faiss.write_index(ann.index, faiss.PyCallbackIOWriter(write))
                        sections.append({"name": "faiss", "offset": off, "nbytes": f.tell() - off,
                                         "crc32": crc[0]})
                        meta = {"kind": ann.kind, "ntotal": ann.ntotal, "tombstones": ann.tombstones,
                                "n_built": ann.n_built, "nlist": ann.nlist}
                    header = {"format": _FORMAT, "name": self.name, "dim": self.dim, "model_id": self.model_id,
                              "kind": self.cfg.index, "n": n, "seq": int(seq), "saved_at": time.time(),
                              "ann": meta, "sections": sections}
                    hb = json.dumps(header).encode()
                    f.write(hb)
                    f.write(_TRAILER.pack(len(hb), _END))
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException as e:
                try:
                    tmp.unlink()
                except OSError:
                    pass
                if isinstance(e, OSError):
                    raise VectorError(f"{path}: cannot write vector snapshot: {e}") from e
                raise
        try:  # make the rename durable
            fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            pass

    @staticmethod
    def _read_header(f, path: Path) -> dict:
        size = os.fstat(f.fileno()).st_size
        if size < len(_MAGIC) + _TRAILER.size:
            raise VectorError(f"{path}: not a vector snapshot (truncated: {size} bytes)")
        if f.read(len(_MAGIC)) != _MAGIC:
            raise VectorError(f"{path}: not a vector snapshot (bad magic)")
        f.seek(size - _TRAILER.size)
        hlen, end = _TRAILER.unpack(f.read(_TRAILER.size))
        if end != _END:
            raise VectorError(f"{path}: vector snapshot truncated or corrupt (no end marker)")
        hstart = size - _TRAILER.size - hlen
        if hlen > size or hstart < len(_MAGIC):
            raise VectorError(f"{path}: vector snapshot corrupt (bad header length {hlen})")
        f.seek(hstart)
        try:
            h = json.loads(f.read(hlen))
        except ValueError as e:
            raise VectorError(f"{path}: vector snapshot corrupt (header: {e})") from None
        try:
            if h["format"] != _FORMAT:
                raise VectorError(f"{path}: vector snapshot format {h['format']} (this engine reads {_FORMAT})")
            n, dim = int(h["n"]), int(h["dim"])
            int(h["seq"])
            if n < 0 or dim < 1:
                raise ValueError("bad n or dim")
            for s in h["sections"]:
                if s["offset"] < len(_MAGIC) or s["nbytes"] < 0 or s["offset"] + s["nbytes"] > hstart:
                    raise ValueError(f"section {s['name']} outside the file")
        except VectorError:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise VectorError(f"{path}: vector snapshot corrupt (header: {e!r})") from None
        return h

    @classmethod
    def snapshot_info(cls, path) -> dict:
        """The JSON header of a snapshot (seq, dim, model_id, kind, n, ...), read cheaply."""
        path = Path(path)
        try:
            with open(path, "rb") as f:
                return cls._read_header(f, path)
        except OSError as e:
            raise VectorError(f"{path}: cannot read vector snapshot: {e}") from None

    @classmethod
    def load(cls, path, cfg: VectorConfig | None = None, *, device: str = "cpu", name: str | None = None,
             dim: int | None = None, model_id: str | None = None,
             background_build: bool = True) -> tuple["VectorSpace", int]:
        """Read a snapshot written by ``save``. Returns (space, seq). VectorError naming the
        file when it is missing, truncated or corrupt, or when ``name``/``dim``/``model_id``
        are given and differ from the snapshot's."""
        path = Path(path)
        try:
            with open(path, "rb") as f:
                return cls._load(f, path, cfg, device, name, dim, model_id, background_build)
        except OSError as e:
            raise VectorError(f"{path}: cannot read vector snapshot: {e}") from None
        except (ValueError, TypeError, KeyError, IndexError, RuntimeError, struct.error) as e:
            raise VectorError(f"{path}: vector snapshot corrupt ({type(e).__name__}: {e})") from None
        except MemoryError:
            raise VectorError(f"{path}: vector snapshot too large for memory (or corrupt sizes)") from None

    @classmethod
    def _load(cls, f, path, cfg, device, name, dim, model_id, background_build):
        h = cls._read_header(f, path)
        if dim is not None and int(h["dim"]) != int(dim):
            raise VectorError(f"{path}: snapshot holds {h['dim']}-d vectors, expected {dim}")
        if model_id is not None and h.get("model_id", "") != model_id:
            raise VectorError(f"{path}: snapshot was made with model {h.get('model_id')!r}, expected {model_id!r}")
        if name is not None and h.get("name") != name:
            raise VectorError(f"{path}: snapshot is of space {h.get('name')!r}, expected {name!r}")
        sec = {s["name"]: s for s in h["sections"]}
        n, d = int(h["n"]), int(h["dim"])

        def corrupt(why: str) -> VectorError:
            return VectorError(f"{path}: vector snapshot corrupt ({why})")

        def read(key: str, shape, dtype) -> np.ndarray:
            if key not in sec:
                raise corrupt(f"no {key} section")
            s = sec[key]
            need = math.prod(shape) * np.dtype(dtype).itemsize
            if need != s["nbytes"]:  # section sizes are bounded by the file's: allocation is safe
                raise corrupt(f"{key}: {s['nbytes']} bytes, expected {need}")
            arr = np.empty(shape, dtype)
            f.seek(s["offset"])
            mv = memoryview(arr).cast("B")
            got = f.readinto(mv)
            if got != arr.nbytes:
                raise corrupt(f"{key}: truncated")
            if zlib.crc32(mv) != s["crc32"]:
                raise corrupt(f"{key}: checksum mismatch")
            return arr

        space = cls(h.get("name") or name or path.stem, d, cfg, device=device, model_id=h.get("model_id", ""),
                    background_build=background_build)
        ids = read("ids", (n,), np.int64)
        vecs = read("vectors", (n, d), np.float32)
        if n:
            if (ids < 0).any() or len(np.unique(ids)) != n:
                raise corrupt("negative or duplicate ids")
            if not np.isfinite(vecs).all():
                raise corrupt("non-finite vectors")
        ann = None
        meta = h.get("ann")
        if meta and n and meta.get("kind") == space._ann_kind:
            ann = cls._load_ann(f, path, sec, meta, n, d, ids, read, corrupt)
        space._vecs, space._ids = vecs, ids
        space._seqno = np.arange(n, dtype=np.int64)
        space._next_seqno = n
        space._label = ann[1] if ann else np.full(n, -1, np.int64)
        space._n = n
        space._map.rebuild(ids)
        if space._backend is not None:
            space._backend.reset(vecs)
        if ann:
            space._ann = ann[0]
        with space._mut:
            build = space._claim_build()
        if build:
            space._run_build()
        return space, int(h["seq"])

    @staticmethod
    def _load_ann(f, path, sec, meta, n, d, ids, read, corrupt):
        try:
            ntotal = int(meta["ntotal"])
            kind = meta["kind"]
        except (KeyError, TypeError, ValueError) as e:
            raise corrupt(f"ann metadata: {e!r}") from None
        labels = read("row_labels", (n,), np.int64)
        label_id = read("label_ids", (ntotal,), np.int64)
        if "faiss" not in sec:
            raise corrupt("no faiss section")
        s = sec["faiss"]
        f.seek(s["offset"])  # verify the checksum before faiss parses a byte of it
        crc, left = 0, s["nbytes"]
        while left:
            b = f.read(min(left, 1 << 22))
            if not b:
                raise corrupt("faiss: truncated")
            crc = zlib.crc32(b, crc)
            left -= len(b)
        if crc != s["crc32"]:
            raise corrupt("faiss: checksum mismatch")
        f.seek(s["offset"])
        left = [s["nbytes"]]

        def reader(size: int) -> bytes:
            b = f.read(min(size, left[0]))
            left[0] -= len(b)
            return b

        faiss = _faiss()
        try:
            index = faiss.read_index(faiss.PyCallbackIOReader(reader))
        except RuntimeError as e:
            raise corrupt(f"faiss: {e}") from None
        if index.d != d or index.ntotal != ntotal:
            raise corrupt(f"faiss index is {index.d}-d with {index.ntotal} vectors, expected {d}-d with {ntotal}")
        if (labels < 0).any() or (labels >= ntotal).any() or not np.array_equal(label_id[labels], ids):
            raise corrupt("ann labels do not match the ids")
        ann = _Ann(kind, d, index, int(meta.get("nlist") or 0))
        if kind == "ivf":
            ann.nlist = int(faiss.extract_index_ivf(index).nlist)
        ann._grow(ntotal)
        ann.ntotal = ntotal
        ann.label_id[:ntotal] = -1
        ann.label_id[labels] = ids
        live = np.zeros(ntotal, bool)
        live[labels] = True
        ann.bits[:] = 0
        packed = np.packbits(live, bitorder="little")
        ann.bits[:len(packed)] = packed
        ann.tombstones = ntotal - n
        ann.n_built = int(meta.get("n_built") or n)
        return ann, labels
