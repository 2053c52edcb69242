"""Loopback ports for tests that need a server, or the lack of one."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback TCP port nothing listens on (free when this returns: a connection is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def silent_listener(backlog: int = 8) -> socket.socket:
    """A loopback socket that accepts connections (the kernel does) and never answers: a hung
    server. The caller closes it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(backlog)
    return s
