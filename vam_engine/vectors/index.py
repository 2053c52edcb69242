"""The parts a vector space (vectors/space.py) is built of: the ANN index (faiss HNSW or IVF
whose labels are insertion positions, removed rows tombstoned until a rebuild), the id -> row
map, and the readers-writer lock searches and mutations share."""
from __future__ import annotations

import math
import threading
from contextlib import contextmanager

import numpy as np

from .bodies import faiss_module

# ANN parameters (benchmarks/bench_search.py measures them on 512-d clustered vectors)
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
IVF_NITER = 10


def ivf_nlist(n: int) -> int:
    """Lists of an IVF index over n vectors: ~4 sqrt(n), at least 39 training points each."""
    return int(max(1, min(round(4 * math.sqrt(max(n, 1))), n // 39)))


def ivf_nprobe(nlist: int) -> int:
    """Default lists probed per query (recall >= 0.95 in bench_search.py on clustered data)."""
    return int(max(1, min(nlist, max(16, round(nlist / 64)))))


def format_ids(ids, limit: int = 10) -> str:
    ids = [int(i) for i in np.asarray(ids).ravel()[: limit + 1]]
    more = len(ids) > limit
    return "[" + ", ".join(map(str, ids[:limit])) + (", ...]" if more else "]")


class RWLock:
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


class IdMap:
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

    @property
    def kind(self) -> str:
        """"table" (dense ids) or "dict" (sparse ones)."""
        return "table" if self.d is None else "dict"

    def nbytes(self) -> int:
        return self.table.nbytes if self.d is None else 100 * len(self.d)


# ---------------------------------------------------------------------------------------------
# ANN index

class Ann:
    """A faiss ANN index whose labels are insertion positions, with label -> id and a bitmap
    of live labels (removed ones are tombstones until the next rebuild)."""

    def __init__(self, kind: str, dim: int, index, nlist: int = 0, quantizer=None):
        self.kind = kind
        self.dim = dim
        self.index = index
        self.nlist = nlist
        self.quantizer = quantizer  # an IVF index borrows it: kept alive with the index
        self.label_id = np.empty(0, np.int64)
        self.bits = np.empty(0, np.uint8)
        self.ntotal = 0
        self.tombstones = 0
        self.n_built = 0

    @classmethod
    def create(cls, kind: str, dim: int, train: np.ndarray | None = None, nlist: int = 0) -> "Ann":
        faiss = faiss_module()
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
        return cls("ivf", dim, index, nlist, quantizer)

    @classmethod
    def restore(cls, kind: str, dim: int, index, nlist: int, labels: np.ndarray, ids: np.ndarray,
                ntotal: int, n_built: int) -> "Ann":
        """An index read back from a snapshot: ``ntotal`` labels, of which ``labels`` are the
        live rows' (holding ``ids``), the others tombstones."""
        ann = cls(kind, dim, index, nlist)
        ann._grow(ntotal)
        ann.ntotal = ntotal
        ann.label_id[:ntotal] = -1
        ann.label_id[labels] = ids
        live = np.zeros(ntotal, bool)
        live[labels] = True
        packed = np.packbits(live, bitorder="little")
        ann.bits[:len(packed)] = packed
        ann.tombstones = ntotal - len(labels)
        ann.n_built = n_built
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
        faiss = faiss_module()
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
