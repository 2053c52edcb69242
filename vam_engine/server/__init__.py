"""The service: an authenticated HTTP + SSE + WebSocket API over one Engine, Prometheus metrics,
and a web page (``vam-engine serve``). ``create_app(engine, ServeOptions(...))`` builds the
FastAPI app (app.py) from thin routers (routes_*.py) beside auth.py (the bind policy and each
request's authentication); ``TokenStore`` (tokens.py) manages the bearer tokens of a store
directory. It imports no engine, CLI or cluster: it serves any object with the engine's API.

The web stack is the ``server`` extra: ``create_app`` and ``ServeOptions`` are imported on first
use, so the CLI (and ``token`` commands) load without FastAPI installed."""
from .tokens import SCOPES, Principal, TokenInfo, TokenStore

__all__ = ["create_app", "ServeOptions", "TokenStore", "TokenInfo", "Principal", "SCOPES"]


def __getattr__(name: str):
    if name in ("create_app", "ServeOptions"):
        from . import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
