"""Vector side of the event forest: node embeddings (unit vectors, children's weighted mean
directions) and each camera's retrieval matrix with its greedy lineage-pruned top-k; and the
small helpers forest/tree.py applies to nodes (copies handed out, keyframes spread in time, text
clipped)."""
from __future__ import annotations

import bisect
import math
from dataclasses import replace

import numpy as np

from ...numerics import SINGLE_THREAD_MAX, unit
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
    camera loses nodes only by being removed or rebuilt as a whole)."""

    def __init__(self, dim: int):
        cap = 64
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

    def eff(self, node_id: int) -> np.ndarray:
        return self.emb[self.row[node_id]]

    def greedy(self, q: np.ndarray, k: int, as_of: float | None) -> list[tuple[int, float]]:
        """Algorithm 1 on this camera: best node, drop every node whose leaf range overlaps its
        range (its ancestors and descendants), repeat."""
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
        out = []
        for _ in range(k):
            j = int(np.argmax(s))
            if not np.isfinite(s[j]):
                break
            out.append((int(self.ids[j]), float(s[j])))
            s[(lo <= hi[j]) & (hi >= lo[j])] = -np.inf
        return out


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
