"""Every log record the service emits while a test runs, as the records and as their text."""
from __future__ import annotations

import contextlib
import logging

# the loggers a served request can reach: uvicorn's (configured by uvicorn.Config, so attach
# after making one: its dictConfig replaces their handlers), the service's, the websockets
# library's and the root
LOGGERS = ("", "uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi", "websockets", "vam_engine")


CLIENTS = ("websockets.client", "httpx", "httpcore", "asyncio")  # the test's own side (and its event loop)


class Captured(logging.Handler):
    def __init__(self, exclude=CLIENTS):
        super().__init__(1)
        self.exclude = tuple(exclude)
        self.records: list[logging.LogRecord] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record):
        if not record.name.startswith(self.exclude):
            self.records.append(record)

    @property
    def text(self) -> str:
        """Each record formatted, with its raw message and arguments too (a filter must clean both)."""
        out = []
        for r in self.records:
            out.append(self.format(r))
            out.append(f"{r.msg!s} {r.args!r}")
        return "\n".join(out)


@contextlib.contextmanager
def captured_logs(level=logging.DEBUG, exclude=CLIENTS):
    """Every record of the service's side (not ``exclude``: the clients a test drives it with)
    at ``level`` and above, while the block runs."""
    h = Captured(exclude)
    saved = {}
    for name in LOGGERS:
        logger = logging.getLogger(name)
        saved[name] = logger.level
        if logger.level == logging.NOTSET or logger.level > level:
            logger.setLevel(level)
        logger.addHandler(h)
    try:
        yield h
    finally:
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(h)
            logging.getLogger(name).setLevel(saved[name])
