"""Small numeric helpers used across the engine."""
from __future__ import annotations

import numpy as np


def spread_evenly(n: int, k: int) -> list[int]:
    """``min(n, k)`` indices of 0..n-1 spread evenly, first and last included, sorted, unique."""
    if n <= 0 or k <= 0:
        return []
    if n <= k:
        return list(range(n))
    if k == 1:
        return [0]
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def unit(v, what: str) -> np.ndarray:
    """``v`` as a float32 1-D unit vector; a clear error naming ``what`` for an empty,
    non-finite or zero vector."""
    a = np.asarray(v, dtype=np.float32).reshape(-1)
    if a.size == 0 or not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: embedding is empty or not finite")
    n = float(np.linalg.norm(a))
    if n < 1e-12:
        raise ValueError(f"{what}: embedding is the zero vector")
    return a / n
