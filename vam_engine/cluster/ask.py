"""``ClusterEngine.ask``: the answerers run at the router over a FanoutView (view.py).

The router holds what one engine's ``ask`` holds besides the store: the model (an object passed
as ``llm=``, or the config's ``llm`` section: an OpenAI-compatible server the router can reach),
the text embedder (queries of the forest and the QA history, built from the shards' config so
the spaces match), and the QA history, in its own small store ``<root>/_router``. The cameras'
present (their latest frames, in the shards' working memories) is read from the shards for
each question (present.py).
"""
from __future__ import annotations

import threading
import time

from ..errors import VamError


class RouterAsk:
    def __init__(self, router, config, llm, device: str | None):
        from ..config import load_config

        self._router = router
        self.config = load_config(config, device)
        self._llm = llm
        self._lock = threading.Lock()
        self._texts = self._store = self._qa = None
        self._texts_made = False

    def built_llm(self):
        return self._llm

    def wrap_model(self, wrap) -> bool:
        """Use ``wrap(model)`` for the router's answers (the service's latency tap); False without a model."""
        from ..device import resolve_device
        from ..llm import describe_llm, make_llm

        with self._lock:
            if self._llm is None:
                if describe_llm(self.config.llm) is None:
                    return False
                self._llm = make_llm(self.config.llm, device=resolve_device(self.config.device))
            self._llm = wrap(self._llm)
            if self._qa is not None:  # built by an earlier question: it rewrites the QA summary with the model
                self._qa.llm = self._llm
            return True

    def _parts(self):
        with self._lock:
            if self._store is None:
                from ..device import resolve_device
                from ..embed import make_image_embedder, make_text_embedder
                from ..llm import describe_llm, make_llm
                from ..memory import Store
                from ..reason.qa_record import QARecorder

                cfg = self.config
                if self._llm is None:
                    if describe_llm(cfg.llm) is None:
                        raise VamError("ask needs an LLM at the router: pass llm=... to connect or set llm.backend")
                    self._llm = make_llm(cfg.llm, device=resolve_device(cfg.device))
                dev = resolve_device(cfg.device)
                self._texts = make_text_embedder(cfg.embed, device=dev,
                                                 image_embedder=make_image_embedder(cfg.embed, device=dev))
                self._store = Store(self._router.catalogue.root / "_router")
                self._qa = QARecorder(self._llm, self._texts)
            return self._llm, self._texts, self._store, self._qa

    def ask(self, question, as_of=None, camera=None, mode="auto", *, max_turns=6, session=None, read_only=False):
        from ..reason.ask import ask_question, check_ask
        from .present import FanoutPresent
        from .view import FanoutView

        check_ask(question, as_of, mode, max_turns, session=session, read_only=read_only)
        started = time.perf_counter()
        _, texts, store, qa = self._parts()
        llm = self._llm  # (read after _parts: wrap_model may have replaced it)
        view = FanoutView(self._router, texts, store, as_of=as_of, cameras=camera, session=session or "",
                          write=not read_only)
        answer = ask_question(question, view, llm, FanoutPresent(self._router), texts, qa, mode=mode,
                              max_turns=max_turns, started=started)
        # never silently partial: the cameras whose shard did not answer a read of this question
        answer.missing_cameras = tuple(sorted(view.missing_cameras))
        answer.missing_shards = tuple(sorted(view.missing_shards))
        return answer

    def wait_for_answers(self, timeout=None) -> bool:
        return self._qa is None or self._qa.wait_idle(timeout)

    def close(self) -> None:
        if self._qa is not None:
            self._qa.close()
        if self._store is not None:
            self._store.close()
