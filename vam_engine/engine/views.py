"""What a question reads of one engine, handed to the answering part (reason/ask.py: ``Answering``):
the causal view of its memory (memory/view.py), the cameras' present, and the time now."""
from __future__ import annotations

from ..memory import MemoryView, Store
from ..reason import WorkingMemory
from .documents import Documents
from .lifecycle import Lifecycle
from .models import EngineModels


class EngineViews:
    """``lifecycle``: the vector indexes (reloaded when the engine becomes the writer);
    ``models``: the text embedder and the forest; ``documents``: the planner's summarizer."""

    def __init__(self, store: Store, lifecycle: Lifecycle, models: EngineModels, documents: Documents, embedder,
                 working: WorkingMemory):
        self._store = store
        self._life = lifecycle
        self._models = models
        self._documents = documents
        self._embedder = embedder
        self._working = working

    def view(self, as_of: float | None = None, cameras=None, *, session: str | None = None,
             write: bool = True) -> MemoryView:
        """See ``Engine.view``."""
        return MemoryView(self._store, self._life.vectors, self._embedder, self._models.text_embedder(),
                          self._models.forest, self._documents.summarizer(write), as_of=as_of, cameras=cameras,
                          session=session or "")

    def present(self) -> WorkingMemory:
        """The cameras' present (OASIS 3.1), fed from decode."""
        return self._working

    def now(self, cameras) -> float | None:
        """The newest frame of ``cameras`` (None: every camera): the present's or, for a store
        another process indexes, the newest moment; None when there is none."""
        moments = self._store.moments
        names = cameras if cameras is not None else sorted(set(self._working.cameras()) | set(moments.cameras()))
        ts = [t for c in names for t in (self._working.latest(c), moments.latest_time(c)) if t is not None]
        return max(ts) if ts else None
