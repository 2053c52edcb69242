"""Names a face loads at first use (a module-level ``__getattr__``, PEP 562), so that importing
the face does not import the modules behind names its importer never reads: the web stack behind
``vam_engine.server.create_app``, live cameras and clips behind ``vam_engine.ingest``'s names.

A face keeps the ``if TYPE_CHECKING:`` block that imports the same names eagerly: type checkers,
editors and the layer contract (tests/test_architecture.py) read the face's names from it."""
from __future__ import annotations

import importlib
from typing import Callable


def lazy_names(face: str, namespace: dict, exports: dict[str, tuple[str, str]]) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for the face named ``face`` whose globals are ``namespace``.
    ``exports``: lazy name -> (module it lives in, its name there). A name, once read, is bound in
    ``namespace``, so later reads skip ``__getattr__``; ``__dir__`` lists the face's ``__all__``.
    A name that is no export is an AttributeError naming the face and the name."""
    def __getattr__(name: str):
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {face!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[0]), where[1])
        namespace[name] = value
        return value

    def __dir__():
        return list(namespace["__all__"])

    return __getattr__, __dir__
