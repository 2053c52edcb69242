"""The factory the engine uses: the body an ``llm`` config describes, behind the two-tier
scheduler, one body per distinct model when roles name several."""
from __future__ import annotations

import os

from ..config import LLMConfig
from ..errors import VamError
from .base import LLM
from .openai_http import OpenAIChat
from .roles import RoleRouter
from .scheduler import schedule_http, schedule_local
from .spec import describe_llm, describe_one, role_configs


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
    key = describe_one(cfg)
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
