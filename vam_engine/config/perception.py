"""Detection, OCR, tracks and entities (``perception``)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Section


class PerceptionConfig(Section):
    """Detection, OCR, tracks and entities (perception/__init__.py: ``make_perception_stage``).
    Off by default: with no detector and ocr off nothing runs and nothing changes. Needs the
    extra ``vam_engine[perception]``."""

    detector: str | None = Field(None, description="a detector model file: a TensorFlow .pb with its OpenCV "
                                                   ".pbtxt beside it, an .onnx (YOLO or DETR layout), or a "
                                                   "TensorRT .engine; None = no detection")
    labels: str | None = Field(None, description="a labels file (one class name per line, line i = class id i); "
                                                 "None = COCO in the model's numbering")
    layout: Literal["auto", "yolov5", "yolov8", "detr"] = Field(
        "auto", description="output layout of an .onnx/.engine model; auto: told from its output shapes")
    input_size: int | None = Field(None, ge=16, le=4096, description="model input side when the model does not "
                                   "fix it (None: 300 for TensorFlow SSD, 640 YOLO, 800 DETR)")
    min_score: float = Field(0.4, ge=0, le=1, description="detections below this score are dropped")
    ocr: bool = Field(False, description="read text on kept frames (RapidOCR's PP-OCR models)")
    ocr_min_confidence: float = Field(0.8, ge=0, le=1, description="OCR lines below this confidence are dropped "
                                      "(texture misread as text scores 0.2-0.7; rendered signs 0.95+)")
    ocr_max_side: int = Field(960, ge=32, le=8192, description="long side the OCR text detector sees a frame at")
    detect_present: bool = Field(False, description="also detect on the present's 2 fps frames (denser tracks)")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: the engine's device")
    batch_size: int = Field(8, ge=1, le=256, description="frames per detector call, across cameras")
    queue_batches: int = Field(8, ge=1, le=1024, description="submissions waiting for the perception worker")
    cache_dir: str | None = Field(None, description="where onnxruntime's TensorRT provider caches engines")

    @property
    def enabled(self) -> bool:
        return bool(self.detector) or self.ocr
