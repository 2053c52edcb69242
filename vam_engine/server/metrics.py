"""Prometheus text exposition (format 0.0.4) at ``/metrics``, written by hand: a few families,
no client library needed.

What it reports: per camera, the store's moments and gated samples by outcome (kept, or the
gate that dropped them); the indexing pipeline's stages (busy seconds, items, queue depth,
drops: ``engine.stage_status()``); when the engine runs live cameras (``engine.status()``) - state,
input fps, frames decoded and dropped, reconnects, gaps and lag behind live; the document
writer's backlog and lag; model latency by priority class (frontend / backend) and the
scheduler's queues; search latency; HTTP latency per route; store size on disk. Queries over
the store are cached for ``store_every_s`` so a scrape costs little on a large store.
"""
from __future__ import annotations

import bisect
import os
import threading
import time


LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _esc(v) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: dict) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in labels.items()) + "}"


def _val(v) -> str:
    if v is None:
        return "NaN"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return repr(v) if v == v and v not in (float("inf"), float("-inf")) else (
            "NaN" if v != v else ("+Inf" if v > 0 else "-Inf"))
    return str(v)


class Histogram:
    """A histogram per label set; thread-safe."""

    def __init__(self, name: str, help: str, label_names: tuple, buckets=LATENCY_BUCKETS):
        self.name, self.help, self.label_names, self.buckets = name, help, label_names, tuple(buckets)
        self._series: dict[tuple, list] = {}  # labels -> [counts per bucket..., sum, count]
        self._lock = threading.Lock()

    def observe(self, value: float, *labels) -> None:
        i = bisect.bisect_left(self.buckets, value)
        with self._lock:
            s = self._series.setdefault(tuple(labels), [0] * len(self.buckets) + [0.0, 0])
            for k in range(i, len(self.buckets)):
                s[k] += 1
            s[-2] += value
            s[-1] += 1

    def render(self, out: list[str]) -> None:
        out.append(f"# HELP {self.name} {self.help}")
        out.append(f"# TYPE {self.name} histogram")
        with self._lock:
            series = {k: list(v) for k, v in self._series.items()}
        for labels, s in sorted(series.items()):
            base = dict(zip(self.label_names, labels))
            for le, n in zip(self.buckets, s):
                out.append(f"{self.name}_bucket{_labels({**base, 'le': repr(float(le))})} {n}")
            out.append(f"{self.name}_bucket{_labels({**base, 'le': '+Inf'})} {s[-1]}")
            out.append(f"{self.name}_sum{_labels(base)} {_val(float(s[-2]))}")
            out.append(f"{self.name}_count{_labels(base)} {s[-1]}")


class Counter:
    def __init__(self, name: str, help: str, label_names: tuple):
        self.name, self.help, self.label_names = name, help, label_names
        self._values: dict[tuple, int] = {}
        self._lock = threading.Lock()

    def inc(self, *labels, by: int = 1) -> None:
        with self._lock:
            self._values[tuple(labels)] = self._values.get(tuple(labels), 0) + by

    def render(self, out: list[str]) -> None:
        with self._lock:  # inc runs on the event loop meanwhile
            values = sorted(self._values.items())
        metric_family(out, self.name, "counter", self.help, [(dict(zip(self.label_names, k)), v) for k, v in values])


def metric_family(out: list[str], name: str, kind: str, help: str, samples) -> None:
    out.append(f"# HELP {name} {help}")
    out.append(f"# TYPE {name} {kind}")
    for labels, value in samples:
        out.append(f"{name}{_labels(labels)} {_val(value)}")


