"""Server-Sent Events, and the hub that fans the engine's alerts out to every stream.

SSE framing (the WHATWG event-stream format): ``id:``, ``event:``, one ``data:`` line per line
of the payload, a blank line; a line starting with ``:`` is a comment (the keepalive). An alert's
id is its ``alert_id``, so a client that reconnects with ``Last-Event-ID: N`` gets every alert
after N (from ``engine.alerts(since=N)``) and then the live ones, none twice.

The hub reads the engine's alert subscription on one thread and hands each alert to the
subscribers' asyncio queues on the server's loop. A subscriber that falls more than
``QUEUE_MAX`` alerts behind is not dropped: it rereads what it missed from the store.
Positions (where a stream is, what a reconnect resumes from) are the backend's
(server/backend.py): an alert id for one engine, one per shard for a cluster.
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading

log = logging.getLogger(__name__)
QUEUE_MAX = 1000


def sse_event(data, *, event: str | None = None, id=None) -> str:
    text = data if isinstance(data, str) else json.dumps(data, allow_nan=False, default=str)
    lines = []
    if id is not None:
        lines.append(f"id: {id}")
    if event is not None:
        lines.append(f"event: {event}")
    lines += [f"data: {part}" for part in text.split("\n")]
    return "\n".join(lines) + "\n\n"


SSE_KEEPALIVE = ": keepalive\n\n"
STOPPED = object()  # what ``next_item`` returns once its stream is to stop


async def next_item(queue: asyncio.Queue, timeout: float, stop: asyncio.Event | None = None):
    """The queue's next item; asyncio.TimeoutError after ``timeout``; STOPPED as soon as ``stop``
    is set (the stream's token was revoked: server/revocation.py)."""
    if stop is None:
        return await asyncio.wait_for(queue.get(), timeout)
    if stop.is_set():
        return STOPPED
    getter, stopper = asyncio.ensure_future(queue.get()), asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({getter, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (getter, stopper):
            if not t.done():
                t.cancel()
    if getter in done:
        return getter.result()
    if stopper in done:
        return STOPPED
    raise asyncio.TimeoutError


class _Subscriber:
    def __init__(self, loop):
        self.loop = loop
        self.queue: asyncio.Queue = asyncio.Queue(QUEUE_MAX)
        self.overflowed = False

    def put(self, alert) -> None:  # on the loop
        try:
            self.queue.put_nowait(alert)
        except asyncio.QueueFull:
            self.overflowed = True


class AlertHub:
    """``engine.subscribe_alerts`` read on one thread; ``stream(since, sees)`` per client."""

    def __init__(self, engine, backend, prepare=None):
        """``prepare(alert)``: called on the hub's thread before an alert is handed out (what the
        streams' ``sees`` reads is read there, not on the event loop)."""
        self.engine, self.backend = engine, backend
        self._prepare = prepare
        self._subs: set[_Subscriber] = set()
        self._lock = threading.Lock()
        self._sub = None
        self._thread = None
        self._stop = threading.Event()

    @property
    def available(self) -> bool:
        return hasattr(self.engine, "subscribe_alerts") and hasattr(self.engine, "alerts")

    def start(self) -> None:
        if not self.available or self._thread is not None:
            return
        self._sub = self.engine.subscribe_alerts()
        self._thread = threading.Thread(target=self._pump, name="vam-alert-hub", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._sub is not None:
            self._sub.close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _pump(self) -> None:
        while not self._stop.is_set():
            try:
                alert = self._sub.get(timeout=0.5)
            except Exception:  # noqa: BLE001 - a closed subscription ends the pump
                if not self._stop.is_set():
                    log.exception("the alert subscription failed; alert streams get no live alerts")
                return
            if alert is None:
                continue
            if self._prepare is not None:
                try:
                    self._prepare(alert)
                except Exception:  # noqa: BLE001 - a stream reads it itself then
                    log.exception("preparing an alert for the streams failed")
            with self._lock:
                subs = list(self._subs)
            for s in subs:
                try:
                    s.loop.call_soon_threadsafe(s.put, alert)
                except RuntimeError:  # its loop closed
                    pass

    async def stream(self, since, sees, keepalive_s: float = 15.0, alive=None, stop: asyncio.Event | None = None):
        """(alert, position after it) for the alerts after the position ``since`` (None: from
        now on) that ``sees(alert)`` allows, oldest first; None every ``keepalive_s`` without
        one (the caller sends a keepalive). ``alive()`` is asked at each keepalive: False (the
        token was revoked) ends the stream; ``stop`` set ends it at once."""
        from starlette.concurrency import run_in_threadpool

        backend = self.backend
        sub = _Subscriber(asyncio.get_running_loop())
        with self._lock:
            self._subs.add(sub)
        try:
            # subscribed first, read second: nothing falls between
            pos = await run_in_threadpool(backend.alert_position_now) if since is None else since
            reread = since is not None
            while True:
                if reread or sub.overflowed:
                    reread = sub.overflowed = False
                    while not sub.queue.empty():
                        sub.queue.get_nowait()
                    for a, pos in await run_in_threadpool(backend.alerts_after, pos):
                        if sees(a):
                            yield a, pos
                    continue
                try:
                    a = await next_item(sub.queue, keepalive_s, stop)
                except asyncio.TimeoutError:
                    if alive is not None and not alive():
                        return
                    yield None
                    continue
                if a is STOPPED:
                    return
                nxt = backend.advance(pos, a)
                if nxt is None:
                    continue  # read already (from the store, before it came live)
                pos = nxt
                if sees(a):
                    yield a, pos
        finally:
            with self._lock:
                self._subs.discard(sub)
