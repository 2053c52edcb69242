"""The whole tree, ``EngineConfig``, assembled from the sections (one module each), and how
it is read.

Overrides, later wins: a JSON or TOML file (``EngineConfig.load(path)``), then environment
variables ``VAM_<SECTION>__<FIELD>`` (for example ``VAM_GATE__SSIM_MAX=0.95``), then keyword
arguments.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from ..errors import VamError
from .ask import AskConfig
from .audio import AudioConfig
from .base import Section
from .clips import ClipsConfig
from .commit import CommitConfig
from .embed import EmbedConfig
from .forest import ForestConfig
from .gate import GateConfig
from .ingest import IngestConfig
from .llm import LLMConfig
from .monitors import MonitorConfig
from .mqtt import MqttConfig
from .perception import PerceptionConfig
from .retention import RetentionConfig
from .service import ServiceConfig
from .sessions import SessionConfig
from .store import StoreConfig
from .tools import ToolsConfig
from .vectors import VectorConfig
from .webhooks import WebhookConfig
from .writer import WriterConfig


class EngineConfig(Section):
    """The whole tree: the engine's device and one section per part."""

    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="where the accelerated bodies run; auto: "
                                                   "cuda when torch sees a GPU, else cpu")
    gate: GateConfig = GateConfig()
    ingest: IngestConfig = IngestConfig()
    store: StoreConfig = StoreConfig()
    embed: EmbedConfig = EmbedConfig()
    commit: CommitConfig = CommitConfig()
    vectors: VectorConfig = VectorConfig()
    retention: RetentionConfig = RetentionConfig()
    llm: LLMConfig = LLMConfig()
    writer: WriterConfig = WriterConfig()
    forest: ForestConfig = ForestConfig()
    monitors: MonitorConfig = MonitorConfig()
    service: ServiceConfig = ServiceConfig()
    perception: PerceptionConfig = PerceptionConfig()
    audio: AudioConfig = AudioConfig()
    ask: AskConfig = AskConfig()
    sessions: SessionConfig = SessionConfig()
    tools: ToolsConfig = ToolsConfig()
    mqtt: MqttConfig = MqttConfig()
    webhooks: WebhookConfig = WebhookConfig()
    clips: ClipsConfig = ClipsConfig()

    @classmethod
    def load(cls, path: str | os.PathLike | None = None, env: dict | None = None, **overrides) -> "EngineConfig":
        data: dict = {}
        if path is not None:
            p = Path(path)
            try:
                text = p.read_text()
                if p.suffix == ".toml":
                    import tomllib

                    data = tomllib.loads(text)
                else:
                    data = json.loads(text)
            except (OSError, ValueError) as e:
                raise VamError(f"{p}: cannot read config: {e}") from None
        for key, value in (os.environ if env is None else env).items():
            if not key.startswith("VAM_") or "__" not in key:
                continue
            section, _, name = key[4:].lower().partition("__")
            data.setdefault(section, {})[name] = value
        for key, value in overrides.items():
            if isinstance(value, dict):
                data.setdefault(key, {}).update(value)
            else:
                data[key] = value
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise VamError(f"invalid config{f' in {path}' if path else ''}: {_error_text(e)}") from None


_SECRET_SECTIONS = ("mqtt", "webhooks")  # what was given there may hold a password: an error never echoes it


def _error_text(e: ValidationError) -> str:
    errors = e.errors(include_url=False, include_input=False)
    if not any(err["loc"][:1] and err["loc"][0] in _SECRET_SECTIONS for err in errors):
        return str(e)
    return "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in errors)


def load_config(config, device: str | None = None) -> EngineConfig:
    """An EngineConfig from what ``Engine`` accepts (a config, a dict of overrides, a path to a
    JSON/TOML file, or None), with ``device`` overriding its device when given."""
    if isinstance(config, EngineConfig):
        cfg = config
    elif isinstance(config, dict):
        cfg = EngineConfig.load(**config)
    else:
        cfg = EngineConfig.load(config)
    return cfg.model_copy(update={"device": device}) if device is not None else cfg
