"""descriptor-v1: a weight-free image descriptor for change detection and near-duplicate search.

numpy (and one native pass), deterministic, a few milliseconds per 720p frame on one core. One
pass over the full frame (an area resize to at most 128 px on the long side, by an integer factor,
with a centre crop of the remainder: ``_C.box_sums``, exact integer sums as its numpy reference
``box_sums_reference``), then everything works on that small image:

====== ============================================================ ====== ======
block  what                                                          dims   weight
====== ============================================================ ====== ======
G      global brightness (as an angle: cos, sin) and mean chroma       4    0.5
C4     4x4 opponent-colour means, mean-centred, chroma x2              48    0.8
C8     8x8 opponent-colour means, mean-centred, chroma x2             192    1.0
H4     4x4 grid of 8-bin gradient-orientation histograms (HOG-like,   128    1.0
       magnitude-weighted, soft-binned, square-rooted)
HG     12-bin global orientation histogram (shift-invariant)           12    0.5
====== ============================================================ ====== ======

Each block but G is L2-normalized (so C* ignore brightness and contrast and H* ignore contrast),
weighted, concatenated, and the whole vector L2-normalized. G keeps the vector non-zero on a
uniform frame and tells a dark frame from a bright one. Grid cells are fractions of the frame, so
one scene at two resolutions gets nearly the same vector.
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from ..native import load
from .base import EmbedError, batches, check_frames, empty, finish

WORK_LONG = 128   # long side of the working image, at most
MIN_SIDE = 8      # working images are upsampled (nearest) to at least this per side
CHROMA = 2.0
WEIGHTS = {"G": 0.5, "C4": 0.8, "C8": 1.0, "H4": 1.0, "HG": 0.5}
DIM = 4 + 48 + 192 + 128 + 12

# RGB -> opponent colour (O1 red-green, O2 yellow-blue, O3 intensity), orthonormal rows
_OPP = np.array([[1 / np.sqrt(2), -1 / np.sqrt(2), 0.0],
                 [1 / np.sqrt(6), 1 / np.sqrt(6), -2 / np.sqrt(6)],
                 [1 / np.sqrt(3), 1 / np.sqrt(3), 1 / np.sqrt(3)]], np.float32)
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)


def working_image(frames: np.ndarray, box_sums=None) -> np.ndarray:
    """uint8 N x H x W x 3 -> float32 N x h x w x 3 in [0, 1]: an area resize by the integer
    factor f = max(1, long side // 128), centre-cropping the H % f, W % f remainder.
    ``box_sums``: the block sums' body (default the native one; ``box_sums_reference``)."""
    n, H, W, _ = frames.shape
    f = max(1, max(H, W) // WORK_LONG)
    h, w = H // f, W // f
    y0, x0 = (H - h * f) // 2, (W - w * f) // 2
    if f == 1:
        work = frames[:, y0:y0 + h, x0:x0 + w].astype(np.float32) * np.float32(1 / 255)
    else:
        s = (box_sums or _box_sums)(frames, f, y0, x0, h, w)
        work = s.astype(np.float32) * np.float32(1 / (255 * f * f))
    if h < MIN_SIDE or w < MIN_SIDE:
        work = work.repeat(-(-MIN_SIDE // h), axis=1).repeat(-(-MIN_SIDE // w), axis=2)
    return work


def box_sums_reference(frames: np.ndarray, f: int, y0: int, x0: int, h: int, w: int) -> np.ndarray:
    """uint32 N x h x w x 3 exact sums of the f x f blocks from (y0, x0): f whole-row slice adds
    (SIMD, ~5x faster than np.add.reduceat), then f column adds on the f-times smaller result.
    The definition of ``_C.box_sums``, which reads the frame once instead of 2f times."""
    n = len(frames)
    x = frames[:, y0:y0 + h * f, x0:x0 + w * f]
    rows = x[:, 0::f].astype(np.uint16 if f <= 257 else np.uint32)
    for k in range(1, f):
        rows += x[:, k::f]
    cols = rows.reshape(n, h, w, f, 3)
    s = cols[:, :, :, 0].astype(np.uint32)
    for k in range(1, f):
        s += cols[:, :, :, k]
    return s


def _box_sums(frames, f, y0, x0, h, w) -> np.ndarray:
    return load().box_sums(frames, f, y0, x0, h, w)


@functools.lru_cache(maxsize=32)
def _pool_cells(h: int, w: int, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """_pool's cell starts and its g x g x 1 float32 cell areas for an h x w image: the same for
    every frame of a camera, so made once (a sparse sample is embedded alone, and these small
    index computations were a fifth of its descriptor's time)."""
    ri = (np.arange(g) * h) // g
    ci = (np.arange(g) * w) // g
    cnt = (np.diff(np.append(ri, h))[:, None] * np.diff(np.append(ci, w))[None, :])[None, :, :, None]
    for x in (ri, ci, cnt):
        x.flags.writeable = False
    return ri, ci, cnt.astype(np.float32)


def _pool(a: np.ndarray, g: int) -> np.ndarray:
    """N x h x w x C -> N x g x g x C cell means (cells: integer row/column boundaries)."""
    _, h, w, _ = a.shape
    ri, ci, cnt = _pool_cells(h, w, g)
    s = np.add.reduceat(np.add.reduceat(a, ri, axis=1), ci, axis=2)
    return s / cnt


def _l2(v: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalization of N x D; rows of (near) zero norm stay zero."""
    n = np.sqrt(np.einsum("ij,ij->i", v, v))[:, None]
    return np.where(n > 1e-8, v / np.maximum(n, 1e-8), 0.0).astype(np.float32)


def _orientation_grid(mag: np.ndarray, ang: np.ndarray, bins: int, g: int) -> np.ndarray:
    """Magnitude-weighted soft (linear) binning of unsigned orientations in [0, pi), averaged
    over a g x g grid of cells: N x h x w -> N x g x g x bins."""
    n, h, w = mag.shape
    cell, counts = _orientation_cells(n, h, w, g, bins)
    b = ang * np.float32(bins / np.pi) - np.float32(0.5)
    b0 = np.floor(b)
    fr = b - b0
    b0 = b0.astype(np.int64) % bins
    size = n * g * g * bins
    hist = (np.bincount((cell + b0).ravel(), (mag * (1 - fr)).ravel(), minlength=size)
            + np.bincount((cell + (b0 + 1) % bins).ravel(), (mag * fr).ravel(), minlength=size))
    return (hist.reshape(n, g, g, bins) / counts).astype(np.float32)


@functools.lru_cache(maxsize=32)
def _orientation_cells(n: int, h: int, w: int, g: int, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """_orientation_grid's first histogram bin of each pixel's cell (N x h x w) and its
    1 x g x g x 1 cell pixel counts: made once per batch shape (see _pool_cells)."""
    ri = np.repeat(np.arange(g), np.diff(np.append((np.arange(g) * h) // g, h)))
    ci = np.repeat(np.arange(g), np.diff(np.append((np.arange(g) * w) // g, w)))
    cell = ((np.arange(n)[:, None, None] * g + ri[None, :, None]) * g + ci[None, None, :]) * bins
    counts = (np.bincount(ri, minlength=g)[:, None] * np.bincount(ci, minlength=g)[None, :])[None, :, :, None]
    for x in (cell, counts):
        x.flags.writeable = False
    return cell, counts


def describe(frames: np.ndarray, box_sums=None) -> np.ndarray:
    """The raw (unchecked) descriptor of an N x H x W x 3 uint8 batch: float32 N x DIM, unit rows.
    ``box_sums``: as for ``working_image``."""
    n = len(frames)
    work = working_image(frames, box_sums)

    # colour layout
    mean_rgb = work.mean(axis=(1, 2))                                  # N x 3
    mean_opp = mean_rgb @ _OPP.T
    chroma_w = np.array([CHROMA, CHROMA, 1.0], np.float32)
    blocks = {}
    for g in (4, 8):
        opp = _pool(work, g) @ _OPP.T                                  # N x g x g x 3
        opp = (opp - mean_opp[:, None, None, :]) * chroma_w
        blocks[f"C{g}"] = _l2(opp.reshape(n, -1))
    intensity = mean_rgb @ _LUMA                                       # N, in [0, 1]
    theta = intensity * np.float32(np.pi / 2)
    blocks["G"] = np.stack([np.cos(theta), np.sin(theta), CHROMA * mean_opp[:, 0], CHROMA * mean_opp[:, 1]],
                           axis=1).astype(np.float32)

    # gradient orientations of the gray working image
    gray = work @ _LUMA                                                # N x h x w
    gp = np.pad(gray, ((0, 0), (1, 1), (1, 1)), mode="edge")
    gx = gp[:, 1:-1, 2:] - gp[:, 1:-1, :-2]
    gy = gp[:, 2:, 1:-1] - gp[:, :-2, 1:-1]
    mag = np.sqrt(gx * gx + gy * gy)
    ang = np.arctan2(gy, gx) % np.float32(np.pi)
    h4 = _orientation_grid(mag, ang, 8, 4)                             # N x 4 x 4 x 8
    blocks["H4"] = _l2(np.sqrt(h4.reshape(n, -1)))
    hg = _orientation_grid(mag, ang, 12, 1).reshape(n, 12)            # N x 12
    blocks["HG"] = _l2(np.sqrt(hg))

    v = np.concatenate([WEIGHTS[k] * blocks[k] for k in ("G", "C4", "C8", "H4", "HG")], axis=1)
    return _l2(v)


class DescriptorEmbedder:
    """The default image body: no weights, no text side. See the module docstring."""

    name = "descriptor-v1"
    model_id = f"descriptor-v1-d{DIM}"
    dim = DIM
    has_text = False
    # it reads each frame once (its block sums): a batch gains nothing from being one array, so
    # callers may embed frames one by one instead of stacking copies of them
    per_frame = True

    def __init__(self, batch_size: int = 32, *, box_sums=None):
        """``box_sums``: the area resize's block sums (default the native ``_C.box_sums``;
        ``box_sums_reference``, the numpy definition, is the benchmarks' baseline)."""
        if int(batch_size) < 1:
            raise ValueError(f"descriptor: batch_size must be >= 1, got {batch_size}")
        self.batch_size = int(batch_size)
        self.box_sums = box_sums

    def embed_images(self, frames: np.ndarray) -> np.ndarray:
        check_frames(frames, self.name)
        if len(frames) == 0:
            return empty(self.dim)
        out = np.empty((len(frames), self.dim), np.float32)
        for sl in batches(len(frames), self.batch_size):
            out[sl] = describe(frames[sl], self.box_sums)
        return finish(out, self.name)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        raise EmbedError(f"{self.name} has no text side: configure a CLIP/SigLIP model "
                         f"(embed.body torch|onnx|tensorrt with embed.model) to search images by text")

    def __repr__(self) -> str:
        return f"DescriptorEmbedder(dim={self.dim}, batch_size={self.batch_size})"
