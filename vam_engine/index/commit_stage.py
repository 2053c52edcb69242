"""The commit stage: one thread takes the embed stage's ``CommitUnit``s in order, waits for
their JPEGs (every file is in place before its row commits) and perception's rounds (a kept
frame whose text on screen changed starts an event: index/perceive.py), and commits rows, gate
records, per-source progress and camera references in one transaction; then tells the pipeline
(``done``), which wakes whoever waits on a flush or a source's end.
"""
from __future__ import annotations

import queue
import threading
from typing import Callable

import numpy as np

from ..memory import GateReference, Store
from .meter import StageMeter, stop_thread
from .records import CommitUnit


class CommitStage:
    def __init__(self, store: Store, *, perception=None, after_commit: Callable[[], None] | None = None,
                 done: Callable[[CommitUnit], None], fail: Callable[[BaseException], None], depth: int = 8):
        """``after_commit``: called after each transaction (the document writer); ``done(unit)``:
        the unit is committed."""
        self.store = store
        self.perception = perception
        self.after_commit = after_commit
        self._done = done
        self._fail = fail
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.meter = StageMeter("commit", depth=self.queue.qsize, capacity=depth)
        self._thread = threading.Thread(target=self._loop, name="vam-commit", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        """After everything queued is committed (the embed stage stopped first)."""
        stop_thread(self._thread, self.queue)

    def _loop(self) -> None:
        try:
            self.store.db.conn()  # opened now: the last commit of a run waits for nothing but its rows
        except BaseException as e:  # noqa: BLE001
            self._fail(e)
            return
        while True:
            unit = self.queue.get()
            if unit is None:
                return
            try:
                for w in unit.writes:
                    w.result()  # not busy: waiting on the encoder pool
                if unit.perceived:
                    self.perception.resolve(unit.perceived, unit.batch)  # waits on perception's worker
                with self.meter.busy(items=1):
                    batch = unit.batch
                    batch.refs = {cam: GateReference(r.t, _host(r.gray), r.sharpness) for cam, r in batch.refs.items()}
                    self.store.commit(batch)
                    if self.after_commit is not None:
                        self.after_commit()
            except BaseException as e:  # noqa: BLE001
                self._fail(e)
                return
            self._done(unit)


def _host(gray) -> np.ndarray:
    if isinstance(gray, np.ndarray):
        return gray
    return gray.detach().cpu().numpy()
