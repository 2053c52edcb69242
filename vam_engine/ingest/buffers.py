"""Reused frame buffers for the private copies ``Engine.push`` makes of sampled frames.

A fresh 720p RGB array costs more to fault in than to fill (about 1.4 ms against 0.06 ms on
our machines: the allocator maps new pages for arrays this large). The pool keeps a few arrays
per shape and hands one out again once nothing references it any more: numpy views keep their
base array alive, so a pooled array whose only reference is the pool's own is free, whatever
the pipeline did with it (views in batches, payloads awaiting their JPEG, held frames).
"""
from __future__ import annotations

import sys
import threading

import numpy as np

_FREE_REFS = 2  # the pool's list entry and getrefcount's own argument


class BufferPool:
    """``copy(view)``: a C-contiguous private copy of an array, in a reused buffer when one of
    its shape is free (``take``: such a buffer, to fill). At most ``per_shape`` buffers are kept per (shape, dtype); beyond that,
    copies are fresh arrays."""

    def __init__(self, per_shape: int = 8):
        if per_shape < 0:
            raise ValueError(f"BufferPool: per_shape must be >= 0, got {per_shape}")
        self.per_shape = per_shape
        self._buffers: dict[tuple, list[np.ndarray]] = {}
        self._lock = threading.Lock()

    def copy(self, view: np.ndarray) -> np.ndarray:
        out = self.take(view.shape, view.dtype)
        np.copyto(out, view)
        return out

    def take(self, shape: tuple, dtype) -> np.ndarray:
        """An array of that shape and dtype (contents undefined) that nothing else references."""
        key = (tuple(shape), np.dtype(dtype).str)
        with self._lock:
            bufs = self._buffers.setdefault(key, [])
            for i in range(len(bufs)):
                if sys.getrefcount(bufs[i]) <= _FREE_REFS:
                    return bufs[i]
            out = np.empty(shape, dtype)
            if len(bufs) < self.per_shape:
                bufs.append(out)
            return out

    def reserve(self, shape: tuple, dtype) -> None:
        """Make sure one buffer of that shape is free, its pages faulted in here (off the thread
        that calls ``copy`` next: ``Engine.push`` reserves from the gate thread, so a camera
        loop never pays a new buffer's page faults). No-op when one is free or the pool is full."""
        key = (tuple(shape), np.dtype(dtype).str)
        with self._lock:
            bufs = self._buffers.setdefault(key, [])
            if len(bufs) >= self.per_shape or any(sys.getrefcount(bufs[i]) <= _FREE_REFS for i in range(len(bufs))):
                return
        out = np.empty(shape, dtype)
        out.fill(0)  # touches every page
        with self._lock:
            if len(bufs) < self.per_shape:
                bufs.append(out)
