"""The MCP tools (mcp.py) over streamable HTTP at ``/mcp`` of the service (``serve --mcp``),
behind the API's own authentication: the same bearer tokens, scopes and camera limits, the same
loopback-only rule while the store has no token.

Stateless: each POST carries one JSON-RPC message and gets its reply as JSON (GET and DELETE
are 405); the server keeps no MCP session between requests, so a client cannot make it hold anything beyond the requests
in flight (the API's bounds hold: connections, body size, questions at once, monitors per token,
the read and search lanes). Each request is authenticated on arrival; a revoked token is
refused from its next request.
"""
from __future__ import annotations

import anyio.to_thread
from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route

from .auth import authenticate, bearer
from .mcp import McpService, build_server
from .tokens import Principal

PRINCIPAL = "vam_engine.principal"  # the ASGI scope key the endpoint leaves the request's principal under


def request_principal(ctx) -> Principal:
    """Who an MCP call over HTTP acts as: the principal its request authenticated as."""
    request = ctx.request_context.request
    p = None if request is None else request.scope.get(PRINCIPAL)
    if not isinstance(p, Principal):  # only the endpoint below calls the tools over HTTP
        raise RuntimeError("an MCP call over HTTP without an authenticated request")
    return p


class McpEndpoint:
    """The ASGI endpoint of ``/mcp``: authenticates, then hands the request to the SDK's
    streamable HTTP transport with the principal in its scope."""

    def __init__(self, manager):
        self.manager = manager

    async def __call__(self, scope, receive, send) -> None:
        headers = Headers(scope=scope)
        try:
            p = authenticate(scope["app"].state, bearer(headers), headers)
        except HTTPException as e:
            await JSONResponse({"detail": e.detail}, e.status_code, headers=e.headers)(scope, receive, send)
            return
        await self.manager.handle_request({**scope, PRINCIPAL: p}, receive, send)


def mount(app):
    """Add ``/mcp`` to the service's ``app``; returns the SDK's session manager, which the app's
    lifespan must run (``async with manager.run()``)."""
    from mcp.server.transport_security import TransportSecuritySettings

    st, opts = app.state, app.state.options

    async def run(lane, fn):
        return await (st.lanes.run(lane, fn) if lane is not None else anyio.to_thread.run_sync(fn))

    service = McpService(st.engine, st.backend, st.asks, st.owned, run, max_page=opts.max_page,
                         max_image_pixels=opts.max_image_pixels, max_image_bytes=opts.max_upload_bytes,
                         max_monitors=opts.max_monitors_per_token, ask_shares=st.ask_shares,
                         watch_owners=st.watch_owners, monitor_lock=st.monitor_lock, thumbnails=st.thumbnails)
    server = build_server(service, request_principal)
    # the Host / Origin check is authenticate's (loopback names only while the store has no token)
    server.streamable_http_app(stateless_http=True, json_response=True, max_request_body_size=opts.max_upload_bytes,
                               transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    # POST only: stateless, there is no session to DELETE, and a GET would open a standalone event
    # stream the server never writes to (a connection a client could hold for nothing): 405
    app.router.routes.append(Route("/mcp", endpoint=McpEndpoint(server.session_manager), methods=["POST"],
                                   include_in_schema=False))
    return server.session_manager
