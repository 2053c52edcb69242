"""Bearer tokens of the service: created by ``vam-engine token create``, stored hashed, and the
rights a token carries (``Principal``). No web stack here: the CLI's token commands load it alone.

A token is ``vam_<id>_<secret>``: the id (8 hex digits) names it in ``token list`` and
``token revoke``; only the SHA-256 of the whole token is stored, in ``<store>/tokens.json``
(mode 0600, written atomically: a temporary file renamed over the old one), never the token.
A presented token is found by its id and its hash compared with ``hmac.compare_digest``, so
the comparison takes the same time whatever the bytes.

Scopes are ordered: read (GET, search, ask) < write (cameras, monitors, summarize) < admin
(delete, tokens). A token may be limited to cameras: it then sees nothing of the others
(moments, events, frames, search, answers, monitors, alerts). The server rereads the file when
it changes, so a token created or revoked while it runs applies at the next request.

Once a store has had a token, it needs one: the file remembers (``"required": true``) after its
last token is revoked, so revoking every token closes the server instead of opening it. Only
``vam-engine token reset`` (a person, on the store's machine, with no token left) undoes that.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import VamError

TOKENS_FILE = "tokens.json"
SCOPES = ("read", "write", "admin")
_TOKEN = re.compile(r"^vam_([0-9a-f]{8})_([A-Za-z0-9_-]{20,100})$")
_CAMERA = re.compile(r"^[^\s,][^,]{0,255}$")


def scope_rank(scope: str) -> int:
    return SCOPES.index(scope)


@dataclass(frozen=True)
class TokenInfo:
    """A stored token, without its secret."""

    token_id: str
    scope: str
    cameras: tuple[str, ...] | None  # None: every camera
    created_at: float
    label: str = ""
    sha256: str = field(default="", repr=False)

    def to_json(self) -> dict:
        return {"token_id": self.token_id, "scope": self.scope,
                "cameras": list(self.cameras) if self.cameras is not None else None,
                "created_at": self.created_at, "label": self.label}


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: a token's scope and camera limit (``anonymous``: a server with no
    token, reachable on loopback only)."""

    token_id: str | None
    scope: str
    cameras: tuple[str, ...] | None

    def allows(self, scope: str) -> bool:
        return scope_rank(self.scope) >= scope_rank(scope)

    def sees(self, camera_id: str) -> bool:
        return self.cameras is None or camera_id in self.cameras

    def sees_all(self, cameras) -> bool:
        """Whether every one of ``cameras`` is in view (None: every camera, in view of an
        unlimited token only): a monitor or a session bound to cameras."""
        return self.cameras is None or (cameras is not None and all(c in self.cameras for c in cameras))

    def history(self, session: str | None = None) -> str | None:
        """The QA history a question of this principal reads and joins: its token's own (one
        token's questions never reach another token's prompts), and within it the client's
        ``session``; None for a server without tokens and no session."""
        if self.token_id is None and session is None:
            return None
        return f"{self.token_id or ''}/{session or ''}"

    def camera_scope(self, requested) -> list[str] | None:
        """The cameras a request may touch: ``requested`` (None: all it may see), or
        CameraForbidden naming the first camera outside the token's limit."""
        if isinstance(requested, str):
            requested = [requested]
        if requested is not None:
            requested = list(requested)
            if not requested:  # downstream, an empty list would read as "every camera"
                raise ValueError("cameras: give at least one camera id, or leave it out for all")
        if self.cameras is None:
            return requested
        if requested is None:
            return list(self.cameras)
        for cam in requested:
            if cam not in self.cameras:
                raise CameraForbidden(f"this token is limited to cameras {list(self.cameras)}; "
                                      f"camera {cam!r} is outside it")
        return requested


ANONYMOUS = Principal(None, "admin", None)


