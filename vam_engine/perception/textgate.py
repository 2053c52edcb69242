"""When to read a camera's text again: a cheap test that something text-like changed since the
camera's last OCR read, and what changed between two reads.

The test works on a grey thumbnail (an area downscale by an integer factor to at most
``work_long`` px on the long side: 640 for 720p, half resolution) cut into ``cell`` x ``cell``
cells (16: 32 px at 720p):

- a cell is *text-like* when strong gradients (a step of at least ``edge_min`` grey levels
  between neighbours) are dense in it (``text_density`` of its pixels) and run both ways (glyph
  strokes have horizontal and vertical edges; a horizon, a shelf edge or a flat wall do not);
- a cell *changed* when at least ``min_pixels`` of its pixels moved by ``pixel_diff`` grey levels
  or more since the last read frame (one stroke of a changing digit: a few pixels, far apart
  from sensor noise and codec ringing), or its mean abs difference reaches ``cell_mad``;
- a frame is read when a cell changed that is text-like now or was at the last read (text
  appeared, changed or went), widened by one cell (glyphs cross cell borders). A camera's first
  frame, or a frame of a new size, is always read.
- ``region`` says where: the box around those cells (widened by a cell), so a reader may read
  that part of the frame and carry the camera's other lines (``read_box``, ``merge_lines``);
  the whole frame (None) when the part would be more than ``max_region`` of it.

Moving textured things (fur, foliage, a patterned shirt) look text-like too and cause reads: the
test errs towards reading. ``benchmarks/bench_perception.py`` measures its skip and miss rates.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .ocr import normalise_text
from .records import OcrLine, TextChange



@dataclass(frozen=True)
class TextSignature:
    """What the gate keeps of a frame: the grey thumbnail (padded to whole cells) and its
    text-like cells."""

    gray: np.ndarray      # h x w float32, h and w multiples of the cell
    textlike: np.ndarray  # (h / cell) x (w / cell) bool
    frame_hw: tuple[int, int]


def _cells(x: np.ndarray, cell: int) -> np.ndarray:
    """h x w -> (h/cell) x (w/cell) x cell*cell view of the cells."""
    h, w = x.shape
    return x.reshape(h // cell, cell, w // cell, cell).swapaxes(1, 2).reshape(h // cell, w // cell, -1)


class TextChangeGate:
    """See the module docstring. One gate serves many cameras (state per camera id); calls for
    one camera must come in time order. Not thread-safe: the perception stage's worker owns it."""

    def __init__(self, *, work_long: int = 640, cell: int = 16, edge_min: float = 40.0,
                 text_density: float = 0.06, min_contrast: float = 60.0, max_mid: float = 0.25,
                 pixel_diff: float = 32.0, min_pixels: int = 2, cell_mad: float = 10.0, min_new_cells: int = 3,
                 max_region: float = 0.5):
        if int(work_long) < 32 or int(cell) < 4 or int(cell) > int(work_long):
            raise ValueError(f"TextChangeGate: need work_long >= 32 and 4 <= cell <= work_long, got "
                             f"work_long={work_long}, cell={cell}")
        self.work_long, self.cell = int(work_long), int(cell)
        self.edge_min, self.text_density = float(edge_min), float(text_density)
        self.min_contrast, self.max_mid = float(min_contrast), float(max_mid)
        self.pixel_diff, self.min_pixels, self.cell_mad = float(pixel_diff), int(min_pixels), float(cell_mad)
        self.min_new_cells = int(min_new_cells)
        self.max_region = float(max_region)
        self._last: dict[str, TextSignature] = {}
        self.reads = 0
        self.skips = 0

    def signature(self, frame: np.ndarray) -> TextSignature:
        """The grey thumbnail and text-like cells of one H x W x 3 uint8 RGB frame."""
        import cv2

        H, W = frame.shape[:2]
        f = max(1, -(-max(H, W) // self.work_long))
        gray = cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)
        if f > 1:
            gray = cv2.resize(gray, (W // f, H // f), interpolation=cv2.INTER_AREA)
        gray = gray.astype(np.float32)
        c = self.cell
        ph, pw = -gray.shape[0] % c, -gray.shape[1] % c
        if ph or pw:
            gray = np.pad(gray, ((0, ph), (0, pw)), mode="edge")
        gx = np.zeros(gray.shape, bool)
        gy = np.zeros(gray.shape, bool)
        gx[:, 1:] = np.abs(np.diff(gray, axis=1)) >= self.edge_min
        gy[1:] = np.abs(np.diff(gray, axis=0)) >= self.edge_min
        dx, dy = _cells(gx, c).mean(axis=2), _cells(gy, c).mean(axis=2)
        edges = ((dx + dy) >= self.text_density) & (dx >= self.text_density / 4) & (dy >= self.text_density / 4)
        # glyphs are two-toned (ink and ground, a thin anti-aliased rim between): few of a text
        # cell's pixels lie in the middle half of its range; fur, foliage and faces spread over it
        vals = np.sort(_cells(gray, c), axis=2)
        n = vals.shape[2]
        lo, hi = vals[..., n // 20], vals[..., n - 1 - n // 20]
        span = hi - lo
        mid = ((vals > (lo + span / 4)[..., None]) & (vals < (hi - span / 4)[..., None])).mean(axis=2)
        textlike = edges & (span >= self.min_contrast) & (mid <= self.max_mid)
        return TextSignature(gray, textlike, (H, W))

    def changed_cells(self, before: TextSignature, now: TextSignature) -> np.ndarray:
        """Cells (bool grid) where ``now`` differs from ``before`` enough to have changed text."""
        d = _cells(np.abs(now.gray - before.gray), self.cell)
        return ((d >= self.pixel_diff).sum(axis=2) >= self.min_pixels) | (d.mean(axis=2) >= self.cell_mad)

    def text_changed_cells(self, before: TextSignature, now: TextSignature) -> tuple[int, int, int]:
        """Changed cells that were and are text-like (text changed in place), that became
        text-like, and that stopped being text-like."""
        ch = self.changed_cells(before, now)
        a, b = before.textlike, now.textlike
        return int((ch & a & b).sum()), int((ch & b & ~a).sum()), int((ch & a & ~b).sum())

    def _ignore_mask(self, sig: TextSignature, ignore: Sequence) -> np.ndarray | None:
        """The cells (bool grid) that the frame-pixel boxes ``ignore`` touch; None for none."""
        if not ignore:
            return None
        H, W = sig.frame_hw
        f = max(1, -(-max(H, W) // self.work_long))
        c = self.cell * f  # a cell in frame pixels
        mask = np.zeros(sig.textlike.shape, bool)
        for x0, y0, x1, y1 in ignore:
            mask[max(0, int(y0 // c)):max(0, int(np.ceil(y1 / c))), max(0, int(x0 // c)):max(0, int(np.ceil(x1 / c)))] = True
        return mask

    def should_read(self, camera_id: str, sig: TextSignature, ignore: Sequence = ()) -> bool:
        """Whether ``camera_id``'s text may have changed since its last read (counted).
        ``ignore``: frame-pixel boxes whose changes do not count (things seen moving there)."""
        last = self._last.get(camera_id)
        if last is None or last.gray.shape != sig.gray.shape or last.frame_hw != sig.frame_hw:
            read = True
        else:
            ch = self.changed_cells(last, sig)
            mask = self._ignore_mask(sig, ignore)
            if mask is not None:
                ch &= ~mask
            a, b = last.textlike, sig.textlike
            stayed, came, went = int((ch & a & b).sum()), int((ch & b & ~a).sum()), int((ch & a & ~b).sum())
            read = stayed > 0 or came >= self.min_new_cells or went >= self.min_new_cells
        if read:
            self.reads += 1
        else:
            self.skips += 1
        return read

    def regions(self, camera_id: str, sig: TextSignature,
                ignore: Sequence = ()) -> list[tuple[float, float, float, float]] | None:
        """Where ``sig``'s frame holds text that may have changed since the camera's last read:
        a box (x0, y0, x1, y1, frame pixels) per cluster of changed cells that are or were
        text-like (a counter changing while a thing moves elsewhere: two small parts, not the
        box around both), each widened by a cell; None for the whole frame (a first read, a new
        size, no such cell, or parts over ``max_region`` of the frame together)."""
        last = self._last.get(camera_id)
        if last is None or last.gray.shape != sig.gray.shape or last.frame_hw != sig.frame_hw:
            return None
        cells = self.changed_cells(last, sig) & (last.textlike | sig.textlike)
        mask = self._ignore_mask(sig, ignore)
        if mask is not None:
            cells &= ~mask
        if not cells.any():
            return None
        import cv2

        # cells a cell apart are one cluster (a line's glyphs leave gaps)
        grown = cv2.dilate(cells.astype(np.uint8), np.ones((3, 3), np.uint8))
        n, lab = cv2.connectedComponents(grown, connectivity=8)
        H, W = sig.frame_hw
        f = max(1, -(-max(H, W) // self.work_long))  # thumbnail pixels -> frame pixels
        c = self.cell * f
        out = []
        for k in range(1, n):
            ys, xs = np.nonzero((lab == k) & cells)
            if len(ys):
                out.append((float(max(0, (xs.min() - 1) * c)), float(max(0, (ys.min() - 1) * c)),
                            float(min(W, (xs.max() + 2) * c)), float(min(H, (ys.max() + 2) * c))))
        if sum((b[2] - b[0]) * (b[3] - b[1]) for b in out) > self.max_region * W * H:
            return None
        return out

    def region(self, camera_id: str, sig: TextSignature,
               ignore: Sequence = ()) -> tuple[float, float, float, float] | None:
        """The box around all of ``regions``; None for the whole frame (as there, or when that
        box is over ``max_region`` of the frame)."""
        parts = self.regions(camera_id, sig, ignore)
        if not parts:
            return None
        box = (min(b[0] for b in parts), min(b[1] for b in parts), max(b[2] for b in parts), max(b[3] for b in parts))
        H, W = sig.frame_hw
        if (box[2] - box[0]) * (box[3] - box[1]) > self.max_region * W * H:
            return None
        return box

    def mark_read(self, camera_id: str, sig: TextSignature) -> None:
        """``sig``'s frame was read: later frames of the camera are compared with it."""
        self._last[camera_id] = sig

    def forget(self, camera_id: str) -> None:
        self._last.pop(camera_id, None)

    def cameras(self) -> list[str]:
        """The cameras it holds a last read for."""
        return list(self._last)


def _meets(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def read_box(region, lines: Sequence[OcrLine], frame_hw: tuple[int, int], pad: float = 8.0):
    """The part of a frame to read for ``region``: it widened to take in whole every line of the
    last read it meets (a line cut in two would be misread), padded; whole pixels, clipped."""
    x0, y0, x1, y1 = region
    grown = True
    while grown:
        grown = False
        for ln in lines:
            if _meets(ln.box, (x0, y0, x1, y1)) and not (x0 <= ln.box[0] and y0 <= ln.box[1] and x1 >= ln.box[2]
                                                          and y1 >= ln.box[3]):
                x0, y0, x1, y1 = min(x0, ln.box[0]), min(y0, ln.box[1]), max(x1, ln.box[2]), max(y1, ln.box[3])
                grown = True
    H, W = frame_hw
    return (int(max(0, x0 - pad)), int(max(0, y0 - pad)), int(min(W, x1 + pad + 0.999)),
            int(min(H, y1 + pad + 0.999)))


def merge_lines(last: Sequence[OcrLine], box, read: Sequence[OcrLine]) -> list[OcrLine]:
    """The camera's lines after reading the part ``box`` of a frame: the last read's lines
    outside it, and those read in it (boxes in the frame's pixels), top to bottom."""
    kept = [ln for ln in last if not _meets(ln.box, box)]
    return sorted(kept + list(read), key=lambda ln: (ln.box[1], ln.box[0]))


def shift_lines(lines: Sequence[OcrLine], dx: float, dy: float) -> list[OcrLine]:
    """Lines read in a crop, in the frame's pixels."""
    return [OcrLine((ln.box[0] + dx, ln.box[1] + dy, ln.box[2] + dx, ln.box[3] + dy), ln.text, ln.confidence,
                    tuple((x + dx, y + dy) for x, y in ln.polygon)) for ln in lines]


def text_change(before: Sequence[OcrLine] | None, after: Sequence[OcrLine]) -> TextChange | None:
    """How the strings of two reads of one camera differ (as multisets of whitespace-collapsed,
    case-folded strings); None when they hold the same strings. ``before`` None (a first read):
    a change when ``after`` holds any text."""
    from collections import Counter

    def bag(lines):
        return Counter(normalise_text(ln.text).casefold() for ln in lines or ())

    a, b = bag(before), bag(after)
    if a == b:
        return None
    shown = {normalise_text(ln.text).casefold(): normalise_text(ln.text) for ln in list(before or ()) + list(after)}
    appeared = tuple(shown[k] for k in sorted((b - a).elements()))
    disappeared = tuple(shown[k] for k in sorted((a - b).elements()))
    return TextChange(appeared, disappeared)
