"""The ONNX Runtime body: an exported YOLO (v5/v8-style) or DETR-style detector (``.onnx``).

The model's first input must be N x 3 x H x W (float32 or float16); H and W come from the model
when fixed, else ``input_size`` (default 640 for YOLO layouts, 800 for DETR). A fixed batch axis
is honoured (frames run in chunks of it, the last one padded). The output layout is told from
the output shapes of one run on a blank frame at construction (detect_layouts.py), so an
unloadable model or one of an unknown layout is an error at start, naming the file.

Execution providers: CPU; on a CUDA device, ONNX Runtime's TensorRT provider first when the
installed onnxruntime has it (fp16, engines cached under ``<cache_dir>/onnx-trt``), then CUDA,
then CPU for what they do not take. Without a GPU-enabled onnxruntime, a warning and the CPU.
"""
from __future__ import annotations

import threading
import warnings
from pathlib import Path

import numpy as np

from .detect_base import check_frame_list, check_min_score, optional_module
from .detect_layouts import Layout, detect_in_batches, detect_layout, prepare
from .records import Detection, PerceptionError


NEEDS_ORT = "onnxruntime (pip install 'vam_engine[perception]', or onnxruntime-gpu for CUDA)"


def providers_for(ort, device: str, cache_dir: str | None, who: str, tensorrt_ep: bool = True) -> list:
    if not str(device).startswith("cuda"):
        return ["CPUExecutionProvider"]
    have = set(ort.get_available_providers())
    idx = int(str(device).partition(":")[2] or 0)
    out: list = []
    if tensorrt_ep and "TensorrtExecutionProvider" in have:
        from ..embed import cache_root

        cache = cache_root(cache_dir) / "onnx-trt"
        cache.mkdir(parents=True, exist_ok=True)
        out.append(("TensorrtExecutionProvider", {"device_id": idx, "trt_fp16_enable": True,
                                                  "trt_engine_cache_enable": True,
                                                  "trt_engine_cache_path": str(cache)}))
    if "CUDAExecutionProvider" in have:
        out.append(("CUDAExecutionProvider", {"device_id": idx}))
    if not out:
        warnings.warn(f"{who}: onnxruntime has no CUDA or TensorRT execution provider (install "
                      f"onnxruntime-gpu); running on CPU", RuntimeWarning, stacklevel=3)
    return out + ["CPUExecutionProvider"]


def model_file(model: str | Path) -> Path:
    p = Path(model).expanduser()
    if not p.exists():
        raise PerceptionError(f"perception.detector: {p} does not exist")
    if not p.is_file():
        raise PerceptionError(f"perception.detector: {p} is not a file")
    if p.stat().st_size == 0:
        raise PerceptionError(f"perception.detector: {p} is empty")
    return p


def input_hw(shape, input_size: int | None, default: int, who: str) -> tuple[int, int]:
    if len(shape) != 4:
        raise PerceptionError(f"{who}: the model's input has shape {list(shape)}; expected N x 3 x H x W")
    c = shape[1]
    if isinstance(c, (int, np.integer)) and int(c) != 3:
        raise PerceptionError(f"{who}: the model's input has {c} channels (shape {list(shape)}); expected 3 (RGB)")
    hw = []
    for d in shape[2:]:
        if isinstance(d, (int, np.integer)) and int(d) > 0:
            hw.append(int(d))
        else:
            hw.append(int(input_size or default))
    return hw[0], hw[1]


class OnnxDetector:
    """See the module docstring."""

    def __init__(self, model: str | Path, *, labels: tuple[str, ...] | None = None, min_score: float = 0.4,
                 device: str = "cpu", layout: str = "auto", input_size: int | None = None,
                 batch_size: int = 8, cache_dir: str | None = None, tensorrt_ep: bool = True,
                 threads: int | None = 1):
        self.name = f"onnx:{Path(model).name}"
        self.min_score = check_min_score(min_score, self.name)
        if int(batch_size) < 1:
            raise ValueError(f"{self.name}: batch_size must be >= 1, got {batch_size}")
        self.model = model_file(model)
        ort = optional_module("onnxruntime", self.name, NEEDS_ORT)
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # no busy-waiting between runs: perception shares the CPUs with decode, gate and embed
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads is not None:
            if not 1 <= int(threads) <= 256:
                raise ValueError(f"{self.name}: threads must be in [1, 256] or None, got {threads}")
            so.intra_op_num_threads = int(threads)
        so.add_session_config_entry("session.inter_op.allow_spinning", "0")
        so.log_severity_level = 3
        self.providers = providers_for(ort, device, cache_dir, self.name, tensorrt_ep)
        try:
            self._sess = ort.InferenceSession(str(self.model), sess_options=so, providers=self.providers)
        except Exception as e:  # noqa: BLE001 - onnxruntime raises several types for a bad model
            raise PerceptionError(f"perception.detector: onnxruntime cannot load {self.model}: "
                                  f"{type(e).__name__}: {str(e).strip()[:300]}") from None
        self.device = str(device) if len(self.providers) > 1 else "cpu"
        inp = self._sess.get_inputs()[0]
        self._input = inp.name
        self._in_dtype = np.float16 if "float16" in inp.type else np.float32
        fixed = inp.shape[0]
        self._fixed_batch = int(fixed) if isinstance(fixed, (int, np.integer)) and int(fixed) > 0 else None
        self.batch_size = self._fixed_batch or int(batch_size)
        outs = self._sess.get_outputs()
        self._outputs = [o.name for o in outs]
        # the layout and the input size: a first guess decides the default side, one run on a
        # blank frame gives the real output shapes
        guess_detr = len(outs) == 2
        self.input_hw = input_hw(inp.shape, input_size, 800 if guess_detr else 640, self.name)
        probe = Layout("detr" if guess_detr else "yolov8", 0)
        self._lock = threading.Lock()
        try:
            got = self._run(prepare(probe, [np.zeros((*self.input_hw, 3), np.uint8)], self.input_hw).x)
        except Exception as e:  # noqa: BLE001
            raise PerceptionError(f"perception.detector: {self.model} loads but does not run in onnxruntime "
                                  f"on a 1 x 3 x {self.input_hw[0]} x {self.input_hw[1]} input: "
                                  f"{type(e).__name__}: {str(e).strip()[:300]}") from None
        self.layout, self.labels = detect_layout([o.shape for o in got], self._outputs, labels, layout, self.name)

    def _run(self, x: np.ndarray) -> list[np.ndarray]:
        n = len(x)
        if self._fixed_batch and n < self._fixed_batch:
            x = np.concatenate([x, np.zeros((self._fixed_batch - n, *x.shape[1:]), x.dtype)])
        with self._lock:
            outs = self._sess.run(self._outputs, {self._input: x.astype(self._in_dtype, copy=False)})
        return [np.asarray(o)[:n] for o in outs]

    def detect(self, frames) -> list[list[Detection]]:
        return detect_in_batches(self.layout, check_frame_list(frames, self.name), self.input_hw, self.batch_size,
                                 self._run, self.labels, self.min_score, self.name)

    def __repr__(self) -> str:
        return (f"OnnxDetector({str(self.model)!r}, layout={self.layout.kind}, input={self.input_hw}, "
                f"providers={[p if isinstance(p, str) else p[0] for p in self.providers]})")
