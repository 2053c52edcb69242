"""Camera shards on a local Ray cluster (vam_engine/cluster) against one plain engine.

The same pushed frames (``--cameras`` cameras, ``--seconds`` of 2 fps video each, a new random
view every second so the gates keep about every sample at the 1 fps sampling) go into one plain
Engine and into clusters of 1, 2 and 4 shards (``--shards``), each over a fresh store root.
Measured, in one run on this machine:

- ingest: frames pushed per second through the router (one driver pushing camera after camera,
  ``--batch`` frames per actor call) and the wall time until every shard has committed;
- search (image query, top 10, all cameras) and moments (one camera, all of it): p50/p99 over
  ``--queries`` requests, for the plain engine and through the router;
- the router's overhead per request: the round trip of an empty actor call (p50) and the
  router-side merge (fanout.fuse_shards over the shards' ranked lists, p50), next to a search's total;
- over HTTP (with the server extra): a page of moments (``GET /api/moments``, one camera,
  200 rows) and an image search (``POST /api/search``, multipart) through the single engine's
  app and through the router's (the same app over ClusterBackend), p50 over ``--queries``.

What this machine cannot show: every shard here shares the same 2 cores (and the driver), so
adding shards cannot speed anything up; the rows show the per-shard and fan-out costs. The
extrapolation to N nodes (one shard per node) is printed separately and marked as such:
ingest ~ N x the 1-shard rate (each node gates, embeds and commits its own cameras; the router
only forwards pushes, a few hundred microseconds each); a search ~ the slowest shard's own time
for its 1/N of the data + the router's overhead.

Usage (from the repository root):

    python benchmarks/bench_cluster.py            # 8 cameras x 60 s, 1/2/4 shards (~2-3 min on 2 cores)
    python benchmarks/bench_cluster.py --quick    # 4 cameras x 20 s, 1/2 shards (smoke run)

Prints one table and writes benchmarks/results/bench_cluster.json.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from _common import call_latencies, percentiles, print_table, write_json

CFG = {"ingest": {"fps": 1.0}, "writer": {"enabled": False}, "retention": {"enabled": False}}
NAMESPACE = "vam_engine"  # the cluster's Ray namespace (vam_engine.cluster.shard.NAMESPACE)


def frame(cam: int, t: float, h: int = 96, w: int = 128) -> np.ndarray:
    return np.random.default_rng(cam * 100_003 + int(t)).integers(0, 255, (h, w, 3), dtype=np.uint8)


def ms(xs, q: float):
    """The q-th percentile of seconds ``xs`` in milliseconds; None (shown "-") without any."""
    return percentiles(xs, q, scale=1e3)[0]


class Served:
    """An app served by uvicorn on a loopback port in a thread (``with Served(app) as url``)."""

    def __init__(self, app):
        import socket
        import threading

        import uvicorn

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(15)
        self.sock.close()


def http_latency(app, camera: str, query_png: bytes, n: int) -> tuple[list[float], list[float]]:
    """(moments page, image search) request latencies through ``app``; empty without the server extra."""
    import httpx

    if app is None:
        return [], []
    with Served(app) as url, httpx.Client(base_url=url, timeout=60) as c:
        def page():
            r = c.get("/api/moments", params={"camera": camera, "limit": 200})
            assert r.status_code == 200, r.text

        def search():
            r = c.post("/api/search", files={"image": ("q.png", query_png, "image/png")}, data={"top_k": "10"})
            assert r.status_code == 200, r.text

        return call_latencies(page, n), call_latencies(search, n)


def png(arr) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def web_apps():
    """(create_app, create_cluster_app); None for both without the server extra (the HTTP columns
    stay empty)."""
    try:
        from vam_engine.cluster.app import create_cluster_app
        from vam_engine.server import create_app
    except ImportError:
        return None, None
    return create_app, create_cluster_app


@dataclass
class Pushed:
    """The frames every setup ingests and the queries it answers."""
    cams: list
    times: list
    frames: dict
    queries: list

    @classmethod
    def make(cls, a) -> "Pushed":
        n = int(a.seconds * 2)
        times = [k / 2 for k in range(n)]
        cams = [f"cam{c}" for c in range(a.cameras)]
        return cls(cams, times, {c: [frame(i, t) for t in times] for i, c in enumerate(cams)},
                   [frame(i % a.cameras, (7 * i) % a.seconds) for i in range(a.queries)])

    @property
    def total(self) -> int:
        return len(self.cams) * len(self.times)

    def search_latencies(self, target, n: int) -> list[float]:
        qi = iter(range(10**9))
        return call_latencies(lambda: target.search(image=self.queries[next(qi) % len(self.queries)], top_k=10), n)


# -- rows ----------------------------------------------------------------------------------------------
def plain_row(a, data: Pushed, root: Path) -> tuple[dict, list]:
    """One plain Engine: every camera pushed, then search, moments and HTTP latencies."""
    from vam_engine import Engine

    create_app = web_apps()[0]
    plain = Engine(root, CFG, device="cpu")
    t0 = time.perf_counter()
    for c in data.cams:
        for f, t in zip(data.frames[c], data.times):
            plain.push(c, f, t)
        plain.end_push(c)
    ingest_s = time.perf_counter() - t0
    s_lat = data.search_latencies(plain, a.queries)
    m_lat = call_latencies(lambda: plain.moments(data.cams[0]), a.queries)
    moments = len(plain.moments())
    hp, hs = http_latency(create_app(plain) if create_app else None, data.cams[0], png(data.queries[0]), a.queries)
    plain.close()
    result = {"setup": "plain engine", "shards": 0, "moments": moments, "ingest_fps": data.total / ingest_s,
              "search_ms": s_lat, "moments_ms": m_lat, "http_page_ms": hp, "http_search_ms": hs}
    row = ["plain engine", "-", moments, data.total / ingest_s, ms(s_lat, 50), ms(s_lat, 99), ms(m_lat, 50),
           ms(m_lat, 99), "-", "-", "-", ms(hp, 50), ms(hs, 50)]
    return result, row


def router_costs(router, data: Pushed, n: int) -> tuple[list, list, list]:
    """The router's own costs: an empty actor call's round trip, the merge of the shards' parts,
    and the slowest shard's own time for each query's search (inside the actor)."""
    import ray

    from vam_engine.cluster.fanout import fuse_shards

    handles = {s: ray.get_actor(router.actor_name(s), namespace=NAMESPACE) for s in router.shard_names()}
    first = handles[router.shard_names()[0]]
    rtt = call_latencies(lambda: ray.get(first.pid.remote()), n)
    parts = {s: ray.get(h.search_lists.remote(image=data.queries[0], top_k=10, sources=("frame", "event")))
             for s, h in handles.items()}
    merge = call_latencies(lambda: fuse_shards(parts, 10), n)
    inside = [max(ray.get([h.search_lists.remote(image=q, top_k=10, sources=("frame", "event"))
                           for h in handles.values()]),
                  key=lambda hits: hits.seconds).seconds for q in data.queries]
    return rtt, merge, inside


def cluster_row(a, data: Pushed, root: Path, k: int) -> tuple[dict, list]:
    """k shards behind a router: pushed in batches, flushed, then the same latencies plus the
    router's own costs."""
    from vam_engine.cluster import connect

    create_cluster_app = web_apps()[1]
    router = connect(None, root=root, shards=[f"b{k}-{j}" for j in range(k)], config=CFG, device="cpu")
    assert all(s.alive for s in router.info().shards)  # every shard's engine is open before timing
    n = len(data.times)
    t0 = time.perf_counter()
    for c in data.cams:
        for b in range(0, n, a.batch):
            router.push_many(c, data.frames[c][b:b + a.batch], data.times[b:b + a.batch])
        router.end_push(c)
    push_s = time.perf_counter() - t0
    router.flush()
    ingest_s = time.perf_counter() - t0
    s_lat = data.search_latencies(router, a.queries)
    m_lat = call_latencies(lambda: router.moments(data.cams[0]), a.queries)
    rtt, merge, inside = router_costs(router, data, a.queries)
    moments = len(router.moments())
    hp, hs = http_latency(create_cluster_app(router) if create_cluster_app else None, data.cams[0],
                          png(data.queries[0]), a.queries)
    label = f"cluster, {k} shard{'s' if k > 1 else ''}"
    result = {"setup": label, "shards": k, "moments": moments, "ingest_fps": data.total / ingest_s,
              "push_fps": data.total / push_s, "search_ms": s_lat, "moments_ms": m_lat, "actor_rtt_ms": rtt,
              "merge_ms": merge, "http_page_ms": hp, "http_search_ms": hs, "shard_search_ms": inside,
              "cameras_per_shard": {s: sum(1 for v in router.catalogue.cameras().values() if v == s)
                                    for s in router.shard_names()}}
    row = [label, k, moments, data.total / ingest_s, ms(s_lat, 50), ms(s_lat, 99), ms(m_lat, 50), ms(m_lat, 99),
           ms(rtt, 50), ms(merge, 50), ms(inside, 50), ms(hp, 50), ms(hs, 50)]
    router.shutdown_shards()
    router.close()
    return result, row


