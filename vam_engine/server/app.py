"""The service's FastAPI app: ``create_app(engine, ServeOptions(...))``.

Security by default (DESIGN.md section 7): once any token exists (``vam-engine token create``),
every API request but ``GET /api/health`` needs one, on loopback too; with ``require_tokens``
(set by ``serve`` on any address other than loopback) even an empty token file admits nobody.
The page's static files (``/``, ``/static/...``) and the API description (``/openapi.json``,
``/docs``) carry no data and load without a token, so a browser can open the page and enter
its token there. Request bodies are capped (``max_upload_bytes``, 413 beyond, checked on the
declared length and on the bytes as they arrive); CORS is off unless ``cors_origins`` names
origins; malformed bodies get a 422 naming the field. Nothing here logs a header or a body.
"""
from __future__ import annotations

import logging
import time
import threading
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles

from ..errors import StoreError, Unavailable, VamError
from .auth import need
from .lanes import Lanes, LaneSizes
from .metrics import Metrics, process_lines
from .queries import BadQuery
from .routes_live import router as live_router
from .routes_memory import router as memory_router
from .sse import AlertHub
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
    lanes: LaneSizes = field(default_factory=LaneSizes)  # handler threads at once per endpoint class

    def __post_init__(self):
        if not (isinstance(self.max_upload_bytes, int) and self.max_upload_bytes >= 1024):
            raise ValueError(f"max_upload_bytes must be an integer >= 1024, got {self.max_upload_bytes!r}")
        if not (isinstance(self.max_asks, int) and self.max_asks >= 1):
            raise ValueError(f"max_asks must be an integer >= 1, got {self.max_asks!r}")
        if self.status_poll_s <= 0 or self.keepalive_s <= 0:
            raise ValueError("status_poll_s and keepalive_s must be > 0")
        if not isinstance(self.lanes, LaneSizes):
            raise ValueError(f"lanes must be a LaneSizes, got {type(self.lanes).__name__}")


# -- middleware (plain ASGI: streaming responses pass through untouched) --------------------------
class BodyLimit:
    """413 for a body over ``limit`` bytes: at once when Content-Length says so, else as soon as
    the bytes received pass it (a chunked upload cannot slip by)."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for k, v in scope.get("headers", ()):
            if k == b"content-length":
                try:
                    n = int(v)
                except ValueError:
                    return await _plain(send, 400, "Content-Length is not a number")
                if n > self.limit:
                    return await _plain(send, 413, self._detail(n))
        seen = 0
        started = False

        async def counted():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge(self._detail(seen))
            return msg

        async def tracked(msg):
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, counted, tracked)
        except _TooLarge as e:
            if not started:
                await _plain(send, 413, e.detail)

    def _detail(self, n: int) -> str:
        return (f"request body of {n} bytes or more is over this server's limit of {self.limit} bytes "
                "(serve --max-upload-mb)")


class _TooLarge(HTTPException):
    """An HTTPException, so the route's body parsing passes it on as a 413 (not a parse error)."""

    def __init__(self, detail: str):
        super().__init__(413, detail)


async def _plain(send, status: int, detail: str):
    import json

    data = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


class Timing:
    """Latency per route template (to the response's start: a stream counts until its headers)."""

    def __init__(self, app, metrics: Metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        status = [500]

        async def timed(msg):
            if msg["type"] == "http.response.start":
                status[0] = msg["status"]
                route = getattr(scope.get("route"), "path", None) or "unmatched"
                self.metrics.http.observe(time.perf_counter() - t0, route, scope["method"])
                self.metrics.http_total.inc(route, scope["method"], str(msg["status"]))
            await send(msg)

        await self.app(scope, receive, timed)


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
    hub = AlertHub(engine, backend)

    @asynccontextmanager
    async def lifespan(app):
        hub.start()
        try:
            yield
        finally:
            hub.close()

    app = FastAPI(title="vam_engine", version="0.1.0", lifespan=lifespan,
                  description="Streaming visual memory: moments, events, search, answers with citations, "
                              "monitors and alerts. Bearer tokens: 'vam-engine token create'.")
    app.state.engine = engine
    app.state.backend = backend
    app.state.options = options
    app.state.tokens = TokenStore(options.tokens_dir or backend.root)
    app.state.metrics = metrics
    app.state.hub = hub
    app.state.asks = threading.BoundedSemaphore(options.max_asks)
    app.state.lanes = Lanes(options.lanes)
    model_tap.install(backend, lambda cls, s: metrics.model.observe(s, cls))

    if options.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(options.cors_origins), allow_credentials=False,
                           allow_methods=["GET", "POST", "DELETE"], allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(BodyLimit, limit=options.max_upload_bytes)
    app.add_middleware(Timing, metrics=metrics)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request, exc: RequestValidationError):
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
                             (VamError, 400), (ValueError, 400)):
        def handler(request, exc, status=status):
            return JSONResponse({"detail": str(exc)}, status_code=status)
        app.add_exception_handler(exc_type, handler)

    @app.get("/api/health", tags=["service"])
    def health():
        """Liveness; no token needed. Says whether tokens are required (never which)."""
        st = app.state
        return {"ok": True, "auth": st.tokens.required() or st.options.require_tokens,
                "monitors": hub.available, "live": hasattr(engine, "status")}

    @app.get("/metrics", tags=["service"], response_class=PlainTextResponse)
    def prometheus(p: Principal = need("read")):
        """Prometheus text (0.0.4). It names every camera: a camera-limited token is refused."""
        if p.cameras is not None:
            raise HTTPException(403, "metrics cover every camera; use a token without a camera limit")
        text = metrics.render(backend) + "\n".join(process_lines() + app.state.lanes.metric_lines()) + "\n"
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    app.include_router(memory_router)
    app.include_router(live_router)

    app.mount("/static", StaticFiles(directory=WEB), name="static")

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(WEB / "index.html", headers={"Cache-Control": "no-cache"})

    return app
