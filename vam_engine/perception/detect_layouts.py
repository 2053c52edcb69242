"""Output layouts of exported detectors, told apart by output shapes, and the preprocessing each
expects. Pure numpy: the ONNX Runtime and TensorRT bodies share it.

==========  =====================================  =========================================  ======
layout      outputs                                preprocessing                              NMS
==========  =====================================  =========================================  ======
yolov8      one: N x (4 + C) x A (or N x A x       letterbox to the input size (grey 114      yes
            (4 + C)); cx, cy, w, h in input px,    padding), RGB / 255
            then C class scores
yolov5      one: N x A x (5 + C); cx, cy, w, h,    the same                                   yes
            objectness, C class scores (score =
            objectness x class score)
detr        two: N x Q x 4 boxes (cx, cy, w, h     resize to the input size, RGB / 255,       no
            normalised to [0, 1]) and N x Q x K    ImageNet mean/std
            logits: K = C + 1 (softmax, the last
            is "no object", DETR) or K = C
            (sigmoid, Deformable/RT-DETR style)
==========  =====================================  =========================================  ======

With ``layout="auto"`` the class count C is matched against the labels: 4 + C channels is
yolov8, 5 + C yolov5; with no labels file the default is COCO_80 for the YOLO layouts and
COCO_91 for detr. A shape that fits none is a PerceptionError naming the shapes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .detect_base import batched_nms, to_detections
from .labels import COCO_80, COCO_91
from .records import Detection, PerceptionError

LAYOUTS = ("auto", "yolov5", "yolov8", "detr")
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)
LETTERBOX_FILL = 114
NMS_IOU = 0.45
PRE_NMS_TOP = 1000  # candidates per frame kept before NMS (best scores)


@dataclass(frozen=True)
class Layout:
    kind: str                  # "yolov8" | "yolov5" | "detr"
    num_classes: int
    channels_first: bool = False   # yolo: the 4 + C (5 + C) axis comes before the anchor axis
    boxes_output: int = 0          # detr: which output holds the boxes, which the logits
    logits_output: int = 1
    softmax: bool = True           # detr: logits include "no object" (softmax) or not (sigmoid)


def _dim(d) -> int | None:
    return int(d) if isinstance(d, (int, np.integer)) and int(d) > 0 else None


def _yolo(shape, labels, forced: str, who: str) -> tuple[Layout, tuple[str, ...]]:
    dims = {1: _dim(shape[1]), 2: _dim(shape[2])}
    known = {ax: d for ax, d in dims.items() if d is not None}
    if not known:
        raise PerceptionError(f"{who}: output shape {list(shape)} has no fixed class axis: cannot tell its "
                              f"layout (set perception.layout)")
    want = labels if labels is not None else COCO_80
    extra = {"yolov8": 4, "yolov5": 5}
    fits = [(d, ax, kind) for ax, d in known.items() for kind, e in extra.items()
            if forced in ("auto", kind) and d - e == len(want)]
    if fits:  # when both axes fit, the class axis is the short one (anchors are many)
        d, ax, kind = min(fits)
        return Layout(kind, d - extra[kind], channels_first=ax == 1), tuple(want)
    src = "the labels file" if labels is not None else "COCO (no perception.labels given)"
    if forced == "auto" or labels is not None:
        kinds = [k for k in extra if forced in ("auto", k)]
        raise PerceptionError(f"{who}: output shape {list(shape)}: no axis has "
                              f"{' or '.join(f'{extra[k]} + {len(want)} ({k})' for k in kinds)} channels for the "
                              f"{len(want)} classes of {src}; give perception.labels (one class per line) for "
                              f"this model")
    d, ax = min((d, ax) for ax, d in known.items())  # forced, no labels: the short axis holds the classes
    c = d - extra[forced]
    if c < 1:
        raise PerceptionError(f"{who}: output shape {list(shape)} has {d} channels: too few for {forced}")
    return Layout(forced, c, channels_first=ax == 1), _numbered(c)


def _numbered(c: int) -> tuple[str, ...]:
    return tuple(f"class{i}" for i in range(c))


def _detr(shapes, names, labels, who: str) -> tuple[Layout, tuple[str, ...]]:
    last = [_dim(s[-1]) for s in shapes]
    box_idx = [i for i, d in enumerate(last) if d == 4]
    if len(box_idx) == 2:  # a 4-class model: the output named like boxes holds the boxes
        box_idx = [i for i in box_idx if "box" in names[i].lower()] or box_idx[:1]
    if len(box_idx) != 1:
        raise PerceptionError(f"{who}: detr layout needs one N x Q x 4 boxes output, got shapes "
                              f"{[list(s) for s in shapes]}")
    b = box_idx[0]
    lg = 1 - b
    k = last[lg]
    if k is None:
        raise PerceptionError(f"{who}: the logits output has no fixed class axis: shape {list(shapes[lg])}")
    want = labels if labels is not None else COCO_91
    if k == len(want) + 1:
        return Layout("detr", len(want), boxes_output=b, logits_output=lg, softmax=True), tuple(want)
    if k == len(want):
        return Layout("detr", len(want), boxes_output=b, logits_output=lg, softmax=False), tuple(want)
    src = "the labels file" if labels is not None else "COCO_91 (no perception.labels given)"
    raise PerceptionError(f"{who}: the logits output has {k} classes per query: neither {len(want)} + 1 "
                          f"(DETR, with 'no object') nor {len(want)} (sigmoid) classes of {src}; give "
                          f"perception.labels for this model")


def detect_layout(shapes: Sequence[Sequence], names: Sequence[str], labels: Sequence[str] | None,
                  forced: str = "auto", who: str = "detector") -> tuple[Layout, tuple[str, ...]]:
    """The layout of a model with these output ``shapes`` (dims: int, or None/str when dynamic)
    and the labels to use (``labels`` when given, else the layout's COCO numbering)."""
    if forced not in LAYOUTS:
        raise PerceptionError(f"{who}: perception.layout must be one of {', '.join(LAYOUTS)}, got {forced!r}")
    labels = tuple(labels) if labels is not None else None
    ranks = [len(s) for s in shapes]
    if forced in ("auto", "yolov5", "yolov8") and len(shapes) == 1 and ranks == [3]:
        return _yolo(shapes[0], labels, forced, who)
    if forced in ("auto", "detr") and len(shapes) == 2 and ranks == [3, 3]:
        return _detr(shapes, names, labels, who)
    raise PerceptionError(f"{who}: outputs {[list(s) for s in shapes]} fit no known layout (layout={forced}): "
                          f"expected one N x (4 + C) x A or N x A x (5 + C) output (YOLO) or two outputs, "
                          f"N x Q x 4 boxes and N x Q x K logits (DETR)")


@dataclass(frozen=True)
class Prepared:
    """A preprocessed batch and how to map its boxes back to each frame."""

    x: np.ndarray                        # N x 3 x H x W float32
    scale: np.ndarray                    # N: input px per frame px (letterbox)
    pad: np.ndarray                      # N x 2: letterbox padding (x, y) in input px
    sizes: list[tuple[int, int]]         # each frame's (h, w)


def letterbox(frames: list[np.ndarray], hw: tuple[int, int]) -> Prepared:
    import cv2

    H, W = hw
    x = np.full((len(frames), H, W, 3), LETTERBOX_FILL, np.uint8)
    scale = np.empty(len(frames), np.float64)
    pad = np.empty((len(frames), 2), np.float64)
    for i, f in enumerate(frames):
        h, w = f.shape[:2]
        s = min(H / h, W / w)
        nh, nw = max(1, round(h * s)), max(1, round(w * s))
        py, px = (H - nh) // 2, (W - nw) // 2
        x[i, py:py + nh, px:px + nw] = cv2.resize(f, (nw, nh), interpolation=cv2.INTER_AREA if s < 1
                                                  else cv2.INTER_LINEAR)
        scale[i], pad[i] = s, (px, py)
    x = np.ascontiguousarray(x.transpose(0, 3, 1, 2), np.float32) * np.float32(1 / 255)
    return Prepared(x, scale, pad, [f.shape[:2] for f in frames])


def resize_normalise(frames: list[np.ndarray], hw: tuple[int, int]) -> Prepared:
    import cv2

    H, W = hw
    x = np.empty((len(frames), H, W, 3), np.float32)
    for i, f in enumerate(frames):
        x[i] = cv2.resize(f, (W, H), interpolation=cv2.INTER_AREA if H * W < f.shape[0] * f.shape[1]
                          else cv2.INTER_LINEAR)
    x = (x * np.float32(1 / 255) - IMAGENET_MEAN) / IMAGENET_STD
    n = len(frames)
    return Prepared(np.ascontiguousarray(x.transpose(0, 3, 1, 2)), np.ones(n), np.zeros((n, 2)),
                    [f.shape[:2] for f in frames])


def prepare(layout: Layout, frames: list[np.ndarray], hw: tuple[int, int]) -> Prepared:
    return resize_normalise(frames, hw) if layout.kind == "detr" else letterbox(frames, hw)


def _xyxy(cxcywh: np.ndarray) -> np.ndarray:
    cx, cy, w, h = (cxcywh[:, i] for i in range(4))
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -60, 60)))


