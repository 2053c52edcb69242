"""The engine's models beside the image embedder, each built at its first use, never at
construction: the MLLM, the document text embedder and the event forest it keeps."""
from __future__ import annotations

import threading

from ..config import EngineConfig
from ..llm import describe_llm, make_llm


def model_name(config: EngineConfig, llm=None) -> str | None:
    """The name of the model an engine will use (None: none), checking the config's ``llm``
    section without loading anything: a config that cannot work fails before a store opens."""
    if llm is not None:
        return getattr(llm, "name", "llm")
    return describe_llm(config.llm)


class EngineModels:
    """``llm``: an object with the MLLM contract (overrides the config); ``name``: from
    ``model_name``. ``store``: the store whose recorded model ids the text embedder must match
    and whose forest table the forest reads."""

    def __init__(self, store, config: EngineConfig, device: str, image_embedder, llm, name: str | None):
        self._store = store
        self._config = config
        self._device = device
        self._image_embedder = image_embedder
        self._llm = llm
        self.name = name
        self._texts = None
        self._forest = None
        self._lock = threading.RLock()

    @property
    def documents(self) -> bool:
        """Whether this engine documents events (a model is set and the writer is enabled)."""
        return self.name is not None and self._config.writer.enabled

    @property
    def llm(self):
        """The model (built at first use; None without one)."""
        with self._lock:
            if self._llm is None and self.name is not None:
                self._llm = make_llm(self._config.llm, device=self._device)
            return self._llm

    def built_llm(self):
        """The model if it has been built (never builds it)."""
        return self._llm

    def wrap_llm(self, wrap) -> bool:
        """Use ``wrap(model)`` from now on (building the model first); False without a model."""
        with self._lock:
            if self.llm is None:
                return False
            self._llm = wrap(self._llm)
            return True

    def text_embedder(self):
        """The document text embedder (None: no text model and no text side of the image model)."""
        with self._lock:
            if self._texts is None:
                from ..embed import make_text_embedder

                self._texts = make_text_embedder(self._config.embed, device=self._device,
                                                 image_embedder=self._image_embedder)
                if self._texts is not None:
                    self._store.sources.check_model("text_embedder", self._texts.model_id)
            return self._texts

    @property
    def forest(self):
        """The event forest (with a model and the writer enabled, else None), loaded at first use."""
        if self._forest is None and self.documents:
            from ..memory import EventForest, ForestNodeRepository

            with self._lock:
                if self._forest is None:
                    # on the engine's device, as the vector spaces are (one device rule)
                    self._forest = EventForest(ForestNodeRepository(self._store.db), self._config.forest,
                                               device=self._device)
        return self._forest

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
