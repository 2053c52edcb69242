"""Waiting for something a background thread or process does, with a deadline."""
from __future__ import annotations

import time


def wait_for(what: str, cond, timeout: float, every: float = 0.05, ignore: tuple = ()):
    """Poll ``cond()`` until it returns something truthy and return that; AssertionError naming
    ``what`` on timeout. Exceptions of the types in ``ignore`` count as not yet (a server that
    is still starting)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = cond()
        except ignore:
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)
