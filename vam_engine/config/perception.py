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
    detect_gate: bool = Field(True, description="run the detector only where a camera's picture changed since its "
                              "last perceived frame (perception/detgate.py): carry the last detections when "
                              "nothing changed or tracked things only moved, detect a crop of a small change; "
                              "false: every frame whole")
    detect_tile_mad: float = Field(6.0, ge=0, le=255, description="a tile (16 px of a 320 px thumbnail) changed "
                                   "when its mean absolute grey difference is at least this")
    detect_crop_max: float = Field(0.35, ge=0, le=1, description="largest changed region, as a share of the frame, "
                                   "detected as a crop (larger: the whole frame; 0: never a crop)")
    detect_crop_pad: float = Field(0.25, ge=0, le=4, description="a crop's padding around its changed region, as "
                                   "a share of the region's side (at least 24 px)")
    detect_refresh_s: float = Field(30.0, gt=0, description="the first frame of each window of this many camera "
                                    "seconds is detected whole whatever changed (bounds how long carried boxes drift)")
    detect_match_min: float = Field(0.8, ge=-1, le=1, description="correlation at which a detected thing's patch "
                                    "is found again where it moved (its box carried, no detector call)")
    region_detector: str | None = Field(None, description="a second, cheaper detector body (an int8-quantised or "
                                        "smaller model, same file kinds and labels as detector) for changed-region "
                                        "crops; full frames use detector. None: detector for both")
    threads: int | None = Field(1, ge=1, le=256, description="CPU threads of one detector pass or OCR read "
                                "(onnxruntime's intra-op pool; OpenCV DNN's for its pass); None: the libraries' "
                                "default, every core (on shared cores their waiting threads doubled OCR's CPU time "
                                "for no gain in wall time)")
    ocr_ignore_motion: bool = Field(True, description="the text gate disregards changes where tracked things only "
                                    "moved since the last read (with a detector and detect_gate)")
    max_entities: int = Field(4096, ge=1, le=1_000_000, description="entities held in memory for linking (their "
                              "appearance and tracks); the least recently seen go first and stay in the store")

    @property
    def enabled(self) -> bool:
        return bool(self.detector) or self.ocr