class Metrics:
    def __init__(self, store_every_s: float = 10.0):
        self.store_every_s = store_every_s
        self.http = Histogram("vam_http_request_duration_seconds", "HTTP request latency by route",
                              ("route", "method"))
        self.http_total = Counter("vam_http_requests_total", "HTTP requests by route and status",
                                  ("route", "method", "status"))
        self.search = Histogram("vam_search_latency_seconds", "search latency (embedding + fused lookup)", ())
        self.model = Histogram("vam_model_latency_seconds", "model call latency by priority class", ("priority",))
        self.sse_clients = 0
        self.ws_clients = 0
        self._store_cache: tuple[float, list[str]] | None = None
        self._lock = threading.Lock()

    def render(self, backend) -> str:
        """``backend``: server/backend.py's surface (one engine's store, or a cluster's shards)."""
        out: list[str] = []
        out += self._store_lines(backend)
        self._live_lines(backend.camera_statuses(), out)
        _stage_lines(backend.stage_statuses(), out)
        b = backend.writer_backlog()
        metric_family(out, "vam_writer_backlog_events", "gauge", "closed events waiting for their document",
                [({}, b.pending_events)])
        metric_family(out, "vam_writer_lag_seconds", "gauge", "how long the oldest of them has waited", [({}, b.lag_s)])
        queued = backend.model_queued()
        if queued is not None:
            metric_family(out, "vam_model_queued_requests", "gauge", "model requests waiting, by priority class",
                    [({"priority": k}, v) for k, v in sorted(queued.items())])
        out += backend.metric_lines()
        for h in (self.search, self.model, self.http):
            h.render(out)
        self.http_total.render(out)
        metric_family(out, "vam_stream_clients", "gauge", "connected alert streams by kind",
                [({"kind": "sse"}, self.sse_clients), ({"kind": "websocket"}, self.ws_clients)])
        return "\n".join(out) + "\n"

    # -- the store (cached) --------------------------------------------------------------------
    def _store_lines(self, backend) -> list[str]:
        with self._lock:
            now = time.monotonic()
            if self._store_cache is not None and now - self._store_cache[0] < self.store_every_s:
                return self._store_cache[1]
        st = backend.store_stats()
        out: list[str] = []
        ext = st.extents
        metric_family(out, "vam_camera_moments", "gauge", "retained frames per camera",
                [({"camera": c}, e["moments"]) for c, e in sorted(ext.items())])
        metric_family(out, "vam_camera_last_moment_time", "gauge", "time of the newest moment (camera axis, seconds)",
                [({"camera": c}, e["t_last"]) for c, e in sorted(ext.items())])
        metric_family(out, "vam_camera_events", "gauge", "events per camera",
                [({"camera": c}, n) for c, n in sorted(st.events.items())])
        metric_family(out, "vam_samples_total", "counter",
                "gated samples per camera by outcome: kept, or the gate that dropped them (blur, low_change, ssim, "
                "hist, dedup)", [({"camera": c, "outcome": o}, n) for (c, o), n in sorted(st.outcomes.items())])
        metric_family(out, "vam_store_bytes", "gauge", "store size on disk by part",
                [({"part": k}, v) for k, v in st.bytes_by_part.items()])
        with self._lock:
            self._store_cache = (time.monotonic(), out)
        return out

    # -- live cameras ----------------------------------------------------------------------------
    @staticmethod
    def _live_lines(statuses, out: list[str]) -> None:
        rows = [s.to_json() if hasattr(s, "to_json") else dict(vars(s)) for s in statuses]
        if not rows:
            return
        metric_family(out, "vam_camera_state", "gauge", "1 for the camera's current state",
                [({"camera": r["camera_id"], "state": st}, r.get("state") == st) for r in rows
                 for st in ("online", "connecting", "stalled", "offline")])
        for name, key, kind, help in (
                ("vam_camera_input_fps", "input_fps", "gauge", "frames per second arriving from the source"),
                ("vam_camera_frames_decoded_total", "frames_decoded", "counter", "frames decoded"),
                ("vam_camera_frames_sampled_total", "frames_sampled", "counter", "frames sampled for the gates"),
                ("vam_camera_frames_kept_total", "frames_kept", "counter", "frames the gates kept"),
                ("vam_camera_frames_dropped_total", "frames_dropped", "counter",
                 "frames dropped before the gates (ingest behind)"),
                ("vam_camera_reconnects_total", "reconnects", "counter", "reconnections of the source"),
                ("vam_camera_gaps_total", "gaps", "counter", "gaps recorded (time without frames)"),
                ("vam_camera_lag_seconds", "lag_s", "gauge", "how far ingest is behind live")):
            metric_family(out, name, kind, help, [({"camera": r["camera_id"]}, r.get(key)) for r in rows if key in r])


def _stage_lines(rows, out: list[str]) -> None:
    """The indexing pipeline's stages: where a machine's capacity goes (index/meter.py)."""
    if not rows:
        return
    for name, kind, help, value in (
            ("vam_stage_busy_seconds_total", "counter", "seconds the stage's workers spent busy, summed over them",
             lambda st: st.busy_s),
            ("vam_stage_items_total", "counter", "items the stage finished (frames; perception rounds; commits)",
             lambda st: st.items),
            ("vam_stage_workers", "gauge", "threads that run the stage now", lambda st: st.workers),
            ("vam_stage_queue_depth", "gauge", "items waiting at the stage's input", lambda st: st.queue_depth),
            ("vam_stage_queue_capacity", "gauge", "the bound of the stage's input (absent: unbounded)",
             lambda st: st.queue_capacity),
            ("vam_stage_dropped_total", "counter", "items the stage dropped because it was behind",
             lambda st: st.dropped)):
        metric_family(out, name, kind, help, [({**labels, "stage": st.name}, value(st)) for labels, st in rows
                                              if value(st) is not None])


def process_lines() -> list[str]:
    """Resident memory of this process (Linux), for capacity planning."""
    try:
        rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return []
    out: list[str] = []
    metric_family(out, "process_resident_memory_bytes", "gauge", "resident memory", [({}, rss)])
    return out
