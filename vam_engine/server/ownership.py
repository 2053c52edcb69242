"""What each token has grown on this server: the live cameras it added and the monitors it
started (and has not removed or ended). Each is capped per token (``ServeOptions``), so one
write token cannot make the server hold without bound; the engine caps the totals too
(``monitors.max_active``).

A session's standing request ("tell me when ...") is a monitor too, bound to the session whose
turn started it; the session's id begins with its token's (``session_prefix``), so the monitor
is that token's alone: ``WatchOwners`` says whose each monitor is, and the monitor and alert
routes hide another token's (404, as if it did not exist).
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from ..errors import VamError


class QuotaExceeded(VamError):
    """A token holds as many of something as it may (the service answers 429)."""


class Ownership:
    def __init__(self, max_cameras: int, max_monitors: int):
        self._caps = {"camera": max_cameras, "monitor": max_monitors}
        self._owner: dict[tuple[str, str], str] = {}  # (kind, id) -> the token that made it
        self._lock = threading.Lock()

    def claim(self, kind: str, token_id: str | None, item_id: str | None = None) -> None:
        """Check that ``token_id`` may hold one more ``kind`` ("camera" or "monitor"), and record
        ``item_id`` as its (when known already: a camera's id; a monitor's comes after ``add``)."""
        owner = token_id or ""
        with self._lock:
            held = sum(1 for (k, _), o in self._owner.items() if k == kind and o == owner)
            if item_id is not None and (kind, item_id) in self._owner:
                return
            if held >= self._caps[kind]:
                raise QuotaExceeded(f"this token holds {held} {kind}s, at most {self._caps[kind]} per token: "
                                    f"remove one first (the server's --max-{kind}s-per-token)")
            if item_id is not None:
                self._owner[(kind, item_id)] = owner

    def record(self, kind: str, token_id: str | None, item_id: str) -> None:
        with self._lock:
            self._owner[(kind, item_id)] = token_id or ""

    def release(self, kind: str, item_id: str) -> None:
        with self._lock:
            self._owner.pop((kind, item_id), None)


def session_prefix(token_id: str | None) -> str:
    """The beginning of the engine's id of every session of a token (``"<token id>/"``)."""
    return f"{token_id or ''}/"


class WatchOwners:
    """Monitor id -> the session whose standing request it is (None: a monitor of no session),
    from the engine's ``watch_sessions`` (an engine without sessions: every monitor is nobody's).
    A monitor is bound before it can fire or be listed and its binding never changes, so what was
    read is kept (the newest ``size``)."""

    def __init__(self, engine, size: int = 4096):
        self._read = getattr(engine, "watch_sessions", None)
        self._known: OrderedDict[str, str | None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def of(self, monitor_ids) -> dict[str, str | None]:
        """The session of each of ``monitor_ids`` (read from the store for those not known)."""
        ids = list(dict.fromkeys(monitor_ids))
        with self._lock:
            out = {m: self._known[m] for m in ids if m in self._known}
        missing = [m for m in ids if m not in out]
        if missing:
            found = self._read(missing) if self._read is not None else {}
            with self._lock:
                for m in missing:
                    out[m] = self._known[m] = found.get(m)
                    self._known.move_to_end(m)
                while len(self._known) > self._size:
                    self._known.popitem(last=False)
        return out

    def allows(self, token_id: str | None, monitor_id: str) -> bool:
        """Whether the token may see a monitor (and its alerts) by whose it is: one of no
        session, or one of its own sessions."""
        owner = self.of([monitor_id])[monitor_id]
        return owner is None or owner.startswith(session_prefix(token_id))
