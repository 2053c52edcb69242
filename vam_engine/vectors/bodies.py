"""Exact top-k bodies of a vector space (vectors/space.py): numpy over the host rows, and the
device mirrors of those rows (a resident torch tensor, or faiss-gpu), behind one interface
(``RowsBody``), chosen once when the space is made (``make_rows_body``). The device rule itself
(``resolve_rows_device``) is the one place that decides where rows live: the event forest's node
index (memory/forest/) asks it too."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..errors import VectorError
from ..numerics import SINGLE_THREAD_MAX

SCORE_BLOCK = 1 << 24             # exact scans: scores computed per block (floats)
GATHER_BLOCK = 1 << 22            # exact scans of a row subset: bytes gathered per block
MIN_BLOCK = 2048


def faiss_module():
    try:
        import faiss  # noqa: PLC0415
    except ImportError as e:  # pragma: no cover - faiss-cpu is a dependency of the vector memory
        raise VectorError(f"the vector memory needs faiss (pip install faiss-cpu): {e}") from None
    return faiss


class RowsBody(Protocol):
    """What a space asks of its exact-search body. The host rows (``host``, float32, contiguous)
    are the space's own copy; a body mirrors them in the same order, told of every change:
    appends (``write``), swap-removes (``move`` then ``truncate``), a whole new set (``reset``),
    rows overwritten in place (``put_rows``: the event forest updates its nodes' rows)."""

    name: str       # for stats(): "numpy", "torch-cuda:0-float16", "faiss-gpu", ...
    approx: bool    # scores in reduced precision: the space re-scores candidates in float32
    on_device: bool  # searches run on a GPU (the space then prefers exact search to an ANN index)

    def write(self, start: int, vecs: np.ndarray) -> None: ...
    def put_rows(self, rows: np.ndarray, vecs: np.ndarray) -> None: ...
    def move(self, dst: np.ndarray, src: np.ndarray) -> None: ...
    def truncate(self, n: int) -> None: ...
    def reset(self, vecs: np.ndarray) -> None: ...

    def topk(self, q: np.ndarray, host: np.ndarray, n: int, k: int, rows=None, mask=None):
        """Exact (scores, row indices) of the top k of the first ``n`` rows, of ``rows`` only, or
        of the rows where ``mask`` is set; each (M x min(k, candidates)), best first."""


# ---------------------------------------------------------------------------------------------
# exact top-k bodies

def top_sorted(s: np.ndarray, i: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
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


def pad_rows(s: np.ndarray, i: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Widen (scores, indices) to k columns with -inf / -1."""
    if s.shape[1] >= k:
        return s, i
    ps = np.full((len(s), k), -np.inf, np.float32)
    pi = np.full((len(s), k), -1, np.int64)
    ps[:, :s.shape[1]] = s
    pi[:, :s.shape[1]] = i
    return ps, pi


def numpy_topk(q: np.ndarray, v: np.ndarray, k: int, mask: np.ndarray | None = None,
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
    return top_sorted(best_s, best_i, kk)


class NumpyRows:
    """The host body: numpy over the space's own rows (no mirror to keep)."""

    name = "numpy"
    approx = False
    on_device = False

    def write(self, start: int, vecs: np.ndarray) -> None:
        pass

    def put_rows(self, rows: np.ndarray, vecs: np.ndarray) -> None:
        pass

    def move(self, dst: np.ndarray, src: np.ndarray) -> None:
        pass

    def truncate(self, n: int) -> None:
        pass

    def reset(self, vecs: np.ndarray) -> None:
        pass

    def topk(self, q, host, n, k, rows=None, mask=None):
        return host_topk(q, host, n, k, rows, mask)


def host_topk(q, host, n, k, rows=None, mask=None):
    """``RowsBody.topk`` by numpy over the host rows."""
    if rows is not None:
        return numpy_topk(q, host, k, rows=rows)
    return numpy_topk(q, host[:n], k, mask)


class TorchRows:
    """A resident torch copy of the rows, kept in the same order (same swap-removes), searched
    with a matmul + torch.topk. fp16 on CUDA (the caller re-scores candidates in fp32) unless
    ``dtype`` says otherwise (a torch dtype or its name, e.g. "float32")."""

    def __init__(self, dim: int, device: str, dtype=None):
        import torch  # noqa: PLC0415

        self.torch = torch
        self.dim = dim
        self.device = torch.device(device)
        if isinstance(dtype, str):
            named = getattr(torch, dtype, None)
            if not isinstance(named, torch.dtype):
                raise VectorError(f"torch rows: unknown dtype name {dtype!r}")
            dtype = named
        self.dtype = dtype or (torch.float16 if self.device.type == "cuda" else torch.float32)
        self.approx = self.dtype != torch.float32
        self.on_device = self.device.type == "cuda"
        self.name = f"torch-{self.device}-{str(self.dtype).replace('torch.', '')}"
        self.t = torch.empty((0, dim), dtype=self.dtype, device=self.device)

    def _reserve(self, n: int) -> None:
        cap = self.t.shape[0]
        if n > cap:
            new = self.torch.empty((max(n, 2 * cap, 1024), self.dim), dtype=self.dtype, device=self.device)
            new[:cap] = self.t
            self.t = new

    def upload(self, a: np.ndarray, dtype=None):
        """``a`` as a tensor on this body's device (in ``dtype``, else its own): on CUDA through
        pinned memory without blocking the host, which never waits on the device for it (the
        caching host allocator keeps the staging block until the copy is done)."""
        t = self.torch.from_numpy(np.array(a, copy=True, order="C"))
        if self.device.type == "cuda":
            t = t.pin_memory()
        return t.to(self.device, dtype or t.dtype, non_blocking=True)

    def write(self, start: int, vecs: np.ndarray) -> None:
        self._reserve(start + len(vecs))
        self.t[start:start + len(vecs)] = self.torch.from_numpy(vecs).to(self.device, self.dtype)

    def put_rows(self, rows: np.ndarray, vecs: np.ndarray) -> None:
        """Overwrite rows ``rows`` (any order, beyond the current end too) with ``vecs``."""
        if len(rows) == 0:
            return
        self._reserve(int(rows.max()) + 1)
        self.t.index_copy_(0, self.upload(rows.astype(np.int64)), self.upload(vecs, self.dtype))

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


class FaissGpuRows:
    """faiss-gpu exact body: a GpuIndexFlatIP holding the rows in the same order. Appends are
    mirrored; a swap-remove marks it stale and the next search re-uploads the rows. Subsets
    and masked searches run on the host (numpy)."""

    approx = False
    on_device = True
    name = "faiss-gpu"

    def __init__(self, dim: int):
        faiss = faiss_module()
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

    def put_rows(self, rows, vecs) -> None:
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
        if rows is not None or mask is not None:
            return host_topk(q, host, n, k, rows, mask)
        with self.lock:
            if self.stale or self.index.ntotal != n:
                self.reset(host[:n])
            s, i = self.index.search(q, min(k, n))
        i = i.astype(np.int64)
        i[~np.isfinite(s)] = -1
        return s, i


@dataclass(frozen=True)
class RowsDevice:
    """Where rows live and exact searches run, as ``resolve_rows_device`` decided it: "numpy"
    (the host), "torch" (a resident tensor on ``torch_device``) or "faiss-gpu"."""

    kind: str
    torch_device: str | None = None

    def body(self, dim: int, torch_dtype=None) -> RowsBody:
        if self.kind == "numpy":
            return NumpyRows()
        if self.kind == "torch":
            return TorchRows(dim, self.torch_device, torch_dtype)
        return FaissGpuRows(dim)


def resolve_rows_device(device: str) -> RowsDevice:
    """The device rule of every row store: numpy on the host ("cpu"), torch ("cuda", "cuda:N",
    "torch-cpu"), faiss-gpu (CUDA without a CUDA torch); "auto" takes a GPU when there is one."""
    dev = str(device or "cpu")
    if dev == "cpu":
        return RowsDevice("numpy")
    if dev == "torch-cpu":
        return RowsDevice("torch", "cpu")
    if dev == "auto" or dev.startswith("cuda"):
        from ..device import cuda_available  # noqa: PLC0415

        if cuda_available():
            return RowsDevice("torch", "cuda" if dev == "auto" else dev)
        try:
            import faiss  # noqa: PLC0415

            faiss_gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
        except ImportError:
            faiss_gpus = 0
        if faiss_gpus > 0:
            return RowsDevice("faiss-gpu")
        if dev == "auto":
            return RowsDevice("numpy")
        raise VectorError(f"vector device {dev!r}: neither a CUDA torch nor faiss-gpu is available")
    raise VectorError(f"unknown vector device {dev!r} (expected cpu, cuda, cuda:N, auto or torch-cpu)")


def make_rows_body(device: str, dim: int, torch_dtype=None) -> RowsBody:
    """The exact-search body for ``device`` (``resolve_rows_device``'s rule)."""
    return resolve_rows_device(device).body(dim, torch_dtype)
