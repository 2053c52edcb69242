"""Model sources for the torch, onnx and tensorrt bodies: where a CLIP/SigLIP-style model lives,
its identity, its image preprocessing and tokenizer (all cheap), and its two towers (loaded on
demand). Two kinds: Hugging Face transformers models (a local directory or a hub id, read from the
local cache only when HF_HUB_OFFLINE is set) and open_clip models ("open_clip:<arch>/<pretrained>"
or "open_clip:hf-hub:<repo>"; open_clip is imported only then).

Image preprocessing is ours, in torch (transformers' fast image processors need torchvision):
antialiased resize of the uint8 RGB frame (shortest edge to `size` then centre crop, or straight
to `size`) -> float [0, 1] -> (x - mean) / std. Every body runs this same function, so their
outputs agree.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .base import EmbedError, fingerprint_dir, looks_like_path, offline

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class PreprocessSpec:
    resize: str                    # "shortest_edge": short side to size[0], keep aspect; "exact": to size (h, w)
    size: tuple[int, int]
    crop: tuple[int, int] | None   # centre crop (h, w) after the resize, or None
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: str = "bicubic"  # or "bilinear"

    @property
    def out_hw(self) -> tuple[int, int]:
        if self.crop is not None:
            return self.crop
        if self.resize == "exact":
            return self.size
        raise EmbedError("preprocessing: a shortest-edge resize needs a centre crop (batch frames share one size)")

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PreprocessSpec":
        return cls(resize=d["resize"], size=tuple(d["size"]), crop=tuple(d["crop"]) if d.get("crop") else None,
                   mean=tuple(d["mean"]), std=tuple(d["std"]), interpolation=d.get("interpolation", "bicubic"))


def preprocess(frames, spec: PreprocessSpec, device="cpu", dtype=None):
    """uint8 N x H x W x 3 (checked) -> float N x 3 x h x w on ``device``, cast to ``dtype``.
    ``frames`` is a numpy array or a torch tensor (a GPU decoder's frames stay where they are).

    On the CPU the resize runs on uint8 channels-last (torch's vectorized path, ~30x faster than
    float; it rounds to uint8 as PIL does for transformers' processors); on CUDA it runs in
    float32 (no uint8 kernels there). Only tensor methods that torch's fake CUDA tensors run on a
    CPU-only build are used (``movedim``, ``narrow``; not ``permute``, indexing or ``contiguous``
    of a view): the device path's fake-CUDA test runs this function."""
    import torch
    import torch.nn.functional as F

    n, H, W, _ = frames.shape
    x = frames if isinstance(frames, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(frames))
    on_cpu = torch.device(device).type == "cpu"
    x = x.movedim(3, 1)  # a channels-last view, no copy
    if not on_cpu:
        dev = torch.device(device)
        if x.device.type != dev.type or (dev.index is not None and x.device.index != dev.index):
            x = x.to(dev, non_blocking=True)  # a host array; a tensor already there is not copied
        x = x.float().mul_(1 / 255)

    def resize(t, hw):
        t = F.interpolate(t, size=hw, mode=spec.interpolation, antialias=True, align_corners=False)
        return t if t.dtype == torch.uint8 else t.clamp_(0, 1)

    if spec.resize == "shortest_edge":
        s = spec.size[0]
        nh, nw = (s, int(s * W / H)) if H <= W else (int(s * H / W), s)
    else:
        nh, nw = spec.size
    if (nh, nw) != (H, W):
        x = resize(x, (nh, nw))
    if spec.crop is not None:
        ch, cw = spec.crop
        if ch > nh or cw > nw:  # smaller than the crop: stretch to it (transformers would pad)
            x = resize(x, (ch, cw))
        else:
            top, left = int((nh - ch) / 2), int((nw - cw) / 2)
            x = x.narrow(2, top, ch).narrow(3, left, cw)
    if on_cpu:
        x = x.float().mul_(1 / 255)
    mean = torch.tensor(spec.mean, dtype=torch.float32, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(spec.std, dtype=torch.float32, device=x.device).view(1, 3, 1, 1)
    x = ((x - mean) / std).clone(memory_format=torch.contiguous_format)
    return x if dtype is None or dtype == torch.float32 else x.to(dtype)


def _features(out):
    """get_*_features returns a tensor (transformers 4) or an output whose pooler_output is the
    projected embedding (transformers 5)."""
    import torch

    if torch.is_tensor(out):
        return out
    pooled = getattr(out, "pooler_output", None)
    if pooled is None:
        raise EmbedError("the model's get_*_features returned no pooled embedding")
    return pooled


def _towers():
    import torch

    class ImageTower(torch.nn.Module):
        """pixel_values N x 3 x h x w -> N x dim (unnormalized)."""

        def __init__(self, fn: Callable, owner: torch.nn.Module):
            super().__init__()
            self.owner = owner
            self.fn = fn

        def forward(self, pixel_values):
            return _features(self.fn(pixel_values))

    class TextTower(torch.nn.Module):
        """input_ids (and attention_mask) N x L int64 -> N x dim (unnormalized)."""

        def __init__(self, fn: Callable, owner: torch.nn.Module, use_mask: bool):
            super().__init__()
            self.owner = owner
            self.fn = fn
            self.use_mask = use_mask

        def forward(self, input_ids, attention_mask=None):
            if self.use_mask:
                return _features(self.fn(input_ids, attention_mask))
            return _features(self.fn(input_ids))

    return ImageTower, TextTower


class ModelSource:
    """What a body needs to know about a model before (and besides) its weights."""

    model: str                       # as configured
    short: str                       # a readable name: hub id or directory name
    fingerprint: str                 # hex digest of the model's files / revision
    spec: PreprocessSpec
    text_inputs: tuple[str, ...] = ("input_ids", "attention_mask")
    no_text_reason: str | None = None  # why there is no text side, or None

    def model_id(self, dim: int) -> str:
        return f"{self.short}@{self.fingerprint[:12]}-d{dim}"

    @property
    def has_tokenizer(self) -> bool:
        return self.no_text_reason is None

    def tokenize(self, texts: list[str]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def load(self, device, dtype):
        """-> (image tower, text tower or None): torch modules in eval mode on device/dtype."""
        raise NotImplementedError


class HFSource(ModelSource):
    """A transformers dual encoder with get_image_features / get_text_features (CLIP, SigLIP, ...)."""

    def __init__(self, model: str):
        self.model = model
        local = Path(model).expanduser()
        self._offline = offline()
        if local.exists():
            if not (local / "config.json").is_file():
                raise EmbedError(f"model path {model} is not a model directory (no config.json in it)")
            local = local.resolve()
            self.ref, self.short, self._dir, self._hub = str(local), local.name, local, False
            self.fingerprint = fingerprint_dir(local)
        elif looks_like_path(model):
            raise EmbedError(f"model path does not exist: {model}")
        else:
            from transformers.utils import cached_file

            try:
                cfg_file = Path(cached_file(model, "config.json", local_files_only=self._offline))
            except Exception as e:  # noqa: BLE001 - hub errors come in many types
                where = "in the Hugging Face cache (HF_HUB_OFFLINE is set: no download)" if self._offline \
                    else "locally or on the Hugging Face hub"
                raise EmbedError(f"model {model!r} is not a local path and was not found {where}: "
                                 f"{type(e).__name__}: {e}") from None
            self.ref, self.short, self._dir, self._hub = model, model, cfg_file.parent, True
            self.fingerprint = hashlib.sha256(
                (model + "\0" + cfg_file.parent.name + "\0").encode() + cfg_file.read_bytes()).hexdigest()
        try:
            from transformers import AutoConfig

            self.config = AutoConfig.from_pretrained(self.ref, local_files_only=True)
        except Exception as e:  # noqa: BLE001
            raise EmbedError(f"{model}: cannot read the model config: {type(e).__name__}: {e}") from None
        self.model_type = str(getattr(self.config, "model_type", ""))
        self._siglip = self.model_type.startswith("siglip")
        self.text_inputs = ("input_ids",) if self._siglip else ("input_ids", "attention_mask")
        self.spec = self._read_spec()
        self.tokenizer, self.no_text_reason = self._read_tokenizer()

    # -- preprocessing ------------------------------------------------------------------------
    def _read_spec(self) -> PreprocessSpec:
        vc = getattr(self.config, "vision_config", None) or self.config
        image_size = getattr(vc, "image_size", 224)
        image_size = int(image_size[0] if isinstance(image_size, (list, tuple)) else image_size)
        pp = {}
        path = self._dir / "preprocessor_config.json"
        if not path.is_file() and self._hub:
            try:
                from transformers.utils import cached_file

                found = cached_file(self.ref, "preprocessor_config.json", local_files_only=self._offline,
                                    _raise_exceptions_for_missing_entries=False)
                path = Path(found) if found else path
            except Exception:  # noqa: BLE001 - optional file
                pass
        if path.is_file():
            try:
                pp = json.loads(path.read_text())
            except ValueError as e:
                raise EmbedError(f"{path}: not valid JSON: {e}") from None
        if self._siglip:
            resize, size, crop = "exact", (image_size, image_size), None
            mean, std, interp = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), "bilinear"
        else:
            resize, size, crop = "shortest_edge", (image_size, image_size), (image_size, image_size)
            mean, std, interp = CLIP_MEAN, CLIP_STD, "bicubic"
        if pp:
            sz = pp.get("size")
            if isinstance(sz, dict) and "shortest_edge" in sz:
                resize, size = "shortest_edge", (int(sz["shortest_edge"]),) * 2
            elif isinstance(sz, dict) and "height" in sz and "width" in sz:
                resize, size = "exact", (int(sz["height"]), int(sz["width"]))
            elif isinstance(sz, int):
                resize, size = "shortest_edge", (sz, sz)
            cs = pp.get("crop_size")
            if pp.get("do_center_crop", crop is not None) and cs is not None:
                crop = (int(cs["height"]), int(cs["width"])) if isinstance(cs, dict) else (int(cs), int(cs))
            elif not pp.get("do_center_crop", crop is not None):
                crop = None
            mean = tuple(float(v) for v in pp.get("image_mean", mean))
            std = tuple(float(v) for v in pp.get("image_std", std))
            interp = {2: "bilinear", 3: "bicubic"}.get(pp.get("resample"), interp)
        if resize == "shortest_edge" and crop is None:
            crop = size
        return PreprocessSpec(resize, size, crop, mean, std, interp)

    # -- text ---------------------------------------------------------------------------------
    def _read_tokenizer(self):
        if getattr(self.config, "text_config", None) is None:
            return None, f"{self.model} has no text tower"
        # transformers 5 builds an empty tokenizer from no files at all: require some
        names = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt", "spiece.model",
                 "tokenizer.model")
        found = any((self._dir / n).is_file() for n in names)
        if not found and self._hub:
            from transformers.utils import cached_file

            for n in names[:2]:
                try:
                    found = bool(cached_file(self.ref, n, local_files_only=self._offline,
                                             _raise_exceptions_for_missing_entries=False))
                except Exception:  # noqa: BLE001 - optional file
                    found = False
                if found:
                    break
        if not found:
            return None, f"no tokenizer files in {self.model}"
        try:
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(self.ref, local_files_only=self._offline or not self._hub), None
        except Exception as e:  # noqa: BLE001
            return None, f"no tokenizer could be loaded from {self.model}: {type(e).__name__}: {e}"

    @property
    def max_length(self) -> int:
        tc = getattr(self.config, "text_config", None)
        return int(getattr(tc, "max_position_embeddings", 77) or 77)

    def tokenize(self, texts: list[str]) -> dict[str, np.ndarray]:
        if self.tokenizer is None:
            raise EmbedError(self.no_text_reason or f"{self.model} has no tokenizer")
        pad = "max_length" if self._siglip else True
        enc = self.tokenizer(texts, padding=pad, truncation=True, max_length=self.max_length, return_tensors="np")
        return {k: np.asarray(enc[k], dtype=np.int64) for k in self.text_inputs}

    # -- weights ------------------------------------------------------------------------------
    def load(self, device, dtype):
        from transformers import AutoModel

        try:
            model = AutoModel.from_pretrained(self.ref, dtype=dtype, local_files_only=self._offline)
        except Exception as e:  # noqa: BLE001
            raise EmbedError(f"{self.model}: cannot load the model weights: {type(e).__name__}: {e}") from None
        if not hasattr(model, "get_image_features"):
            raise EmbedError(f"{self.model}: {type(model).__name__} is not a CLIP/SigLIP-style dual encoder "
                             f"(no get_image_features)")
        model = model.to(device).eval().requires_grad_(False)
        ImageTower, TextTower = _towers()
        image = ImageTower(lambda x: model.get_image_features(pixel_values=x), model)
        text = None
        if self.tokenizer is not None and hasattr(model, "get_text_features"):
            if self._siglip:
                fn = lambda ids: model.get_text_features(input_ids=ids)  # noqa: E731
            else:
                fn = lambda ids, mask: model.get_text_features(input_ids=ids, attention_mask=mask)  # noqa: E731
            text = TextTower(fn, model, use_mask=not self._siglip)
        elif self.no_text_reason is None:
            self.no_text_reason = f"{type(model).__name__} has no text tower"
        return image, text


class OpenClipSource(ModelSource):
    """``open_clip:<arch>/<pretrained tag or checkpoint path>`` or ``open_clip:hf-hub:<repo>``.

    Written against open_clip's public API (create_model_and_transforms, get_tokenizer,
    encode_image, encode_text); open_clip is optional and imported only here."""

    text_inputs = ("input_ids",)

    def __init__(self, model: str):
        try:
            import open_clip
        except ImportError:
            raise EmbedError(f"open_clip is not installed (pip install open_clip_torch); "
                             f"it is needed for model {model!r}") from None
        self.model = model
        name = model[len("open_clip:"):]
        if name.startswith("hf-hub:"):
            arch, pretrained = name, None
        else:
            arch, _, pretrained = name.partition("/")
        if pretrained and looks_like_path(pretrained) and not Path(pretrained).expanduser().exists():
            raise EmbedError(f"model path does not exist: {pretrained}")
        try:
            self._model = open_clip.create_model_and_transforms(arch, pretrained=pretrained or None)[0]
            self._tok = open_clip.get_tokenizer(arch)
        except Exception as e:  # noqa: BLE001
            raise EmbedError(f"{model}: open_clip cannot load it: {type(e).__name__}: {e}") from None
        self._model.eval().requires_grad_(False)
        self.short = name
        self.fingerprint = hashlib.sha256(f"{name}\0{getattr(open_clip, '__version__', '')}".encode()).hexdigest()
        pp = dict(getattr(self._model.visual, "preprocess_cfg", None) or {})
        size = pp.get("size") or getattr(self._model.visual, "image_size", 224)
        size = (int(size[0]), int(size[1])) if isinstance(size, (list, tuple)) else (int(size), int(size))
        mean = tuple(pp.get("mean") or getattr(open_clip, "OPENAI_DATASET_MEAN", CLIP_MEAN))
        std = tuple(pp.get("std") or getattr(open_clip, "OPENAI_DATASET_STD", CLIP_STD))
        interp = "bilinear" if pp.get("interpolation") == "bilinear" else "bicubic"
        if pp.get("resize_mode", "shortest") == "shortest":
            self.spec = PreprocessSpec("shortest_edge", (min(size),) * 2, size, mean, std, interp)
        else:
            self.spec = PreprocessSpec("exact", size, None, mean, std, interp)
        self.no_text_reason = None if hasattr(self._model, "encode_text") else f"{model} has no text tower"

    def tokenize(self, texts: list[str]) -> dict[str, np.ndarray]:
        return {"input_ids": np.asarray(self._tok(texts), dtype=np.int64)}

    def load(self, device, dtype):
        model = self._model.to(device=device, dtype=dtype)
        ImageTower, TextTower = _towers()
        image = ImageTower(lambda x: model.encode_image(x), model)
        text = TextTower(lambda ids: model.encode_text(ids), model, use_mask=False) \
            if self.no_text_reason is None else None
        return image, text


def open_source(model: str | None, body: str) -> ModelSource:
    if not model:
        raise EmbedError(f"embed.body={body} needs embed.model: a CLIP/SigLIP model directory or hub id")
    if not isinstance(model, (str, os.PathLike)):
        raise ValueError(f"embed.model must be a str, got {type(model).__name__}")
    model = os.fspath(model)
    if model.startswith("open_clip:"):
        return OpenClipSource(model)
    return HFSource(model)
