"""The service's FastAPI app: ``create_app(engine, ServeOptions(...))``.

Security by default (docs/design.md section 7): once any token exists (``vam-engine token create``),
every API request but ``GET /api/health`` needs one, on loopback too; with ``require_tokens``
(set by ``serve`` on any address other than loopback) even an empty token file admits nobody.
The page's static files (``/``, ``/static/...``) and the API description (``/openapi.json``,
``/docs``: a page of this server's own, no script from elsewhere) carry no data and load
without a token, so a browser can open the page and enter its token there.

Everything a client can make the server hold is bounded (``ServeOptions``): request bodies
(``max_upload_bytes``, 413 beyond, checked on the declared length and on the bytes as they
arrive), connections and the time to send a request head (http.py), questions and summaries
answered at once (429 beyond) and each token's share of every such pool (config ``service``),
cameras, monitors and sessions per token, session streams, image sizes, page sizes, metric label
values. Revoking a token ends what it started (revocation.py). CORS is off unless ``cors_origins`` names origins; malformed input gets a 4xx
naming the problem and one log line. Nothing here logs a header, a body or a query string.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from fastapi import FastAPI, HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles

from ..config import ServiceConfig
from ..errors import StoreError, Unavailable, VamError
from ..memory import MonitorLimit, SessionLimit
from . import logfilter
from .auth import need
from .lanes import Lanes, LaneSizes
from .images import ThumbnailCache
from .metrics import Metrics, process_lines
from .middleware import BodyLimit, SecurityHeaders, Timing
from .queries import BadQuery
from .revocation import Revocation
from .routes_clips import router as clips_router
from .routes_live import router as live_router
from .routes_memory import router as memory_router
from .routes_sessions import router as sessions_router
from .routes_sessions import session_state
from .routes_perception import router as perception_router
from .sse import AlertHub
from .ownership import OWNERS_FILE, Ownership, QuotaExceeded, TokenSlots, WatchOwners
from .tokens import CameraForbidden, Principal, TokenStore

log = logging.getLogger("vam_engine.server")
WEB = Path(__file__).parent / "web"
MB = 1 << 20


@dataclass
class ServeOptions:
    tokens_dir: str | None = None  # where tokens.json lives; default: the engine's store directory
    max_upload_bytes: int = 10 * MB
    cors_origins: tuple[str, ...] = ()
    require_tokens: bool = False  # no token file, no access (serve sets it off loopback)
    status_poll_s: float = 1.0  # how often the WebSocket looks for camera status changes
    keepalive_s: float = 15.0  # SSE comment / WebSocket ping when nothing else is sent
    max_page: int = 1000  # moments / events per page at most
    metrics_store_every_s: float = 10.0
    max_asks: int = 8  # questions answered at once; more get 429 (each holds a model turn and a thread)
    max_summaries: int = 2  # summarize calls at once; more get 429 (each runs many model calls)
    max_cameras_per_token: int = 16  # live cameras one token may have added and not removed
    max_monitors_per_token: int = ServiceConfig().monitors_per_token  # active monitors of one token, its
    # sessions' standing requests included (config service.monitors_per_token; the engine's pool: monitors.max_active)
    max_sessions_per_token: int = 32  # open sessions one token may hold (routes_sessions.py)
    max_session_streams: int = 64  # session SSE streams open at once
    # each token's share of the pools above (config ``service``: ``ServeOptions.shares``)
    max_session_streams_per_token: int = ServiceConfig().session_streams_per_token
    max_asks_per_token: int = ServiceConfig().asks_per_token
    max_summaries_per_token: int = ServiceConfig().summaries_per_token
    max_lane_requests_per_token: int = ServiceConfig().lane_requests_per_token
    max_streams_per_token: int = ServiceConfig().streams_per_token  # alert streams and WebSockets
    max_clips_per_token: int = ServiceConfig().clips_per_token
    thumbnail_cache_bytes: int = ServiceConfig().thumbnail_cache_mb << 20  # thumbnails kept made (images.py)
    max_image_pixels: int = 40_000_000  # an uploaded query image's size at most
    max_connections: int = 256  # open connections (uvicorn answers 503 beyond; http.py)
    header_timeout_s: float = 10.0  # a request's head must arrive within this (http.py)
    token_poll_s: float = 1.0  # how often the token file is checked for revoked tokens (revocation.py)
    lanes: LaneSizes = field(default_factory=LaneSizes)  # handler threads at once per endpoint class
    # more /metrics lines: callables returning Prometheus text lines (serve adds the notifier's:
    # MQTT and webhook deliveries, drops, dead letters)
    metric_sources: tuple[Callable[[], list[str]], ...] = ()
    mcp: bool = False  # the MCP tools over streamable HTTP at /mcp (mcp_http.py; needs the mcp extra)

    def __post_init__(self):
        if not (isinstance(self.max_upload_bytes, int) and self.max_upload_bytes >= 1024):
            raise ValueError(f"max_upload_bytes must be an integer >= 1024, got {self.max_upload_bytes!r}")
        for name in ("max_asks", "max_summaries", "max_cameras_per_token", "max_monitors_per_token",
                     "max_image_pixels", "max_connections", "max_sessions_per_token", "max_session_streams",
                     "max_session_streams_per_token", "max_asks_per_token", "max_summaries_per_token",
                     "max_lane_requests_per_token", "max_streams_per_token", "max_clips_per_token"):
            v = getattr(self, name)
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if not (isinstance(self.thumbnail_cache_bytes, int) and self.thumbnail_cache_bytes >= 0):
            raise ValueError(f"thumbnail_cache_bytes must be an integer >= 0, got {self.thumbnail_cache_bytes!r}")
        if not self.header_timeout_s > 0:
            raise ValueError(f"header_timeout_s must be > 0, got {self.header_timeout_s!r}")
        if self.status_poll_s <= 0 or self.keepalive_s <= 0 or self.token_poll_s <= 0:
            raise ValueError("status_poll_s, keepalive_s and token_poll_s must be > 0")
        if not all(callable(f) for f in self.metric_sources):
            raise ValueError("metric_sources must be callables returning lines of Prometheus text")
        if not isinstance(self.lanes, LaneSizes):
            raise ValueError(f"lanes must be a LaneSizes, got {type(self.lanes).__name__}")

    @staticmethod
    def shares(service: ServiceConfig) -> dict:
        """The fields of the per-token shares from the config's ``service`` section."""
        return {"max_monitors_per_token": service.monitors_per_token,
                "max_session_streams_per_token": service.session_streams_per_token,
                "max_asks_per_token": service.asks_per_token, "max_summaries_per_token": service.summaries_per_token,
                "max_lane_requests_per_token": service.lane_requests_per_token,
                "max_streams_per_token": service.streams_per_token, "max_clips_per_token": service.clips_per_token,
                "thumbnail_cache_bytes": service.thumbnail_cache_mb << 20}


