"""A polygon place filter at its bound: a region of ``MAX_CORNERS`` corners over 30,000 posed
moments, and what it does to the rest of the service while it runs.

Rows (one process; the store's moments are copies of one pushed frame at 30,000 poses spread
over a 20 m x 20 m map, the polygon a star of MAX_CORNERS corners spanning it, so its bounding
box lets nearly every row through to the exact test):

- point in polygon, scalar reference: ``in_polygon`` per row (the filter as it was: the
  baseline of the next row);
- point in polygon, vectorised: ``in_polygon_many`` over every row at once;
- GET /api/moments?region=..., scalar / vectorised: a page of 1,000 of the moments in the
  polygon through a real server (uvicorn on loopback), the exact test as each row above
  (the scalar one swapped in for the baseline);
- GET /api/health while idle, and while ``--clients`` clients fetch such pages back to back
  (scalar / vectorised): what one token's region requests cost every other request.

    python benchmarks/bench_places.py            # 30,000 moments, 20 region pages, 200 health checks
    python benchmarks/bench_places.py --quick    # 5 region pages, 60 health checks

Prints the table and writes benchmarks/results/bench_places.json.
"""
from __future__ import annotations

import argparse
import asyncio
import math
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from _common import percentiles, print_table, timeit, write_json

from vam_engine import Engine
from vam_engine.memory import MAX_CORNERS, Pose
from vam_engine.memory import places

SPAN_M = 10.0


def star(n: int) -> list[tuple[float, float]]:
    """A star of ``n`` corners around the origin, reaching out to SPAN_M (concave)."""
    return [((SPAN_M if k % 2 else 0.6 * SPAN_M) * math.cos(2 * math.pi * k / n),
             (SPAN_M if k % 2 else 0.6 * SPAN_M) * math.sin(2 * math.pi * k / n)) for k in range(n)]


def build(root: Path, n: int) -> Engine:
    """An engine whose store holds ``n`` moments at random poses (one frame pushed, its row copied)."""
    eng = Engine(root, {"writer": {"enabled": False}, "retention": {"enabled": False}}, device="cpu")
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
    eng.push("rover", frame, 0.0, pose=Pose(0.0, 0.0, 0.0, 0.0))
    eng.end_push("rover")
    assert eng.flush(timeout=120)
    db = eng.store.db
    cols = [r[1] for r in db.conn().execute("PRAGMA table_info(moments)")]
    first = dict(zip(cols, db.conn().execute("SELECT * FROM moments LIMIT 1").fetchone()))
    xy = rng.uniform(-SPAN_M, SPAN_M, (n - 1, 2))
    copy = [c for c in cols if c not in ("moment_id", "t_rel", "t", "pose_x", "pose_y", "embedding_id", "event_id")]
    rows = [tuple(first[c] for c in copy) + ((k + 1) * 0.5, (k + 1) * 0.5, float(x), float(y))
            for k, (x, y) in enumerate(xy)]
    with db.transaction() as conn:
        conn.executemany(f"INSERT INTO moments ({', '.join(copy)}, t_rel, t, pose_x, pose_y) VALUES "
                         f"({', '.join('?' * (len(copy) + 4))})", rows)
    return eng


