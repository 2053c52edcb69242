"""What a detected thing looks like: crops, a colour histogram, dominant colour names, and the
appearance vector tracks and entities are matched by.

The appearance vector of a crop joins two unit vectors, weighted so that the dot product of two
appearance vectors is ``(1 - w) cos(e1, e2) + w BC(h1, h2)``: ``e`` from an image embedder (the
engine's ImageEmbedder contract; the weight-free descriptor by default) of the crop resized to
``side`` x ``side``, and ``BC`` the Bhattacharyya coefficient of centre-weighted hue/saturation/
value histograms (the square roots of the histograms are unit vectors). The embedding sees shape
and texture (and the background around a loose box); the histogram sees the thing's colours,
with the border of the box weighted down.

Colour names come from a fixed palette; the box's border ring tells the background: a colour
that dominates the ring is discounted inside unless nothing else is there (a white car on a
white road is still white).
"""
from __future__ import annotations

import numpy as np

from ..embed import DescriptorEmbedder, ImageEmbedder
from .records import Box

PALETTE = ("black", "white", "gray", "red", "orange", "yellow", "green", "blue", "purple", "pink", "brown")
HUE_BINS, SAT_BINS, VAL_BINS, GREY_BINS = 12, 3, 3, 4
HIST_DIM = HUE_BINS * SAT_BINS * VAL_BINS + GREY_BINS
BACKGROUND_LEAK = 0.3  # share of a box's centre-weighted inside taken to be background


def crop(frame: np.ndarray, box: Box, pad: float = 0.0) -> np.ndarray:
    """The part of ``frame`` inside ``box`` (grown by ``pad`` of its size each side), clipped to
    the frame; at least 1 x 1."""
    h, w = frame.shape[:2]
    x0, y0, x1, y1 = box
    px, py = (x1 - x0) * pad, (y1 - y0) * pad
    xa, ya = int(np.clip(np.floor(x0 - px), 0, w - 1)), int(np.clip(np.floor(y0 - py), 0, h - 1))
    xb, yb = int(np.clip(np.ceil(x1 + px), xa + 1, w)), int(np.clip(np.ceil(y1 + py), ya + 1, h))
    return frame[ya:yb, xa:xb]


def resize(img: np.ndarray, side: int) -> np.ndarray:
    """``img`` resized to side x side (bilinear, PIL)."""
    from PIL import Image

    return np.asarray(Image.fromarray(np.ascontiguousarray(img)).resize((side, side), Image.BILINEAR))


def shrink(img: np.ndarray, long_side: int) -> np.ndarray:
    """``img`` scaled down (aspect kept) so its long side is at most ``long_side``; a copy."""
    from PIL import Image

    h, w = img.shape[:2]
    s = long_side / max(h, w)
    if s >= 1:
        return img.copy()
    size = (max(1, round(w * s)), max(1, round(h * s)))
    return np.asarray(Image.fromarray(np.ascontiguousarray(img)).resize(size, Image.BILINEAR))