class CameraForbidden(Exception):
    """A request names a camera outside its token's limit (the service answers 403)."""


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    """The tokens of one store directory."""

    def __init__(self, store_dir: str | os.PathLike):
        self.dir = Path(store_dir)
        self.path = self.dir / TOKENS_FILE
        self._lock = threading.Lock()
        self._seen: tuple | None = None  # (mtime_ns, size, inode) of the file last read
        self._tokens: dict[str, TokenInfo] = {}
        self._required = False

    # -- reading -------------------------------------------------------------------------------
    def _stamp(self):
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def _current(self) -> tuple[dict[str, TokenInfo], bool]:
        with self._lock:
            stamp = self._stamp()
            if stamp != self._seen:
                self._tokens, self._required = self._read() if stamp is not None else ({}, False)
                self._seen = stamp
            return self._tokens, self._required

    def tokens(self) -> dict[str, TokenInfo]:
        """Token id -> TokenInfo, reread when the file changed."""
        return self._current()[0]

    def required(self) -> bool:
        """Whether requests need a token: one exists, or one existed (revoking every token keeps
        the store closed until ``reset``)."""
        tokens, required = self._current()
        return bool(tokens) or required

    def _read(self) -> tuple[dict[str, TokenInfo], bool]:
        try:
            data = json.loads(self.path.read_text())
            rows = data["tokens"]
            tokens = {r["token_id"]: TokenInfo(r["token_id"], r["scope"],
                                               tuple(r["cameras"]) if r.get("cameras") is not None else None,
                                               float(r["created_at"]), r.get("label", ""), r["sha256"])
                      for r in rows}
            # a file of an earlier release without the flag: it had tokens once, since it exists
            return tokens, bool(data.get("required", True))
        except FileNotFoundError:
            return {}, False
        except (ValueError, KeyError, TypeError) as e:
            # refusing every token beats accepting a half-read file: the error says which file
            raise VamError(f"{self.path}: unreadable token file ({type(e).__name__}: {e}); fix or remove it "
                           "and create the tokens again") from None

    def verify(self, presented: str | None) -> TokenInfo | None:
        """The stored token ``presented`` is, or None."""
        if not presented:
            return None
        m = _TOKEN.match(presented)
        info = self.tokens().get(m.group(1)) if m else None
        # compared even when no id matched, so a miss takes as long as a wrong secret
        ok = hmac.compare_digest(_hash(presented), info.sha256 if info is not None else "0" * 64)
        return info if ok and info is not None else None

    # -- writing (the CLI) ---------------------------------------------------------------------
    @contextlib.contextmanager
    def _edit(self, required: bool = True):
        """The token list under an exclusive lock; written back atomically (mode 0600), marked
        ``required`` (a store that has had a token keeps needing one)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / (TOKENS_FILE + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            tokens = dict(self._read()[0])
            yield tokens
            tmp = self.dir / f"{TOKENS_FILE}.{os.getpid()}.tmp"
            body = json.dumps({"version": 1, "required": required, "tokens": [
                {**t.to_json(), "sha256": t.sha256} for t in tokens.values()]}, indent=2)
            try:
                with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                    f.write(body)  # all of it (os.write may write short)
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(tmp, 0o600)  # whatever the umask made of it
                os.replace(tmp, self.path)
            finally:
                if tmp.exists():
                    tmp.unlink()  # a failed write leaves no stray copy of the hashes
        finally:
            os.close(fd)
        with self._lock:
            self._seen = None

    def create(self, scope: str, cameras=None, label: str = "") -> tuple[TokenInfo, str]:
        """A new token: (its info, the token itself: shown once, never stored)."""
        if scope not in SCOPES:
            raise VamError(f"--scope must be one of {', '.join(SCOPES)}, got {scope!r}")
        if cameras is not None:
            cameras = tuple(c.strip() for c in cameras)
            bad = [c for c in cameras if not _CAMERA.match(c)]
            if not cameras or bad:
                raise VamError(f"--cameras must be a comma-separated list of camera ids, got {list(cameras)!r}")
        with self._edit() as tokens:
            token_id = secrets.token_hex(4)
            while token_id in tokens:
                token_id = secrets.token_hex(4)
            token = f"vam_{token_id}_{secrets.token_urlsafe(32)}"
            info = TokenInfo(token_id, scope, cameras, time.time(), label, _hash(token))
            tokens[token_id] = info
        return info, token

    def revoke(self, token_id: str) -> bool:
        with self._edit() as tokens:
            return tokens.pop(token_id, None) is not None

    def reset(self) -> None:
        """Forget that the store has had tokens (loopback without a token again). Refused while a
        token exists: revoke them first."""
        with self._edit(required=False) as tokens:
            if tokens:
                raise VamError(f"{self.path} still holds {len(tokens)} token(s): revoke them first "
                               f"('vam-engine token list', 'vam-engine token revoke ID')")
