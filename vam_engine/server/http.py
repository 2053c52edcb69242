"""The HTTP server around the app: uvicorn with the service's bounds, used by ``vam-engine serve``
and by the tests, so what is tested is what runs.

- Connections: at most ``max_connections`` at once (uvicorn answers 503 beyond); a request's
  headers must arrive within ``header_timeout_s`` of its connection (or of the previous
  response), else the connection is closed: slowly trickled headers cannot hold sockets.
- WebSocket messages are at most 64 KiB; request heads at most 64 KiB.
- The access log is the service's own (``vam_engine.server.access``, app.py): method, path and
  status, never the query string (clients put tokens there); uvicorn's loggers and handlers
  carry logfilter.py's filter, so no line of theirs has one either (a WebSocket handshake's).
"""
from __future__ import annotations

import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from . import logfilter

log = logging.getLogger("vam_engine.server")
MAX_HEAD_BYTES = 64 * 1024
MAX_WS_MESSAGE_BYTES = 64 * 1024


class BoundedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on each request's head. uvicorn's own
    keep-alive timer is cancelled by the first byte of a request, so a client sending one byte
    a second would keep its socket forever; this closes it ``header_timeout_s`` after the
    connection opened (or the last response ended) unless the head is complete by then."""

    header_timeout_s = 10.0

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._head_deadline = None
        self._arm_head_deadline()

    def _arm_head_deadline(self) -> None:
        self._cancel_head_deadline()
        self._head_deadline = self.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def _cancel_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the head is complete (or the socket switched protocol)
            self._cancel_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_deadline()

    def connection_lost(self, exc) -> None:
        self._cancel_head_deadline()
        super().connection_lost(exc)

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            client = "%s:%d" % self.client if self.client else "?"
            log.info("closed a connection from %s: no complete request head within %.0f s", client,
                     self.header_timeout_s)
            self.transport.close()


def server_config(app, host: str, port: int, options, *, log_level: str = "info", **kw):
    """The uvicorn Config of the service: ``options`` is the app's ServeOptions (its connection
    and header bounds); ``kw``: other uvicorn.Config arguments (``log_config``: by default
    uvicorn's, with the service's own loggers beside its, at ``log_level``)."""
    import copy

    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    if "log_config" not in kw:
        cfg = copy.deepcopy(LOGGING_CONFIG)
        cfg["loggers"]["vam_engine.server"] = {"handlers": ["default"], "level": log_level.upper(), "propagate": False}
        cfg.setdefault("filters", {})["no_query"] = {"()": "vam_engine.server.logfilter.QueryStringFilter"}
        for handler in cfg["handlers"].values():
            handler.setdefault("filters", []).append("no_query")
        kw["log_config"] = cfg
    logfilter.install()
    logging.getLogger("vam_engine.server").setLevel(log_level.upper())  # as uvicorn sets its own loggers'
    protocol = type("ServiceH11Protocol", (BoundedH11Protocol,), {"header_timeout_s": options.header_timeout_s})
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, server_header=False, access_log=False,
                          http=protocol, limit_concurrency=options.max_connections,
                          h11_max_incomplete_event_size=MAX_HEAD_BYTES, ws_max_size=MAX_WS_MESSAGE_BYTES, **kw)
