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

import json
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

from ..errors import VamError

log = logging.getLogger(__name__)
OWNERS_FILE = "monitor_owners.json"  # beside tokens.json


class QuotaExceeded(VamError):
    """A token holds as many of something as it may (the service answers 429, with Retry-After
    when what it holds ends by itself soon)."""

    def __init__(self, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class Ownership:
    """What each token made: ``claim`` checks a token's share of live cameras and records the
    camera as its; ``record`` notes whose a monitor is (a token's monitors are counted where they
    are made, with its sessions' standing requests: ``check_monitor_share``); ``held`` lists a
    token's (what revoking it ends: revocation.py). ``path``: where whose each monitor is is kept
    (JSON, mode 0600, beside the tokens), so a restarted server still knows (monitors outlive it;
    the live cameras of a restart are the cameras file's, nobody's)."""

    def __init__(self, max_cameras: int, path: str | os.PathLike | None = None):
        self._max_cameras = max_cameras
        self._owner: dict[tuple[str, str], str] = {}  # (kind, id) -> the token that made it
        self._lock = threading.Lock()
        self._path = Path(path) if path is not None else None
        if self._path is not None:
            try:
                kept = json.loads(self._path.read_text())
                self._owner.update({("monitor", str(m)): str(t) for m, t in kept["monitors"].items()})
            except FileNotFoundError:
                pass
            except (ValueError, KeyError, TypeError, AttributeError):
                log.warning("%s is unreadable: whose each monitor is starts again from nothing", self._path)

    def claim(self, kind: str, token_id: str | None, item_id: str) -> None:
        """Check that ``token_id`` may hold one more camera, and record ``item_id`` as its."""
        if kind != "camera":
            raise ValueError(f"only cameras are claimed here, not {kind!r}")
        owner = token_id or ""
        with self._lock:
            if (kind, item_id) in self._owner:
                return
            held = sum(1 for (k, _), o in self._owner.items() if k == kind and o == owner)
            if held >= self._max_cameras:
                raise QuotaExceeded(f"this token holds {held} cameras, at most {self._max_cameras} per token: "
                                    f"remove one first (the server's --max-cameras-per-token)")
            self._owner[(kind, item_id)] = owner

    def record(self, kind: str, token_id: str | None, item_id: str) -> None:
        with self._lock:
            self._owner[(kind, item_id)] = token_id or ""
            self._save(kind)

    def release(self, kind: str, item_id: str) -> None:
        with self._lock:
            if self._owner.pop((kind, item_id), None) is not None:
                self._save(kind)

    def held(self, kind: str, token_id: str | None) -> list[str]:
        """The ids of ``kind`` the token made (and has not removed)."""
        owner = token_id or ""
        with self._lock:
            return [i for (k, i), o in self._owner.items() if k == kind and o == owner]

    def owners(self, kind: str) -> dict[str, str]:
        """Item id -> the token that made it ("" for a server without tokens), for ``kind``."""
        with self._lock:
            return {i: o for (k, i), o in self._owner.items() if k == kind}

    def _save(self, kind: str) -> None:
        """Under the lock: the monitors' owners written atomically (cameras are not kept)."""
        if self._path is None or kind != "monitor":
            return
        body = json.dumps({"monitors": {i: o for (k, i), o in self._owner.items() if k == "monitor"}})
        tmp = self._path.with_name(f"{self._path.name}.{os.getpid()}.tmp")
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                f.write(body)
            os.replace(tmp, self._path)
        except OSError as e:  # the server goes on; a restart then knows less
            log.warning("cannot keep whose each monitor is in %s: %s", self._path, e)
            tmp.unlink(missing_ok=True)


class TokenSlots:
    """A token's share of a pool held for a while (a stream, a question being answered): at most
    ``limit`` at once per token; ``take`` raises QuotaExceeded naming ``what`` and ``key``."""

    def __init__(self, limit: int, what: str, key: str, retry_after: int = 1):
        self.limit, self.what, self.key, self.retry_after = limit, what, key, retry_after
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, token_id: str | None) -> None:
        """One more for the token (a server without tokens has one client and no shares)."""
        if token_id is None:
            return
        owner = token_id
        with self._lock:
            n = self._held.get(owner, 0)
            if n >= self.limit:
                raise QuotaExceeded(f"this token has {n} {self.what} at once, at most {self.limit} per token "
                                    f"({self.key}); retry when one ends", self.retry_after)
            self._held[owner] = n + 1

    def give(self, token_id: str | None) -> None:
        if token_id is None:
            return
        owner = token_id
        with self._lock:
            n = self._held.get(owner, 0) - 1
            if n > 0:
                self._held[owner] = n
            else:
                self._held.pop(owner, None)


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


def monitor_visible(p, m, owners: dict) -> bool:
    """Whether principal ``p`` may see monitor ``m``: within its cameras, and not another token's
    standing request (``owners``: ``WatchOwners.of``)."""
    owner = owners.get(m.monitor_id)
    if owner is not None and not owner.startswith(session_prefix(p.token_id)):
        return False
    return p.sees_all(m.cameras)


def monitors_held(engine, owned: Ownership, token_id: str | None) -> int:
    """The token's active monitors: those it started over the API and its sessions' standing
    requests (one share of the engine's ``monitors.max_active``)."""
    active = [m.monitor_id for m in engine.monitors()]
    mine = set(owned.held("monitor", token_id))
    read = getattr(engine, "watch_sessions", None)
    bound = read(active) if read is not None and active else {}
    prefix = session_prefix(token_id)
    return sum(1 for m in active if m in mine or (bound.get(m) or "").startswith(prefix))


def check_monitor_share(engine, owned: Ownership, token_id: str | None, limit: int) -> None:
    """QuotaExceeded when the token holds ``limit`` active monitors already."""
    held = monitors_held(engine, owned, token_id)
    if held >= limit:
        raise QuotaExceeded(f"this token holds {held} active monitors (standing requests of its sessions "
                            f"included), at most {limit} per token (service.monitors_per_token): end one first")
