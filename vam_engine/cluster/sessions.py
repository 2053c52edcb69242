"""What a session's standing requests need of the router (reason/sessions.py's ``monitors``).

The router keeps sessions, their turns and their standing requests in its own store
(``<root>/_router``), answered by the same session policy as one engine (``Answering`` with a
session store). A standing request is a router monitor over the shards holding its cameras,
recorded under the same id in the router's store (its condition, cameras and whether it is
still active: what the session reads of it); its alerts come from every shard through one
polled stream, with frames fetched to the router's disk so the reply's model can see them.

The stream is opened at the first standing request, or at start when an open session has one,
and reads alerts from then on: an alert that fires while the router is down is kept on its
shard (``/api/alerts`` lists it) but gets no reply.
"""
from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path

from ..errors import VamError


class RouterMonitors:
    """``watch(spec, bind=)``, ``unwatch(id)`` and ``subscribe(callback)`` over the router's monitors."""

    def __init__(self, router, records, frames_dir: Path, resume: bool):
        self._router = router
        self._records = records  # the router store's monitors
        self._dir = Path(frames_dir)
        self._callbacks: list = []
        self._stream = None
        self._bound = threading.Lock()  # held from a monitor's creation until its session knows it
        self._resume = resume

    def watch(self, spec, images=None, *, bind=None):
        if images:
            raise VamError("a standing request through the router carries no reference images")
        self._listen()  # before the monitor exists: none of its alerts may be missed
        with self._bound:
            m = self._router.watch(spec.condition, spec.cameras, mode=spec.mode, min_confidence=spec.min_confidence,
                                   every_s=spec.every_s, frames=spec.frames, repeat_gap_s=spec.repeat_gap_s)
            try:
                self._records.add(spec, monitor_id=m.monitor_id)
                if bind is not None:
                    bind(m)
            except BaseException:
                self.unwatch(m.monitor_id)
                raise
        return m

    def unwatch(self, monitor_id: str) -> bool:
        self._records.end(monitor_id)
        return self._router.unwatch(monitor_id)

    def subscribe(self, callback):
        """Deliver every alert to ``callback`` (the session replies), from the first watch on
        (or now, when open sessions hold standing requests)."""
        self._callbacks.append(callback)
        if self._resume:
            self._listen()
        return self

    def _listen(self) -> None:
        with self._bound:
            if self._stream is None:
                self._stream = self._router.subscribe_alerts(self._deliver)

    def _deliver(self, alert) -> None:
        with self._bound:  # a monitor being created is bound to its session first
            pass
        record = self._records.get(alert.monitor_id)
        if record is not None and record.mode == "once":
            self._records.end(alert.monitor_id)  # its shards ended it at this alert
        alert = self._readable(alert)
        for cb in list(self._callbacks):
            cb(alert)

    def _readable(self, alert):
        """The alert with its observed frames at paths readable here (fetched from its shard)."""
        if all(os.path.exists(p) for p in alert.frame_paths):
            return alert
        shard, local = self._router.locate(alert.alert_id)
        paths = []
        for k, p in enumerate(alert.frame_paths):
            mine = self._dir / f"alert-{alert.alert_id}-{k}.jpg"
            if not mine.exists():
                f = self._router.call(shard, "alert_frame", local, k)
                if f is not None and f.data is not None:
                    self._dir.mkdir(parents=True, exist_ok=True)
                    mine.write_bytes(f.data)
            paths.append(str(mine) if mine.exists() else p)
        return replace(alert, frame_paths=tuple(paths))

    def close(self) -> None:
        """Stop the alert stream (the session part is closed first)."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
