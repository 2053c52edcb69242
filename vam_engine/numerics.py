"""Small numeric helpers several modules share (one definition each, so they cannot drift).

``spread_evenly``: which k of n ordered items to keep (keyframes of an event, frames shown to a
model). ``unit``: an embedding as a unit vector, with errors that name the input.
``SINGLE_THREAD_MAX``: below it, a scan uses numpy's own loop rather than BLAS.
``finite_time`` and ``time_range``: the one check of a time (or an interval of them) a caller
gives, with the one message naming the argument.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import VamError

# Scans up to this many multiply-adds use numpy's single-threaded einsum rather than BLAS, whose
# threads cost a scheduler slice (~8 ms) per call on a busy machine (the vector spaces' exact
# search, the event forest's retrieval)
SINGLE_THREAD_MAX = 1 << 22


def spread_evenly(n: int, k: int) -> list[int]:
    """Indices of ``k`` of the items ``0..n-1``, spread evenly: the first and the last included
    (for k >= 2), sorted, unique. All of them when ``n <= k``; ``[0]`` for k == 1 (of n >= 1).

    Index i is ``round(i * (n - 1) / (k - 1))`` (ties to even, as numpy's ``linspace().round()``
    gives), so picks of the same n and k never change. With n > k the step exceeds 1, so no
    two picks coincide."""
    for name, v in (("n", n), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"spread_evenly: {name} must be an integer >= 0, got {v!r}")
    n, k = int(n), int(k)
    if n <= k:
        return list(range(n))
    if k == 0:
        return []
    if k == 1:
        return [0]
    return [round(i * (n - 1) / (k - 1)) for i in range(k)]


def unit(v, what: str, *, dim: int | None = None) -> np.ndarray:
    """``v`` as a float32 1-D unit vector (a new array). ValueError naming ``what`` when it is
    not a numeric 1-D vector, has the wrong dimension (``dim``), is empty, holds NaN or inf, or
    is the zero vector (it has no direction to compare)."""
    try:
        with np.errstate(over="ignore"):  # an overflow becomes inf, reported below
            a = np.asarray(v).astype(np.float32)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what}: embedding is not a numeric vector ({e})") from None
    if a.ndim != 1:
        raise ValueError(f"{what}: embedding must be 1-D, got shape {a.shape}")
    if dim is not None and a.shape[0] != dim:
        raise ValueError(f"{what}: embedding has dimension {a.shape[0]}, expected {dim}")
    if a.shape[0] == 0:
        raise ValueError(f"{what}: embedding is empty")
    if not np.all(np.isfinite(a)):  # after the cast: 1e300 overflows float32
        raise ValueError(f"{what}: embedding has NaN or inf values")
    scale = float(np.abs(a).max())
    if not scale > 0:
        raise ValueError(f"{what}: embedding is the zero vector (no direction to compare)")
    a = a / np.float32(scale)  # scaled first: huge components do not overflow the norm
    return (a / np.float32(np.linalg.norm(a))).astype(np.float32)


class TimeError(VamError, ValueError):
    """A time, or an interval of them, that is not one. A ValueError too: callers that check
    their arguments with ValueError keep doing so."""


def finite_time(t, name: str, *, optional: bool = False, error: type[Exception] = TimeError) -> float | None:
    """``t`` as a float when it is a finite real number (int, float or a numpy scalar; not a
    bool, not a string); None stays None when ``optional``. Otherwise ``error`` (TimeError
    unless the caller has its own kind) with the one message, naming ``name``."""
    if t is None and optional:
        return None
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, numbers.Real) or not math.isfinite(t):
        raise error(f"{name} must be a finite time in seconds, got {t!r:.60}")
    return float(t)


def time_range(time_range, name: str = "time_range", *, open_ends: bool = False, strict: bool = False,
               error: type[Exception] = TimeError) -> tuple[float | None, float | None]:
    """(t0, t1) of an interval given as a pair: each end a finite time (None too, unbounded, when
    ``open_ends``; None for the whole range is (None, None) then), t0 <= t1 (t0 < t1 when
    ``strict``). Otherwise ``error`` naming ``name``."""
    if time_range is None and open_ends:
        return None, None
    try:
        t0, t1 = time_range
    except (TypeError, ValueError):
        raise error(f"{name} must be a pair (t0, t1) of times in seconds, got {time_range!r:.60}") from None
    t0 = finite_time(t0, f"{name} start", optional=open_ends, error=error)
    t1 = finite_time(t1, f"{name} end", optional=open_ends, error=error)
    if t0 is not None and t1 is not None and (t0 >= t1 if strict else t0 > t1):
        raise error(f"{name} starts {'at or ' if strict else ''}after it ends (t0={t0:g} {'>=' if strict else '>'} "
                    f"t1={t1:g}): give t0 {'<' if strict else '<='} t1")
    return t0, t1
