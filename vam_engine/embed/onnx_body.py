"""The onnx body: the model's towers exported to ONNX once, run by onnxruntime.

The export (torch.onnx.export, TorchScript exporter, opset 17, dynamic batch axis; the text tower
also has a dynamic sequence axis) is cached under ``<cache_dir>/onnx/<model>-<fingerprint>-<key>/``
(cache_dir: cfg.cache_dir, else $VAM_ENGINE_CACHE, else ~/.cache/vam_engine) with a meta.json
holding what is needed to run it without loading the torch weights again. A cache hit does not
load the model; preprocessing (torch, CPU) and tokenizing still use the model directory.

onnxruntime runs on CPUExecutionProvider, or CUDAExecutionProvider first when the device is CUDA
and the installed onnxruntime has it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from .base import EmbedError, batches, cache_root, check_frames, check_texts, empty, finish, safe_name
from .models import ModelSource, PreprocessSpec, open_source, preprocess

FORMAT = 1
OPSET = 17


def export_dir(source: ModelSource, cache_dir: str | None, half: bool = False) -> Path:
    key = hashlib.sha256(json.dumps({"format": FORMAT, "opset": OPSET, "spec": source.spec.as_dict(),
                                     "text_inputs": list(source.text_inputs), "half": half},
                                    sort_keys=True).encode())
    tag = "-fp16" if half else ""
    return (cache_root(cache_dir) / "onnx"
            / f"{safe_name(source.short)}-{source.fingerprint[:16]}-{key.hexdigest()[:8]}{tag}")


def _read_meta(d: Path) -> dict | None:
    try:
        meta = json.loads((d / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    if meta.get("format") != FORMAT or not (d / meta.get("image", "")).is_file():
        return None
    if meta.get("text") and not (d / meta["text"]).is_file():
        return None
    return meta


def export(source: ModelSource, cache_dir: str | None, *, half: bool = False,
           device="cpu") -> tuple[Path, dict]:
    """The cached export of ``source``'s towers, made now if missing. Returns (dir, meta).

    ``half``: the image tower only, fp16 weights and math with float32 input and output (for
    TensorRT 11+, which takes its precision from the graph), traced on ``device`` (CUDA)."""
    d = export_dir(source, cache_dir, half)
    meta = _read_meta(d)
    if meta is not None:
        return d, meta
    import torch

    if d.exists():  # a stale, incomplete export
        shutil.rmtree(d, ignore_errors=True)
    d.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{d.name}.", dir=d.parent))
    try:
        os.chmod(tmp, 0o755)
        device = torch.device(device if half else "cpu")
        image, text = source.load(device, torch.float16 if half else torch.float32)
        if half:
            image, text = _float32_io(image), None
        h, w = source.spec.out_hw
        with torch.inference_mode():
            dim = int(image(torch.zeros(1, 3, h, w, device=device)).shape[1])
        meta = {"format": FORMAT, "model": source.model, "model_id": source.model_id(dim), "dim": dim,
                "spec": source.spec.as_dict(), "text_inputs": list(source.text_inputs), "opset": OPSET,
                "torch": torch.__version__, "image": "image.onnx", "text": None, "half": half}
        dummy = torch.rand(2, 3, h, w, device=device) * 2 - 1
        _export(image, (dummy,), tmp / "image.onnx", ["pixel_values"], {"pixel_values": {0: "batch"}})
        if text is not None:
            enc = source.tokenize(["a photo", "a photo of a dog on a street"])
            args = tuple(torch.from_numpy(enc[k]) for k in source.text_inputs)
            axes = {k: {0: "batch", 1: "sequence"} for k in source.text_inputs}
            _export(text, args, tmp / "text.onnx", list(source.text_inputs), axes)
            meta["text"] = "text.onnx"
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        try:
            os.replace(tmp, d)
        except OSError:  # another process finished the same export first
            if _read_meta(d) is None:
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta = _read_meta(d)
    if meta is None:
        raise EmbedError(f"ONNX export of {source.model} left no usable files in {d}")
    return d, meta


def _float32_io(inner):
    """An fp16 tower with float32 input and output."""
    import torch

    class Float32IO(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x.to(torch.float16)).float()

    return Float32IO()


def _export(module, args, path: Path, input_names, axes) -> None:
    import torch

    axes = dict(axes, embedding={0: "batch"})
    errors = []
    # the TorchScript exporter first (no extra packages); the dynamo exporter (needs onnxscript)
    # when a torch without the TorchScript exporter refuses it
    for dynamo in (False, True):
        try:
            with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
                warnings.simplefilter("ignore")
                torch.onnx.export(module, args, str(path), input_names=list(input_names),
                                  output_names=["embedding"], dynamic_axes=axes, opset_version=OPSET,
                                  do_constant_folding=True, dynamo=dynamo)
            return
        except Exception as e:  # noqa: BLE001 - exporter failures come in many types
            errors.append(f"{'dynamo' if dynamo else 'TorchScript'} exporter: {type(e).__name__}: {e}")
    raise EmbedError(f"ONNX export of the {path.stem} tower failed: " + "; ".join(errors))


def session(path: Path, device) -> "onnxruntime.InferenceSession":  # noqa: F821
    try:
        import onnxruntime as ort
    except ImportError:
        raise EmbedError("onnxruntime is not installed (pip install onnxruntime, or onnxruntime-gpu)") from None
    providers = ["CPUExecutionProvider"]
    if str(device).startswith("cuda"):
        if "CUDAExecutionProvider" in ort.get_available_providers():
            idx = str(device).partition(":")[2] or "0"
            providers = [("CUDAExecutionProvider", {"device_id": int(idx)}), "CPUExecutionProvider"]
        else:
            warnings.warn("embed: onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu); "
                          "running on CPU", RuntimeWarning, stacklevel=3)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # no busy-waiting between runs: the engine shares the CPUs with decode, gate and torch
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), sess_options=so, providers=providers)
    except Exception as e:  # noqa: BLE001
        raise EmbedError(f"onnxruntime cannot load {path}: {type(e).__name__}: {e}") from None


class OnnxImageEmbedder:
    """Image and text towers of one model in onnxruntime. See the module docstring."""

    def __init__(self, model: str, *, device="cpu", batch_size: int = 32, cache_dir: str | None = None,
                 source: ModelSource | None = None):
        if int(batch_size) < 1:
            raise ValueError(f"embed.batch_size must be >= 1, got {batch_size}")
        self.batch_size = int(batch_size)
        self.device = str(device)
        self.source = source or open_source(model, "onnx")
        self.export_dir, meta = export(self.source, cache_dir)
        self.spec = PreprocessSpec.from_dict(meta["spec"])
        self.dim = int(meta["dim"])
        self.model_id = meta["model_id"]
        self.name = f"onnx:{self.source.model}"
        self._image = session(self.export_dir / meta["image"], self.device)
        self._text = session(self.export_dir / meta["text"], self.device) if meta.get("text") else None
        self.has_text = self._text is not None and self.source.has_tokenizer

    def embed_images(self, frames: np.ndarray) -> np.ndarray:
        check_frames(frames, self.name)
        if len(frames) == 0:
            return empty(self.dim)
        out = np.empty((len(frames), self.dim), np.float32)
        for sl in batches(len(frames), self.batch_size):
            x = preprocess(frames[sl], self.spec, "cpu").numpy()
            out[sl] = self._image.run(["embedding"], {"pixel_values": x})[0]
        return finish(out, self.name)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts, self.name)
        if not self.has_text:
            raise EmbedError(f"{self.name} has no text side ({self.source.no_text_reason or 'no text export'})")
        if not texts:
            return empty(self.dim)
        out = np.empty((len(texts), self.dim), np.float32)
        for sl in batches(len(texts), self.batch_size):
            out[sl] = self._text.run(["embedding"], self.source.tokenize(texts[sl]))[0]
        return finish(out, self.name)

    def __repr__(self) -> str:
        return f"OnnxImageEmbedder({self.source.model!r}, dim={self.dim}, export={str(self.export_dir)!r})"
