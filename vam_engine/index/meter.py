"""What each stage of the indexing pipeline reports: time busy, items done, queue depth, drops.

Every stage owns one ``StageMeter``; its threads add to it, anyone reads it (``status()``).
``Engine.stage_status()`` and ``/metrics`` show these, and the capacity benchmark reads them to
find the stage that limits a machine: a stage busy nearly all of its workers' time, with its
input queue full, is the one that holds the rest back.
"""
from __future__ import annotations

import queue
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class StageStatus:
    """One stage's figures since the pipeline started. Busy fraction over an interval:
    (busy_s after - busy_s before) / (seconds between * workers)."""

    name: str  # decode, gate, embed, encode, perceive, commit
    workers: int  # threads that run it now
    busy_s: float  # seconds its workers spent working, summed over them
    items: int  # what it finished: frames for decode, gate, embed and encode; rounds for perceive; units for commit
    queue_depth: int  # what waits at its input now
    queue_capacity: int | None  # its input's bound (None: unbounded)
    dropped: int  # what it dropped because it was behind (live samples, present frames)


class StageMeter:
    """Counters a stage's threads update (``busy``, ``add``) and any thread reads."""

    def __init__(self, name: str, *, workers: Callable[[], int] | int = 1,
                 depth: Callable[[], int] | None = None, capacity: int | None = None):
        self.name = name
        self._workers = workers
        self._depth = depth
        self._capacity = capacity
        self._lock = threading.Lock()
        self._busy_s = 0.0
        self._items = 0
        self._dropped = 0
        self._waiting = 0

    def waiting(self, delta: int) -> None:
        """Work handed to the stage (+1) or taken up by it (-1): its queue depth when no
        ``depth`` callable reads its queue."""
        with self._lock:
            self._waiting += delta

    @contextmanager
    def busy(self, items: int = 0):
        """Times the block as busy; ``items`` done in it."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(time.perf_counter() - t0, items)

    def add(self, busy_s: float = 0.0, items: int = 0, dropped: int = 0) -> None:
        with self._lock:
            self._busy_s += busy_s
            self._items += items
            self._dropped += dropped

    def status(self) -> StageStatus:
        workers = self._workers() if callable(self._workers) else self._workers
        with self._lock:
            depth = self._depth() if self._depth is not None else self._waiting
            return StageStatus(self.name, int(workers), self._busy_s, self._items, int(depth), self._capacity,
                               self._dropped)


def stop_thread(thread: threading.Thread, q) -> None:
    """Ends a stage's thread: queues its stop marker (None) unless it has ended already (a
    failed stage leaves its queue full), and waits for it."""
    while thread.is_alive():
        try:
            q.put(None, timeout=0.2)
            break
        except queue.Full:  # look again whether it ended
            continue
    thread.join()
