"""What the router hands its answering part (reason/ask.py: ``Answering``, the one body behind
``Engine.ask`` too): the answerers run here over a FanoutView (view.py).

The router holds what one engine's answering holds besides the store: the model (an object
passed as ``llm=``, or the config's ``llm`` section: an OpenAI-compatible server the router can
reach), the text embedder (queries of the forest and the QA history, built from the shards'
config so the spaces match), the outside tools and the dialogue budget of that config, and the
QA history, in its own small store ``<root>/_router`` (opened at the first question). The
cameras' present (their latest frames, in the shards' working memories) is read from the shards
for each question (present.py). Sessions, their turns and standing requests are the router's too
(sessions.py).
"""
from __future__ import annotations

import threading

from ..config import EngineConfig
from ..device import resolve_device
from ..llm import describe_llm, make_llm
from .present import FanoutPresent
from .view import FanoutView


class RouterModels:
    """The router's model and text embedder, each built at its first use (what ``Answering``
    reads of an engine's models: ``name``, ``llm``, ``text_embedder()``)."""

    def __init__(self, config: EngineConfig, llm=None):
        self._config = config
        self._llm = llm
        self._texts = None
        self._texts_made = False
        self._lock = threading.RLock()

    @property
    def name(self) -> str | None:
        """The model's name (None: none is passed or configured)."""
        return getattr(self._llm, "name", "llm") if self._llm is not None else describe_llm(self._config.llm)

    @property
    def llm(self):
        with self._lock:
            if self._llm is None and self.name is not None:
                self._llm = make_llm(self._config.llm, device=resolve_device(self._config.device))
            return self._llm

    def built_llm(self):
        return self._llm

    def wrap_llm(self, wrap) -> bool:
        """Use ``wrap(model)`` for the router's answers (the service's latency tap); False without a model."""
        with self._lock:
            if self.llm is None:
                return False
            self._llm = wrap(self._llm)
            return True

    def text_embedder(self):
        with self._lock:
            if not self._texts_made:
                from ..embed import make_image_embedder, make_text_embedder

                cfg, dev = self._config, resolve_device(self._config.device)
                self._texts = make_text_embedder(cfg.embed, device=dev,
                                                 image_embedder=make_image_embedder(cfg.embed, device=dev))
                self._texts_made = True
            return self._texts


class RouterViews:
    """What a question reads at the router: a FanoutView over the shards holding its cameras
    (its QA history in the router's store) and the shards' present."""

    def __init__(self, router, models: RouterModels, ask=None):
        self._router = router
        self._models = models
        self._ask = ask  # the shards' AskConfig: their present's spans
        self._store = None
        self._lock = threading.Lock()

    @property
    def store(self):
        """The router's own store (``<root>/_router``: the QA history), opened at first use."""
        with self._lock:
            if self._store is None:
                from ..memory import Store

                self._store = Store(self._router.catalogue.root / "_router")
            return self._store

    def view(self, as_of=None, cameras=None, *, session: str | None = None, write: bool = True) -> FanoutView:
        return FanoutView(self._router, self._models.text_embedder(), self.store, as_of=as_of, cameras=cameras,
                          session=session or "", write=write)

    def now(self, cameras) -> float | None:
        """The newest frame of ``cameras`` (None: every camera) on their shards (a turn's time
        when it names none)."""
        return FanoutView(self._router, None, self.store, cameras=cameras, write=False).now()

    def present(self) -> FanoutPresent:
        return FanoutPresent(self._router, self._ask)  # one per question: its windows are read once

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