def extrapolate(results: list) -> list:
    """N nodes from the 1-shard row (not measured): ingest N x, search the per-request overhead +
    the in-shard time / N."""
    one = next((r for r in results if r["shards"] == 1), None)
    if one is None:
        return []
    shard_search = ms(one["shard_search_ms"], 50)  # the part that shrinks with a shard's data
    overhead = max(ms(one["search_ms"], 50) - shard_search, 0.0)  # transport, actor, merge: per request
    extrap = [[nn, nn * one["ingest_fps"], overhead + shard_search / nn] for nn in (1, 4, 16)]
    print(f"\nthe 1-shard search: {shard_search:.2f} ms inside the shard, {overhead:.2f} ms per request around "
          "it (Ray's call, transport, the merge)")
    print("EXTRAPOLATED (not measured): N nodes, one shard each, the data split evenly; ingest = N x the "
          "1-shard rate, search p50 = the per-request overhead + the 1-shard search's time inside the shard / N "
          "(a lower bound: a shard's search cost is not linear in its size)")
    print_table(["nodes", "ingest frames/s (extrapolated)", "search p50 ms (extrapolated)"], extrap)
    return extrap


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cameras", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--batch", type=int, default=20, help="frames per push_many call")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.cameras, a.seconds, a.shards, a.queries = 4, 20.0, [1, 2], 15
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, namespace=NAMESPACE, object_store_memory=200 << 20,
             log_to_driver=False)
    work = Path(tempfile.mkdtemp(prefix="bench_cluster_"))
    data = Pushed.make(a)
    try:
        result, row = plain_row(a, data, work / "plain")
        results, rows = [result], [row]
        for k in a.shards:
            result, row = cluster_row(a, data, work / f"shards{k}", k)
            results.append(result)
            rows.append(row)
        print(f"{len(data.cams)} cameras x {a.seconds:g} s at 2 fps (1 fps sampled); {a.queries} requests each; "
              f"2-core machine: all shards share the same cores")
        table = print_table(["setup", "shards", "moments", "ingest frames/s", "search p50 ms", "search p99 ms",
                             "moments p50 ms", "moments p99 ms", "actor rtt p50 ms", "merge p50 ms",
                             "in-shard search p50 ms", "HTTP page p50 ms", "HTTP search p50 ms"], rows)
        extrap = extrapolate(results)
        path = write_json("bench_cluster", {"args": vars(a), "results": results, "table": table,
                                            "extrapolated": {"rows": extrap, "note": "not measured; see the doc"}})
        print(f"\nwrote {path}")
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