# -- the app ---------------------------------------------------------------------------------------
def create_app(engine, options: ServeOptions | None = None, backend=None) -> FastAPI:
    """The service over ``engine`` (an Engine, or a cluster router with Engine's API).
    ``backend``: what the routes read beside the engine's API (server/backend.py); default:
    the engine's own store."""
    from contextlib import asynccontextmanager

    from . import model_tap
    from .backend import LocalBackend

    options = options or ServeOptions()
    backend = backend or LocalBackend(engine)
    metrics = Metrics(options.metrics_store_every_s)
    watch_owners = WatchOwners(engine)
    hub = AlertHub(engine, backend, prepare=lambda a: watch_owners.of([a.monitor_id]))

    mcp_manager = []  # the MCP transport's session manager, run while the app runs (options.mcp)

    @asynccontextmanager
    async def lifespan(app):
        logfilter.install()  # whatever runs the app: no query string in the HTTP server's log lines
        hub.start()
        revoking = asyncio.create_task(app.state.revocation.follow(options.token_poll_s))
        try:
            if mcp_manager:
                async with mcp_manager[0].run():
                    yield
            else:
                yield
        finally:
            revoking.cancel()
            hub.close()

    app = FastAPI(title="vam_engine", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Streaming visual memory: moments, events, search, answers with citations, "
                              "monitors and alerts. Bearer tokens: 'vam-engine token create'.")
    app.state.engine = engine
    app.state.backend = backend
    app.state.options = options
    app.state.tokens = TokenStore(options.tokens_dir or backend.root)
    app.state.metrics = metrics
    app.state.hub = hub
    app.state.asks = threading.BoundedSemaphore(options.max_asks)
    app.state.summaries = threading.BoundedSemaphore(options.max_summaries)
    app.state.ask_shares = TokenSlots(options.max_asks_per_token, "questions being answered",
                                      "service.asks_per_token")
    app.state.summary_shares = TokenSlots(options.max_summaries_per_token, "summaries being written",
                                          "service.summaries_per_token", retry_after=5)
    app.state.stream_shares = TokenSlots(options.max_streams_per_token, "alert streams and WebSockets open",
                                         "service.streams_per_token", retry_after=5)
    app.state.clip_shares = TokenSlots(options.max_clips_per_token, "clips being encoded", "service.clips_per_token",
                                       retry_after=2)
    app.state.monitor_lock = threading.Lock()  # a token's monitors counted and one added, as one step
    app.state.owned = Ownership(options.max_cameras_per_token, Path(app.state.tokens.dir) / OWNERS_FILE)
    app.state.watch_owners = watch_owners
    app.state.thumbnails = ThumbnailCache(options.thumbnail_cache_bytes)
    app.state.revocation = Revocation(engine, app.state.tokens, app.state.owned)
    app.state.lanes = Lanes(options.lanes, options.max_lane_requests_per_token)
    for name, value in session_state(options).items():
        setattr(app.state, name, value)
    model_tap.install(backend, lambda cls, s: metrics.model.observe(s, cls))

    if options.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(options.cors_origins), allow_credentials=False,
                           allow_methods=["GET", "POST", "DELETE"], allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(BodyLimit, limit=options.max_upload_bytes)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(Timing, metrics=metrics)

    _error_statuses(app)
    _service_routes(app, engine, backend, metrics, hub)
    app.include_router(memory_router)
    app.include_router(live_router)
    app.include_router(sessions_router)
    app.include_router(perception_router)
    app.include_router(clips_router)

    if options.mcp:
        try:
            from .mcp_http import mount
        except ImportError as e:
            raise VamError(f"the MCP endpoint needs the MCP SDK ({e.name} is not installed): "
                           "pip install 'vam_engine[mcp]'") from None
        mcp_manager.append(mount(app))
    app.mount("/static", StaticFiles(directory=WEB), name="static")

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(WEB / "index.html", headers={"Cache-Control": "no-cache"})

    @app.get("/docs", include_in_schema=False)
    def docs():
        """The API's endpoints, read from /openapi.json by a script of this server (no CDN)."""
        return FileResponse(WEB / "docs.html", headers={"Cache-Control": "no-cache"})

    return app


