"""The detector contract and the checks every body shares.

Every body takes uint8 RGB frames (an N x H x W x 3 array, or a list of H x W x 3 arrays whose
sizes may differ: frames of several cameras in one call) and returns, per frame, a list of
Detection with boxes in that frame's own pixels. Inputs are checked before any work (ValueError
naming what is wrong); model outputs are untrusted: non-finite rows are dropped, boxes clipped to
the frame, scores clamped to [0, 1], classes outside the labels dropped.
"""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from .labels import NO_LABEL
from .records import Detection, PerceptionError

MAX_DETECTIONS = 100  # per frame, after NMS (the COCO evaluation's cap)


@runtime_checkable
class Detector(Protocol):
    name: str                 # body and model, for logs: "opencv:<file>", "onnx:<file>", "tensorrt:<file>"
    labels: tuple[str, ...]   # class id -> name
    min_score: float

    def detect(self, frames) -> list[list[Detection]]: ...


def optional_module(name: str, who: str, how: str):
    """The module ``name`` (a body's optional dependency), or PerceptionError naming ``who``
    needs it and ``how`` to get it."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise PerceptionError(f"{who} needs {how}") from None


def check_frame_list(frames, who: str) -> list[np.ndarray]:
    """Validate a batch (N x H x W x 3 uint8 array, or a sequence of H x W x 3 uint8 arrays);
    returns it as a list of H x W x 3 arrays."""
    if isinstance(frames, np.ndarray):
        if frames.ndim == 3 and frames.shape[-1] == 3:
            raise ValueError(f"{who}: frames must be N x H x W x 3 (RGB), got shape {tuple(frames.shape)} "
                             f"(one frame? pass frames[None])")
        if frames.ndim != 4:
            raise ValueError(f"{who}: frames must be N x H x W x 3 (RGB), got shape {tuple(frames.shape)}")
        items = list(frames)
    elif isinstance(frames, (list, tuple)):
        items = list(frames)
    else:
        raise ValueError(f"{who}: frames must be a numpy array (N x H x W x 3 uint8 RGB) or a list of "
                         f"H x W x 3 arrays, got {type(frames).__name__}")
    for i, f in enumerate(items):
        if not isinstance(f, np.ndarray):
            raise ValueError(f"{who}: frames[{i}] must be a numpy array, got {type(f).__name__}")
        if f.dtype != np.uint8:
            raise ValueError(f"{who}: frames[{i}] must be uint8 RGB, got dtype {f.dtype}")
        if f.ndim != 3 or f.shape[-1] != 3:
            raise ValueError(f"{who}: frames[{i}] must be H x W x 3 (RGB), got shape {tuple(f.shape)}")
        if f.shape[0] < 1 or f.shape[1] < 1:
            raise ValueError(f"{who}: frames[{i}] has no pixels: shape {tuple(f.shape)}")
    return items


def check_min_score(min_score: float, who: str) -> float:
    s = float(min_score)
    if not 0.0 <= s <= 1.0:
        raise ValueError(f"{who}: min_score must be in [0, 1], got {min_score}")
    return s


def nms(boxes: np.ndarray, scores: np.ndarray, iou_max: float) -> np.ndarray:
    """Greedy non-maximum suppression: indices of the boxes kept, by descending score. A box is
    suppressed when its IoU with a kept box exceeds ``iou_max``."""
    if len(boxes) == 0:
        return np.zeros(0, np.int64)
    x0, y0, x1, y1 = (boxes[:, i].astype(np.float64) for i in range(4))
    area = np.maximum(x1 - x0, 0) * np.maximum(y1 - y0, 0)
    order = np.argsort(-scores, kind="stable")
    keep = []
    while order.size:
        i = order[0]
        keep.append(i)
        rest = order[1:]
        iw = np.maximum(0.0, np.minimum(x1[i], x1[rest]) - np.maximum(x0[i], x0[rest]))
        ih = np.maximum(0.0, np.minimum(y1[i], y1[rest]) - np.maximum(y0[i], y0[rest]))
        inter = iw * ih
        iou = inter / np.maximum(area[i] + area[rest] - inter, 1e-12)
        order = rest[iou <= iou_max]
    return np.asarray(keep, np.int64)


def batched_nms(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, iou_max: float) -> np.ndarray:
    """Class-aware NMS (boxes of different classes never suppress each other): the trick of
    offsetting each class's boxes by a distinct amount larger than any coordinate."""
    if len(boxes) == 0:
        return np.zeros(0, np.int64)
    span = float(np.abs(boxes).max()) + 1.0
    shifted = boxes.astype(np.float64) + (classes.astype(np.float64) * 2 * span)[:, None]
    return nms(shifted, scores, iou_max)


def to_detections(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, labels: Sequence[str],
                  hw: tuple[int, int], min_score: float) -> list[Detection]:
    """Model rows (boxes in frame pixels) -> Detection records, best first: rows with a
    non-finite value, a score under ``min_score``, a class outside ``labels`` or labelled "N/A",
    or a box of no area after clipping to the frame are dropped; at most MAX_DETECTIONS."""
    h, w = hw
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    scores = np.asarray(scores, np.float64).reshape(-1)
    classes = np.asarray(classes).reshape(-1)
    ok = np.isfinite(boxes).all(axis=1) & np.isfinite(scores) & (scores >= min_score)
    out = []
    for i in np.flatnonzero(ok)[np.argsort(-scores[ok], kind="stable")]:
        cid = int(classes[i])
        if not 0 <= cid < len(labels) or labels[cid] == NO_LABEL:
            continue
        x0, x1 = sorted((float(np.clip(boxes[i, 0], 0, w)), float(np.clip(boxes[i, 2], 0, w))))
        y0, y1 = sorted((float(np.clip(boxes[i, 1], 0, h)), float(np.clip(boxes[i, 3], 0, h))))
        if x1 - x0 < 1.0 or y1 - y0 < 1.0:
            continue
        out.append(Detection((x0, y0, x1, y1), labels[cid], float(min(1.0, scores[i])), cid))
        if len(out) == MAX_DETECTIONS:
            break
    return out
