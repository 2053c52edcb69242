"""Events POSTed to an HTTP endpoint: ``WebhookSink(url, secret)``.

Each body is the event's JSON (notify/events.py), signed: ``X-Vam-Signature: sha256=<hex>``,
the HMAC-SHA256 of the body's bytes under the secret (``sign``; a receiver checks it with
``verify``). ``X-Vam-Event`` names the kind, ``X-Vam-Delivery`` the event id (the same on every
try: a receiver drops a repeat by it). One thread per endpoint delivers in order, so a reply
arrives after the alert it answers.

A try fails on a connection error, a timeout, a 5xx, 408 or 429: it is tried again after
``backoff_s``, doubling up to ``backoff_max_s``, ``max_attempts`` tries in all; then it is a dead
letter (counted, logged by event id). Any other status outside 2xx (a 4xx, a redirect: none is
followed) is a dead letter at once. The endpoint is logged as its index and host only: its
path may be its secret (chat webhooks), and the secret and bodies are never logged."""
from __future__ import annotations

import hashlib
import hmac
import http.client
import logging
import ssl
import threading
from urllib.parse import urlsplit

from .events import Event, SinkStats
from .outbox import Outbox

log = logging.getLogger(__name__)
SIGNATURE_HEADER = "X-Vam-Signature"
RETRY_STATUSES = frozenset({408, 429})
MAX_REPLY_BYTES = 64 << 10  # what is read of a receiver's answer (then the connection is closed)


def sign(body: bytes, secret: bytes) -> str:
    """The ``X-Vam-Signature`` value of ``body``: ``sha256=`` and the hex HMAC-SHA256 under ``secret``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(body: bytes, signature: str | None, secret: bytes) -> bool:
    """Whether ``signature`` (the header's value) signs ``body`` under ``secret`` (constant time)."""
    return isinstance(signature, str) and hmac.compare_digest(sign(body, secret), signature.strip())


class _Permanent(Exception):
    """The receiver refused the event for good (a status no retry changes)."""


class WebhookSink:
    kinds = frozenset({"alert", "reply", "state"})

    def __init__(self, url: str, secret: bytes, *, index: int = 0, timeout_s: float = 5.0, max_attempts: int = 5,
                 backoff_s: float = 1.0, backoff_max_s: float = 60.0, queue_max: int = 1000):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"webhook {index}: must be an http:// or https:// URL with a host")
        if not secret:
            raise ValueError(f"webhook {index}: needs a secret to sign its bodies with")
        if max_attempts < 1 or timeout_s <= 0 or backoff_s <= 0 or backoff_max_s <= 0:
            raise ValueError(f"webhook {index}: max_attempts >= 1 and timeouts and backoffs > 0, got "
                             f"{max_attempts}, {timeout_s}, {backoff_s}, {backoff_max_s}")
        self.name = f"webhook-{index}"
        self.where = f"webhook {index} ({parts.hostname})"  # what a log line names: never the path
        self._tls = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._secret = secret
        self.timeout_s, self.max_attempts = timeout_s, max_attempts
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self._outbox = Outbox(queue_max)
        self._stats = SinkStats()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the engine's side ----------------------------------------------------------------------
    def offer(self, event: Event) -> bool:
        return not self._closing.is_set() and self._outbox.put(event)

    def stats(self) -> SinkStats:
        with self._lock:
            s = SinkStats(**vars(self._stats))
        s.dropped, s.queued = self._outbox.dropped, len(self._outbox)
        return s

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"vam-{self.name}", daemon=True)
            self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued for up to ``timeout`` seconds, then stop (a retry waiting is cut short)."""
        self._closing.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._stop.set()
            self._thread.join(self.timeout_s + 1)
        left = len(self._outbox)
        if left:
            log.warning("%s: %d events not delivered at close", self.where, left)

    # -- delivery ------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            event = self._outbox.get(timeout=0.1)
            if event is None:
                if self._closing.is_set():
                    return
                continue
            self._deliver(event)

    def _deliver(self, event: Event) -> None:
        body = event.json_bytes()
        headers = {"Content-Type": "application/json", "User-Agent": "vam-engine", "X-Vam-Event": event.kind,
                   "X-Vam-Delivery": event.event_id, SIGNATURE_HEADER: sign(body, self._secret)}
        delay = self.backoff_s
        for attempt in range(1, self.max_attempts + 1):
            try:
                self._post(body, headers)
            except _Permanent as e:
                return self._dead(event, str(e), attempt)
            except (OSError, http.client.HTTPException) as e:  # refused, reset, timed out, a 5xx, 408, 429
                why = f"{type(e).__name__}: {e}" if not isinstance(e, _Retry) else str(e)
                if attempt == self.max_attempts:
                    return self._dead(event, why, attempt)
                with self._lock:
                    self._stats.retries += 1
                log.info("%s: event %s, try %d failed (%s); again in %.2g s", self.where, event.event_id, attempt,
                         why, delay)
                if self._stop.wait(delay):  # closing: not a dead letter, one of those "not delivered at close"
                    self._outbox.put(event)
                    return None
                delay = min(delay * 2, self.backoff_max_s)
                continue
            with self._lock:
                self._stats.sent += 1
            return None

    def _dead(self, event: Event, why: str, attempts: int) -> None:
        with self._lock:
            self._stats.dead_letters += 1
        log.warning("%s: event %s is a dead letter after %d tries: %s", self.where, event.event_id, attempts, why)

    def _post(self, body: bytes, headers: dict) -> None:
        if self._tls:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout_s,
                                               context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)
        try:
            conn.request("POST", self._target, body=body, headers=headers)
            resp = conn.getresponse()
            resp.read(MAX_REPLY_BYTES)
            status = resp.status
        finally:
            conn.close()
        if 200 <= status < 300:
            return
        if status >= 500 or status in RETRY_STATUSES:
            raise _Retry(f"HTTP {status}")
        raise _Permanent(f"HTTP {status} (not retried)")


class _Retry(OSError):
    """A status worth another try (5xx, 408, 429)."""
