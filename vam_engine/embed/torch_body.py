"""The torch body: a CLIP/SigLIP-style model run eagerly by torch (transformers or open_clip).

On CUDA, ``dtype="auto"`` runs fp16 (on CPU fp32). ``compile=True`` (CUDA only; ignored on CPU)
wraps the image tower in ``torch.compile(mode="reduce-overhead")`` (CUDA graphs) and pads every
batch to ``batch_size`` so one graph serves all calls; if compiling fails the body falls back to
eager with a warning. Outputs are cast to float32 and L2-normalized on the host;
``embed_tensor`` leaves a device tensor's rows on the device (the device path).
"""
from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

from .base import EmbedError, batches, check_frames, check_texts, empty, finish
from .models import ModelSource, open_source, preprocess

_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


def torch_device(device) -> "torch.device":  # noqa: F821
    """``device`` (a string or a torch.device) as the torch.device ``device.resolve_device``
    decides; a CUDA device this machine lacks is an EmbedError (the embedder cannot run)."""
    import torch

    from ..device import DeviceError, resolve_device

    if isinstance(device, torch.device):
        device = str(device)
    try:
        return torch.device(resolve_device(device))
    except DeviceError as e:
        if str(device).startswith("cuda"):  # a real device this machine lacks: the embedder cannot run
            raise EmbedError(f"embed: {e}") from None
        raise


def resolve_dtype(dtype: str, device) -> "torch.dtype":  # noqa: F821
    import torch

    if dtype in (None, "auto"):
        return torch.float16 if device.type == "cuda" else torch.float32
    if dtype not in _DTYPES:
        raise ValueError(f"embed.dtype must be auto, float32, float16 or bfloat16, got {dtype!r}")
    return getattr(torch, _DTYPES[dtype])


class TorchImageEmbedder:
    """Image and text towers of one model in torch. See the module docstring."""

    def __init__(self, model: str, *, device="cpu", dtype: str = "auto", batch_size: int = 32,
                 compile: bool = False, source: ModelSource | None = None):
        import torch

        if int(batch_size) < 1:
            raise ValueError(f"embed.batch_size must be >= 1, got {batch_size}")
        self.batch_size = int(batch_size)
        self.device = torch_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.source = source or open_source(model, "torch")
        self._image, self._text = self.source.load(self.device, self.dtype)
        self.has_text = self._text is not None
        self.name = f"torch:{self.source.model}"
        self._compiled = None
        self.dim = self._probe()
        self.model_id = self.source.model_id(self.dim)
        if compile and self.device.type == "cuda":
            self._compiled = torch.compile(self._image, mode="reduce-overhead", dynamic=False)

    def _probe(self) -> int:
        import torch

        h, w = self.source.spec.out_hw
        with torch.inference_mode():
            y = self._image(torch.zeros(1, 3, h, w, device=self.device, dtype=self.dtype))
        if y.ndim != 2 or y.shape[0] != 1:
            raise EmbedError(f"{self.name}: the image tower returned shape {tuple(y.shape)}, expected 1 x dim")
        return int(y.shape[1])

    @property
    def compiled(self) -> bool:
        """Whether the image tower runs through torch.compile's CUDA graphs (False when not asked
        for, off CUDA, or after a compile failure fell back to eager)."""
        return self._compiled is not None

    @property
    def attn_implementation(self) -> str | None:
        """The attention implementation of the loaded transformers model, when it says."""
        owner = getattr(self._image, "owner", None)
        return getattr(getattr(owner, "config", None), "_attn_implementation", None)

    def run_image(self, x):
        """The image tower alone on preprocessed input already on the device (``preprocess``):
        what ``embed_images`` runs per batch, without the preprocessing and the copy back."""
        if self._compiled is not None:
            import torch

            n = len(x)
            if n < self.batch_size:  # one static shape: one CUDA graph
                x = torch.cat([x, x[-1:].expand(self.batch_size - n, *x.shape[1:])])
            try:
                return self._compiled(x)[:n].clone()  # graph outputs are overwritten by the next replay
            except Exception as e:  # noqa: BLE001 - any compile failure: fall back, once
                warnings.warn(f"{self.name}: torch.compile failed ({type(e).__name__}: {e}); running eager",
                              RuntimeWarning, stacklevel=3)
                self._compiled = None
                x = x[:n]
        return self._image(x)

    def embed_images(self, frames: np.ndarray) -> np.ndarray:
        import torch

        check_frames(frames, self.name)
        if len(frames) == 0:
            return empty(self.dim)
        out = np.empty((len(frames), self.dim), np.float32)
        with torch.inference_mode():
            for sl in batches(len(frames), self.batch_size):
                x = preprocess(frames[sl], self.source.spec, self.device, self.dtype)
                out[sl] = self.run_image(x).float().cpu().numpy()
        return finish(out, self.name)

    def embed_tensor(self, frames):
        """``embed_images`` for a torch uint8 N x H x W x 3 tensor, left where it is: float32 N x dim
        unit rows on the tensor's device, no copy to the host and no host synchronisation (the
        device path, index/device_path.py). So the NaN / zero-row check of ``embed_images`` is not
        made here (it would wait on the device): the device path's committer makes it when the
        rows reach it, naming the frame's time."""
        import torch
        import torch.nn.functional as F

        if not isinstance(frames, torch.Tensor) or frames.dtype != torch.uint8 or frames.ndim != 4 \
                or frames.shape[-1] != 3:
            raise ValueError(f"{self.name}: embed_tensor takes a uint8 N x H x W x 3 torch tensor, got "
                             f"{type(frames).__name__} {getattr(frames, 'dtype', '')} "
                             f"{tuple(getattr(frames, 'shape', ()))}")
        d = frames.device
        if d.type != self.device.type or (self.device.index is not None and d.index != self.device.index):
            raise ValueError(f"{self.name}: frames are on {frames.device}, the model on {self.device}")
        parts = []
        with torch.inference_mode():
            for sl in batches(len(frames), self.batch_size):
                x = preprocess(frames.narrow(0, sl.start, sl.stop - sl.start), self.source.spec, self.device,
                               self.dtype)
                parts.append(self.run_image(x).float())
        if not parts:
            return torch.zeros((0, self.dim), dtype=torch.float32, device=self.device)
        return F.normalize(torch.cat(parts), dim=1)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        texts = check_texts(texts, self.name)
        if not self.has_text:
            raise EmbedError(f"{self.name} has no text side ({self.source.no_text_reason})")
        if not texts:
            return empty(self.dim)
        out = np.empty((len(texts), self.dim), np.float32)
        with torch.inference_mode():
            for sl in batches(len(texts), self.batch_size):
                enc = self.source.tokenize(texts[sl])
                args = [torch.from_numpy(enc[k]).to(self.device) for k in self.source.text_inputs]
                out[sl] = self._text(*args).float().cpu().numpy()
        return finish(out, self.name)

    def __repr__(self) -> str:
        return (f"TorchImageEmbedder({self.source.model!r}, device={self.device}, dtype={self.dtype}, "
                f"dim={self.dim}, has_text={self.has_text})")