class Server:
    """uvicorn serving the app on a free loopback port, in a thread."""

    def __init__(self, app):
        import uvicorn

        from vam_engine.server.http import server_config

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(server_config(app, "127.0.0.1", self.port, app.state.options, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self):
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()


async def _get(port: int, target: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
    data = await reader.read()
    writer.close()
    return int(data.split(b" ", 2)[1]), time.perf_counter() - t0


async def _load(port: int, region: str, pages: int, clients: int, health: int) -> tuple[list, list]:
    """(region page latencies, health latencies) with ``clients`` region clients running."""
    stop = asyncio.Event()
    page_s: list[float] = []

    async def region_client():
        while not stop.is_set() and len(page_s) < pages:
            status, dt = await _get(port, f"/api/moments?limit=1000&region={region}")
            assert status == 200, status
            page_s.append(dt)

    tasks = [asyncio.create_task(region_client()) for _ in range(clients)]
    await asyncio.sleep(0.05)
    health_s = []
    for _ in range(health):
        if tasks and all(t.done() for t in tasks):
            break
        status, dt = await _get(port, "/api/health")
        assert status == 200
        health_s.append(dt)
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.gather(*tasks)
    return page_s, health_s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moments", type=int, default=30_000)
    ap.add_argument("--pages", type=int, default=20, help="region pages per run")
    ap.add_argument("--health", type=int, default=200, help="health checks per run (at most)")
    ap.add_argument("--clients", type=int, default=2, help="region clients at once")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.pages, args.health = 5, 60

    from vam_engine.server import ServeOptions, create_app

    corners = star(MAX_CORNERS)
    region = ";".join(f"{x:.4f},{y:.4f}" for x, y in corners)
    vectorised = places.in_polygon_many

    def scalar(c, xs, ys):  # the filter as it was: the reference, row by row
        return np.array([places.in_polygon(c, x, y) for x, y in zip(xs, ys)], bool)

    out: dict = {"moments": args.moments, "corners": MAX_CORNERS, "clients": args.clients}
    with tempfile.TemporaryDirectory() as tmp:
        eng = build(Path(tmp) / "store", args.moments)
        try:
            xs, ys = zip(*((m[0], m[1]) for m in eng.store.db.conn().execute(
                "SELECT pose_x, pose_y FROM moments")))
            xs, ys = np.array(xs), np.array(ys)
            assert (scalar(corners, xs, ys) == vectorised(corners, xs, ys)).all()
            out["inside"] = int(vectorised(corners, xs, ys).sum())
            out["filter_scalar_s"] = timeit(lambda: scalar(corners, xs, ys), repeats=3)["median"]
            out["filter_vectorised_s"] = timeit(lambda: vectorised(corners, xs, ys), repeats=5)["median"]
            with Server(create_app(eng, ServeOptions())) as srv:
                _, idle = asyncio.run(_load(srv.port, region, 0, 0, min(args.health, 100)))
                out["health_idle_ms"] = percentiles(idle, 50, 99, scale=1e3)
                for name, fn in (("scalar", scalar), ("vectorised", vectorised)):
                    places.in_polygon_many = fn
                    try:
                        pages, health = asyncio.run(_load(srv.port, region, args.pages, args.clients, args.health))
                    finally:
                        places.in_polygon_many = vectorised
                    out[f"page_{name}_ms"] = percentiles(pages, 50, 99, scale=1e3)
                    out[f"health_{name}_ms"] = percentiles(health, 50, 99, scale=1e3)
        finally:
            eng.close()

    ratio = out["filter_scalar_s"] / out["filter_vectorised_s"]
    rows = [
        ["point in polygon, scalar reference", f"{out['filter_scalar_s'] * 1e3:.1f}", "", "1.00x"],
        ["point in polygon, vectorised", f"{out['filter_vectorised_s'] * 1e3:.1f}", "", f"{ratio:.1f}x faster"],
    ]
    for name in ("scalar", "vectorised"):
        p50, p99 = out[f"page_{name}_ms"]
        rows.append([f"GET /api/moments?region (1000 of {out['inside']}), {name}", f"{p50:.1f}", f"{p99:.1f}", ""])
    i50, i99 = out["health_idle_ms"]
    rows.append(["GET /api/health, idle", f"{i50:.1f}", f"{i99:.1f}", "1.00x"])
    for name in ("scalar", "vectorised"):
        p50, p99 = out[f"health_{name}_ms"]
        rows.append([f"GET /api/health, {args.clients} region clients, {name}", f"{p50:.1f}", f"{p99:.1f}",
                     f"p99 {p99 / i99:.1f}x idle"])
    print(f"{args.moments} posed moments, a {MAX_CORNERS}-corner polygon ({out['inside']} moments inside)")
    print_table(["what", "p50 / median ms", "p99 ms", "vs baseline"], rows)
    path = write_json("bench_places", out)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
