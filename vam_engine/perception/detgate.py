"""Where the detector runs: only where a camera's picture changed since its last perceived frame.

A detector call costs the same whatever a frame holds (SSD-MobileNet: ~70 ms of a core at 300 x
300), so the way to pay less is to call it less. Per camera, in time order, the gate compares a
grey thumbnail of each frame with the camera's last perceived one on a grid of tiles (a tile's
mean absolute difference over ``tile_mad``: changed) and plans one of:

- ``carry``: nothing changed (a near-duplicate), or every changed tile is explained by a thing
  already detected: its box is unchanged, or its patch of the last thumbnail is found again
  nearby (normalised cross-correlation at least ``match_min``: a tracked thing that moved, its
  box moved with it). The last detections are carried (moved ones at their new place); no call.
- ``region``: the unexplained tiles lie in a box (padded by ``crop_pad`` of its size, at least
  ``MIN_PAD`` pixels) of at most ``crop_max`` of the frame: the detector sees that crop (at its
  own input size, so a small thing is seen larger), its boxes are shifted back to the frame
  (``to_frame``), and carried detections outside the crop are kept.
- ``full``: a camera's first frame, a frame of a new size, a large change, or the first frame of
  each ``refresh_s`` window of camera time (bounds what carrying can drift; on a fixed grid, so
  a resumed run refreshes where an uninterrupted one does).

The gate's own grid is used, not the frame gate's record: that holds only the largest tile's
change and a count of changed tiles (not where), and is taken against the last kept frame, not
against the last one perceived.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np

from .records import Box, Detection

MIN_PAD = 24.0  # frame pixels around a changed region at least: context for the detector
MAX_ASPECT = 2.0
SEARCH = 0.25  # a moved thing is looked for this share of the picture's side around its box, at least
EXPLAIN_PAD = 0.25  # a thing's box grown by this share of its side explains the change around it (boxes
#                     are tighter than what moves with a thing: limbs, shadow, motion blur)
  # a crop is widened to at most this aspect ratio (the detector squashes to a square)


@dataclass(frozen=True)
class DetectPlan:
    """What to do for one frame: ``kind``; ``box``: the crop (x0, y0, x1, y1, whole frame pixels)
    of a ``region`` plan; ``carried``: detections kept from the camera's last perceived frame
    (moved where their thing moved), with ``carried_from`` their indices in it; ``moved``: the
    old and new boxes of the things that moved, grown as they explained the change;
    ``explained``: every changed tile was explained so (a carry, or a refresh that would have
    carried)."""

    kind: Literal["full", "region", "carry"]
    box: tuple[int, int, int, int] | None = None
    carried: tuple[Detection, ...] = ()
    carried_from: tuple[int, ...] = ()
    moved: tuple[Box, ...] = ()
    explained: bool = False  # every change explained (carried, or a refresh that could have been)


@dataclass
class _Camera:
    thumb: np.ndarray
    frame_hw: tuple[int, int]
    detections: list[Detection] = field(default_factory=list)
    full_t: float = float("-inf")


def to_frame(dets: Sequence[Detection], box: tuple[int, int, int, int]) -> list[Detection]:
    """Detections made on the crop ``box`` of a frame, in the frame's pixels."""
    x0, y0 = float(box[0]), float(box[1])
    return [Detection((d.box[0] + x0, d.box[1] + y0, d.box[2] + x0, d.box[3] + y0), d.label, d.score, d.class_id)
            for d in dets]


