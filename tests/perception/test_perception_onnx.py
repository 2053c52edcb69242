"""The ONNX Runtime detector body on tiny constructed models of each output layout: letterbox
or resize preprocessing, boxes mapped back to each frame, class scores, NMS, batching."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from support import detector_models as dm  # noqa: E402
from vam_engine.config import PerceptionConfig  # noqa: E402
from vam_engine.perception import PerceptionError, load_labels, make_detector  # noqa: E402
from vam_engine.perception import COCO_80, COCO_91  # noqa: E402
from vam_engine.perception.detect_layouts import detect_layout  # noqa: E402
from vam_engine.perception.detect_onnx import OnnxDetector  # noqa: E402


def solid(rgb, h, w):
    return np.broadcast_to(np.asarray(rgb, np.uint8), (h, w, 3)).copy()


def by_label(dets):
    return {d.label: d for d in dets}


@pytest.mark.parametrize("kind,channels_first", [("yolov8", True), ("yolov8", False), ("yolov5", False)])
def test_yolo_layouts_map_boxes_back_and_suppress_overlaps(tmp_path, kind, channels_first):
    path = dm.yolo_model(tmp_path / "m.onnx", kind, channels_first=channels_first)
    det = OnnxDetector(path, labels=dm.LABELS, min_score=0.1)
    assert det.layout.kind == kind and det.layout.num_classes == 3
    assert det.layout.channels_first == (kind == "yolov8" and channels_first)
    h, w = 64, 128  # letterboxed into 64 x 64: scale 0.5, 16 px bands top and bottom
    frames = [solid((250, 10, 10), h, w), solid((10, 10, 250), 96, 48)]  # two sizes in one call
    out = det.detect(frames)
    assert len(out) == 2
    red = by_label(out[0])
    m = dm.yolo_means((250, 10, 10), h, w)
    assert set(red) == {"red", "green", "blue"}  # anchor 3 (class 0 again, over anchor 0) suppressed
    assert len(out[0]) == 3
    assert red["red"].score == pytest.approx(m[0], abs=1e-4)
    assert red["red"].box == pytest.approx(dm.yolo_box_in_frame(0, h, w), abs=0.01)
    obj = dm.YOLO_OBJECTNESS[1] if kind == "yolov5" else 1.0
    assert red["green"].score == pytest.approx(m[1] * obj, abs=1e-4)
    assert red["blue"].box == pytest.approx(dm.yolo_box_in_frame(2, h, w), abs=0.01)
    assert [d.score for d in out[0]] == sorted((d.score for d in out[0]), reverse=True)
    blue = by_label(out[1])
    mb = dm.yolo_means((10, 10, 250), 96, 48)
    assert blue["blue"].score == pytest.approx(mb[2], abs=1e-4)
    assert blue["blue"].box == pytest.approx(dm.yolo_box_in_frame(2, 96, 48), abs=0.01)
    # the score threshold: only the frame's own colour clears it
    det.min_score = 0.5
    assert [[d.label for d in f] for f in det.detect(frames)] == [["red"], ["blue"]]


@pytest.mark.parametrize("softmax", [True, False])
def test_detr_layouts(tmp_path, softmax):
    path = dm.detr_model(tmp_path / "detr.onnx", softmax=softmax)
    det = OnnxDetector(path, labels=dm.LABELS, min_score=0.0)
    assert det.layout.kind == "detr" and det.layout.softmax is softmax
    frames = np.stack([solid((240, 30, 30), 50, 100), solid((30, 240, 30), 50, 100)])
    out = det.detect(frames)
    for f, rgb in zip(out, [(240, 30, 30), (30, 240, 30)]):
        probs = dm.detr_probs(rgb, softmax)
        assert len(f) == 2  # one per query, no NMS
        got = sorted(f, key=lambda d: d.box[0], reverse=True)  # query 0's box starts further right
        for q, d in enumerate(got):
            c = int(np.argmax(probs[q]))
            assert d.label == dm.LABELS[c]
            assert d.score == pytest.approx(probs[q, c], abs=1e-4)
            assert d.box == pytest.approx(dm.detr_box_in_frame(q, 50, 100), abs=0.01)
    assert out[0][0].label == "red" and {d.label for d in out[1]} == {"green"}


def test_fixed_batch_model_runs_any_number_of_frames(tmp_path):
    path = dm.yolo_model(tmp_path / "b1.onnx", "yolov8", batch=1)
    det = OnnxDetector(path, labels=dm.LABELS, min_score=0.5, batch_size=8)
    assert det.batch_size == 1
    colours = [(250, 0, 0), (0, 250, 0), (0, 0, 250)]
    out = det.detect([solid(c, 64, 64) for c in colours])
    assert [[d.label for d in f] for f in out] == [["red"], ["green"], ["blue"]]


def test_default_labels_must_match_the_class_count(tmp_path):
    path = dm.yolo_model(tmp_path / "m.onnx", "yolov8")
    with pytest.raises(PerceptionError, match=r"no axis has 4 \+ 80 .*perception.labels"):
        OnnxDetector(path)  # 3 classes, but COCO's 80 by default
    with pytest.raises(PerceptionError, match=r"4 \+ 5 \(yolov8\) or 5 \+ 5"):
        OnnxDetector(path, labels=("a", "b", "c", "d", "e"))
    with pytest.raises(PerceptionError, match=r"no axis has 4 \+ 5 \(yolov8\) channels"):
        OnnxDetector(path, labels=("a", "b", "c", "d", "e"), layout="yolov8")


def test_layouts_of_real_model_shapes():
    """The shapes exported YOLO and DETR models have (COCO by default)."""
    lay, labels = detect_layout([(1, 84, 8400)], ["output0"], None)
    assert (lay.kind, lay.channels_first, lay.num_classes, labels) == ("yolov8", True, 80, COCO_80)
    lay, _ = detect_layout([("batch", 8400, 84)], ["output0"], None)
    assert (lay.kind, lay.channels_first) == ("yolov8", False)
    lay, _ = detect_layout([(1, 25200, 85)], ["output"], None)
    assert (lay.kind, lay.channels_first) == ("yolov5", False)
    lay, labels = detect_layout([(1, 100, 92), (1, 100, 4)], ["logits", "pred_boxes"], None)
    assert (lay.kind, lay.softmax, lay.boxes_output, labels) == ("detr", True, 1, COCO_91)
    # forced without labels: the short axis holds the classes, named by number
    lay, labels = detect_layout([(1, 20, 8400)], ["output0"], None, "yolov8")
    assert lay.num_classes == 16 and labels[:2] == ("class0", "class1")
    with pytest.raises(PerceptionError, match="no fixed class axis"):
        detect_layout([(1, "c", "a")], ["output0"], None)


def test_unknown_layout_and_bad_files_are_errors_at_construction(tmp_path):
    with pytest.raises(PerceptionError, match="fit no known layout"):
        OnnxDetector(dm.odd_model(tmp_path / "odd.onnx"), labels=dm.LABELS)
    bad = tmp_path / "corrupt.onnx"
    bad.write_bytes(b"\x08\x07not an onnx model" * 50)
    with pytest.raises(PerceptionError, match=r"onnxruntime cannot load .*corrupt\.onnx"):
        OnnxDetector(bad)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(PerceptionError, match=r"empty\.onnx is empty"):
        OnnxDetector(empty)
    with pytest.raises(PerceptionError, match=r"nothere\.onnx does not exist"):
        OnnxDetector(tmp_path / "nothere.onnx")


def test_make_detector_picks_the_onnx_body_with_a_labels_file(tmp_path):
    path = dm.yolo_model(tmp_path / "m.onnx", "yolov5")
    labels = dm.labels_file(tmp_path / "labels.txt")
    assert load_labels(labels) == dm.LABELS
    det = make_detector(PerceptionConfig(detector=str(path), labels=str(labels), min_score=0.6), "cpu")
    assert isinstance(det, OnnxDetector) and det.layout.kind == "yolov5"
    assert [d.label for d in det.detect([solid((0, 250, 0), 64, 64)])[0]] == []  # objectness 0.5 x 0.62
    assert [d.label for d in det.detect([solid((250, 0, 0), 64, 64)])[0]] == ["red"]
    with pytest.raises(PerceptionError, match=r"layout must be one of"):
        OnnxDetector(path, labels=dm.LABELS, layout="ssd")


def test_bad_frames_are_value_errors_naming_the_problem(tmp_path):
    det = OnnxDetector(dm.yolo_model(tmp_path / "m.onnx"), labels=dm.LABELS)
    with pytest.raises(ValueError, match="one frame"):
        det.detect(np.zeros((64, 64, 3), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        det.detect([np.zeros((64, 64, 3), np.float32)])
    with pytest.raises(ValueError, match=r"frames\[1\].*H x W x 3"):
        det.detect([np.zeros((8, 8, 3), np.uint8), np.zeros((8, 8), np.uint8)])
    assert det.detect([]) == []


@pytest.mark.needs("ort_without_cuda")
def test_cuda_without_a_gpu_onnxruntime_warns_and_runs_on_the_cpu(tmp_path):
    with pytest.warns(RuntimeWarning, match="no CUDA or TensorRT execution provider"):
        det = OnnxDetector(dm.yolo_model(tmp_path / "m.onnx"), labels=dm.LABELS, device="cuda", min_score=0.5)
    assert det.providers == ["CPUExecutionProvider"] and det.device == "cpu"
    assert [d.label for d in det.detect([solid((250, 0, 0), 64, 64)])[0]] == ["red"]


@pytest.mark.needs("no_modules", "tensorrt")
def test_a_tensorrt_engine_without_tensorrt_is_a_clear_error(tmp_path):
    engine = tmp_path / "yolo.engine"
    engine.write_bytes(b"\x00" * 64)
    with pytest.raises(PerceptionError, match="TensorRT, which is not installed"):
        make_detector(PerceptionConfig(detector=str(engine)), "cpu")
    with pytest.raises(PerceptionError, match=r"gone\.engine does not exist"):
        make_detector(PerceptionConfig(detector=str(tmp_path / "gone.engine")), "cpu")
