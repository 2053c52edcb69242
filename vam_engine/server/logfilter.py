"""No query string in any log line: clients put tokens there (``/api/ws?token=...``,
``/api/moments?token=...``), and uvicorn logs a WebSocket handshake with its full path and
query (``"WebSocket /api/ws?token=..." [accepted]``, on ``uvicorn.error``), its access log
(when on) and its debug lines the same way.

``install`` puts a ``QueryStringFilter`` on the loggers of the HTTP server (uvicorn's and the
websockets library's, and the service's own): each record's arguments and message lose what
follows a ``?`` after a path (``/api/ws?token=abc`` becomes ``/api/ws``), so neither the
formatted text nor a handler reading ``record.args`` sees it (nor a traceback's text); a WebSocket frame in a debug
line shows its kind and size, not its payload (a first message authenticates with a token).
Idempotent: ``vam-engine serve``
and the app's startup both call it.
"""
from __future__ import annotations

import logging
import re

LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi", "websockets", "websockets.server",
           "websockets.protocol", "vam_engine.server", "vam_engine.server.access")
_QUERY = re.compile(r"""(/[^\s?#"'<>]*)\?[^\s"'<>]*""")  # a path, then its query (to the next space or quote)


def strip_query(text: str) -> str:
    """``text`` without the query strings of the paths and URLs in it."""
    return _QUERY.sub(r"\1", text)


def _clean(value):
    if isinstance(value, str):
        return strip_query(value)
    if isinstance(value, bytes):
        return strip_query(value.decode("latin-1")).encode("latin-1")
    if type(value).__name__ == "Frame" and hasattr(value, "opcode") and hasattr(value, "data"):
        # a WebSocket frame (websockets' debug lines): its kind and size, never its payload (an
        # auth message holds a token)
        return f"{getattr(value.opcode, 'name', value.opcode)} [{len(value.data)} bytes]"
    return value


class QueryStringFilter(logging.Filter):
    """Removes query strings from a record's message and arguments (the record stays, with the
    shape of its arguments: uvicorn's access formatter reads them by position)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = strip_query(record.msg)
        if isinstance(record.args, dict):
            record.args = {k: _clean(v) for k, v in record.args.items()}
        elif isinstance(record.args, tuple):
            record.args = tuple(_clean(a) for a in record.args)
        if record.exc_info and not record.exc_text:  # a traceback's messages may name a request's URL
            record.exc_text = strip_query(logging.Formatter().formatException(record.exc_info))
        try:
            text = record.getMessage()
        except (TypeError, ValueError):  # a malformed record: logging reports it as it would anyway
            return True
        if strip_query(text) != text and record.name != "uvicorn.access":  # a query made of message and args
            record.msg, record.args = strip_query(text), ()
        return True


def install() -> None:
    """The filter on every logger of the HTTP server, once."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, QueryStringFilter) for f in logger.filters):
            logger.addFilter(QueryStringFilter())
