"""The one dispatch point of the gate statistics: a reference, a CPU and a CUDA body behind
one signature. The device is chosen once, when a body is made.

Contract (every body):

``stats(frames, ref, ref_thumb=None, ref_hist=None, tiles=Tiles()) -> GateStats``
    frames: N x H x W uint8 gray frames; ref: H x W uint8 (the camera's last kept frame) or
    None. Computes every statistic of ``reference.frame_stats`` in one fused pass. The
    reference's own thumbnail and histogram may be passed when known (a body may use them to
    skip reading the reference for them). ``tiles`` sets the local-change grid: the kernels
    return each frame's grid of tile sums, reduced here (``reference.reduce_tiles``, the same
    float64 rule for every body) to the largest tile MAD and the tiles at or over the threshold.
``compare(frames, thumbs, hists, ref, ref_thumb, ref_hist, tiles=Tiles()) -> GateComparison``
    Only the statistics that depend on the reference, reusing the frames' thumbnails and
    histograms: what the cascade recomputes for the frames after a keep.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import reference as ref_impl


@dataclass(frozen=True)
class Tiles:
    """The local-change tiles: ``size`` x ``size`` pixels, overlapping by half (the kernels sum
    cells of size / 2; a tile is 2 x 2 cells, see reference.py); a tile counts as changed when
    its mean abs difference is >= ``threshold``."""

    size: int = 2 * ref_impl.TILE
    threshold: float = float("inf")

    def __post_init__(self):
        if not 2 <= int(self.size) <= 2 * ref_impl.MAX_TILE or int(self.size) % 2:
            raise ValueError(f"tile size must be even, 2..{2 * ref_impl.MAX_TILE} pixels, got {self.size}")

    @property
    def cell(self) -> int:
        return int(self.size) // 2


@dataclass
class GateStats:
    lap_var: np.ndarray  # (N,) float64
    mad: np.ndarray  # (N,) float64, NaN without a reference
    ssim: np.ndarray  # (N,) float64, NaN without a reference
    hist_corr: np.ndarray  # (N,) float64, NaN without a reference
    thumb: np.ndarray  # (N, 64, 64) float32
    hist: np.ndarray  # (N, 64) float32 counts
    tile_mad: np.ndarray  # (N,) float64: the largest tile's mean abs diff, NaN without a reference
    tiles_changed: np.ndarray  # (N,) int64: tiles whose mean abs diff is >= the threshold (0 without one)
    n_tiles: int = 0  # tiles in a frame's grid

    def __len__(self) -> int:
        return len(self.lap_var)


@dataclass
class GateComparison:
    """The reference-dependent statistics alone (``compare``)."""

    mad: np.ndarray
    ssim: np.ndarray
    hist_corr: np.ndarray
    tile_mad: np.ndarray
    tiles_changed: np.ndarray


def reduce_tiles(sums: np.ndarray, h: int, w: int, tiles: Tiles, has_ref: bool) -> tuple[np.ndarray, np.ndarray]:
    """(tile_mad, tiles_changed) of N frames' tile sums (N, TR, TC): ``reference.reduce_tiles``
    over a batch."""
    n = len(sums)
    if not has_ref or n == 0:
        return np.full(n, np.nan), np.zeros(n, np.int64)
    win = ref_impl.tile_windows(np.asarray(sums, np.int64)).astype(np.float64).reshape(n, -1)
    means = win / ref_impl.tile_windows(ref_impl.tile_areas(h, w, tiles.cell)).reshape(-1)
    return means.max(axis=1), np.count_nonzero(means >= tiles.threshold, axis=1).astype(np.int64)


def _n_tiles(h: int, w: int, tiles: Tiles) -> int:
    return ref_impl.tile_count(h, w, tiles.cell)


def _stats(out, h: int, w: int, tiles: Tiles, has_ref: bool, reduce=None) -> GateStats:
    """GateStats of a kernel's (lap_var, mad, ssim, hist_corr, thumb, hist, tile_sums); ``reduce``
    replaces reduce_tiles (the same rule: _C.reduce_tiles)."""
    tmad, tchg = (reduce or reduce_tiles)(out[6], h, w, tiles, has_ref)
    return GateStats(*out[:6], tmad, tchg, _n_tiles(h, w, tiles))


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

    def stats(self, frames: np.ndarray, ref: np.ndarray | None, ref_thumb=None, ref_hist=None,
              tiles: Tiles = Tiles()) -> GateStats:
        _check_batch(frames, ref)
        rows = [ref_impl.frame_stats(f, ref, tiles.cell, tiles.threshold) for f in frames]
        return GateStats(
            lap_var=np.array([r["lap_var"] for r in rows], np.float64),
            mad=np.array([r["mad"] for r in rows], np.float64),
            ssim=np.array([r["ssim"] for r in rows], np.float64),
            hist_corr=np.array([r["hist_corr"] for r in rows], np.float64),
            thumb=np.array([r["thumb"] for r in rows], np.float32).reshape(-1, 64, 64),
            hist=np.array([r["hist"] for r in rows], np.float32).reshape(-1, 64),
            tile_mad=np.array([r["tile_mad"] for r in rows], np.float64),
            tiles_changed=np.array([r["tiles_changed"] for r in rows], np.int64),
            n_tiles=_n_tiles(*frames.shape[1:], tiles),
        )

    def compare(self, frames, thumbs, hists, ref, ref_thumb, ref_hist, tiles: Tiles = Tiles()) -> GateComparison:
        s = self.stats(frames, ref, tiles=tiles)
        return GateComparison(s.mad, s.ssim, s.hist_corr, s.tile_mad, s.tiles_changed)


class CpuBody:
    """The fused C++ kernel (csrc/gate_stats.cpp), frames and row parts of them across threads
    (csrc/gate_pool.cpp)."""

    name = "cpu"

    def __init__(self):
        from ..native import load

        self._C = load()

    def _reduce(self, sums, h: int, w: int, tiles: Tiles, has_ref: bool):
        """reduce_tiles in C++ (_C.reduce_tiles, the same float64 rule): numpy's took a tenth of
        the fused pass's time at 720p."""
        if not has_ref or len(sums) == 0:
            return reduce_tiles(sums, h, w, tiles, has_ref)
        return self._C.reduce_tiles(sums, h, w, tiles.cell, float(tiles.threshold))

    def stats(self, frames: np.ndarray, ref: np.ndarray | None, ref_thumb=None, ref_hist=None,
              tiles: Tiles = Tiles()) -> GateStats:
        frames = np.ascontiguousarray(frames)
        _check_batch(frames, ref)
        h, w = frames.shape[1:]
        if ref is None:
            out = self._C.gate_stats(frames, tile=tiles.cell)
        elif ref_thumb is None or ref_hist is None:
            out = self._C.gate_stats(frames, np.ascontiguousarray(ref), tile=tiles.cell)
        else:
            out = self._C.gate_stats(frames, np.ascontiguousarray(ref), np.ascontiguousarray(ref_thumb, np.float32),
                                     np.ascontiguousarray(ref_hist, np.float32), tile=tiles.cell)
        return _stats(out, h, w, tiles, ref is not None, self._reduce)

    def compare(self, frames, thumbs, hists, ref, ref_thumb, ref_hist, tiles: Tiles = Tiles()) -> GateComparison:
        frames = np.ascontiguousarray(frames)
        mad, ssim, hc, sums = self._C.gate_compare(
            frames, np.ascontiguousarray(thumbs, np.float32), np.ascontiguousarray(hists, np.float32),
            np.ascontiguousarray(ref), np.ascontiguousarray(ref_thumb, np.float32),
            np.ascontiguousarray(ref_hist, np.float32), tile=tiles.cell)
        return GateComparison(mad, ssim, hc, *self._reduce(sums, *frames.shape[1:], tiles, True))


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

    def stats(self, frames, ref, ref_thumb=None, ref_hist=None, tiles: Tiles = Tiles()) -> GateStats:
        # the Triton pass reads the reference in the same launch; cached statistics are not needed
        f = self._dev(frames)
        r = None if ref is None else self._dev(ref)
        _check_batch(f, r)
        out = self._tk.gate_stats(f, r, tile=tiles.cell)
        return _stats([o.cpu().numpy() for o in out], *f.shape[1:], tiles, r is not None)

    def compare(self, frames, thumbs, hists, ref, ref_thumb, ref_hist, tiles: Tiles = Tiles()) -> GateComparison:
        t = self._torch
        f = self._dev(frames)
        out = self._tk.gate_compare(f, self._dev(thumbs, t.float32), self._dev(hists, t.float32),
                                    self._dev(ref), self._dev(ref_thumb, t.float32), self._dev(ref_hist, t.float32),
                                    tile=tiles.cell)
        mad, ssim, hc, sums = (o.cpu().numpy() for o in out)
        return GateComparison(mad, ssim, hc, *reduce_tiles(sums, *f.shape[1:], tiles, True))


def make_body(device: str = "auto"):
    """``auto`` takes CUDA when torch sees a GPU (vam_engine.device), else the CPU; ``reference``
    is the numpy definition. ``cuda`` without CUDA is a DeviceError."""
    if device == "reference":
        return ReferenceBody()
    from ..device import resolve_device

    dev = resolve_device(device)
    return CudaBody(dev) if dev.startswith("cuda") else CpuBody()
