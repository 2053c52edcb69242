"""The serve process's garbage collector, settled once the service has started.

Why: CPython's full (generation 2) collection walks every tracked object. In ``serve`` most of
them are there from start-up - the modules, FastAPI's routes and models, the engine and its
configuration - and never become garbage; measured under bench_serve's load, each full
collection paused every thread (the event loop and the ingest threads included) for 100-180 ms,
and those pauses were the slowest requests. ``gc.freeze()`` moves everything alive at start-up
into a permanent generation that collections skip, so a full collection walks only what was
made while serving. Garbage made later is still collected as before.
"""
from __future__ import annotations

import gc


def settle() -> int:
    """Collect what start-up left behind, then freeze the rest; returns the objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
