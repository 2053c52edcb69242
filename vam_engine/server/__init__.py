"""The service: an authenticated HTTP + SSE + WebSocket API over one Engine, Prometheus metrics,
and a web page (``vam-engine serve``). ``create_app(engine, ServeOptions(...))`` builds the
FastAPI app; ``TokenStore`` manages the bearer tokens of a store directory."""
from .app import ServeOptions, create_app
from .auth import SCOPES, Principal, TokenInfo, TokenStore

__all__ = ["create_app", "ServeOptions", "TokenStore", "TokenInfo", "Principal", "SCOPES"]
