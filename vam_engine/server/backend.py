"""What the service reads beside the engine's API: pages of moments and events, frame files,
alerts by position, per-camera figures and the store's state for ``/metrics``.

``LocalBackend`` answers these from one engine's store (SQLite keyset pages, files under the
store directory). A cluster router answers the same calls by asking its shards, each of which
holds a LocalBackend over its own engine (cluster/backend.py). The routes, the alert hub and
``/metrics`` call only this surface and the engine's public API (search, ask, summarize,
delete, cameras, monitors), so one app serves both.

No FastAPI here: a shard imports this module without the web stack.

Alert positions. A stream of alerts resumes from a position: for one engine, the last alert
id seen (an integer; -1 before the first); for a cluster, the last id seen per shard. The
backend turns positions to and from text (the SSE id, ``since``) and says, for each alert,
the position just after it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from . import queries
from .queries import Page, StoreStats


@dataclass(frozen=True)
class FrameData:
    """A JPEG to serve: a file under the store, or bytes fetched from elsewhere (a shard)."""

    camera_id: str
    cache_key: tuple  # for its thumbnails: changes whenever the picture could
    path: Path | None = None
    data: bytes | None = None


@dataclass(frozen=True)
class WriterBacklog:
    pending_events: int  # closed events waiting for their document
    lag_s: float  # how long the oldest of them has waited


def file_under(root, path, sub: str) -> Path | None:
    """``path`` (absolute, or relative to ``root``) if it is a file under ``root/sub`` once
    symlinks are resolved; None otherwise (a row never makes the service read elsewhere)."""
    base = (Path(root) / sub).resolve()
    path = Path(path)
    try:
        p = (path if path.is_absolute() else Path(root) / path).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    return p if base in p.parents and p.is_file() else None


class LocalBackend:
    """The service's reads of one engine's store."""

    def __init__(self, engine):
        self.engine = engine

    @property
    def root(self) -> Path:
        """Where the service keeps its tokens by default."""
        return Path(self.engine.store.root)

    # -- moments, events, frames ---------------------------------------------------------------

    def page(self, kind: str, *, cameras, t0=None, t1=None, as_of=None, cursor=None, limit=200, place=None) -> Page:
        """``kind`` "moments" or "events": queries.page over this store."""
        return queries.page(self.engine.store, kind, cameras=cameras, t0=t0, t1=t1, as_of=as_of, cursor=cursor,
                            limit=limit, place=place)

    def moment_frame(self, moment_id: int) -> FrameData | None:
        """A moment's JPEG; None when there is no such moment. A moment whose file is gone
        (retention, deletion) gives FrameData with neither path nor data."""
        store = self.engine.store
        m = store.moments.by_id([moment_id]).get(moment_id)
        if m is None:
            return None
        return self._file(m.camera_id, ("m", moment_id), store.root, m.frame_path, "frames")

    def moment(self, moment_id: int):
        """The Moment of that id; None when there is none."""
        return self.engine.store.moments.by_id([moment_id]).get(moment_id)

    def entity_crop(self, entity_id: int, cameras) -> FrameData | None:
        """An entity's representative crop as seen from ``cameras`` (None: every camera); None
        when it has none in view."""
        store = self.engine.store
        ent = store.entities.get(entity_id, cameras=cameras)
        if ent is None or ent.crop_path is None:
            return None
        return self._file(ent.crop_camera or "", ("e", entity_id), store.root, ent.crop_path, "entities")

    def alert(self, alert_id: int):
        return self.engine.store.monitors.alert(alert_id)

    def alert_frame(self, alert, k: int) -> FrameData:
        """The k-th frame an alert's check saw (0 <= k < len(alert.frame_paths))."""
        return self._file(alert.camera_id, ("a", alert.alert_id, k), self.engine.store.root, alert.frame_paths[k],
                          "alerts")

    @staticmethod
    def _file(camera_id, key, root, path, sub) -> FrameData:
        p = file_under(root, path, sub)
        return FrameData(camera_id, key if p is None else (*key, p.stat().st_mtime_ns), path=p)

    # -- alerts by position ------------------------------------------------------------------------
    def alert_position_now(self) -> int:
        return self.engine.store.monitors.last_alert_id()

    def parse_alert_position(self, text) -> int | None:
        """``since`` / Last-Event-ID: an alert id; None when absent; BadQuery when malformed."""
        return queries.parse_position(text, "an alert position (a non-negative alert id)")

    @staticmethod
    def alert_position_json(pos: int | None):
        return pos

    @staticmethod
    def alert_position_text(pos: int) -> str:
        return str(pos)

    def alerts_after(self, pos: int | None, *, monitor_id=None, cameras=None, limit=None) -> list[tuple]:
        """[(alert, the position just after it)], oldest first."""
        rows = self.engine.store.monitors.alerts(pos, monitor_id, cameras, limit=limit)
        return [(a, a.alert_id) for a in rows]

    @staticmethod
    def advance(pos: int | None, alert) -> int | None:
        """The position after ``alert``, or None when ``pos`` already covers it."""
        return alert.alert_id if pos is None or alert.alert_id > pos else None

    # -- figures ---------------------------------------------------------------------------------
    def store_stats(self) -> StoreStats:
        return queries.store_stats(self.engine.store)

    def camera_statuses(self) -> list:
        fn = getattr(self.engine, "status", None)
        return list(fn()) if fn is not None else []

    def stage_statuses(self) -> list[tuple[dict, object]]:
        """The engine's indexing stages (index/meter.py's StageStatus), each with its labels."""
        fn = getattr(self.engine, "stage_status", None)
        return [({}, st) for st in fn()] if fn is not None else []

    def writer_backlog(self) -> WriterBacklog:
        e = self.engine
        if e.writer is not None:
            s = e.writer.stats()
            return WriterBacklog(s.pending_events, s.lag_s)
        b = e.store.doc_queue.backlog()
        return WriterBacklog(b.pending, 0.0 if b.oldest_closed_at is None else max(0.0, time.time() - b.oldest_closed_at))

    def model_queued(self) -> dict[str, int] | None:
        """Model requests waiting per priority class (None: no scheduler, or no model built yet:
        a scrape never loads a model)."""
        return queued_by_class(self.engine.built_llm())

    def wrap_model(self, wrap) -> bool:
        """Put ``wrap(model)`` in place of the engine's model (the service's latency tap);
        False when it has none."""
        return self.engine.wrap_model(wrap)

    def metric_lines(self) -> list[str]:
        return []


def queued_by_class(llm) -> dict[str, int] | None:
    stats = getattr(llm, "stats", None) if llm is not None else None
    if stats is None:
        return None
    try:
        return dict(stats().queued)
    except (AttributeError, TypeError):  # a body whose stats() is not the scheduler's
        return None
