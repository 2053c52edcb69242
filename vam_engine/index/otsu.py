"""Otsu's threshold (Otsu 1979) over a 1-D list of distances.

The values are binned into ``bins`` equal bins over ``[min, max]``; the split after bin ``k``
that maximizes the between-class variance ``w0 * w1 * (mu0 - mu1)**2`` wins, and the threshold is
the upper edge of bin ``k``: values in bins ``0..k`` lie below it. Empty bins after ``k`` tie with
it exactly; the threshold is then the middle of that tied run (``k0..k1``, the first maximum and
the maximal bins right after it): ``(edge[k0 + 1] + edge[k1 + 1]) / 2``, the middle of the gap
between the two classes rather than its lower end.
Returns None when no threshold exists: fewer than two values, a non-finite value, or all values
(nearly) equal. Callers fall back to a configured threshold then.

The between-class variance of a split is computed from the bins' integer counts, exactly: with
bin centres ``lo + (i + 1/2) * step``, ``H_k`` the values in bins ``0..k``, ``S_k`` the sum of their
``2i + 1`` and ``S`` that over all ``n`` values, it is ``(step / 2)**2 * (n S_k - H_k S)**2 /
(n**2 H_k (n - H_k))``, so the split maximizing ``(n S_k - H_k S)**2 / (H_k (n - H_k))`` (one
float64 division of integers) wins, and ties are ties exactly. The bins are ``np.histogram``'s, written
out (edges ``lo + i * step``, the last ``hi``; a value's bin from ``(v - lo) / (hi - lo) * bins``,
moved by one where an edge says so). The dedup scan kernel (``kernels/cosine_dedup.py``) follows
this operation for operation, so the device's thresholds are these, bit for bit.
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
    edges = np.arange(bins + 1, dtype=np.float64) * ((hi - lo) / bins) + lo
    edges[-1] = hi
    idx = np.minimum(((v - lo) / (hi - lo) * bins).astype(np.int64), bins - 1)
    idx -= v < edges[idx]
    idx += (v >= edges[idx + 1]) & (idx != bins - 1)
    hist = np.bincount(idx, minlength=bins)
    n = v.size
    h_k = np.cumsum(hist)[:-1]  # class 0 = bins 0..k, k = 0..bins-2
    s_all = np.cumsum(hist * (2 * np.arange(bins, dtype=np.int64) + 1))
    s_k, s_n = s_all[:-1], s_all[-1]
    valid = (h_k > 0) & (h_k < n)
    if not valid.any():
        return None
    a = (n * s_k - h_k * s_n).astype(np.float64)
    between = np.zeros(bins - 1, np.float64)
    between[valid] = a[valid] * a[valid] / (h_k[valid].astype(np.float64) * (n - h_k[valid]).astype(np.float64))
    k0 = int(np.argmax(between))
    k1 = k0
    while k1 + 1 < between.size and between[k1 + 1] == between[k0]:
        k1 += 1
    return float((edges[k0 + 1] + edges[k1 + 1]) / 2)
