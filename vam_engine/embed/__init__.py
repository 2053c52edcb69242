"""Image and text embedders.

Bodies (``EmbedConfig.body``): ``descriptor`` (default: numpy, no weights, no text side),
``torch`` (a CLIP/SigLIP model in transformers, or open_clip), ``onnx`` (the same model exported
once and run by onnxruntime), ``tensorrt`` (an fp16 engine built from that export; optional).

Contract of every image embedder:

``name``, ``model_id`` (identity of the embedding space, dim included; the same for every body of
one model), ``dim``, ``has_text``;
``embed_images(frames)``: uint8 N x H x W x 3 RGB -> float32 N x dim, unit rows (batched by
``batch_size`` internally);
``embed_texts(texts)``: list of str -> float32 N x dim, unit rows, in the image space (EmbedError
when ``has_text`` is False).

Bad input raises ValueError naming the problem; a missing model path, an unloadable model or a NaN,
inf or all-zero output raises EmbedError.
"""
from __future__ import annotations

from ..config import EmbedConfig
from .base import EmbedError, ImageEmbedder, TextEmbedder, cache_root
from .descriptor import DescriptorEmbedder

__all__ = ["EmbedError", "ImageEmbedder", "TextEmbedder", "cache_root", "DescriptorEmbedder", "make_image_embedder",
           "make_text_embedder"]


def make_image_embedder(cfg: EmbedConfig | None = None, device: str = "cpu", *,
                        compile: bool | None = None) -> ImageEmbedder:
    """The image embedder ``cfg`` describes, on ``device`` ("cpu", "cuda[:i]" or "auto").

    ``compile`` (torch body on CUDA only): torch.compile with CUDA graphs; default
    ``cfg.compile`` when the config has that field, else False."""
    cfg = cfg if cfg is not None else EmbedConfig()
    if cfg.body == "descriptor":
        if cfg.model:
            raise EmbedError(f"embed.model is set ({cfg.model!r}) but embed.body is 'descriptor', which uses no "
                             f"model: set embed.body to torch, onnx or tensorrt")
        return DescriptorEmbedder(batch_size=cfg.batch_size)
    if cfg.body == "tensorrt":  # before anything heavy: a clear error when TensorRT is missing
        from .tensorrt_body import TensorRTImageEmbedder, import_tensorrt

        import_tensorrt()
        return TensorRTImageEmbedder(cfg.model, device="cuda" if device in ("auto", None) else device,
                                     batch_size=cfg.batch_size, cache_dir=cfg.cache_dir)
    if cfg.body == "torch":
        from .torch_body import TorchImageEmbedder

        if compile is None:
            compile = bool(getattr(cfg, "compile", False))
        return TorchImageEmbedder(cfg.model, device=device, dtype=cfg.dtype, batch_size=cfg.batch_size,
                                  compile=compile)
    if cfg.body == "onnx":
        from .onnx_body import OnnxImageEmbedder

        if device == "auto":
            from ..device import resolve_device

            device = resolve_device(device)
        return OnnxImageEmbedder(cfg.model, device=device, batch_size=cfg.batch_size, cache_dir=cfg.cache_dir)
    raise EmbedError(f"unknown embed.body {cfg.body!r}")  # the config's Literal makes this unreachable


def make_text_embedder(cfg: EmbedConfig | None = None, device: str = "cpu", *,
                       image_embedder: ImageEmbedder | None = None) -> TextEmbedder | None:
    """The document text embedder: ``cfg.text_model`` when set (a sentence-transformers model, or
    "minilm"); else the text side of the image model (pass ``image_embedder`` to share the one
    already built); None when neither exists (the descriptor has no text side)."""
    cfg = cfg if cfg is not None else EmbedConfig()
    from .text import ImageTextEmbedder, SentenceTransformerEmbedder

    if cfg.text_model:
        return SentenceTransformerEmbedder(cfg.text_model, device=device, batch_size=cfg.batch_size)
    if image_embedder is None:
        if cfg.body == "descriptor":
            return None
        image_embedder = make_image_embedder(cfg, device)
    return ImageTextEmbedder(image_embedder) if image_embedder.has_text else None
