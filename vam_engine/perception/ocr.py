"""The OCR body: RapidOCR 3.x running the PP-OCR detection and recognition ONNX models shipped
in its wheel, through onnxruntime (CUDA provider on a CUDA device, with onnxruntime-gpu).

Frames are read whole; the text detector sees a frame scaled down to at most ``max_side`` pixels
on its long side (960 reads 10 px text on a 1280 x 720 frame and costs about half of the 736 px
short-side default). The angle classifier is off unless asked for (camera text is rarely upside
down, and it costs a pass per line). Lines under ``min_confidence`` are dropped.

The models are loaded and run once on a rendered line at construction: a broken install is an
error at start, not mid-stream.
"""
from __future__ import annotations

import re
import threading
from typing import Protocol, runtime_checkable

import numpy as np

from .detect_base import check_frame_list
from .records import OcrLine, PerceptionError

_SPACES = re.compile(r"\s+")


@runtime_checkable
class OcrReader(Protocol):
    name: str

    def read(self, frames) -> list[list[OcrLine]]: ...


def normalise_text(text: str) -> str:
    """Whitespace collapsed and trimmed: the form lines are compared and stored in."""
    return _SPACES.sub(" ", text).strip()


def _import_rapidocr():
    try:
        from rapidocr import RapidOCR
    except ImportError as e:
        raise PerceptionError(f"perception.ocr needs rapidocr 3.x and onnxruntime (pip install "
                              f"'vam_engine[perception]'): {e}") from None
    return RapidOCR


class RapidOcrReader:
    """See the module docstring. ``read(frames)``: uint8 RGB frames (an N x H x W x 3 array or a
    list of H x W x 3 arrays) -> per frame, the OcrLine records read, top to bottom."""

    name = "rapidocr"

    def __init__(self, *, device: str = "cpu", min_confidence: float = 0.8, max_side: int = 960,
                 use_angle: bool = False, threads: int | None = 1):
        if not 0.0 <= float(min_confidence) <= 1.0:
            raise ValueError(f"{self.name}: min_confidence must be in [0, 1], got {min_confidence}")
        if not 32 <= int(max_side) <= 8192:
            raise ValueError(f"{self.name}: max_side must be in [32, 8192], got {max_side}")
        self.min_confidence = float(min_confidence)
        self.max_side = int(max_side)
        RapidOCR = _import_rapidocr()
        cuda = str(device).startswith("cuda")
        params = {"Global.log_level": "error", "Global.use_cls": bool(use_angle),
                  "Global.text_score": self.min_confidence, "Det.limit_type": "max",
                  "Det.limit_side_len": self.max_side, "EngineConfig.onnxruntime.use_cuda": cuda}
        if threads is not None:
            # onnxruntime's default pool spins its idle threads between ops: on a shared CPU that
            # doubled a read's CPU time (500 vs 256 ms per 1280x720 frame, wall time the same)
            if not 1 <= int(threads) <= 256:
                raise ValueError(f"{self.name}: threads must be in [1, 256] or None, got {threads}")
            params["EngineConfig.onnxruntime.intra_op_num_threads"] = int(threads)
            params["EngineConfig.onnxruntime.inter_op_num_threads"] = 1
        if cuda:
            params["EngineConfig.onnxruntime.cuda_ep_cfg.device_id"] = int(str(device).partition(":")[2] or 0)
        self.device = str(device) if cuda else "cpu"
        self._lock = threading.Lock()
        try:
            self._ocr = RapidOCR(params=params)
            got = self._read_one(_probe_line())
        except PerceptionError:
            raise
        except Exception as e:  # noqa: BLE001 - a broken install fails in many ways
            raise PerceptionError(f"perception.ocr: RapidOCR cannot load its models: {type(e).__name__}: "
                                  f"{str(e).strip()[:300]}") from None
        if not got:
            raise PerceptionError("perception.ocr: RapidOCR loads but reads nothing on a rendered test line "
                                  "(broken models?)")

    def _read_one(self, rgb: np.ndarray) -> list[OcrLine]:
        h, w = rgb.shape[:2]
        with self._lock:
            res = self._ocr(np.ascontiguousarray(rgb[:, :, ::-1]))  # RapidOCR takes arrays as BGR
        boxes, txts, scores = (getattr(res, k, None) for k in ("boxes", "txts", "scores"))
        if boxes is None or txts is None or scores is None:
            return []
        out = []
        for poly, text, conf in zip(boxes, txts, scores):
            text, conf = normalise_text(str(text)), float(conf)
            poly = np.asarray(poly, np.float64).reshape(-1, 2)
            if not text or not np.isfinite(conf) or conf < self.min_confidence or not np.isfinite(poly).all():
                continue
            x0, y0 = np.clip(poly.min(axis=0), 0, (w, h))
            x1, y1 = np.clip(poly.max(axis=0), 0, (w, h))
            out.append(OcrLine((float(x0), float(y0), float(x1), float(y1)), text, min(conf, 1.0),
                               tuple((float(x), float(y)) for x, y in poly)))
        out.sort(key=lambda ln: (ln.box[1], ln.box[0]))
        return out

    def read(self, frames) -> list[list[OcrLine]]:
        return [self._read_one(f) for f in check_frame_list(frames, self.name)]

    def __repr__(self) -> str:
        return f"RapidOcrReader(device={self.device!r}, max_side={self.max_side})"


def _probe_line() -> np.ndarray:
    """A dark "OCR 42" on white, 64 x 200 px: what the start-up check must read."""
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (200, 64), (255, 255, 255))
    ImageDraw.Draw(img).text((12, 10), "OCR 42", fill=(0, 0, 0), font=ImageFont.load_default(size=36))
    return np.asarray(img)
