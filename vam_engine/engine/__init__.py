"""The engine: the public API (``Engine``, core.py) composed of parts that each receive what they
use: models (models.py), the store's claim and the workers beside indexing (lifecycle.py),
the ways video comes in (files.py, pushed.py, live.py), monitors (monitors.py) and documents
(documents.py). ``retain_store`` runs retention without an engine; ``StoreFollower`` feeds the
present from a store another process indexes.

Imports run downward: the engine uses reason/, index/, memory/ and the layers below, never the
service, the cluster or the CLI above it.
"""
from .core import Engine
from .lifecycle import retain_store
from .monitors import StoreFollower

__all__ = ["Engine", "retain_store", "StoreFollower"]
