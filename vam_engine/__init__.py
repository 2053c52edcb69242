"""vam_engine: a streaming visual-memory engine.

The public API, importable from here (``from vam_engine import Engine``): the engine and its
config, ``connect`` (the same API over camera shards on a Ray cluster), the records a user
meets (reports, search results, evidence, moments, answers) and the errors. Names load at first use, so ``import vam_engine`` stays light (no torch, no numpy).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# name -> module it lives in
_EXPORTS = {
    "Engine": "vam_engine.engine",
    "retain_store": "vam_engine.engine",
    "connect": "vam_engine.cluster",
    "EngineConfig": "vam_engine.config",
    "SourceReport": "vam_engine.index.pipeline",
    "Progress": "vam_engine.index.pipeline",
    "SearchResult": "vam_engine.memory",
    "Evidence": "vam_engine.memory",
    "Moment": "vam_engine.memory",
    "Answer": "vam_engine.reason.answer",
    "ToolCitation": "vam_engine.reason.answer",
    "Pose": "vam_engine.ingest",
    "PoseError": "vam_engine.ingest",
    "RetentionReport": "vam_engine.memory",
    "VamError": "vam_engine.errors",
    "SourceError": "vam_engine.errors",
    "FrameError": "vam_engine.errors",
    "StoreError": "vam_engine.errors",
    "VectorError": "vam_engine.errors",
    "DeviceError": "vam_engine.device",
    "EmbedError": "vam_engine.embed",
    "LLMError": "vam_engine.llm",
}

__all__ = [  # a literal list, for linters; the same names as _EXPORTS
    "Answer", "DeviceError", "EmbedError", "Engine", "EngineConfig", "Evidence", "FrameError", "LLMError",
    "Moment", "Pose", "PoseError", "Progress", "RetentionReport", "SearchResult", "SourceError", "SourceReport",
    "StoreError", "ToolCitation", "VamError", "VectorError", "connect", "retain_store", "__version__"
]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vam_engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return __all__


if TYPE_CHECKING:  # for type checkers and editors: the same names, imported eagerly
    from .config import EngineConfig
    from .device import DeviceError
    from .embed import EmbedError
    from .cluster import connect
    from .engine import Engine, retain_store
    from .errors import FrameError, SourceError, StoreError, VamError, VectorError
    from .llm import LLMError
    from .memory import Evidence, Moment, RetentionReport, SearchResult
    from .index import Progress, SourceReport
    from .ingest import Pose, PoseError
    from .reason import Answer, ToolCitation
