"""One typed config tree with the seed defaults (docs/design.md section 6): ``EngineConfig``
(engine.py) holds one section per part, each section in a module of its own named as its key
(``gate.py`` is ``[gate]``, ``tools.py`` is ``[tools]`` with its two providers). Everything is
imported from here: ``from vam_engine.config import EngineConfig, GateConfig``.

Overrides, later wins: a JSON or TOML file (``EngineConfig.load(path)``), then environment
variables ``VAM_<SECTION>__<FIELD>`` (for example ``VAM_GATE__SSIM_MAX=0.95``), then keyword
arguments. docs/gen_config.py writes docs/configuration.md from this tree.
"""
from __future__ import annotations

from .ask import AskConfig
from .audio import AudioConfig
from .base import Section
from .clips import ClipsConfig
from .commit import CommitConfig
from .embed import EmbedConfig
from .engine import EngineConfig, load_config
from .forest import ForestConfig
from .gate import GateConfig
from .ingest import IngestConfig
from .llm import LLMConfig
from .monitors import MonitorConfig
from .mqtt import MqttConfig, mqtt_url_parts
from .perception import PerceptionConfig
from .retention import RetentionConfig
from .service import ServiceConfig
from .sessions import SessionConfig
from .store import StoreConfig
from .tools import ImageSearchConfig, ToolsConfig, WebSearchConfig
from .vectors import VectorConfig
from .webhooks import WebhookConfig
from .writer import WriterConfig

__all__ = ["AskConfig", "AudioConfig", "ClipsConfig", "CommitConfig", "EmbedConfig", "EngineConfig", "ForestConfig",
           "GateConfig", "ImageSearchConfig", "IngestConfig", "LLMConfig", "MonitorConfig", "MqttConfig",
           "PerceptionConfig", "RetentionConfig", "Section", "ServiceConfig", "SessionConfig", "StoreConfig",
           "ToolsConfig", "VectorConfig", "WebSearchConfig", "WebhookConfig", "WriterConfig", "load_config",
           "mqtt_url_parts"]
