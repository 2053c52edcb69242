"""The engine's model, seen by the service: latency per priority class (for /metrics), and the
model calls of one ``ask`` as they happen (the stages an SSE answer streams).

``ModelTap`` wraps the engine's LLM once, at app start, so every caller (answers, monitors, the
document writer) goes through it. A stage listener is per thread: ``ask`` runs in its own
worker thread and calls the model from it (the scheduler below the tap may batch on others),
so the listener sees that answer's calls only.
"""
from __future__ import annotations

import threading
import time

_local = threading.local()


class ModelTap:
    def __init__(self, llm, on_latency):
        self._llm = llm
        self.sinks = [on_latency]  # each called with (priority class, seconds) per request
        self.name = getattr(llm, "name", "llm")

    def generate(self, requests):
        requests = list(requests)
        listener = getattr(_local, "listener", None)
        if listener is not None:
            listener("model_call", {"tags": [r.tag for r in requests]})
        t0 = time.perf_counter()
        try:
            out = self._llm.generate(requests)
        finally:
            dt = time.perf_counter() - t0
            for r in requests:
                for sink in self.sinks:
                    sink(r.priority_class, dt)
        if listener is not None:
            listener("model_reply", {"tags": [r.tag for r in requests], "seconds": dt,
                                     "prompt_tokens": sum(o.prompt_tokens for o in out),
                                     "completion_tokens": sum(o.completion_tokens for o in out)})
        return out

    def close(self):
        self._llm.close()

    def __getattr__(self, name):
        return getattr(self._llm, name)


def install(backend, on_latency) -> bool:
    """Put a ModelTap over the served model (building it: a service loads its model at start,
    not at its first question). False when there is no model."""
    def wrap(llm):
        if isinstance(llm, ModelTap):
            llm.sinks.append(on_latency)  # another app over the same engine (tests)
            return llm
        return ModelTap(llm, on_latency)

    return backend.wrap_model(wrap)


class listening:
    """``with listening(callback):`` reports this thread's model calls to ``callback(kind, data)``."""

    def __init__(self, callback):
        self.callback = callback

    def __enter__(self):
        self._prev = getattr(_local, "listener", None)
        _local.listener = self.callback
        return self

    def __exit__(self, *exc):
        _local.listener = self._prev
