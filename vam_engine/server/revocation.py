"""Revoking a token ends at once what it started on this server. ``vam-engine token revoke``
edits the token file of a running server; ``Revocation.follow`` (a task of the app's lifespan)
looks at the file every ``ServeOptions.token_poll_s`` (a stat; reread only when it changed),
and for each token gone it

- ends the monitors the token started (``POST /api/monitors``),
- ends the token's sessions, and with them their standing requests (no reply is written for
  it again; the turns stay readable to nobody, until the retention of ended sessions removes
  them),
- stops the token's open streams (session streams, alert streams, WebSockets) at once, instead
  of at their next keepalive.

The live cameras a token added keep running: they feed the memory every token reads, and an
admin removes them (``DELETE /api/cameras/{id}``). A token revoked while the server was down is
found when it starts (``sweep``): the monitors recorded as its (ownership.py keeps them beside
the tokens) and the open sessions under its id end then.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading

from starlette.concurrency import run_in_threadpool

from ..errors import VamError
from .ownership import Ownership, session_prefix

log = logging.getLogger(__name__)
TOKEN_ID = re.compile(r"[0-9a-f]{8}")  # a token's id (tokens.py), the part of its sessions' ids before "/"


class Revocation:
    def __init__(self, engine, tokens, owned: Ownership):
        self.engine, self.tokens, self.owned = engine, tokens, owned
        try:
            self._known: set[str] = set(tokens.tokens())
        except VamError:  # an unreadable token file: every request is refused until it is fixed
            self._known = set()
        self._streams: dict[str, set] = {}  # token id -> {(loop, asyncio.Event)} of its open streams
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def stream(self, token_id: str | None):
        """An asyncio.Event set when the token is revoked, for one open stream (on the running
        loop); None for a request without a token (nothing to revoke)."""
        if token_id is None:
            yield None
            return
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._streams.setdefault(token_id, set()).add(entry)
        try:
            yield entry[1]
        finally:
            with self._lock:
                held = self._streams.get(token_id)
                if held is not None:
                    held.discard(entry)
                    if not held:
                        del self._streams[token_id]

    def check(self) -> list[str]:
        """End what each token revoked since the last check started; returns their ids."""
        now = set(self.tokens.tokens())
        with self._lock:
            gone, self._known = sorted(self._known - now), now
        for token_id in gone:
            self.end(token_id)
        return gone

    def end(self, token_id: str) -> None:
        """Stop the token's streams, end its monitors and its sessions (with their standing requests)."""
        with self._lock:
            streams = self._streams.pop(token_id, set())
        for loop, stopped in streams:
            with contextlib.suppress(RuntimeError):  # its loop closed
                loop.call_soon_threadsafe(stopped.set)
        eng = self.engine
        for monitor_id in self.owned.held("monitor", token_id):
            if hasattr(eng, "unwatch"):
                eng.unwatch(monitor_id)
            self.owned.release("monitor", monitor_id)
        if hasattr(eng, "sessions") and hasattr(eng, "end_session"):
            for s in eng.sessions(prefix=session_prefix(token_id)):
                eng.end_session(s.session_id)
        log.info("token %s revoked: its monitors, sessions and streams ended", token_id)

    def sweep(self) -> list[str]:
        """At start: end what tokens that no longer exist started (revoked while no server ran):
        the monitors recorded as theirs and the open sessions under their ids. Nothing on a
        server without tokens (nothing there is a token's). Returns the token ids."""
        try:
            if not self.tokens.required():
                return []
            now = set(self.tokens.tokens())
        except VamError:
            return []
        gone = {o for o in self.owned.owners("monitor").values() if o and o not in now}
        if hasattr(self.engine, "sessions"):
            for s in self.engine.sessions():
                head, slash, _ = s.session_id.partition("/")
                if slash and TOKEN_ID.fullmatch(head) and head not in now:
                    gone.add(head)
        for token_id in sorted(gone):
            self.end(token_id)
        return sorted(gone)

    async def follow(self, every_s: float) -> None:
        """Sweep, then check every ``every_s`` until cancelled (the app's lifespan runs it)."""
        step = self.sweep
        while True:
            try:
                await run_in_threadpool(step)
            except Exception:  # noqa: BLE001 - an unreadable token file: the requests say so; try again
                log.exception("checking the token file for revoked tokens failed")
            step = self.check
            await asyncio.sleep(every_s)
