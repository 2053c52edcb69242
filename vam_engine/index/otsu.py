"""Otsu's threshold (Otsu 1979) over a 1-D list of distances.

The values are binned into ``bins`` equal bins over ``[min, max]``; the split after bin ``k``
that maximizes the between-class variance ``w0 * w1 * (mu0 - mu1)**2`` wins, and the threshold is
the upper edge of bin ``k``: values in bins ``0..k`` lie below it. Empty bins after ``k`` tie with
it exactly; the threshold is then the middle of that tied run (``k0..k1``, the first maximum and
the maximal bins right after it): ``(edge[k0 + 1] + edge[k1 + 1]) / 2``, the middle of the gap
between the two classes rather than its lower end.
Returns None when no threshold exists: fewer than two values, a non-finite value, or all values
(nearly) equal. Callers fall back to a configured threshold then.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np


def otsu_threshold(values: Iterable[float], bins: int = 64) -> float | None:
    v = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float64).ravel()
    if v.size < 2 or not np.all(np.isfinite(v)):
        return None
    lo, hi = float(v.min()), float(v.max())
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        return None
    hist, edges = np.histogram(v, bins=bins, range=(lo, hi))
    p = hist.astype(np.float64) / v.size
    centers = 0.5 * (edges[:-1] + edges[1:])
    w0 = np.cumsum(p)[:-1]  # class 0 = bins 0..k, k = 0..bins-2
    m0 = np.cumsum(p * centers)[:-1]
    mu_t = float(np.sum(p * centers))
    w1 = 1.0 - w0
    valid = (w0 > 0) & (w1 > 0)
    if not valid.any():
        return None
    between = np.zeros_like(w0)
    between[valid] = (mu_t * w0[valid] - m0[valid]) ** 2 / (w0[valid] * w1[valid])
    k0 = int(np.argmax(between))
    k1 = k0
    while k1 + 1 < between.size and between[k1 + 1] == between[k0]:
        k1 += 1
    return float((edges[k0 + 1] + edges[k1 + 1]) / 2)
