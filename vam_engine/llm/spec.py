"""LLM specs: the short form the CLI takes (``openai:URL#MODEL``, ``local:DIR``, ``none``) and
what a config describes, checked without loading anything (the engine checks its config at
construction and loads the model at first use)."""
from __future__ import annotations

import os

from ..config import LLMConfig
from ..errors import VamError
from .roles import known_roles

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


def role_configs(cfg: LLMConfig) -> dict[str, LLMConfig]:
    """role -> the LLMConfig of its model: the main config with the role's spec's fields
    (backend, model, url); every other field (timeouts, concurrency, ...) is the main one's.
    Raises VamError naming the role and what is wrong."""
    if not isinstance(cfg.roles, dict):
        raise VamError(f"llm.roles must map role names to LLM specs, got {type(cfg.roles).__name__}")
    known = known_roles()
    out = {}
    for role, spec in cfg.roles.items():
        where = f"llm.roles.{role}"
        if role not in known:
            raise VamError(f"{where}: unknown role {role!r}; roles are {', '.join(sorted(known))}")
        if cfg.backend == "none":
            raise VamError(f"{where}: roles need a main model (llm.backend is 'none'; set --llm or llm.backend)")
        try:
            fields = parse_llm_spec(spec)
        except ValueError as e:
            raise VamError(f"{where}: {e}") from None
        if fields["backend"] == "none":
            raise VamError(f"{where}: 'none' is not a model; leave the role out to use the main model")
        out[role] = cfg.model_copy(update={"url": None, **fields, "roles": {}})
    return out


def describe_llm(cfg: LLMConfig) -> str | None:
    """The name of the body ``cfg`` describes (as ``LLM.name`` will read), or None for backend
    'none'; raises the VamError ``make_llm`` would for a config that cannot work (its
    ``roles`` included), without loading anything (the engine checks its config at
    construction and loads on first use)."""
    name = describe_one(cfg)
    for role, role_cfg in role_configs(cfg).items():
        try:
            describe_one(role_cfg)
        except VamError as e:
            raise VamError(f"llm.roles.{role}: {e}") from None
    return name


def describe_one(cfg: LLMConfig) -> str | None:
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
