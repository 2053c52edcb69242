"""The service: an authenticated HTTP + SSE + WebSocket API over one Engine, Prometheus metrics,
and a web page (``vam-engine serve``). ``create_app(engine, ServeOptions(...))`` builds the
FastAPI app (app.py) from thin routers (routes_*.py) beside auth.py (the bind policy and each
request's authentication); ``TokenStore`` (tokens.py) manages the bearer tokens of a store
directory. It imports no engine, CLI or cluster: it serves any object with the engine's API.

The names below are the way in for modules outside server (the CLI, the cluster). Each loads its
module at first use: importing this face imports nothing, so code that needs only the records
(``Page``, ``StoreStats``, ``Principal``, ``TokenStore``) and the CLI load without the web stack
(the ``server`` extra: FastAPI, uvicorn) or the MCP SDK (the ``mcp`` extra), which only
``create_app``, ``ServeOptions``, ``need``, ``check_bind``, ``is_loopback``, ``server_config``,
``McpService`` and ``build_server`` need. No name is spelled like a submodule: importing the
submodule would bind its name on this package and shadow the lazy name (``heap.settle`` is
``settle_heap`` here)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_names

# name -> (module it lives in, its name there)
_EXPORTS = {
    **{n: ("vam_engine.server.tokens", n) for n in ("SCOPES", "Principal", "TokenInfo", "TokenStore")},
    **{n: ("vam_engine.server.queries", n) for n in ("BadQuery", "Page", "RowKey", "StoreStats", "check_id",
                                                     "decode_row_key", "encode_row_key", "page_after", "row_key")},
    **{n: ("vam_engine.server.backend", n) for n in ("FrameData", "LocalBackend", "WriterBacklog", "queued_by_class")},
    "Ownership": ("vam_engine.server.ownership", "Ownership"),
    "ThumbnailCache": ("vam_engine.server.images", "ThumbnailCache"),
    "metric_family": ("vam_engine.server.metrics", "metric_family"),
    "settle_heap": ("vam_engine.server.heap", "settle"),
    # the web stack (the server extra)
    "create_app": ("vam_engine.server.app", "create_app"),
    "ServeOptions": ("vam_engine.server.app", "ServeOptions"),
    **{n: ("vam_engine.server.auth", n) for n in ("check_bind", "is_loopback", "need")},
    "server_config": ("vam_engine.server.http", "server_config"),
    # the MCP SDK (the mcp extra)
    **{n: ("vam_engine.server.mcp", n) for n in ("McpService", "build_server")},
}

__all__ = [  # a literal list, for linters; the same names as _EXPORTS
    "SCOPES", "BadQuery", "FrameData", "LocalBackend", "McpService", "Ownership", "Page", "Principal", "RowKey",
    "ServeOptions", "StoreStats", "ThumbnailCache", "TokenInfo", "TokenStore", "WriterBacklog", "build_server", "check_bind",
    "check_id", "create_app", "decode_row_key", "encode_row_key", "is_loopback", "metric_family", "need",
    "page_after", "queued_by_class", "row_key", "server_config", "settle_heap",
]


__getattr__, __dir__ = lazy_names(__name__, globals(), _EXPORTS)

if TYPE_CHECKING:  # for type checkers, editors and the layer contract: the same names, imported eagerly
    from .app import ServeOptions, create_app
    from .auth import check_bind, is_loopback, need
    from .backend import FrameData, LocalBackend, WriterBacklog, queued_by_class
    from .heap import settle as settle_heap
    from .images import ThumbnailCache
    from .http import server_config
    from .mcp import McpService, build_server
    from .metrics import metric_family
    from .ownership import Ownership
    from .queries import (BadQuery, Page, RowKey, StoreStats, check_id, decode_row_key, encode_row_key, page_after,
                          row_key)
    from .tokens import SCOPES, Principal, TokenInfo, TokenStore