def decode(layout: Layout, outputs: Sequence[np.ndarray], prep: Prepared, labels: Sequence[str],
           min_score: float) -> list[list[Detection]]:
    """Model outputs for a prepared batch -> detections per frame, in frame pixels."""
    out = []
    for i, size in enumerate(prep.sizes):
        if layout.kind == "detr":
            boxes_n = np.asarray(outputs[layout.boxes_output][i], np.float64)
            logits = np.asarray(outputs[layout.logits_output][i], np.float64)
            if layout.softmax:
                e = np.exp(logits - logits.max(axis=1, keepdims=True))
                probs = (e / e.sum(axis=1, keepdims=True))[:, :-1]
            else:
                probs = _sigmoid(logits)
            cls = probs.argmax(axis=1)
            score = probs[np.arange(len(probs)), cls]
            h, w = size
            boxes = _xyxy(boxes_n) * np.array([w, h, w, h], np.float64)
            out.append(to_detections(boxes, score, cls, labels, size, min_score))
            continue
        pred = np.asarray(outputs[0][i], np.float64)
        if layout.channels_first:
            pred = pred.T
        if layout.kind == "yolov5":
            cls_scores = pred[:, 5:] * pred[:, 4:5]
        else:
            cls_scores = pred[:, 4:]
        cls = cls_scores.argmax(axis=1)
        score = cls_scores[np.arange(len(pred)), cls]
        ok = np.flatnonzero(np.isfinite(score) & (score >= min_score))
        ok = ok[np.argsort(-score[ok], kind="stable")[:PRE_NMS_TOP]]
        boxes = _xyxy(pred[ok, :4])
        boxes = (boxes - np.tile(prep.pad[i], 2)) / prep.scale[i]
        keep = batched_nms(np.nan_to_num(boxes), score[ok], cls[ok], NMS_IOU) if len(ok) else ok
        out.append(to_detections(boxes[keep], score[ok][keep], cls[ok][keep], labels, size, min_score))
    return out


def detect_in_batches(layout: Layout, frames: list[np.ndarray], hw: tuple[int, int], batch_size: int, run,
                      labels: Sequence[str], min_score: float, who: str) -> list:
    """Detections per frame of a model body: ``frames`` in batches of ``batch_size``, each
    prepared for ``layout``, passed to ``run(x)`` (the body's raw outputs, one row per frame) and
    decoded. An output whose rows do not match the batch is a PerceptionError naming ``who``."""
    out: list = []
    for i in range(0, len(frames), batch_size):
        chunk = frames[i:i + batch_size]
        prep = prepare(layout, chunk, hw)
        outputs = run(prep.x)
        for j, o in enumerate(outputs):
            if o.shape[0] != len(chunk):
                raise PerceptionError(f"{who}: output {j} has {o.shape[0]} rows for {len(chunk)} frames")
        out.extend(decode(layout, outputs, prep, labels, min_score))
    return out
