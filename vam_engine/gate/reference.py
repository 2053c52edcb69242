"""Numpy float64 reference of the fused gate statistics. Tests only: it defines correct.

Every body (C++ in csrc/, Triton in kernels/) computes exactly these quantities for a gray
uint8 frame F (H x W) against the last kept frame R of the same camera:

- ``lap_var``: population variance of the 3x3 Laplacian [[0,1,0],[1,-4,1],[0,1,0]] of F over
  all H*W pixels, borders mirrored without repeating the edge (reflect-101), which is what
  ``cv2.Laplacian(F, cv2.CV_64F).var()`` computes.
- ``thumb``: a 64x64 float thumbnail; cell (i, j) is the mean of F over rows
  [i*H//64, max(i*H//64 + 1, (i+1)*H//64)) and the same rule for columns (a box filter; for
  sides under 64 pixels it degenerates to nearest sampling).
- ``hist``: a 64-bin histogram (bin = value >> 2), as counts, of the rows y of F with
  y % HIST_ROW_STEP == 0 (every column of them). A regular subset of the rows: the histogram's
  scattered increments were half of the fused CPU pass, and its one consumer, ``hist_corr`` (the
  cascade's cut rule and the optional ``hist`` gate), compares distribution shapes, which a
  quarter of the rows estimates closely (benchmarks/bench_gate.py --hist-check measures the
  difference from the full-frame histogram).
- ``mad``: mean of |F - R| over all pixels (NaN without a reference or when shapes differ).
- ``ssim``: SSIM of the two thumbnails with a 7x7 uniform window, data range 255, K1 0.01,
  K2 0.03, sample covariance (N / (N - 1)), averaged over the valid 58x58 window positions,
  which is ``skimage.metrics.structural_similarity(a, b, data_range=255)`` on the thumbnails.
- ``hist_corr``: Pearson correlation of the two histograms (OpenCV's HISTCMP_CORREL); 1.0
  when both are constant and equal, 0.0 when one is constant and they differ.
- ``tile_sums``: the local change, as a grid of cells of C x C pixels (C = ``tile``, cells
  clipped at the right and bottom borders): entry (i, j) is the sum of |F - R| over rows
  [i*C, min(H, (i+1)*C)) and columns [j*C, min(W, (j+1)*C)), an exact integer (every body
  returns the same grid). ``reduce_tiles`` turns it into what the cascade reads. Its tiles are
  2C x 2C: every 2 x 2 block of cells, at a stride of C, so tiles overlap by half and a compact
  change is never split over four tiles, as it can be on a fixed grid (where a side has a single
  cell, a tile is that cell). ``tile_mad`` is the largest tile mean (sum / tile area) and
  ``tiles_changed`` how many tile means are at or over a threshold; NaN and 0 without a reference.
"""
from __future__ import annotations

import numpy as np

THUMB = 64
HIST_BINS = 64
SSIM_WIN = 7
SSIM_K1, SSIM_K2, SSIM_RANGE = 0.01, 0.03, 255.0
TILE = 16  # default cell side of the local-change grid: tiles of 32 (GateConfig.tile_size = 2 cells)
HIST_ROW_STEP = 4  # the histogram counts every 4th row (csrc/gate_kernel.h, kernels/gate_stats.py agree)
MAX_TILE = 1024  # a tile's sum of |F - R| stays below 2^32 (1024^2 * 255)


def cell_bounds(n: int, cells: int = THUMB) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(cells)
    lo = i * n // cells
    hi = np.maximum(lo + 1, (i + 1) * n // cells)
    return lo, hi


def laplacian_var(gray: np.ndarray) -> float:
    g = np.pad(gray.astype(np.float64), 1, mode="reflect")  # numpy "reflect" == reflect-101
    lap = g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:] - 4.0 * g[1:-1, 1:-1]
    return float(lap.var())


def thumbnail(gray: np.ndarray) -> np.ndarray:
    """Cell means from an integral image: exact integer sums, one division each (what
    ``cell.mean()`` gives, since the sums are exact in float64)."""
    h, w = gray.shape
    r0, r1 = cell_bounds(h)
    c0, c1 = cell_bounds(w)
    ii = np.zeros((h + 1, w + 1), np.int64)
    ii[1:, 1:] = gray.astype(np.int64).cumsum(0).cumsum(1)
    sums = ii[r1][:, c1] - ii[r0][:, c1] - ii[r1][:, c0] + ii[r0][:, c0]
    return sums.astype(np.float64) / np.outer(r1 - r0, c1 - c0).astype(np.float64)


def histogram(gray: np.ndarray) -> np.ndarray:
    return np.bincount((gray[::HIST_ROW_STEP] >> 2).ravel(), minlength=HIST_BINS).astype(np.float64)


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    n = SSIM_WIN * SSIM_WIN
    view = np.lib.stride_tricks.sliding_window_view

    def box(x):
        return view(x, (SSIM_WIN, SSIM_WIN)).mean(axis=(-1, -2))

    ua, ub = box(a), box(b)
    cov_norm = n / (n - 1.0)
    vaa = cov_norm * (box(a * a) - ua * ua)
    vbb = cov_norm * (box(b * b) - ub * ub)
    vab = cov_norm * (box(a * b) - ua * ub)
    c1 = (SSIM_K1 * SSIM_RANGE) ** 2
    c2 = (SSIM_K2 * SSIM_RANGE) ** 2
    s = ((2 * ua * ub + c1) * (2 * vab + c2)) / ((ua * ua + ub * ub + c1) * (vaa + vbb + c2))
    return float(s.mean())


