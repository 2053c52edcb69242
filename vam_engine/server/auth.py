"""Who may call the service: the bind policy (``check_bind``: an address other than loopback only
once a token exists) and each request's authentication (``authenticate``, and ``need(scope)``,
the route dependency every endpoint declares). The tokens themselves live in tokens.py.

Once any token exists (``vam-engine token create``), every API request but ``GET /api/health``
needs one, on loopback too; with ``require_tokens`` (set by ``serve`` on any address other than
loopback) even an empty token file admits nobody.
"""
from __future__ import annotations

import ipaddress

from fastapi import Depends, HTTPException, Request

from ..errors import VamError
from .tokens import ANONYMOUS, Principal, TokenStore


# -- the bind policy -------------------------------------------------------------------------------
def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def check_bind(host: str, tokens: TokenStore) -> None:
    """Refuse an address other than loopback while the store has no token."""
    if is_loopback(host) or tokens.required():
        return
    raise VamError(
        f"refusing to listen on {host} while {tokens.path} holds no token: anyone who can reach that address "
        f"could read and delete this memory. Create a token first:\n"
        f"    vam-engine token create --store {tokens.dir} --scope admin\n"
        f"then start serve again; clients send 'Authorization: Bearer <token>'. (On 127.0.0.1, the default, "
        f"no token is needed until the first one is created.)")


# -- each request ---------------------------------------------------------------------------------
def bearer(request_headers) -> str | None:
    h = request_headers.get("authorization")
    if not h:
        return None
    kind, _, token = h.partition(" ")
    return token.strip() if kind.lower() == "bearer" else None


_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")


def _loopback_host(host_header: str | None) -> bool:
    host = (host_header or "").strip().lower()
    if host.startswith("["):
        host = host.split("]")[0] + "]"
    elif host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    return host in _LOOPBACK_HOSTS or host.endswith(".localhost")


def authenticate(app_state, token: str | None, headers=None) -> Principal:
    """The principal a token acts as; HTTPException 401 when one is needed and missing/wrong.
    Without tokens the server is open on loopback only, and only to requests addressed to a
    loopback name: a web page from elsewhere that rebinds its DNS name to 127.0.0.1 sends its
    own Host (and a cross-site WebSocket its own Origin), and is refused."""
    tokens: TokenStore = app_state.tokens
    if not tokens.required() and not app_state.options.require_tokens:
        if headers is not None:
            origin = headers.get("origin")
            if not _loopback_host(headers.get("host")) or (
                    origin and not _loopback_host(origin.split("://", 1)[-1].split("/", 1)[0])):
                raise HTTPException(403, "without tokens this server answers only loopback requests (Host and "
                                         "Origin localhost / 127.0.0.1); create a token: vam-engine token create "
                                         "--store DIR --scope read")
        return ANONYMOUS
    info = tokens.verify(token)
    if info is None:
        detail = ("a bearer token is required (Authorization: Bearer ...); create one with "
                  "'vam-engine token create --store DIR --scope read'") if not token else "unknown or revoked token"
        raise HTTPException(401, detail, headers={"WWW-Authenticate": "Bearer"})
    return Principal(info.token_id, info.scope, info.cameras)


def need(scope: str):
    """A route dependency: the request's principal, which must hold ``scope`` (403 else).
    Async on purpose: it costs a stat of the token file and a hash, far less than the hop to a
    worker thread (and the wait for the GIL there) that a sync dependency costs every request."""

    async def dep(request: Request) -> Principal:
        p = authenticate(request.app.state, bearer(request.headers), request.headers)
        if not p.allows(scope):
            raise HTTPException(403, f"this token's scope is {p.scope!r}; this request needs {scope!r}")
        return p

    dep.__name__ = f"need_{scope}"
    return Depends(dep)
