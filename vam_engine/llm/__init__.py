"""Multimodal LLM bodies behind one contract (see ``base``), and the factory the engine uses."""
from __future__ import annotations

import os

from ..config import LLMConfig
from ..errors import VamError
from .base import LLM, Clip, Image, LLMError, LLMRequest, LLMResponse, Message, Part, Sampling
from .openai_http import OpenAIChat
from .roles import RoleRouter, role_configs
from .scheduler import PriorityScheduler, SchedulerPolicy, schedule_http, schedule_local
from .scripted import ScriptedLLM

__all__ = ["LLM", "Clip", "Image", "LLMError", "LLMRequest", "LLMResponse", "Message", "Part",
           "Sampling", "OpenAIChat", "PriorityScheduler", "RoleRouter", "SchedulerPolicy", "ScriptedLLM",
           "describe_llm", "make_llm", "parse_llm_spec"]

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
    'none'; raises the VamError ``make_llm`` would for a config that cannot work (its
    ``roles`` included), without loading anything (the engine checks its config at
    construction and loads on first use)."""
    name = _describe_one(cfg)
    for role, role_cfg in role_configs(cfg).items():
        try:
            _describe_one(role_cfg)
        except VamError as e:
            raise VamError(f"llm.roles.{role}: {e}") from None
    return name


def _describe_one(cfg: LLMConfig) -> str | None:
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
    """The body ``cfg`` describes behind the two-tier scheduler (``scheduler``), or None for
    backend 'none'; with ``llm.roles``, a ``RoleRouter`` over one scheduled body per distinct
    model."""
    if describe_llm(cfg) is None:
        return None
    bodies: dict[str, LLM] = {}
    try:
        default = _scheduled(cfg, device, bodies)
        routes = {role: _scheduled(role_cfg, device, bodies) for role, role_cfg in role_configs(cfg).items()}
    except BaseException:
        for body in bodies.values():
            body.close()
        raise
    return RoleRouter(default, routes) if routes else default


def _scheduled(cfg: LLMConfig, device: str, bodies: dict) -> LLM:
    # one body per distinct model: two roles naming the same spec share its scheduler
    key = _describe_one(cfg)
    if key not in bodies:
        body = _make_body(cfg, device)
        if cfg.backend == "openai":
            bodies[key] = schedule_http(body, concurrency=cfg.concurrency, backend_slots=cfg.backend_slots,
                                        backend_every=cfg.backend_every)
        else:
            bodies[key] = schedule_local(body, max_batch=cfg.max_batch, backend_every=cfg.backend_every)
    return bodies[key]


def _make_body(cfg: LLMConfig, device: str) -> LLM:
    if cfg.backend == "openai":
        try:
            return OpenAIChat(cfg.url, cfg.model, api_key=os.environ.get(cfg.api_key_env) or None,
                              api_key_env=cfg.api_key_env, timeout_s=cfg.timeout_s,
                              max_retries=cfg.max_retries, concurrency=cfg.concurrency,
                              max_image_side=cfg.max_image_side, max_image_bytes=cfg.max_image_bytes,
                              server_priority=cfg.server_priority)
        except ValueError as e:
            raise VamError(f"llm: {e}") from None
    # Imported here: it pulls in torch and transformers, which the other bodies do not need.
    from .local_qwen import LocalQwenVL

    return LocalQwenVL(cfg.model, device=device, dtype=cfg.dtype, kv_cache_bytes=cfg.kv_cache_bytes,
                       max_batch=cfg.max_batch)