def hist_corr(h1: np.ndarray, h2: np.ndarray) -> float:
    a = h1 - h1.mean()
    b = h2 - h2.mean()
    den = np.sqrt((a * a).sum() * (b * b).sum())
    if den == 0.0:
        return 1.0 if np.array_equal(h1, h2) else 0.0
    return float((a * b).sum() / den)


def tile_grid_shape(h: int, w: int, tile: int = TILE) -> tuple[int, int]:
    return -(-h // tile), -(-w // tile)


def tile_areas(h: int, w: int, tile: int = TILE) -> np.ndarray:
    """Pixels of each tile of the grid (border tiles are clipped), float64 (TR, TC)."""
    tr, tc = tile_grid_shape(h, w, tile)
    rows = np.minimum(h - np.arange(tr) * tile, tile)
    cols = np.minimum(w - np.arange(tc) * tile, tile)
    return np.outer(rows, cols).astype(np.float64)


def tile_sums(gray: np.ndarray, ref: np.ndarray, tile: int = TILE) -> np.ndarray:
    """Sum of |F - R| per tile (see the module doc), int64 (TR, TC)."""
    h, w = gray.shape
    tr, tc = tile_grid_shape(h, w, tile)
    d = np.abs(gray.astype(np.int64) - ref.astype(np.int64))
    pad = np.zeros((tr * tile, tc * tile), np.int64)
    pad[:h, :w] = d
    return pad.reshape(tr, tile, tc, tile).sum(axis=(1, 3))


def pair_windows(a: np.ndarray, axis: int) -> np.ndarray:
    """Sums of neighbouring pairs along an axis (the axis itself where it has one entry)."""
    if a.shape[axis] < 2:
        return a
    lo = np.take(a, np.arange(a.shape[axis] - 1), axis=axis)
    hi = np.take(a, np.arange(1, a.shape[axis]), axis=axis)
    return lo + hi


def tile_windows(cells: np.ndarray) -> np.ndarray:
    """Per-tile sums of a (..., TR, TC) cell grid: every 2 x 2 block of cells (see the module doc)."""
    return pair_windows(pair_windows(cells, cells.ndim - 2), cells.ndim - 1)


def tile_count(h: int, w: int, cell: int = TILE) -> int:
    """How many (overlapping) tiles a frame has."""
    tr, tc = tile_grid_shape(h, w, cell)
    return max(1, tr - 1) * max(1, tc - 1)


def reduce_tiles(sums: np.ndarray, h: int, w: int, tile: int, threshold: float) -> tuple[float, int]:
    """(largest tile mean, tiles whose mean is >= threshold) of one frame's cell sums (cells of
    ``tile`` pixels). The one reduction every body uses (gate.bodies), in float64: exact integer
    sums over exact areas, compared as such."""
    means = tile_windows(np.asarray(sums, np.int64)).astype(np.float64) / tile_windows(tile_areas(h, w, tile))
    return float(means.max()), int(np.count_nonzero(means >= threshold))


def rgb_to_gray(rgb: np.ndarray) -> np.ndarray:
    """uint8 [..., 3] RGB -> uint8 gray with OpenCV's fixed-point BT.601 rule (cv2.COLOR_RGB2GRAY):
    (R*4899 + G*9617 + B*1868 + 8192) >> 14."""
    x = rgb.astype(np.int32)
    return ((x[..., 0] * 4899 + x[..., 1] * 9617 + x[..., 2] * 1868 + 8192) >> 14).astype(np.uint8)


def frame_stats(gray: np.ndarray, ref: np.ndarray | None, tile: int = TILE,
                tile_threshold: float = float("inf")) -> dict:
    """All statistics of one frame against one reference frame (or None)."""
    th = thumbnail(gray)
    hi = histogram(gray)
    h, w = gray.shape
    out = {"lap_var": laplacian_var(gray), "thumb": th, "hist": hi,
           "mad": float("nan"), "ssim": float("nan"), "hist_corr": float("nan"),
           "tile_sums": np.zeros(tile_grid_shape(h, w, tile), np.int64), "tile_mad": float("nan"),
           "tiles_changed": 0}
    if ref is not None and ref.shape == gray.shape:
        out["mad"] = float(np.abs(gray.astype(np.float64) - ref.astype(np.float64)).mean())
        out["ssim"] = ssim(th, thumbnail(ref))
        out["hist_corr"] = hist_corr(hi, histogram(ref))
        out["tile_sums"] = tile_sums(gray, ref, tile)
        out["tile_mad"], out["tiles_changed"] = reduce_tiles(out["tile_sums"], h, w, tile, tile_threshold)
    return out
