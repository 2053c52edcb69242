"""The tensorrt body: an fp16 TensorRT engine built from the ONNX export of the image tower.

TensorRT is optional and imported only here; without it, construction raises EmbedError. The
plan is built once and cached under ``<cache_dir>/tensorrt/`` keyed by the export, the batch
range (1..batch_size, optimum batch_size), the GPU name and compute capability, and the TensorRT
version. It runs on torch CUDA buffers (execute_async_v3 on torch's current stream, tensor
addresses set per call).

Precision: TensorRT <= 10 builds the fp32 export with BuilderFlag.FP16 (weakly typed); TensorRT
11+ (strong typing only) builds an fp16 export with float32 input/output. The text side (queries:
a few strings) runs the model's text tower in torch fp16 on the same GPU, loaded on first use.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from .base import EmbedError, batches, cache_root, check_frames, check_texts, empty, finish
from .models import ModelSource, PreprocessSpec, open_source, preprocess
from .onnx_body import export
from .torch_body import torch_device

INPUT, OUTPUT = "pixel_values", "embedding"


def import_tensorrt():
    try:
        import tensorrt as trt
    except ImportError:
        raise EmbedError("TensorRT is not installed (its wheels come from NVIDIA's package index: "
                         "pip install tensorrt); use embed.body=torch or onnx instead") from None
    return trt


def _build(trt, onnx_path: Path, hw: tuple[int, int], max_batch: int, weak: bool) -> bytes:
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    flags = 0
    ncf = trt.NetworkDefinitionCreationFlag
    if int(trt.__version__.split(".")[0]) < 10 and hasattr(ncf, "EXPLICIT_BATCH"):
        flags |= 1 << int(ncf.EXPLICIT_BATCH)
    if not weak and hasattr(ncf, "STRONGLY_TYPED"):
        flags |= 1 << int(ncf.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise EmbedError(f"TensorRT cannot parse {onnx_path}: {errors}")
    config = builder.create_builder_config()
    if weak:
        config.set_flag(trt.BuilderFlag.FP16)
    h, w = hw
    profile = builder.create_optimization_profile()
    profile.set_shape(INPUT, (1, 3, h, w), (max_batch, 3, h, w), (max_batch, 3, h, w))
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise EmbedError(f"TensorRT could not build an engine from {onnx_path} (see its log above)")
    return bytes(plan)


class TensorRTImageEmbedder:
    """See the module docstring."""

    def __init__(self, model: str, *, device="cuda", batch_size: int = 32, cache_dir: str | None = None,
                 source: ModelSource | None = None):
        trt = import_tensorrt()
        import torch

        if int(batch_size) < 1:
            raise ValueError(f"embed.batch_size must be >= 1, got {batch_size}")
        self.batch_size = int(batch_size)
        self.device = torch_device(device)
        if self.device.type != "cuda":
            raise EmbedError(f"embed.body=tensorrt needs a CUDA device, got {device!r}")
        self.source = source or open_source(model, "tensorrt")
        weak = hasattr(trt, "BuilderFlag") and hasattr(trt.BuilderFlag, "FP16")
        onnx_dir, meta = export(self.source, cache_dir, half=not weak, device=self.device)
        self.spec = PreprocessSpec.from_dict(meta["spec"])
        self.dim = int(meta["dim"])
        self.model_id = meta["model_id"]
        self.name = f"tensorrt:{self.source.model}"
        hw = self.spec.out_hw
        props = torch.cuda.get_device_properties(self.device)
        key = hashlib.sha256(json.dumps({"export": onnx_dir.name, "batch": [1, self.batch_size, self.batch_size],
                                         "hw": list(hw), "gpu": props.name, "cc": [props.major, props.minor],
                                         "trt": trt.__version__}, sort_keys=True).encode()).hexdigest()[:16]
        plan_path = cache_root(cache_dir) / "tensorrt" / f"{onnx_dir.name}-{key}.plan"
        if plan_path.is_file():
            plan = plan_path.read_bytes()
        else:
            plan = _build(trt, onnx_dir / meta["image"], hw, self.batch_size, weak)
            plan_path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{plan_path.name}.", dir=plan_path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(plan)
            os.replace(tmp, plan_path)
        self.plan_path = plan_path
        self._runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        with torch.cuda.device(self.device):
            self._engine = self._runtime.deserialize_cuda_engine(plan)
            if self._engine is None:
                raise EmbedError(f"TensorRT cannot load the plan {plan_path} (built by another version? delete it)")
            self._context = self._engine.create_execution_context()
        dtypes = {trt.float32: torch.float32, trt.float16: torch.float16}
        self._in_dtype = dtypes.get(self._engine.get_tensor_dtype(INPUT))
        self._out_dtype = dtypes.get(self._engine.get_tensor_dtype(OUTPUT))
        if self._in_dtype is None or self._out_dtype is None:
            raise EmbedError(f"{self.name}: unexpected engine I/O types")
        self._lock = threading.Lock()
        self._text = None
        self.has_text = self.source.has_tokenizer and bool(self.source.text_inputs)

    def embed_images(self, frames: np.ndarray) -> np.ndarray:
        import torch

        check_frames(frames, self.name)
        if len(frames) == 0:
            return empty(self.dim)
        out = np.empty((len(frames), self.dim), np.float32)
        with self._lock, torch.inference_mode(), torch.cuda.device(self.device):
            stream = torch.cuda.current_stream(self.device)
            for sl in batches(len(frames), self.batch_size):
                x = preprocess(frames[sl], self.spec, self.device, self._in_dtype)
                y = torch.empty((len(x), self.dim), dtype=self._out_dtype, device=self.device)
                self._context.set_input_shape(INPUT, tuple(x.shape))
                self._context.set_tensor_address(INPUT, x.data_ptr())
                self._context.set_tensor_address(OUTPUT, y.data_ptr())
                if not self._context.execute_async_v3(stream.cuda_stream):
                    raise EmbedError(f"{self.name}: TensorRT execution failed")
                out[sl] = y.float().cpu().numpy()  # the copy waits for the stream
        return finish(out, self.name)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        texts = check_texts(texts, self.name)
        if not self.has_text:
            raise EmbedError(f"{self.name} has no text side ({self.source.no_text_reason})")
        if not texts:
            return empty(self.dim)
        with self._lock:
            if self._text is None:
                _, self._text = self.source.load(self.device, torch.float16)
                if self._text is None:
                    self.has_text = False
                    raise EmbedError(f"{self.name} has no text side ({self.source.no_text_reason})")
        out = np.empty((len(texts), self.dim), np.float32)
        with torch.inference_mode():
            for sl in batches(len(texts), self.batch_size):
                enc = self.source.tokenize(texts[sl])
                args = [torch.from_numpy(enc[k]).to(self.device) for k in self.source.text_inputs]
                out[sl] = self._text(*args).float().cpu().numpy()
        return finish(out, self.name)

    def __repr__(self) -> str:
        return f"TensorRTImageEmbedder({self.source.model!r}, dim={self.dim}, plan={str(self.plan_path)!r})"
