"""The one dispatch point of the gate statistics: a reference, a CPU and a CUDA body behind
one signature. The device is chosen once, when a body is made.

Contract (every body):

``stats(frames, ref, ref_thumb=None, ref_hist=None) -> GateStats``
    frames: N x H x W uint8 gray frames; ref: H x W uint8 (the camera's last kept frame) or
    None. Computes every statistic of ``reference.frame_stats`` in one fused pass. The
    reference's own thumbnail and histogram may be passed when known (a body may use them to
    skip reading the reference for them).
``compare(frames, thumbs, hists, ref, ref_thumb, ref_hist) -> (mad, ssim, hist_corr)``
    Only the statistics that depend on the reference, reusing the frames' thumbnails and
    histograms: what the cascade recomputes for the frames after a keep.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import reference as ref_impl


@dataclass
class GateStats:
    lap_var: np.ndarray  # (N,) float64
    mad: np.ndarray  # (N,) float64, NaN without a reference
    ssim: np.ndarray  # (N,) float64, NaN without a reference
    hist_corr: np.ndarray  # (N,) float64, NaN without a reference
    thumb: np.ndarray  # (N, 64, 64) float32
    hist: np.ndarray  # (N, 64) float32 counts

    def __len__(self) -> int:
        return len(self.lap_var)


def _is_u8(x) -> bool:
    return str(x.dtype) in ("uint8", "torch.uint8")  # numpy arrays and torch tensors alike


def _check_batch(frames, ref) -> None:
    if frames.ndim != 3 or not _is_u8(frames):
        raise ValueError(f"gate frames must be N x H x W uint8, got {frames.dtype} {tuple(frames.shape)}")
    if ref is not None and (not _is_u8(ref) or tuple(ref.shape) != tuple(frames.shape[1:])):
        raise ValueError(f"gate reference must be uint8 {tuple(frames.shape[1:])}, got {ref.dtype} {tuple(ref.shape)}")


class ReferenceBody:
    """numpy float64, frame by frame. Defines correct; far too slow for use."""

    name = "reference"

    def stats(self, frames: np.ndarray, ref: np.ndarray | None, ref_thumb=None, ref_hist=None) -> GateStats:
        _check_batch(frames, ref)
        rows = [ref_impl.frame_stats(f, ref) for f in frames]
        return GateStats(
            lap_var=np.array([r["lap_var"] for r in rows], np.float64),
            mad=np.array([r["mad"] for r in rows], np.float64),
            ssim=np.array([r["ssim"] for r in rows], np.float64),
            hist_corr=np.array([r["hist_corr"] for r in rows], np.float64),
            thumb=np.array([r["thumb"] for r in rows], np.float32).reshape(-1, 64, 64),
            hist=np.array([r["hist"] for r in rows], np.float32).reshape(-1, 64),
        )

    def compare(self, frames, thumbs, hists, ref, ref_thumb, ref_hist):
        s = self.stats(frames, ref)
        return s.mad, s.ssim, s.hist_corr


class CpuBody:
    """The fused C++ kernel (csrc/gate_stats.cpp), OpenMP across frames."""

    name = "cpu"

    def __init__(self):
        from .. import _C  # built by setup.py; a clear ImportError when the build is missing

        self._C = _C

    def stats(self, frames: np.ndarray, ref: np.ndarray | None, ref_thumb=None, ref_hist=None) -> GateStats:
        frames = np.ascontiguousarray(frames)
        _check_batch(frames, ref)
        if ref is None:
            return GateStats(*self._C.gate_stats(frames))
        if ref_thumb is None or ref_hist is None:
            return GateStats(*self._C.gate_stats(frames, np.ascontiguousarray(ref)))
        return GateStats(*self._C.gate_stats(frames, np.ascontiguousarray(ref), np.ascontiguousarray(ref_thumb, np.float32),
                                             np.ascontiguousarray(ref_hist, np.float32)))

    def compare(self, frames, thumbs, hists, ref, ref_thumb, ref_hist):
        return self._C.gate_compare(np.ascontiguousarray(frames), np.ascontiguousarray(thumbs, np.float32),
                                    np.ascontiguousarray(hists, np.float32), np.ascontiguousarray(ref),
                                    np.ascontiguousarray(ref_thumb, np.float32),
                                    np.ascontiguousarray(ref_hist, np.float32))


class CudaBody:
    """The fused Triton kernels (kernels/gate_stats.py) over a batch of frames per launch.

    Accepts numpy arrays (uploaded) or CUDA tensors (from a GPU decoder); returns numpy.
    """

    name = "cuda"

    def __init__(self, device: str = "cuda"):
        import torch

        from ..kernels import gate_stats as tk

        self._torch = torch
        self._tk = tk
        self.device = torch.device(device)

    def _dev(self, x, dtype=None):
        t = self._torch
        x = x if isinstance(x, t.Tensor) else t.from_numpy(np.ascontiguousarray(x))
        x = x.to(self.device, non_blocking=True)
        return (x if dtype is None else x.to(dtype)).contiguous()

    def stats(self, frames, ref, ref_thumb=None, ref_hist=None) -> GateStats:
        # the Triton pass reads the reference in the same launch; cached statistics are not needed
        f = self._dev(frames)
        r = None if ref is None else self._dev(ref)
        _check_batch(f, r)
        out = self._tk.gate_stats(f, r)
        return GateStats(*(o.cpu().numpy() for o in out))

    def compare(self, frames, thumbs, hists, ref, ref_thumb, ref_hist):
        t = self._torch
        out = self._tk.gate_compare(self._dev(frames), self._dev(thumbs, t.float32), self._dev(hists, t.float32),
                                    self._dev(ref), self._dev(ref_thumb, t.float32), self._dev(ref_hist, t.float32))
        return tuple(o.cpu().numpy() for o in out)


def make_body(device: str = "auto"):
    """``auto`` takes CUDA when torch sees a GPU (vam_engine.device), else the CPU; ``reference``
    is the numpy definition. ``cuda`` without CUDA is a DeviceError."""
    if device == "reference":
        return ReferenceBody()
    from ..device import resolve_device

    dev = resolve_device(device)
    return CudaBody(dev) if dev.startswith("cuda") else CpuBody()
