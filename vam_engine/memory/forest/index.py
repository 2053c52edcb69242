"""Vector side of the event forest: node embeddings (unit vectors, children's weighted mean
directions) and each camera's retrieval matrix with its greedy lineage-pruned top-k, on the host
or mirrored on a torch device (forest/device.py); and the small helpers forest/tree.py applies
to nodes (copies handed out, keyframes spread in time, text clipped).

Where the matrices live is decided once, when the forest is made, by the vector spaces' device
rule (vectors/bodies.py ``resolve_rows_device``): "numpy" keeps them on the host only; "torch"
(CUDA, or "torch-cpu") mirrors each camera's rows in a float32 tensor and retrieval runs there;
faiss-gpu (CUDA without a CUDA torch) offers only a top-k, and the greedy needs every node's
score, so the forest then stays on the host."""
from __future__ import annotations

import bisect
import math
from dataclasses import replace

import numpy as np

from ...numerics import SINGLE_THREAD_MAX, unit
from ...vectors import RowsDevice
from ..records import ForestNode


def frozen_unit(v, dim: int | None, what: str) -> np.ndarray:
    """``v`` as a read-only float32 unit vector (shared by nodes and indexes, never mutated)."""
    a = unit(v, what, dim=dim)
    a.flags.writeable = False
    return a


def mean_direction(ea: np.ndarray, na: int, eb: np.ndarray, nb: int) -> np.ndarray:
    """n-weighted normalized mean of two unit vectors. Two exactly opposite halves average to
    nothing: then the larger (earlier on a tie) child's direction stands for the node."""
    m = ea * np.float32(na) + eb * np.float32(nb)
    norm = math.sqrt(float(m @ m))
    if norm < 1e-6 * (na + nb):
        return ea if na >= nb else eb
    m = (m / norm).astype(np.float32)
    m.flags.writeable = False
    return m