def hsv(img: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """uint8 RGB -> hue in degrees [0, 360), saturation and value in [0, 1] (float32)."""
    x = img.astype(np.float32) * np.float32(1 / 255)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    mx, mn = x.max(axis=-1), x.min(axis=-1)
    c = mx - mn
    safe = np.where(c > 0, c, 1.0)
    hue = np.where(mx == r, ((g - b) / safe) % 6, np.where(mx == g, (b - r) / safe + 2, (r - g) / safe + 4)) * 60
    hue = np.where(c > 0, hue, 0.0).astype(np.float32) % 360
    sat = np.where(mx > 0, c / np.where(mx > 0, mx, 1.0), 0.0).astype(np.float32)
    return hue, sat, mx


def centre_weights(h: int, w: int, sigma: float = 0.3) -> np.ndarray:
    """A Gaussian over the crop (std ``sigma`` of each side), peak 1 at the centre."""
    yy = (np.arange(h, dtype=np.float32) + 0.5) / h - 0.5
    xx = (np.arange(w, dtype=np.float32) + 0.5) / w - 0.5
    return np.exp(-(yy[:, None] ** 2 + xx[None, :] ** 2) / (2 * sigma ** 2))


def colour_histogram(img: np.ndarray) -> np.ndarray:
    """A centre-weighted HSV histogram of ``img`` (HIST_DIM bins: hue x saturation x value for
    chromatic pixels, 4 grey levels for the rest), summing to 1."""
    hue, sat, val = hsv(img)
    wts = centre_weights(*img.shape[:2]).ravel()
    grey = ((sat < 0.15) | (val < 0.12)).ravel()
    hb = np.minimum((hue.ravel() / 360 * HUE_BINS).astype(np.int64), HUE_BINS - 1)
    sb = np.minimum(((sat.ravel() - 0.15) / 0.85 * SAT_BINS).astype(np.int64), SAT_BINS - 1).clip(0)
    vb = np.minimum((val.ravel() * VAL_BINS).astype(np.int64), VAL_BINS - 1)
    gb = HUE_BINS * SAT_BINS * VAL_BINS + np.minimum((val.ravel() * GREY_BINS).astype(np.int64), GREY_BINS - 1)
    idx = np.where(grey, gb, (hb * SAT_BINS + sb) * VAL_BINS + vb)
    hist = np.bincount(idx, weights=wts, minlength=HIST_DIM).astype(np.float64)
    return (hist / max(hist.sum(), 1e-12)).astype(np.float32)


def pixel_colour_names(img: np.ndarray) -> np.ndarray:
    """Per pixel, the index into PALETTE of its colour name."""
    hue, sat, val = hsv(img)
    name = np.full(hue.shape, PALETTE.index("gray"), np.int64)
    chroma = sat * val
    achromatic = (sat < 0.22) | (chroma < 0.1)
    name[achromatic & (val >= 0.75)] = PALETTE.index("white")
    chromatic = ~achromatic
    bands = ((15, "red"), (45, "orange"), (70, "yellow"), (170, "green"), (260, "blue"), (290, "purple"),
             (340, "pink"), (361, "red"))
    lo = 0.0
    for hi, nm in bands:
        name[chromatic & (hue >= lo) & (hue < hi)] = PALETTE.index(nm)
        lo = hi
    # orange and dark yellow at low value read as brown; light, weakly saturated red as pink
    brownish = chromatic & (hue >= 10) & (hue < 60) & (val < 0.6)
    name[brownish] = PALETTE.index("brown")
    name[chromatic & ((hue < 15) | (hue >= 340)) & (sat < 0.5) & (val >= 0.7)] = PALETTE.index("pink")
    name[val < 0.2] = PALETTE.index("black")
    return name


def colour_names(img: np.ndarray, *, ring: float = 0.12, min_share: float = 0.25, top: int = 2) -> tuple[str, ...]:
    """The dominant colour names of a thing in a box crop, most dominant first (at most ``top``,
    each holding at least ``min_share`` of the thing's weight). The outer ``ring`` of each side
    is taken as background: the inside's centre-weighted colour shares less BACKGROUND_LEAK
    times the ring's, unless that leaves almost nothing (the thing has the background's colour)."""
    img = shrink(img, 96)
    h, w = img.shape[:2]
    names = pixel_colour_names(img)
    k = len(PALETTE)
    by, bx = max(1, round(h * ring)), max(1, round(w * ring))
    border = np.ones((h, w), bool)
    if h > 2 * by and w > 2 * bx:
        border[by:h - by, bx:w - bx] = False
    wts = centre_weights(h, w, 0.25) * ~border
    if not wts.any():
        wts = np.ones((h, w), np.float32)
    inner = np.bincount(names.ravel(), weights=wts.ravel(), minlength=k)
    inner = inner / max(inner.sum(), 1e-12)
    ring_share = np.bincount(names[border].ravel(), minlength=k) / max(int(border.sum()), 1)
    # the inside of a box holds some background (BACKGROUND_LEAK of it, centre-weighted): take
    # that much of the ring's colours away
    thing = np.maximum(inner - BACKGROUND_LEAK * ring_share, 0.0)
    if thing.sum() < 0.15:  # the thing has the background's colours
        thing = inner
    thing = thing / max(thing.sum(), 1e-12)
    order = [i for i in np.argsort(-thing, kind="stable") if thing[i] >= min_share][:top]
    return tuple(PALETTE[i] for i in order) or (PALETTE[int(np.argmax(thing))],)


class AppearanceEncoder:
    """Appearance vectors of crops (see the module docstring). ``embedder``: any ImageEmbedder
    (default: DescriptorEmbedder, no weights); ``hist_weight``: w."""

    def __init__(self, embedder: ImageEmbedder | None = None, *, side: int = 96, hist_weight: float = 0.5):
        if not 0.0 <= float(hist_weight) <= 1.0:
            raise ValueError(f"AppearanceEncoder: hist_weight must be in [0, 1], got {hist_weight}")
        if int(side) < 8:
            raise ValueError(f"AppearanceEncoder: side must be >= 8, got {side}")
        self.embedder = embedder if embedder is not None else DescriptorEmbedder()
        self.side = int(side)
        self.hist_weight = float(hist_weight)
        self.dim = int(self.embedder.dim) + HIST_DIM

    def encode(self, crops: list[np.ndarray]) -> np.ndarray:
        """N crops (H x W x 3 uint8, any sizes) -> N x dim float32 unit rows."""
        if not crops:
            return np.zeros((0, self.dim), np.float32)
        batch = np.stack([resize(c, self.side) for c in crops])
        emb = np.asarray(self.embedder.embed_images(batch), np.float32)
        hists = np.sqrt(np.stack([colour_histogram(c) for c in batch]))
        hists /= np.maximum(np.linalg.norm(hists, axis=1, keepdims=True), 1e-12)
        w = self.hist_weight
        return np.concatenate([emb * np.float32(np.sqrt(1 - w)), hists * np.float32(np.sqrt(w))], axis=1)
