"""What the engine writes with its model besides indexing: summary documents (``summarize``,
and the planner's summaries during ``ask``), waiting for the document writer, and the event
forest after a deletion."""
from __future__ import annotations

import threading

from ..errors import VamError
from ..ingest import camera_list
from ..numerics import time_range as check_range
from ..memory import Store, Summary
from .lifecycle import Lifecycle, writer_memory
from .models import EngineModels


class Documents:
    def __init__(self, store: Store, lifecycle: Lifecycle, models: EngineModels, config):
        self._store = store
        self._life = lifecycle
        self._models = models
        self._config = config
        self._claiming = None
        self._drafting = None
        self._lock = threading.Lock()

    def summarize(self, time_range, granularity_s: float, prompt: str, cameras, structure) -> list[Summary]:
        """See ``Engine.summarize``."""
        if not self._models.documents:
            raise VamError("summarize needs an LLM: set llm.backend (local or openai) or pass llm=...")
        t0, t1 = check_range(time_range, strict=True)
        if not 0 < granularity_s <= 86400:
            raise VamError(f"granularity_s must be in (0, 86400], got {granularity_s}")
        if (t1 - t0) / granularity_s > 10_000:
            raise VamError(f"{(t1 - t0) / granularity_s:.0f} windows requested; at most 10000 per call")
        if not isinstance(prompt, str) or not prompt.strip():
            raise VamError("summarize needs a non-empty prompt (what the summaries should focus on)")
        self._life.flush()
        writer = self._life.start_writer()
        cams = camera_list(cameras) or list(self._store.moments.cameras())
        return [d for cam in cams for d in writer.summarize(cam, t0, t1, granularity_s, prompt.strip(), structure)]

    def wait(self, timeout: float | None = None) -> bool:
        """See ``Engine.wait_for_documents``."""
        self._life.flush()
        if not self._models.documents:
            return True
        return self._life.start_writer().wait_idle(timeout)

    def summarizer(self, write: bool = True):
        """What ``ask``'s planner writes summary documents with (a callable returning Summary
        records; None without a model): the running writer's ``summarize``, or (an engine that
        has only read) one that claims the store at its first summary. ``write`` False: drafts,
        kept in the answer and never stored (the asker may not write the memory)."""
        if not self._models.documents:
            return None
        with self._lock:
            if not write:
                if self._drafting is None:
                    from ..reason import MemoryWriter

                    self._drafting = MemoryWriter(writer_memory(self._store), self._models.text_embedder(),
                                                  self._models.llm, self._models.forest, self._config.writer,
                                                  max_batch=self._config.llm.max_batch)
                return self._drafting.draft_summaries
            if self._life.writer is not None:
                return self._life.writer.summarize
            if self._claiming is None:
                self._claiming = ClaimingSummarizer(self._store, self._life, self._models, self._config)
            return self._claiming.summarize

    def forget(self, cameras, time_range) -> None:
        """After ``store.delete``: the forest of each camera touched loses the deleted events."""
        forest = self._models.forest
        if forest is None:
            return
        for cam in set(forest.cameras()) & set(cameras or forest.cameras()):
            if time_range is None:
                forest.remove_camera(cam)
            else:
                self._rebuild_forest(cam)

    def _rebuild_forest(self, cam: str) -> None:
        """Re-insert a camera's remaining documented events; the writer rewrites the merges
        (a later writer, when none runs in this engine: they stay marked stale until then)."""
        texts = self._models.text_embedder()
        leaves = []
        for e in self._store.events.documented(cam):
            vec = e.doc_vector if e.doc_vector is not None else texts.embed_texts([e.doc])[0]
            times = self._store.moments.times(e.keyframes)
            leaves.append((e.event_id, e.t_start, e.t_end, [(k, times[k]) for k in e.keyframes if k in times],
                           e.doc, vec))
        self._models.forest.rebuild(cam, leaves)
        if self._life.writer is not None:
            self._life.writer.notify()


class ClaimingSummarizer:
    """The summary writer of an engine that has only read: its first summary claims the store
    (a StoreError when another process writes it: the planner sees that as a note), then a
    MemoryWriter that is never started writes the summaries in the caller's thread."""

    def __init__(self, store: Store, lifecycle: Lifecycle, models: EngineModels, config):
        self._store = store
        self._life = lifecycle
        self._models = models
        self._config = config
        self._writer = None

    def summarize(self, *args, **kw) -> list[Summary]:
        self._life.claim()
        if self._writer is None:
            from ..reason import MemoryWriter

            self._writer = MemoryWriter(writer_memory(self._store), self._models.text_embedder(), self._models.llm,
                                        self._models.forest, self._config.writer,
                                        max_batch=self._config.llm.max_batch)
        return self._writer.summarize(*args, **kw)