class CameraIndex:
    """One camera's nodes as contiguous arrays for retrieval: row r holds a node's current or
    placeholder embedding, its id, t_end and leaf-ordinal range. Rows are only appended (a
    camera loses nodes only by being removed or rebuilt as a whole). With a ``mirror``
    (forest/device.py ``CameraMirror``) the rows are copied to a device, the rows changed since
    the last retrieval at the start of the next one, and retrieval runs there; these host
    arrays stay the truth (for the check, node_embeddings and reloads)."""

    def __init__(self, dim: int, mirror=None):
        cap = 64
        self.mirror = mirror
        self.unsynced: set[int] = set()   # rows the mirror has not seen since they changed
        self.n = 0
        self.emb = np.zeros((cap, dim), np.float32)
        self.ids = np.zeros(cap, np.int64)
        self.t_end = np.zeros(cap, np.float64)
        self.lo = np.zeros(cap, np.int64)
        self.hi = np.zeros(cap, np.int64)
        self.row: dict[int, int] = {}

    def _grow(self) -> None:
        cap = 2 * len(self.ids)
        for name in ("emb", "ids", "t_end", "lo", "hi"):
            old = getattr(self, name)
            new = np.zeros((cap,) + old.shape[1:], old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def put(self, node: ForestNode, eff: np.ndarray) -> None:
        r = self.row.get(node.node_id)
        if r is None:
            if self.n == len(self.ids):
                self._grow()
            r = self.n
            self.n += 1
            self.row[node.node_id] = r
            self.ids[r] = node.node_id
        self.emb[r] = eff
        self.t_end[r] = node.t_end
        self.lo[r] = node.leaf_lo
        self.hi[r] = node.leaf_hi
        if self.mirror is not None:
            self.unsynced.add(r)

    def eff(self, node_id: int) -> np.ndarray:
        return self.emb[self.row[node_id]]

    def sync_mirror(self) -> None:
        """Copy the rows changed since the last sync to the mirror (one batch)."""
        if self.mirror is None or not self.unsynced and self.mirror.n == self.n:
            return
        rows = np.fromiter(sorted(self.unsynced), np.int64, len(self.unsynced))
        meta = np.stack([self.ids[rows], self.lo[rows], self.hi[rows]])
        self.mirror.sync(rows, self.emb[rows], meta, self.t_end[rows], self.n)
        self.unsynced.clear()

    def mirror_mismatch(self) -> str | None:
        """What differs between the mirror's rows and these, after a sync; None when they are
        equal or there is no mirror."""
        if self.mirror is None:
            return None
        self.sync_mirror()
        emb, meta, t_end = self.mirror.download()
        n = self.n
        for what, got, want in (("embeddings", emb, self.emb[:n]), ("node ids", meta[0], self.ids[:n]),
                                ("leaf_lo", meta[1], self.lo[:n]), ("leaf_hi", meta[2], self.hi[:n]),
                                ("t_end", t_end, self.t_end[:n])):
            if got.shape != want.shape or not np.array_equal(got, want):
                return what
        return None

    def greedy(self, q: np.ndarray, k: int, as_of: float | None) -> list[tuple[int, float]]:
        """Algorithm 1 on this camera, on the host: best node (equal scores: the smaller node
        id), drop every node whose leaf range overlaps its range (its ancestors and
        descendants), repeat."""
        n = self.n
        if n * len(q) <= SINGLE_THREAD_MAX:
            # numpy's own single-threaded loop: waking BLAS threads costs a scheduler slice
            # (~8 ms) on a busy machine, far more than a small scan (as in vectors/bodies.py)
            s = np.einsum("nd,d->n", self.emb[:n], q)
        else:
            s = self.emb[:n] @ q
        if as_of is not None:
            s[self.t_end[:n] > as_of] = -np.inf
        lo, hi = self.lo[:n], self.hi[:n]
        ids = self.ids[:n]
        out = []
        for _ in range(k):
            j = int(np.argmax(s))
            best = s[j]
            if not np.isfinite(best):
                break
            tied = np.flatnonzero(s == best)
            if len(tied) > 1:
                j = int(tied[np.argmin(ids[tied])])
            out.append((int(ids[j]), float(best)))
            s[(lo <= hi[j]) & (hi >= lo[j])] = -np.inf
        return out


def make_camera_index(rows: RowsDevice, dim: int) -> CameraIndex:
    """A camera's index where ``rows`` says the forest's rows live (see the module doc)."""
    if rows.kind != "torch":
        return CameraIndex(dim)
    from .device import CameraMirror  # noqa: PLC0415 - imports torch

    return CameraIndex(dim, CameraMirror(rows.body(dim, "float32")))


def retrieve_picks(indexes: list[CameraIndex], q: np.ndarray, k: int,
                   as_of: float | None) -> list[tuple[int, float]]:
    """The greedy's best ``k`` (node id, score) over these cameras, best first, equal scores
    in node id order. Lineage only exists within a camera, so this is the merge of each
    camera's own greedy picks; with mirrors, they are computed on the device."""
    if not indexes:
        return []
    if indexes[0].mirror is not None:
        from .device import mirrored_picks  # noqa: PLC0415 - imports torch

        picks = mirrored_picks(indexes, q, k, as_of)
    else:
        picks = [p for ix in indexes for p in ix.greedy(q, k, as_of)]
    picks.sort(key=lambda p: (-p[1], p[0]))
    return picks[:k]


def public_copy(n: ForestNode) -> ForestNode:
    """A copy callers may keep and mutate without touching the forest (embeddings are
    read-only arrays, shared)."""
    return replace(n, keyframes=list(n.keyframes), keyframe_times=list(n.keyframe_times))


def spread_in_time(times: list[float], budget: int) -> list[int]:
    """Indices of at most ``budget`` of the sorted ``times``, spread evenly in time: for each of
    ``budget`` evenly spaced target times, the nearest candidate that keeps the picks strictly
    increasing and leaves enough candidates for the targets after it. (Pure Python: it runs on
    ~32 candidates for every changed node, where numpy's call overhead dominates.)"""
    n = len(times)
    if n <= budget:
        return list(range(n))
    if budget == 1:
        return [0]
    t0, step = times[0], (times[-1] - times[0]) / (budget - 1)
    picks, prev = [], -1
    for i in range(budget):
        tt = t0 + step * i
        j = bisect.bisect_left(times, tt, prev + 1)
        if j > prev + 1 and (j == n or tt - times[j - 1] <= times[j] - tt):
            j -= 1
        j = min(max(j, prev + 1), n - (budget - i))
        picks.append(j)
        prev = j
    return picks


def clip_text(s: str, n: int) -> str:
    return s if len(s) <= n else s[: max(0, n - 1)] + "\u2026"
