"""Claiming the store and the workers that run beside indexing (the rule of what starts when is
in core.py's docstring).

``Lifecycle`` holds the store's writer lock, the vector indexes (reloaded when this process
becomes the writer after another one wrote), the document writer, background retention and the
indexing pipeline. The engine's other parts get ``pipe`` (the pipeline, claiming the store and
starting what indexing needs at the first call) and ``pipeline`` (the pipeline if one runs).
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

from ..config import EngineConfig, load_config
from ..index import IndexPipeline
from ..memory import Store, VectorMemory, WriterLock
from .models import EngineModels


class Lifecycle:
    """``on_ingest``: called once when ingest first starts (the monitors resume)."""

    def __init__(self, store: Store, config: EngineConfig, device: str, models: EngineModels, cascade, embedder,
                 working, on_ingest: Callable[[], None] = lambda: None,
                 speech_settled: Callable[[str, float], bool] | None = None, perception=None,
                 clip_of: Callable[[str, float, float], bytes] | None = None):
        """``perception``: the engine's EnginePerception (None: perception off); ``clip_of``: an
        interval's MP4 for the writer's event documents (None: keyframes only)."""
        self.store = store
        self._config = config
        self._device = device
        self._models = models
        self._cascade = cascade
        self._embedder = embedder
        self._working = working
        self._on_ingest = on_ingest
        self._speech_settled = speech_settled  # the writer documents an event once its speech is in
        self._clip_of = clip_of
        self._perception = perception
        self._writer_lock = WriterLock(store.root)
        self._start_lock = threading.RLock()  # claiming the store and starting its workers
        self._lock = threading.Lock()  # the pipeline's creation and hand-over at close
        self._pipeline: IndexPipeline | None = None
        self._retention = None
        self._retention_pass = None
        self.writer = None
        self._vectors_seen = self._vector_state()  # before the load: a commit during it shows
        self.vectors = self._open_vectors()

    # -- the writer lock -------------------------------------------------------------------------
    @property
    def writing(self) -> bool:
        return self._writer_lock.held

    def claim(self) -> None:
        """Become the store's one writer, or StoreError naming the process that is."""
        with self._start_lock:
            if self._writer_lock.held:
                return
            self._writer_lock.acquire()
            # Another process may have written since the indexes were loaded: a writer's indexes
            # must hold every committed vector (its snapshots claim the log position they cover).
            if self._vector_state() != self._vectors_seen:
                self.vectors = self._open_vectors()

    def _open_vectors(self) -> VectorMemory:
        return VectorMemory(self.store.vector_table, self.store.root / "vectors", self._config.vectors,
                            device=self._device)

    def _vector_state(self) -> tuple:
        """What changes when any process commits vectors: the log's end, and the snapshot
        files (a snapshot prunes the log it covers)."""
        snaps = sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size)
                       for p in (Path(self.store.root) / "vectors").glob("*") if p.is_file())
        return self.store.vector_table.seq(), tuple(snaps)

    # -- workers ---------------------------------------------------------------------------------
    def start_writer(self):
        """Claim the store and start the document writer (with a model); returns it or None."""
        with self._start_lock:
            self.claim()
            if self.writer is None and self._models.documents:
                from ..reason import MemoryWriter

                self.writer = MemoryWriter(writer_memory(self.store, self._speech_settled, self._clip_of),
                                           self._models.text_embedder(),
                                           self._models.llm, self._models.forest, self._config.writer,
                                           max_batch=self._config.llm.max_batch).start()
            return self.writer

    def start_ingest(self) -> None:
        """What indexing needs: the claim, the document writer, background retention, monitors."""
        with self._start_lock:
            self.start_writer()
            if self._retention is None and self._config.retention.enabled:
                from ..memory import RetentionWorker

                self._retention = RetentionWorker(self.store.moments, cfg=self._config.retention)
                self._retention.start()
        self._on_ingest()

    @property
    def retention(self):
        """The background retention worker (None until ingest starts it, or when disabled)."""
        return self._retention

    def pipe(self) -> IndexPipeline:
        """The indexing pipeline, started (with what indexing needs) at the first call."""
        self.start_ingest()
        with self._lock:
            if self._pipeline is None:
                wanted = self._models.name is not None  # a model reads the present (answers, monitors)
                perc = self._perception
                wanted = wanted or (perc is not None and perc.detect_present)  # ... or the detector does
                w = self._working
                self._pipeline = IndexPipeline(self.store, self._cascade, self._config, self._embedder,
                                               after_commit=self._after_commit, observe=w.observe,
                                               present_fps=w.short_fps if wanted else None,
                                               present_side=w.max_side,
                                               perception=perc.feed() if perc is not None else None)
            return self._pipeline

    @property
    def pipeline(self) -> IndexPipeline | None:
        """The pipeline if one runs (never starts one)."""
        return self._pipeline

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued frame is gated and committed; False on timeout."""
        pipe = self._pipeline
        return pipe.flush(timeout) if pipe is not None else True

    def _after_commit(self) -> None:
        if self.writer is not None:
            self.writer.notify()
            self.writer.wait_for_room()

    def retain(self, budget_s: float | None = None):
        """One retention pass now (see Engine.retain)."""
        self.claim()
        self.flush()
        with self._start_lock:
            if self._retention is not None:
                ret = self._retention.retention
            else:
                if self._retention_pass is None:
                    from ..memory import RetentionPass

                    self._retention_pass = RetentionPass(self.store.moments, cfg=self._config.retention)
                ret = self._retention_pass
        return ret.run(budget_s=budget_s)

    # -- closing ---------------------------------------------------------------------------------
    def stop_pipeline(self, step) -> None:
        """Stop the document writer's hold, the pipeline (its queue committed), then the writer;
        ``step(fn)`` runs each and collects its error."""
        with self._lock:
            pipe, self._pipeline = self._pipeline, None
        if self.writer is not None:
            step(self.writer.stop_holding)  # closing must not wait for the writer's backlog to drain
        if pipe is not None:
            step(pipe.close)
        if self._perception is not None:
            step(self._perception.close)  # after the pipeline: its last commit waited for the stage
        if self.writer is not None:
            step(self.writer.close)

    def stop_retention(self) -> None:
        if self._retention is not None:
            self._retention.stop()

    def close_store(self) -> None:
        if self.vectors is not None and self.writing:
            # Only the writer snapshots the vector indexes: a reader's snapshot would claim the
            # log position of commits another process made after this one loaded them.
            self.vectors.close()
        self.store.close()
        self._writer_lock.release()


def writer_memory(store: Store, speech_settled: Callable[[str, float], bool] | None = None,
                  clip_of: Callable[[str, float, float], bytes] | None = None):
    """What the memory writer reads and writes of a store (never the store itself)."""
    from ..reason import WriterMemory

    return WriterMemory(store.doc_queue, store.events, store.moments, store.summaries, store.transcripts,
                        speech_settled, clip_of)


def retain_store(store_dir: str | os.PathLike, config: EngineConfig | dict | str | None = None,
                 *, budget_s: float | None = None):
    """One retention pass over the store at ``store_dir`` (an existing store), without building
    an engine (no embedder, no vector index, no model): what ``vam-engine retain`` runs. Takes
    the store's writer lock for the pass; returns the ``RetentionReport``."""
    from ..memory import RetentionPass

    cfg = load_config(config, None)
    store = Store(store_dir, create=False)
    try:
        with WriterLock(store_dir):
            return RetentionPass(store.moments, cfg=cfg.retention).run(budget_s=budget_s)
    finally:
        store.close()