def _meets(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


class DetectionGate:
    """See the module docstring. One gate serves many cameras (state per camera id); each
    camera's frames must come in time order. Not thread-safe: the perception stage owns it."""

    def __init__(self, *, thumb_long: int = 320, tile: int = 16, tile_mad: float = 6.0, crop_max: float = 0.35,
                 crop_pad: float = 0.25, refresh_s: float = 30.0, match_min: float = 0.8):
        if int(thumb_long) < 32 or not 2 <= int(tile) <= int(thumb_long):
            raise ValueError(f"DetectionGate: need thumb_long >= 32 and 2 <= tile <= thumb_long, got "
                             f"thumb_long={thumb_long}, tile={tile}")
        if not 0.0 <= float(crop_max) <= 1.0 or float(crop_pad) < 0 or float(refresh_s) <= 0:
            raise ValueError(f"DetectionGate: need crop_max in [0, 1], crop_pad >= 0, refresh_s > 0; got "
                             f"{crop_max}, {crop_pad}, {refresh_s}")
        if not -1.0 <= float(match_min) <= 1.0 or float(tile_mad) < 0:
            raise ValueError(f"DetectionGate: need match_min in [-1, 1] and tile_mad >= 0, got {match_min}, "
                             f"{tile_mad}")
        self.thumb_long, self.tile, self.tile_mad = int(thumb_long), int(tile), float(tile_mad)
        self.crop_max, self.crop_pad = float(crop_max), float(crop_pad)
        self.refresh_s, self.match_min = float(refresh_s), float(match_min)
        self._cams: dict[str, _Camera] = {}

    # -- pictures -----------------------------------------------------------------------------------
    def thumbnail(self, frame: np.ndarray) -> np.ndarray:
        """A grey float32 thumbnail of ``frame`` whose long side is ``thumb_long`` (area-averaged:
        sensor noise and codec ringing average out)."""
        import cv2

        H, W = frame.shape[:2]
        s = self.thumb_long / max(H, W)
        size = (max(1, round(W * s)), max(1, round(H * s)))
        gray = cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)
        return cv2.resize(gray, size, interpolation=cv2.INTER_AREA).astype(np.float32)

    def _changed(self, before: np.ndarray, now: np.ndarray) -> np.ndarray:
        """The tile grid (ceil(h / tile) x ceil(w / tile) bool): tiles whose mean change passes."""
        d = np.abs(now - before)
        t = self.tile
        h, w = d.shape
        ph, pw = -h % t, -w % t
        sums = np.pad(d, ((0, ph), (0, pw))).reshape((h + ph) // t, t, (w + pw) // t, t).sum(axis=(1, 3))
        ones = np.pad(np.ones_like(d), ((0, ph), (0, pw))).reshape(sums.shape[0], t, sums.shape[1], t).sum(axis=(1, 3))
        return sums / ones >= self.tile_mad

    def _tiles(self, box: Box, scale: float, grid: tuple[int, int]) -> tuple[slice, slice]:
        """The tiles a frame-pixel box covers."""
        t = self.tile * 1.0
        x0, y0 = int(box[0] * scale // t), int(box[1] * scale // t)
        x1, y1 = int(np.ceil(box[2] * scale / t)), int(np.ceil(box[3] * scale / t))
        return slice(max(0, y0), min(grid[0], max(y1, y0 + 1))), slice(max(0, x0), min(grid[1], max(x1, x0 + 1)))

    def _follow(self, before: np.ndarray, now: np.ndarray, box: Box, scale: float) -> Box | None:
        """Where ``box``'s patch of ``before`` is in ``now`` (frame pixels), searched within a
        box's size around it; None when it is not found well enough."""
        import cv2

        h, w = before.shape
        x0, y0 = int(np.floor(box[0] * scale)), int(np.floor(box[1] * scale))
        x1, y1 = int(np.ceil(box[2] * scale)), int(np.ceil(box[3] * scale))
        x0, y0, x1, y1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
        bw, bh = x1 - x0, y1 - y0
        if bw < 4 or bh < 4:
            return None
        patch = before[y0:y1, x0:x1]
        if float(patch.std()) < 2.0:  # a flat patch matches anywhere
            return None
        # things move further between kept frames (2 s apart by default) than their own size
        rx, ry = max(bw, bh, int(SEARCH * w)), max(bw, bh, int(SEARCH * h))
        sx0, sy0 = max(0, x0 - rx), max(0, y0 - ry)
        sx1, sy1 = min(w, x1 + rx), min(h, y1 + ry)
        score = cv2.matchTemplate(now[sy0:sy1, sx0:sx1], patch, cv2.TM_CCOEFF_NORMED)
        _, best, _, (mx, my) = cv2.minMaxLoc(score)
        if not np.isfinite(best) or best < self.match_min:
            return None
        dx, dy = (sx0 + mx - x0) / scale, (sy0 + my - y0) / scale
        return (box[0] + dx, box[1] + dy, box[2] + dx, box[3] + dy)

    # -- plans --------------------------------------------------------------------------------------
    def plan(self, camera_id: str, frame: np.ndarray, t: float) -> tuple[DetectPlan, np.ndarray]:
        """The plan for ``camera_id``'s frame at ``t``, and its thumbnail (give both back to
        ``update`` with what was detected)."""
        thumb = self.thumbnail(frame)
        H, W = frame.shape[:2]
        cam = self._cams.get(camera_id)
        # the refresh falls on a fixed grid of camera time (the first frame of each refresh_s
        # window), not refresh_s after the last full call: a run resumed after a kill, whose
        # first frame is detected whole, refreshes on the same frames as an uninterrupted one
        if cam is None or cam.frame_hw != (H, W) or cam.thumb.shape != thumb.shape:
            return DetectPlan("full"), thumb
        plan = self._plan(cam, thumb, (H, W))
        if plan.kind != "full" and np.floor(t / self.refresh_s) > np.floor(cam.full_t / self.refresh_s):
            # what it explained stays known (the text gate still disregards the motion)
            return DetectPlan("full", moved=plan.moved, explained=plan.explained), thumb
        return plan, thumb

    def _plan(self, cam: _Camera, thumb: np.ndarray, hw: tuple[int, int]) -> DetectPlan:
        H, W = hw
        changed = self._changed(cam.thumb, thumb)
        if not changed.any():
            return DetectPlan("carry", carried=tuple(cam.detections), carried_from=tuple(range(len(cam.detections))),
                              explained=True)
        scale = thumb.shape[1] / W
        explained = np.zeros_like(changed)
        carried, src, moved = [], [], []
        for k, d in enumerate(cam.detections):
            ys, xs = self._tiles(d.box, scale, changed.shape)
            if not changed[ys, xs].any():
                carried.append(d)
                src.append(k)
                continue
            new = self._follow(cam.thumb, thumb, d.box, scale)
            if new is None:
                continue  # gone, or changed past recognition: its tiles stay unexplained
            nb = (max(0.0, new[0]), max(0.0, new[1]), min(float(W), new[2]), min(float(H), new[3]))
            if nb[2] - nb[0] < 1 or nb[3] - nb[1] < 1:
                continue
            for b in (d.box, nb):  # boxes are a little tighter than what moved with them
                px, py = EXPLAIN_PAD * (b[2] - b[0]), EXPLAIN_PAD * (b[3] - b[1])
                grown = (max(0.0, b[0] - px), max(0.0, b[1] - py), min(float(W), b[2] + px), min(float(H), b[3] + py))
                ys, xs = self._tiles(grown, scale, changed.shape)
                explained[ys, xs] = True
                moved.append(grown)
            carried.append(Detection(nb, d.label, d.score, d.class_id))
            src.append(k)
        rest = changed & ~explained
        if not rest.any():
            return DetectPlan("carry", carried=tuple(carried), carried_from=tuple(src), moved=tuple(moved),
                              explained=True)
        box = self._region(rest, scale, (H, W), [d.box for d in carried])
        if box is None:
            return DetectPlan("full")
        keep = [(d, k) for d, k in zip(carried, src) if not _meets(d.box, box)]
        return DetectPlan("region", box, tuple(d for d, _ in keep), tuple(k for _, k in keep))

    def _region(self, rest: np.ndarray, scale: float, hw: tuple[int, int],
                boxes: Sequence[Box] = ()) -> tuple[int, int, int, int] | None:
        """The padded frame-pixel box around the tiles ``rest``, grown to take in whole every
        box of ``boxes`` it meets (a crop cutting a thing in two would lose it: the thing is
        detected again in it); None when over ``crop_max``."""
        H, W = hw
        ys, xs = np.nonzero(rest)
        t = self.tile / scale
        x0, y0 = xs.min() * t, ys.min() * t
        x1, y1 = min(W, (xs.max() + 1) * t), min(H, (ys.max() + 1) * t)
        px = max(MIN_PAD, self.crop_pad * (x1 - x0))
        py = max(MIN_PAD, self.crop_pad * (y1 - y0))
        x0, y0, x1, y1 = x0 - px, y0 - py, x1 + px, y1 + py
        bw, bh = x1 - x0, y1 - y0
        if bw < bh / MAX_ASPECT:  # too tall: widen, about the middle
            g = (bh / MAX_ASPECT - bw) / 2
            x0, x1 = x0 - g, x1 + g
        elif bh < bw / MAX_ASPECT:
            g = (bw / MAX_ASPECT - bh) / 2
            y0, y1 = y0 - g, y1 + g
        grown = True
        while grown:
            grown = False
            for b in boxes:
                if _meets(b, (x0, y0, x1, y1)) and not (x0 <= b[0] and y0 <= b[1] and x1 >= b[2] and y1 >= b[3]):
                    x0, y0 = min(x0, b[0] - MIN_PAD), min(y0, b[1] - MIN_PAD)
                    x1, y1 = max(x1, b[2] + MIN_PAD), max(y1, b[3] + MIN_PAD)
                    grown = True
        box = (int(max(0, np.floor(x0))), int(max(0, np.floor(y0))), int(min(W, np.ceil(x1))), int(min(H, np.ceil(y1))))
        if (box[2] - box[0]) * (box[3] - box[1]) > self.crop_max * W * H:
            return None
        return box

    def update(self, camera_id: str, thumb: np.ndarray, frame_hw: tuple[int, int], t: float,
               detections: Sequence[Detection], full: bool) -> None:
        """``camera_id``'s frame at ``t`` was perceived with ``detections`` (``full``: a
        full-frame call): later frames are compared with it."""
        cam = self._cams.get(camera_id)
        full_t = t if full or cam is None else cam.full_t
        self._cams[camera_id] = _Camera(thumb, tuple(frame_hw), list(detections), full_t)

    def forget(self, camera_id: str) -> None:
        self._cams.pop(camera_id, None)

    def cameras(self) -> list[str]:
        """The cameras it holds a last perceived frame for."""
        return list(self._cams)
