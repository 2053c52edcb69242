"""ClusterBackend: the service's reads (server/backend.py) answered by a cluster's shards.

With it the router serves the single engine's app unchanged (server/app.py): every route, the
alert streams, ``/metrics`` and the web page. Each call fans out to the shards that hold the
cameras asked for, where the shard's LocalBackend answers with local ids; here they become
cluster ids (catalogue.py) and results merge in the single engine's order. What did not answer
is named in ``missing_cameras`` / ``missing_shards``; a read of one record on a down shard is
ShardDown (503).

Pages. One engine pages by (camera, time, id); a cluster id orders like its shard number, then
its local id, so the same keyset order holds across shards. A cursor's key is translated per
shard (rows at the key's camera and time come after it on later shards, before it on earlier
ones), each shard returns one page after it, and the merge keeps the first ``limit``.

Alert positions: an AlertCursor (the last alert id seen per shard), as text
``<shard no>-<local id>`` joined by ``.`` (e.g. ``0-12.1-5``; empty: nothing seen); a shard
that was down when a stream started from "now" is ``<shard no>-t<wall-clock ms>`` until its
first alert after that time.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import VamError
from ..server import (BadQuery, FrameData, Page, RowKey, StoreStats, WriterBacklog, check_id, decode_row_key,
                      encode_row_key, queued_by_class, row_key)
from .catalogue import SHARD_SHIFT, split_id
from .router import AlertCursor, Partial
from .view import globalize


@dataclass(frozen=True)
class ClusterStoreStats(StoreStats):
    missing_cameras: tuple[str, ...] = ()
    missing_shards: tuple[str, ...] = ()


class ClusterBackend:
    def __init__(self, router):
        self.router = router

    @property
    def root(self) -> Path:
        return Path(self.router.root)

    # -- moments, events, frames ---------------------------------------------------------------
    def page(self, kind: str, *, cameras, t0=None, t1=None, as_of=None, cursor=None, limit=200, place=None) -> Page:
        r = self.router
        after = decode_row_key(cursor)
        shards, cams = r.targets(cameras)
        calls = {s: ("page_after", (kind, cams, t0, t1, as_of, _local_key(after, r.shard_no(s)), limit), {"place": place})
                 for s in shards}
        out, down = r.call_many(calls)
        items, more = [], False
        for s, (rows, shard_more) in out.items():
            no = r.shard_no(s)
            items += [globalize(x, no) for x in rows]
            more = more or shard_more
        items.sort(key=lambda x: _sort_key(row_key(kind, x)))
        more = more or len(items) > limit
        items = items[:limit]
        nxt = encode_row_key(row_key(kind, items[-1])) if more and items else None
        return Page(items, nxt, r.missing_of(down, cams), tuple(down))

    def moment_frame(self, moment_id: int) -> FrameData | None:
        where = self._locate(moment_id)
        if where is None:
            return None
        return self._frame(self.router.call(where[0], "moment_frame", where[1]), where[0])

    def alert(self, alert_id: int):
        r = self.router
        where = self._locate(alert_id)
        if where is None:
            return None
        shard, local = where
        a = r.call(shard, "alert", local)
        if a is None:
            return None
        return replace(globalize(a, r.shard_no(shard)), monitor_id=r.catalogue.local_monitor(shard, a.monitor_id))

    def alert_frame(self, alert, k: int) -> FrameData:
        shard, local = self.router.locate(alert.alert_id)
        f = self._frame(self.router.call(shard, "alert_frame", local, k), shard)
        return f if f is not None else FrameData(alert.camera_id, ("gone",))

    def moment(self, moment_id: int):
        where = self._locate(moment_id)
        if where is None:
            return None
        shard, local = where
        m = self.router.call(shard, "moments_by_id", [local]).get(local)
        return None if m is None else globalize(m, self.router.shard_no(shard))

    def entity_crop(self, entity_id: int, cameras) -> FrameData | None:
        got = self.router.entity_crop(entity_id, cameras) if self._locate(entity_id) else None
        return None if got is None else self._frame(got[1], got[0])

    def _locate(self, cid: int) -> tuple[str, int] | None:
        """(shard, local id), or None for an id that names no shard of this cluster (404, as one
        engine answers an unknown id)."""
        try:
            return self.router.locate(cid)
        except VamError:
            return None

    @staticmethod
    def _frame(f: FrameData | None, shard: str) -> FrameData | None:
        return None if f is None else replace(f, cache_key=(shard, *f.cache_key))

    # -- alerts by position ------------------------------------------------------------------------
    def alert_position_now(self) -> AlertCursor:
        """Every shard's newest alert; for a shard that is down, the present's time (its alerts
        stored from now on arrive once it answers again)."""
        return self.router.alert_cursor_now()

    def parse_alert_position(self, text) -> AlertCursor | None:
        if text is None:
            return None
        text = str(text).strip()
        if text == "":
            return AlertCursor()
        last, after = {}, {}
        try:
            for part in text.split("."):
                no, _, local = part.partition("-")
                name = self.router.catalogue.shard_by_no(int(no)).name
                if local.startswith("t"):
                    after[name] = check_id(int(local[1:40]), "an alert position's time") / 1000.0
                else:
                    last[name] = check_id(int(local[:40]), "an alert position's id")
        except (ValueError, VamError, BadQuery) as e:
            raise BadQuery(f"{text[:60]!r} is not an alert position of this cluster (pass next_since or the "
                           f"SSE id back unchanged)") from e
        return AlertCursor(tuple(sorted(last.items())), tuple(sorted(after.items())))

    def alert_position_text(self, pos: AlertCursor) -> str:
        r = self.router
        return ".".join([f"{r.shard_no(s)}-{i}" for s, i in pos.last] +
                        [f"{r.shard_no(s)}-t{int(t * 1000)}" for s, t in pos.after_time if pos.of(s) is None])

    def alert_position_json(self, pos: AlertCursor | None):
        return None if pos is None else self.alert_position_text(pos)

    def alerts_after(self, pos: AlertCursor | None, *, monitor_id=None, cameras=None, limit=None) -> Partial:
        got = self.router.alerts(pos, monitor_id, cameras)
        items = []
        cur = pos or AlertCursor()
        for a in got[:limit] if limit is not None else got:
            cur = self.advance(cur, a) or cur
            items.append((a, cur))
        return Partial(items, got.missing_cameras, got.missing_shards)

    def advance(self, pos: AlertCursor | None, alert) -> AlertCursor | None:
        no, local = split_id(alert.alert_id)
        shard = self.router.catalogue.shard_by_no(no).name
        pos = pos or AlertCursor()
        seen, since_t = pos.of(shard), pos.time_of(shard)
        if (seen is not None and local <= seen) or (since_t is not None and alert.created_at <= since_t):
            return None
        return AlertCursor(tuple(sorted({**dict(pos.last), shard: local}.items())),
                           tuple((s, t) for s, t in pos.after_time if s != shard))

    # -- figures ---------------------------------------------------------------------------------
    def store_stats(self) -> ClusterStoreStats:
        r = self.router
        out, down = r.call_many({s: ("store_stats", (), {}) for s in r.shard_names()})
        ext, events, outcomes, parts = {}, {}, {}, {}
        for st in out.values():  # a camera lives on one shard
            ext.update(st.extents)
            events.update(st.events)
            outcomes.update(st.outcomes)
            for k, v in st.bytes_by_part.items():
                parts[k] = parts.get(k, 0) + v
        return ClusterStoreStats(ext, events, outcomes, parts, r.cameras_of(down), tuple(down))

    def camera_statuses(self) -> list:
        return list(self.router.status())

    def stage_statuses(self) -> list[tuple[dict, object]]:
        """Each shard's indexing stages, labelled by shard (a shard that does not answer: none)."""
        r = self.router
        out, _ = r.call_many({s: ("stage_status", (), {}) for s in r.shard_names()})
        return [({"shard": name}, st) for name, sts in sorted(out.items()) for st in sts]

    def writer_backlog(self) -> WriterBacklog:
        r = self.router
        out, _ = r.call_many({s: ("writer_backlog", (), {}) for s in r.shard_names()})
        return WriterBacklog(sum(b.pending_events for b in out.values()),
                             max((b.lag_s for b in out.values()), default=0.0))

    def model_queued(self) -> dict[str, int] | None:
        return queued_by_class(self.router.built_llm())

    def wrap_model(self, wrap) -> bool:
        return self.router.wrap_model(wrap)

    def metric_lines(self) -> list[str]:
        from ..server import metric_family

        info = self.router.info()
        out: list[str] = []
        metric_family(out, "vam_shard_up", "gauge", "1 while the shard answers",
                [({"shard": s.name}, s.alive) for s in info.shards])
        metric_family(out, "vam_shard_cameras", "gauge", "cameras placed on the shard",
                [({"shard": s.name}, len(s.cameras)) for s in info.shards])
        return out


def _local_key(after: RowKey | None, no: int) -> RowKey | None:
    """The key to page after on shard ``no``, from a key holding a cluster id."""
    if after is None:
        return None
    key_no, local = split_id(after.row_id)
    if no == key_no:
        return replace(after, row_id=local)
    # rows at the key's (camera, time): all after it on a later shard, all before it on an earlier one
    return replace(after, row_id=-1 if no > key_no else 1 << SHARD_SHIFT)


def _sort_key(k: RowKey):
    return k.camera_id, k.t, k.row_id
