"""Frames pushed by a caller (``Engine.push``): validated without a copy, then copied privately
only when sampled (the caller may reuse its buffer as soon as ``push`` returns), with the gray
plane made on the frame's own device."""
from __future__ import annotations

import numpy as np

from ..errors import FrameError
from ..native import load
from .buffers import BufferPool

_U8 = np.dtype(np.uint8)
MAX_SIDE = 16384


def pushed_view(cam: str, frame):
    """Validate a pushed frame without copying it: the caller's numpy array (or a CPU tensor's
    numpy view), or a CUDA tensor. It may change after ``push`` returns: see ``own_copy``."""
    # The common case in a few C-level attribute reads: a push that nothing takes costs little
    # more than this check, and a camera loop that sleeps between frames runs it with cold
    # caches, where each Python-level numpy helper (str(dtype), issubdtype) costs tens of us.
    if type(frame) is np.ndarray and frame.ndim == 3 and frame.dtype is _U8:
        h, w, c = frame.shape
        if c == 3 and 2 <= h <= MAX_SIDE and 2 <= w <= MAX_SIDE:
            return frame
    if hasattr(frame, "detach") and hasattr(frame, "device"):  # torch tensor
        t = frame.detach()
        if t.dtype.is_floating_point or t.ndim != 3 or t.shape[-1] != 3 or str(t.dtype) != "torch.uint8":
            raise FrameError(f"camera {cam!r}: pushed tensor must be H x W x 3 uint8, got {t.dtype} {tuple(t.shape)}")
        if t.device.type == "cuda":
            return t
        frame = t.cpu().numpy()  # shares the tensor's memory
    if not isinstance(frame, np.ndarray):
        raise FrameError(f"camera {cam!r}: pushed frame must be a numpy array or torch tensor, got {type(frame).__name__}")
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
        raise FrameError(f"camera {cam!r}: pushed frame must be H x W x 3 uint8, got {frame.dtype} {frame.shape}")
    h, w = frame.shape[:2]
    if h < 2 or w < 2 or h > MAX_SIDE or w > MAX_SIDE:
        raise FrameError(f"camera {cam!r}: pushed frame has absurd dimensions {w}x{h}")
    return frame


def own_copy(view, pool: BufferPool | None = None):
    """A private copy of a sampled frame on its own device (in a reused buffer from ``pool``):
    the gates and the JPEG writer read it later, on other threads, while camera drivers reuse
    their buffers."""
    if not isinstance(view, np.ndarray):  # a CUDA tensor
        import torch

        return view.clone(memory_format=torch.contiguous_format)
    # Copied with the interpreter lock held (numpy's copy releases it for arrays this size, and a
    # pipeline thread that takes it then makes the caller wait up to 5 ms and more: csrc/bindings.cpp).
    out = pool.take(view.shape, view.dtype) if pool is not None else None
    return load().strided_copy(view, 1, out)


def gray_and_spare(rgb, pool: BufferPool | None):
    """``gray_of(rgb)``, run on the gate thread, which also makes sure ``pool`` has a free
    buffer of this shape for the next sampled push (its page faults are paid here, not on
    the caller's thread)."""
    if pool is not None and isinstance(rgb, np.ndarray):
        pool.reserve(rgb.shape, rgb.dtype)
    return gray_of(rgb)


def gray_of(rgb):
    """The gray plane of a private copy (``own_copy``), on its device."""
    if not isinstance(rgb, np.ndarray):  # a CUDA tensor
        import torch

        w = torch.tensor([4899, 9617, 1868], device=rgb.device, dtype=torch.int32)
        return ((rgb.int() * w).sum(-1) + 8192).bitwise_right_shift(14).to(rgb.dtype)
    return rgb_to_gray(rgb)


def rgb_to_gray(rgb: np.ndarray) -> np.ndarray:
    return load().rgb_to_gray(rgb)
