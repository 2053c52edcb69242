"""What each token has grown on this server: the live cameras it added and the monitors it
started (and has not removed or ended). Each is capped per token (``ServeOptions``), so one
write token cannot make the server hold without bound; the engine caps the totals too
(``monitors.max_active``)."""
from __future__ import annotations

import threading

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
