"""The TensorRT body: a serialised TensorRT engine (``.engine`` / ``.plan``) of a YOLO or DETR-style
detector, built by the user (``trtexec --onnx=model.onnx --saveEngine=model.engine --fp16``) for
this GPU and TensorRT version.

TensorRT and torch (for the CUDA buffers and stream) are imported here only; without them, or
without a CUDA device, construction raises PerceptionError. Written against TensorRT 10's tensor
API (``num_io_tensors``, ``set_input_shape``, ``set_tensor_address``, ``execute_async_v3``); the
layouts and preprocessing are the ONNX body's (detect_layouts.py). The batch is capped by the
engine's optimisation profile 0.
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from .detect_base import check_frame_list, check_min_score, optional_module
from .detect_layouts import Layout, detect_in_batches, detect_layout, prepare
from .detect_onnx import input_hw, model_file
from .records import Detection, PerceptionError


NEEDS_TRT = "TensorRT, which is not installed (its wheels come from NVIDIA's package index: pip install tensorrt); or export the model to ONNX and use the .onnx body"


class TensorRTDetector:
    """See the module docstring."""

    def __init__(self, model: str | Path, *, labels: tuple[str, ...] | None = None, min_score: float = 0.4,
                 device: str = "cuda", layout: str = "auto", input_size: int | None = None, batch_size: int = 8):
        self.name = f"tensorrt:{Path(model).name}"
        self.min_score = check_min_score(min_score, self.name)
        self.model = model_file(model)
        trt = optional_module("tensorrt", self.name, NEEDS_TRT)
        import torch

        dev = "cuda" if device in ("auto", None) else str(device)
        if not dev.startswith("cuda") or not torch.cuda.is_available():
            raise PerceptionError(f"{self.name}: a TensorRT engine needs a CUDA device (device={device!r}, "
                                  f"torch sees {'a GPU' if torch.cuda.is_available() else 'none'})")
        self.device = torch.device(dev)
        self._runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        with torch.cuda.device(self.device):
            self._engine = self._runtime.deserialize_cuda_engine(self.model.read_bytes())
            if self._engine is None:
                raise PerceptionError(f"perception.detector: TensorRT cannot load {self.model} (built by another "
                                      f"TensorRT version or for another GPU? rebuild it with trtexec)")
            self._context = self._engine.create_execution_context()
        names = [self._engine.get_tensor_name(i) for i in range(self._engine.num_io_tensors)]
        ins = [n for n in names if self._engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        if len(ins) != 1:
            raise PerceptionError(f"{self.name}: the engine has inputs {ins}; expected one image input")
        self._input = ins[0]
        self._outputs = [n for n in names if n != self._input]
        shape = list(self._engine.get_tensor_shape(self._input))
        guess_detr = len(self._outputs) == 2
        self.input_hw = input_hw([d if d > 0 else None for d in shape], input_size, 800 if guess_detr else 640,
                                 self.name)
        max_batch = shape[0] if shape[0] > 0 else int(self._engine.get_tensor_profile_shape(self._input, 0)[2][0])
        self.batch_size = max(1, min(int(batch_size), max_batch))
        self._fixed_batch = shape[0] if shape[0] > 0 else None
        self._dtypes = {n: trt.nptype(self._engine.get_tensor_dtype(n)) for n in names}
        self._lock = threading.Lock()
        probe = Layout("detr" if guess_detr else "yolov8", 0)
        got = self._run(prepare(probe, [np.zeros((*self.input_hw, 3), np.uint8)], self.input_hw).x)
        self.layout, self.labels = detect_layout([o.shape for o in got], self._outputs, labels, layout, self.name)

    def _run(self, x: np.ndarray) -> list[np.ndarray]:
        import torch

        n = len(x)
        if self._fixed_batch and n < self._fixed_batch:
            x = np.concatenate([x, np.zeros((self._fixed_batch - n, *x.shape[1:]), x.dtype)])
        with self._lock, torch.cuda.device(self.device):
            xt = torch.from_numpy(np.ascontiguousarray(x.astype(self._dtypes[self._input]))).to(self.device)
            self._context.set_input_shape(self._input, tuple(xt.shape))
            self._context.set_tensor_address(self._input, xt.data_ptr())
            outs = []
            for name in self._outputs:
                shape = tuple(self._context.get_tensor_shape(name))
                t = torch.empty(shape, dtype=torch.from_numpy(np.zeros(0, self._dtypes[name])).dtype,
                                device=self.device)
                self._context.set_tensor_address(name, t.data_ptr())
                outs.append(t)
            stream = torch.cuda.current_stream(self.device)
            if not self._context.execute_async_v3(stream.cuda_stream):
                raise PerceptionError(f"{self.name}: TensorRT execution failed")
            return [o.float().cpu().numpy()[:n] for o in outs]  # the copy waits for the stream

    def detect(self, frames) -> list[list[Detection]]:
        return detect_in_batches(self.layout, check_frame_list(frames, self.name), self.input_hw, self.batch_size,
                                 self._run, self.labels, self.min_score, self.name)

    def __repr__(self) -> str:
        return f"TensorRTDetector({str(self.model)!r}, layout={self.layout.kind}, input={self.input_hw})"
