"""The embedder contract and the checks every body shares.

Every image body takes uint8 N x H x W x 3 RGB frames and returns float32 N x dim rows of unit
L2 norm. Inputs are checked before any work (a ValueError that names what is wrong); outputs are
checked before they leave (NaN, inf or an all-zero row raise EmbedError: never returned).
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Iterator, Protocol, Sequence, runtime_checkable

import numpy as np

from ..errors import VamError


class EmbedError(VamError):
    """An embedder cannot be built or cannot produce a valid embedding."""


@runtime_checkable
class ImageEmbedder(Protocol):
    name: str       # the body and model, for logs: "descriptor-v1", "torch:<model>", "onnx:<model>"
    model_id: str   # identity of the embedding space (includes dim); the same for every body of one model
    dim: int
    has_text: bool  # True when embed_texts maps text into the image space (a CLIP/SigLIP text tower)

    def embed_images(self, frames: np.ndarray) -> np.ndarray: ...

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class TextEmbedder(Protocol):
    name: str
    model_id: str
    dim: int

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray: ...


def check_frames(frames, who: str) -> np.ndarray:
    """Validate an N x H x W x 3 uint8 batch; returns it unchanged."""
    if not isinstance(frames, np.ndarray):
        raise ValueError(f"{who}: frames must be a numpy array (N x H x W x 3 uint8 RGB), "
                         f"got {type(frames).__name__}")
    if frames.dtype != np.uint8:
        raise ValueError(f"{who}: frames must be uint8 RGB, got dtype {frames.dtype}")
    if frames.ndim != 4 or frames.shape[-1] != 3:
        hint = " (one frame? pass frames[None])" if frames.ndim == 3 and frames.shape[-1] == 3 else ""
        raise ValueError(f"{who}: frames must be N x H x W x 3 (RGB), got shape {tuple(frames.shape)}{hint}")
    if frames.shape[1] < 1 or frames.shape[2] < 1:
        raise ValueError(f"{who}: frames have no pixels: shape {tuple(frames.shape)}")
    return frames


def check_texts(texts, who: str) -> list[str]:
    """Validate a list of strings; returns it as a list."""
    if isinstance(texts, (str, bytes)):
        raise ValueError(f"{who}: texts must be a list of str, got a single {type(texts).__name__} "
                         f"(wrap it in a list)")
    try:
        out = list(texts)
    except TypeError:
        raise ValueError(f"{who}: texts must be a list of str, got {type(texts).__name__}") from None
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise ValueError(f"{who}: texts[{i}] must be str, got {type(t).__name__}")
    return out


def finish(x, who: str) -> np.ndarray:
    """float32 rows of unit norm; EmbedError on NaN, inf or an all-zero row."""
    x = np.asarray(x)
    if x.ndim != 2:
        raise EmbedError(f"{who}: the model returned shape {x.shape}, expected N x dim")
    bad = ~np.isfinite(x).all(axis=1)
    if bad.any():
        rows = np.flatnonzero(bad)
        raise EmbedError(f"{who}: the model produced NaN or inf for {len(rows)} of {len(x)} inputs "
                         f"(rows {rows[:8].tolist()}); refusing to return them")
    x64 = x.astype(np.float64, copy=False)
    norms = np.sqrt(np.einsum("ij,ij->i", x64, x64))
    zero = ~(norms > 1e-30)
    if zero.any():
        rows = np.flatnonzero(zero)
        raise EmbedError(f"{who}: the model produced an all-zero vector for rows {rows[:8].tolist()}")
    return (x64 / norms[:, None]).astype(np.float32)


def empty(dim: int) -> np.ndarray:
    return np.zeros((0, dim), np.float32)


def batches(n: int, size: int) -> Iterator[slice]:
    for i in range(0, n, size):
        yield slice(i, min(n, i + size))


def offline() -> bool:
    """True when the Hugging Face hub must not be contacted (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE)."""
    return any(os.environ.get(k, "").strip().lower() in ("1", "true", "yes", "on")
               for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def looks_like_path(model: str) -> bool:
    """A string that can only be a filesystem path (not a hub id "name" or "org/name")."""
    return (model.startswith(("/", ".", "~")) or "\\" in model or model.count("/") > 1
            or os.path.isabs(model) or not re.fullmatch(r"[\w.\-]+(/[\w.\-]+)?", model))


_MODEL_FILES = {".json", ".safetensors", ".bin", ".txt", ".model", ".pt", ".pth", ".msgpack", ".h5", ".tiktoken"}


def fingerprint_dir(path: Path) -> str:
    """A content fingerprint of a model directory's model files (configs, weights, vocabularies):
    names, sizes and bytes of the small files, the size plus the first and last MiB of the large
    ones (weights). Cheap, and it tells apart two checkpoints of one architecture."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in _MODEL_FILES and not any(
            part.startswith(".") for part in p.relative_to(path).parts)):
        rel = f.relative_to(path).as_posix()
        size = f.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        with open(f, "rb") as fh:
            if size <= (16 << 20):
                h.update(fh.read())
            else:
                h.update(fh.read(1 << 20))
                fh.seek(size - (1 << 20))
                h.update(fh.read(1 << 20))
    return h.hexdigest()


def cache_root(cache_dir: str | None) -> Path:
    """cfg.cache_dir, or $VAM_ENGINE_CACHE, or ~/.cache/vam_engine."""
    if cache_dir:
        return Path(cache_dir).expanduser()
    env = os.environ.get("VAM_ENGINE_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vam_engine"


def safe_name(s: str) -> str:
    return re.sub(r"[^\w.\-]+", "_", s).strip("_")[:80] or "model"