def _error_statuses(app: FastAPI) -> None:
    """Errors as statuses: malformed bodies 422 naming the field, the engine's own errors and
    argument checks by kind, and input no parser should have let through as 400."""
    @app.exception_handler(RequestValidationError)
    async def invalid(request, exc: RequestValidationError):
        problems = []
        for e in exc.errors():
            where = ".".join(str(x) for x in e.get("loc", ()) if x != "body") or "body"
            problems.append(f"{where}: {e.get('msg')}")
        return JSONResponse({"detail": "; ".join(problems) or "malformed request", "errors": [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in exc.errors()]},
            status_code=422)

    # the engine's own errors and argument checks, as statuses (an OS error is not among them:
    # its message may name server paths, so it stays a plain 500)
    for exc_type, status in ((BadQuery, 422), (CameraForbidden, 403), (StoreError, 409), (Unavailable, 503),
                             (QuotaExceeded, 429), (MonitorLimit, 429), (SessionLimit, 429), (VamError, 400),
                             (ValueError, 400)):
        def handler(request, exc, status=status):
            retry = getattr(exc, "retry_after", None)
            return JSONResponse({"detail": str(exc)}, status_code=status,
                                headers={"Retry-After": str(retry)} if retry else None)
        app.add_exception_handler(exc_type, handler)

    # input no parser should have let through (JSON nested thousands deep, a number past SQLite's
    # 64-bit integers): a 400 and one log line, not a 500 and a traceback
    for exc_type, what in ((RecursionError, "nested too deeply"), (OverflowError, "holds a number out of range")):
        def refused(request, exc, what=what):
            log.info("refused %s %s: the request %s", request.method, request.url.path, what)
            return JSONResponse({"detail": f"malformed request: it {what}"}, status_code=400)
        app.add_exception_handler(exc_type, refused)


def _service_routes(app: FastAPI, engine, backend, metrics: Metrics, hub: AlertHub) -> None:
    """Health (no token) and the Prometheus metrics."""
    @app.get("/api/health", tags=["service"])
    def health():
        """Liveness; no token needed. Says whether tokens are required (never which)."""
        st = app.state
        return {"ok": True, "auth": st.tokens.required() or st.options.require_tokens,
                "monitors": hub.available, "live": hasattr(engine, "status")}

    @app.get("/api/stages", tags=["service"])
    def stages(p: Principal = need("read")):
        """The indexing pipeline's stages (decode, gate, embed, encode, perceive, commit): seconds
        busy, items, queue depth and bound, drops; a cluster labels each with its shard. Like
        /metrics it covers every camera: a camera-limited token is refused."""
        if p.cameras is not None:
            raise HTTPException(403, "stages cover every camera; use a token without a camera limit")
        return {"stages": [{**labels, **asdict(st)} for labels, st in backend.stage_statuses()]}

    @app.get("/metrics", tags=["service"], response_class=PlainTextResponse)
    def prometheus(p: Principal = need("read")):
        """Prometheus text (0.0.4). It names every camera: a camera-limited token is refused."""
        if p.cameras is not None:
            raise HTTPException(403, "metrics cover every camera; use a token without a camera limit")
        extra = [line for source in app.state.options.metric_sources for line in source()]
        text = metrics.render(backend) + "\n".join(process_lines() + app.state.lanes.metric_lines() + extra) + "\n"
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")
