"""Vigilance: when a monitor check can skip the model (so monitors scale to many cameras).

Two tests, both cheap next to a model call:

1. Change. A check whose frames all look like the frame the model last judged says nothing
   new: it takes that verdict instead of asking again. "Look like" is the gates' local-change
   rule on a 32 x 32 luma thumbnail (block means over the whole frame): split into 8 x 8 tiles
   of 4 x 4 thumbnail pixels (1/64 of the frame each) and call a frame changed when any tile's mean absolute difference reaches
   ``min_tile_mad`` grey levels. A small object entering one corner is a change; sensor and
   compression noise, averaged over each thumbnail pixel's block, is not.
2. Similarity (only with an embedder whose text side shares the image space, or reference
   images). A frame whose similarity to the condition is far below its recent range cannot be
   the condition appearing: the check is skipped. "Far below" is more than one range width
   (p90 - p10 of the last 32 scores, at least ``min_spread``) under the range's bottom (p10),
   once 8 scores are known. Raw cosines of different spaces are not comparable (CLIP text to
   image sits near 0.2-0.35), so the rule is relative to each monitor's own recent scores.
"""
from __future__ import annotations

from collections import deque

import numpy as np

THUMB = 32
TILE = 4  # thumbnail pixels per tile side: 8 x 8 tiles
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def thumbnail(rgb: np.ndarray) -> np.ndarray:
    """32 x 32 float32 luma: means over a 32 x 32 grid of blocks covering the whole frame
    (blocks differ by at most a pixel; frames under 32 pixels on a side are sampled instead)."""
    h, w = rgb.shape[:2]
    g = rgb.astype(np.float32) @ _LUMA
    if h < THUMB or w < THUMB:
        rows = np.linspace(0, h - 1, THUMB).round().astype(int)
        cols = np.linspace(0, w - 1, THUMB).round().astype(int)
        return g[rows][:, cols]
    re = (np.arange(THUMB + 1) * h) // THUMB
    ce = (np.arange(THUMB + 1) * w) // THUMB
    sums = np.add.reduceat(np.add.reduceat(g, re[:-1], axis=0), ce[:-1], axis=1)
    return sums / np.outer(np.diff(re), np.diff(ce))


def tile_mad(a: np.ndarray, b: np.ndarray) -> float:
    """The largest tile's mean absolute difference of two thumbnails."""
    d = np.abs(a - b).reshape(THUMB // TILE, TILE, THUMB // TILE, TILE).mean(axis=(1, 3))
    return float(d.max())


class ChangeTest:
    """Remembers the thumbnail of the last frame the model judged, per (monitor, camera)."""

    def __init__(self, min_tile_mad: float):
        self.min_tile_mad = float(min_tile_mad)
        self.judged: np.ndarray | None = None

    def changed(self, frames: list[np.ndarray]) -> tuple[bool, list[np.ndarray]]:
        """Whether any frame differs from the last judged one; also returns the thumbnails
        (``judged_now`` takes the last one when the model is asked)."""
        thumbs = [thumbnail(f) for f in frames]
        if self.judged is None:
            return True, thumbs
        return any(tile_mad(t, self.judged) >= self.min_tile_mad for t in thumbs), thumbs

    def judged_now(self, thumbs: list[np.ndarray]) -> None:
        if thumbs:
            self.judged = thumbs[-1]


class RecentRange:
    """A monitor's recent similarity scores and the "far below the range" test."""

    def __init__(self, size: int = 32, min_known: int = 8, min_spread: float = 0.02):
        self.scores: deque = deque(maxlen=size)
        self.min_known = min_known
        self.min_spread = min_spread

    def far_below(self, score: float) -> bool:
        """Whether ``score`` is far below the recent range; then records it."""
        far = False
        if len(self.scores) >= self.min_known:
            lo, hi = np.percentile(np.asarray(self.scores), [10, 90])
            far = score < lo - max(hi - lo, self.min_spread)
        self.scores.append(float(score))
        return bool(far)


class ConditionSimilarity:
    """Similarity of a frame to a monitor's condition in the image embedder's space: the best
    cosine to the condition's text (when the embedder has a text side) and to its reference
    images (``vectors`` is None when neither exists)."""

    def __init__(self, embedder):
        self.embedder = embedder

    def vectors(self, condition: str, references: list[np.ndarray]) -> np.ndarray | None:
        rows = []
        if getattr(self.embedder, "has_text", False):
            rows.append(np.asarray(self.embedder.embed_texts([condition]), dtype=np.float32))
        for img in references:
            rows.append(np.asarray(self.embedder.embed_images(img[None]), dtype=np.float32))
        if not rows:
            return None
        m = np.concatenate(rows, axis=0)
        return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)

    def score(self, vectors: np.ndarray, frame: np.ndarray) -> float:
        e = np.asarray(self.embedder.embed_images(np.ascontiguousarray(frame)[None]), dtype=np.float32)[0]
        e = e / max(float(np.linalg.norm(e)), 1e-12)
        return float((vectors @ e).max())
