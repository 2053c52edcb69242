"""The parts of the engine's lifecycle that sit beside it (engine.py's module docstring has
the rule of what starts when): the model as one ``ask`` sees it, the summary writer of an
engine that has only read, and a retention pass without an engine."""
from __future__ import annotations

import os

from .config import EngineConfig
from .llm import LLMError
from .memory.store import Store
from .memory.writer_lock import WriterLock


def load_config(config, device: str | None) -> EngineConfig:
    """An EngineConfig from what ``Engine`` accepts (a config, a dict of overrides, a path or
    None), with ``device`` overriding its device when given."""
    if isinstance(config, EngineConfig):
        cfg = config
    elif isinstance(config, dict):
        cfg = EngineConfig.load(**config)
    else:
        cfg = EngineConfig.load(config)
    return cfg.model_copy(update={"device": device}) if device is not None else cfg


class WatchedModel:
    """The model as the answerers see it during one ``ask``. They end with what they have when
    the model fails (an answer saying "not found"); this keeps the first LLMError so that
    ``ask`` raises it instead: an unreachable server is an error, not an answer."""

    def __init__(self, llm):
        self._llm = llm
        self.name = getattr(llm, "name", "llm")
        self.error: LLMError | None = None

    def generate(self, requests):
        try:
            return self._llm.generate(requests)
        except LLMError as e:
            if self.error is None:
                self.error = e
            raise

    def __getattr__(self, name):
        return getattr(self._llm, name)

    def raise_if_failed(self, *, unreachable_only: bool = False) -> None:
        """Raise the first LLMError since the last call (all of them, or only one saying no
        server answers: another stage could not do better); then forget it."""
        error, self.error = self.error, None
        if error is not None and (error.unreachable or not unreachable_only):
            raise error


class ClaimingSummarizer:
    """The summary writer of an engine that has only read: its first summary claims the store
    (a StoreError when another process writes it: the planner sees that as a note), then a
    MemoryWriter that is never started writes the summaries in the caller's thread."""

    def __init__(self, engine):
        self._engine = engine
        self._writer = None

    def summarize(self, *args, **kw) -> list[int]:
        eng = self._engine
        eng._claim()
        if self._writer is None:
            from .reason.writer import MemoryWriter

            self._writer = MemoryWriter(eng.store, eng.text_embedder(), eng.llm, eng.forest, eng.config.writer,
                                        max_batch=eng.config.llm.max_batch)
        return self._writer.summarize(*args, **kw)


def retain_store(store_dir: str | os.PathLike, config: EngineConfig | dict | str | None = None,
                 *, budget_s: float | None = None):
    """One retention pass over the store at ``store_dir`` (an existing store), without building
    an engine (no embedder, no vector index, no model): what ``vam-engine retain`` runs. Takes
    the store's writer lock for the pass; returns the ``RetentionReport``."""
    from .memory.retention import RetentionPass

    cfg = load_config(config, None)
    store = Store(store_dir, create=False)
    try:
        with WriterLock(store_dir):
            return RetentionPass(store.moments, cfg=cfg.retention).run(budget_s=budget_s)
    finally:
        store.close()
