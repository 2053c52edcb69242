"""The bounded queue between the engine's threads and a sink's delivering thread: ``put`` never
waits (a full queue drops the new event and counts it), so a broker or receiver that is slow
or away never holds back ingest, a monitor or a reply."""
from __future__ import annotations

import queue
import threading

from .events import Event


class Outbox:
    def __init__(self, maxsize: int):
        if maxsize < 1:
            raise ValueError(f"an outbox holds at least 1 event, got maxsize={maxsize!r}")
        self._q: queue.Queue = queue.Queue(maxsize)
        self.dropped = 0
        self._lock = threading.Lock()

    def put(self, event: Event) -> bool:
        try:
            self._q.put_nowait(event)
            return True
        except queue.Full:
            with self._lock:
                self.dropped += 1
            return False

    def get(self, timeout: float) -> Event | None:
        try:
            return self._q.get(timeout=timeout)
        except queue.Empty:
            return None

    def __len__(self) -> int:
        return self._q.qsize()
