"""Multimodal LLM bodies behind one contract (see ``base``), and the factory the engine uses."""
from __future__ import annotations

import os

from ..config import LLMConfig
from ..errors import VamError
from .base import LLM, Clip, Image, LLMError, LLMRequest, LLMResponse, Message, Part, Sampling
from .openai_http import OpenAIChat
from .scripted import ScriptedLLM

__all__ = ["LLM", "Clip", "Image", "LLMError", "LLMRequest", "LLMResponse", "Message", "Part",
           "Sampling", "OpenAIChat", "ScriptedLLM", "describe_llm", "make_llm", "parse_llm_spec"]

# The local body loads a checkpoint directory only (no hub download): the spec says so.
_SPEC_FORMS = "'openai:<http(s) url>#<model>', 'local:<Qwen-VL model directory>' or 'none'"


def parse_llm_spec(spec: str) -> dict:
    """The ``llm`` config fields a CLI spec stands for:
    ``openai:http://host:8000/v1#model`` -> backend, url, model; ``local:/path`` -> backend,
    model (a local directory); ``none`` -> backend."""
    if not isinstance(spec, str):
        raise ValueError(f"LLM spec must be a string, got {type(spec).__name__}")
    if spec.strip() == "none":
        return {"backend": "none"}
    kind, sep, rest = spec.partition(":")
    if sep and kind == "openai":
        # rpartition: the model is after the last '#'; a URL fragment means nothing to an API.
        url, sep, model = rest.rpartition("#")
        if not sep or not url.startswith(("http://", "https://")) or not model:
            raise ValueError(f"LLM spec {spec!r}: expected 'openai:<http(s) url>#<model>', "
                             f"e.g. openai:http://127.0.0.1:8000/v1#Qwen/Qwen2-VL-7B-Instruct")
        return {"backend": "openai", "url": url, "model": model}
    if sep and kind == "local":
        if not rest:
            raise ValueError(f"LLM spec {spec!r}: expected 'local:<Qwen-VL model directory>'")
        return {"backend": "local", "model": rest}
    raise ValueError(f"LLM spec {spec!r} is not one of {_SPEC_FORMS}")


def describe_llm(cfg: LLMConfig) -> str | None:
    """The name of the body ``cfg`` describes (as ``LLM.name`` will read), or None for backend
    'none'; raises the VamError ``make_llm`` would for a config that cannot work, without
    loading anything (the engine checks its config at construction and loads on first use)."""
    if cfg.backend == "none":
        return None
    if cfg.backend == "openai":
        if not cfg.url:
            raise VamError("llm.url is required for backend 'openai' (the server's base URL, "
                           "e.g. http://127.0.0.1:8000/v1)")
        if not cfg.model:
            raise VamError("llm.model is required for backend 'openai' (the model name the server serves)")
        if not cfg.url.startswith(("http://", "https://")):
            raise VamError(f"llm.url must start with http:// or https://, got {cfg.url!r}")
        return f"openai:{cfg.url}#{cfg.model}"
    if cfg.backend == "local":
        if not cfg.model:
            raise VamError("llm.model is required for backend 'local' (a Qwen-VL model directory)")
        if not os.path.isdir(cfg.model):
            raise VamError(f"llm.model {cfg.model!r} is not a directory: the local body loads a Qwen-VL "
                           "checkpoint directory (hub ids are not downloaded)")
        return f"local:{cfg.model}"
    raise VamError(f"llm.backend must be none, local or openai, got {cfg.backend!r}")


def make_llm(cfg: LLMConfig, device: str = "cpu") -> LLM | None:
    """The body ``cfg`` describes, or None for backend 'none'."""
    if describe_llm(cfg) is None:
        return None
    if cfg.backend == "openai":
        try:
            return OpenAIChat(cfg.url, cfg.model, api_key=os.environ.get(cfg.api_key_env) or None,
                              api_key_env=cfg.api_key_env, timeout_s=cfg.timeout_s,
                              max_retries=cfg.max_retries, concurrency=cfg.concurrency,
                              max_image_side=cfg.max_image_side, max_image_bytes=cfg.max_image_bytes)
        except ValueError as e:
            raise VamError(f"llm: {e}") from None
    # Imported here: it pulls in torch and transformers, which the other bodies do not need.
    from .local_qwen import LocalQwenVL

    return LocalQwenVL(cfg.model, device=device, dtype=cfg.dtype, kv_cache_bytes=cfg.kv_cache_bytes,
                       max_batch=cfg.max_batch)
