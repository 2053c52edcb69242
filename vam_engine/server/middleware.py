"""The service's middleware, plain ASGI (streaming responses pass through untouched): the body
limit, timing and the access log, security headers."""
from __future__ import annotations

import json
import logging
import time

from fastapi import HTTPException

access = logging.getLogger("vam_engine.server.access")


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
    data = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class Timing:
    """Latency per route template (to the response's start: a stream counts until its headers),
    and the access log: one line per request with its method, path and status, never the query
    string (clients put tokens there). Label values come from bounded sets only (route
    templates, the known methods or "OTHER"), so made-up methods cannot grow /metrics."""

    def __init__(self, app, metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        method = scope["method"] if scope["method"] in METHODS else "OTHER"

        async def timed(msg):
            if msg["type"] == "http.response.start":
                route = getattr(scope.get("route"), "path", None) or "unmatched"
                self.metrics.http.observe(time.perf_counter() - t0, route, method)
                self.metrics.http_total.inc(route, method, str(msg["status"]))
                client = scope.get("client") or ("-", 0)
                access.info('%s - "%s %s" %d', client[0], method, scope["path"][:200], msg["status"])
            await send(msg)

        await self.app(scope, receive, timed)


class SecurityHeaders:
    """Headers every response carries: no MIME sniffing, no framing by other sites (clickjacking),
    no referrer, a content policy for the page (its own scripts and styles only); and frames or
    data fetched with a token are not kept by caches (``no-store``)."""

    POLICY = ("default-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; connect-src 'self'; "
              "style-src 'self' 'unsafe-inline'; script-src 'self'; object-src 'none'; base-uri 'none'; "
              "frame-ancestors 'none'")

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        authorized = any(k == b"authorization" for k, _ in scope.get("headers", ()))

        async def with_headers(msg):
            if msg["type"] == "http.response.start":
                headers = [(k, v) for k, v in msg.get("headers", [])
                           if not (authorized and k.lower() == b"cache-control")]
                headers += [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
                            (b"referrer-policy", b"no-referrer"),
                            (b"content-security-policy", self.POLICY.encode())]
                if authorized:
                    headers.append((b"cache-control", b"no-store"))
                msg = {**msg, "headers": headers}
            await send(msg)

        await self.app(scope, receive, with_headers)
