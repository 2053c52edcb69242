"""``vam-engine serve`` under load: N concurrent clients against a server ingesting M live sources.

The server runs as its own process (``vam-engine serve --cameras``), each source a generated
H.264 file played as live at 1x (``realtime = true``: paced like a camera). Each client is a
closed loop (with ``--think-s`` between requests) over the page's three calls - the moments of
a camera's last minute, a search by an uploaded image, a frame thumbnail - and holds one SSE
alert stream open for the whole run. Reported per endpoint: requests, errors, p50 and p99
latency (client side, body read), and SSE streams that dropped.

The clients share this process's event loop, on the same machine as the server: each speaks
HTTP/1.1 over its own keep-alive connection with a minimal client (``--http-client lean``),
because httpx's per-request CPU made the client use more CPU than the server and measure its
own queueing (``--http-client httpx`` still runs it that way). The CPU table says what the
server, the clients and the whole machine (other work included) used in each phase.

Baseline in the same run: the same clients against the same server after its cameras are
removed (``idle``: no ingest), so the ``x idle`` column is what ingest costs a request.
Ingest keeps real time when the stream time of every camera advances at >= 0.95x wall time
during the loaded phase and its lag behind live does not grow (slope of lag over time).

    python benchmarks/bench_serve.py --clients 10 --sources 1 --seconds 20      # small
    python benchmarks/bench_serve.py --clients 50 --sources 4 --seconds 60      # the issue's target
"""
from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import machine_info, percentiles, print_table, write_json

ENDPOINTS = ("moments", "search", "frame")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` (None: this one)."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat (all cores)."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v) - idle) / tick, sum(v) / tick


class CpuWatch:
    """CPU used during a phase: by the server, by this client process, by the machine in all
    (the rest is other work on a shared machine). In cores (1.0 = one core busy)."""

    def __init__(self, server_pid):
        self.pid = server_pid
        self.wall = time.monotonic()
        self.server, self.client, self.busy = cpu_seconds(server_pid), cpu_seconds(), machine_busy()[0]

    def stop(self) -> dict:
        wall = time.monotonic() - self.wall
        return {"server_cores": (cpu_seconds(self.pid) - self.server) / wall,
                "client_cores": (cpu_seconds() - self.client) / wall,
                "machine_cores": (machine_busy()[0] - self.busy) / wall, "machine_cpus": os.cpu_count()}


class Phase:
    def __init__(self, name):
        self.name = name
        self.lat = {e: [] for e in ENDPOINTS}
        self.errors = {e: 0 for e in ENDPOINTS}
        self.error_kinds: dict[str, int] = {}
        self.cpu: dict = {}

    def record(self, endpoint, seconds, ok, kind=None):
        if ok:
            self.lat[endpoint].append(seconds)
        else:
            self.errors[endpoint] += 1
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1


class LeanHTTP:
    """A minimal HTTP/1.1 client: one keep-alive connection, one request at a time (each client
    is a closed loop, so that is all it needs). Why not httpx: on this 2-core machine httpx's
    per-request CPU (a few ms: its models, anyio, h11) made the client process use more CPU
    than the server it measured, so the latencies it reported were partly its own queueing."""

    def __init__(self, host: str, port: int, timeout: float = 30.0):
        self.host, self.port, self.timeout = host, port, timeout
        self._conn = None

    async def request(self, method: str, target: str, body: bytes = b"", headers: dict | None = None):
        """(status, body bytes); a failed connection is dropped and the next request opens one."""
        try:
            return await asyncio.wait_for(self._request(method, target, body, headers or {}), self.timeout)
        except BaseException:
            await self.close()
            raise

    async def _request(self, method, target, body, headers):
        if self._conn is None:
            self._conn = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._conn
        head = [f"{method} {target} HTTP/1.1", f"Host: {self.host}:{self.port}", f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        hdrs = {}
        for line in lines[1:]:
            if line:
                k, _, v = line.partition(":")
                hdrs[k.strip().lower()] = v.strip()
        if hdrs.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                n = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                parts.append(await reader.readexactly(n + 2))
                if n == 0:
                    break
            data = b"".join(p[:-2] for p in parts)
        else:
            data = await reader.readexactly(int(hdrs.get("content-length", "0")))
        if hdrs.get("connection", "").lower() == "close":
            await self.close()
        return status, data

    async def close(self):
        if self._conn is not None:
            self._conn[1].close()
            self._conn = None


class HttpxHTTP:
    """The same interface over a shared httpx.AsyncClient (``--http-client httpx``)."""

    def __init__(self, http):
        self.http = http

    async def request(self, method, target, body=b"", headers=None):
        r = await self.http.request(method, target, content=body or None, headers=headers)
        return r.status_code, await r.aread()

    async def close(self):
        pass


def multipart(fields: dict, file_field: str, filename: str, data: bytes, ctype: str) -> tuple[bytes, str]:
    """A multipart/form-data body and its Content-Type."""
    b = "vambench" + "0" * 16
    out = b"".join(f'--{b}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
                   for k, v in fields.items())
    out += (f'--{b}\r\nContent-Disposition: form-data; name="{file_field}"; filename="{filename}"\r\n'
            f"Content-Type: {ctype}\r\n\r\n").encode() + data + f"\r\n--{b}--\r\n".encode()
    return out, f"multipart/form-data; boundary={b}"


async def client(http, k, state, query_jpeg, think_s):
    from urllib.parse import urlencode

    rng = random.Random(k)
    i = k
    search_body, search_type = multipart({"top_k": "10", "sources": "frame"}, "image", "q.jpg", query_jpeg,
                                         "image/jpeg")
    while not state["stop"]:
        phase = state["phase"]
        cams = state["cameras"] or ["cam0"]
        cam = cams[i % len(cams)]
        endpoint = ENDPOINTS[i % len(ENDPOINTS)]
        i += 1
        t0 = time.perf_counter()
        ok, kind = True, None
        try:
            if endpoint == "moments":
                last = state["last_t"].get(cam)
                params = {"camera": cam, "limit": 100, **({"t0": last - 60} if last is not None else {})}
                status, data = await http.request("GET", "/api/moments?" + urlencode(params))
                items = json.loads(data)["items"] if status == 200 else None
                if items:
                    state["recent"][cam] = [m["moment_id"] for m in items[-20:]]
            elif endpoint == "search":
                status, data = await http.request("POST", "/api/search", search_body,
                                                  {"Content-Type": search_type})
            else:
                ids = state["recent"].get(cam) or [1]
                status, data = await http.request("GET", f"/api/frames/{rng.choice(ids)}?w=192")
            ok = status == 200
            kind = None if ok else f"{endpoint} HTTP {status}"
        except Exception as e:  # noqa: BLE001 - counted per kind, the run goes on
            ok, kind = False, f"{endpoint} {type(e).__name__}"
        if phase is not None:
            phase.record(endpoint, time.perf_counter() - t0, ok, kind)
        await asyncio.sleep(think_s * (0.5 + rng.random()))
    await http.close()


async def sse_subscriber(http, state):
    """Holds /api/alerts/stream open; a stream that ends or fails before the run does counts."""
    try:
        async with http.stream("GET", "/api/alerts/stream", timeout=None) as r:
            if r.status_code != 200:
                state["sse_dropped"] += 1
                return
            state["sse_open"] += 1
            async for _ in r.aiter_lines():
                if state["stop"]:
                    return
    except Exception:  # noqa: BLE001
        if not state["stop"]:
            state["sse_dropped"] += 1
        return
    if not state["stop"]:
        state["sse_dropped"] += 1


async def watch_ingest(http, state, samples):
    while not state["stop"]:
        try:
            r = await http.get("/api/cameras")
            now = time.monotonic()
            for c in r.json()["cameras"]:
                if c["t_last"] is not None:
                    state["last_t"][c["camera_id"]] = c["t_last"]
                st = c.get("status")
                if st and state["phase"] is not None and state["phase"].name == "loaded":
                    samples.setdefault(c["camera_id"], []).append(
                        (now, st.get("last_frame_t"), st.get("lag_s"), st.get("frames_dropped", 0), st.get("state")))
        except Exception:  # noqa: BLE001 - a missed sample; the next one comes in a second
            pass
        await asyncio.sleep(1.0)


def ingest_figures(samples):
    out = {}
    for cam, s in samples.items():
        s = [x for x in s if x[1] is not None]
        if len(s) < 3:
            out[cam] = {"x_realtime": None, "lag_slope": None, "lag_end_s": None, "dropped": None, "states": []}
            continue
        wall = s[-1][0] - s[0][0]
        xrt = (s[-1][1] - s[0][1]) / wall if wall > 0 else None
        lags = [(x[0] - s[0][0], x[2]) for x in s if x[2] is not None]
        slope = None
        if len(lags) >= 3:
            mt, ml = statistics.fmean(t for t, _ in lags), statistics.fmean(v for _, v in lags)
            den = sum((t - mt) ** 2 for t, _ in lags)
            slope = sum((t - mt) * (v - ml) for t, v in lags) / den if den else None
        out[cam] = {"x_realtime": xrt, "lag_slope": slope, "lag_end_s": lags[-1][1] if lags else None,
                    "dropped": s[-1][3] - s[0][3], "states": sorted({x[4] for x in s})}
    return out


async def timed_phase(name: str, state: dict, server_pid: int, seconds: float) -> Phase:
    """The clients' requests for ``seconds`` recorded as one phase, with the CPU it used."""
    phase = Phase(name)
    state["phase"] = phase
    cpu = CpuWatch(server_pid)
    await asyncio.sleep(seconds)
    phase.cpu = cpu.stop()
    state["phase"] = None
    return phase


async def run(args, url, cams, query_jpeg, server_pid):
    import httpx
    from urllib.parse import urlsplit

    limits = httpx.Limits(max_connections=args.clients * 2 + 10, max_keepalive_connections=args.clients * 2 + 10)
    state = {"stop": False, "phase": None, "cameras": cams, "last_t": {}, "recent": {}, "sse_open": 0,
             "sse_dropped": 0}
    samples: dict = {}
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as http:
        watcher = asyncio.create_task(watch_ingest(http, state, samples))
        deadline = time.monotonic() + 60
        while len(state["last_t"]) < len(cams) and time.monotonic() < deadline:  # warm-up: every camera committed
            await asyncio.sleep(0.5)
        subs = [asyncio.create_task(sse_subscriber(http, state)) for _ in range(args.clients)]
        u = urlsplit(url)
        clients = [asyncio.create_task(client(LeanHTTP(u.hostname, u.port) if args.http_client == "lean"
                                              else HttpxHTTP(http), k, state, query_jpeg, args.think_s))
                   for k in range(args.clients)]
        loaded = await timed_phase("loaded", state, server_pid, args.seconds)
        for cam in cams:  # the baseline: the same server, nothing ingesting
            await http.delete(f"/api/cameras/{cam}")
        idle = await timed_phase("idle", state, server_pid, args.idle_seconds)
        phases = [loaded, idle]
        state["stop"] = True
        for t in clients + [watcher]:
            t.cancel()
        for t in subs:
            t.cancel()
        await asyncio.gather(*clients, watcher, *subs, return_exceptions=True)
    return phases, ingest_figures(samples), state


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--sources", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=20.0, help="the loaded phase")
    ap.add_argument("--idle-seconds", type=float, help="the baseline phase (default: half of --seconds)")
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=360)
    ap.add_argument("--source-fps", type=int, default=15, help="frame rate of the generated sources")
    ap.add_argument("--fps", type=float, default=2.0, help="ingest sampling rate per camera")
    ap.add_argument("--think-s", type=float, default=0.2, help="mean pause between a client's requests")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--http-client", choices=("lean", "httpx"), default="lean",
                    help="the clients' HTTP: lean (a minimal keep-alive client, so the client's own CPU does not "
                         "crowd the server on a small machine) or httpx (one shared AsyncClient)")
    ap.add_argument("--json", default="bench_serve", help="results file name under benchmarks/results/")
    args = ap.parse_args(argv)
    args.idle_seconds = args.idle_seconds if args.idle_seconds is not None else max(5.0, args.seconds / 2)
    return args


def write_sources(args, work: Path) -> list[str]:
    """One generated clip per source, long enough that none ends during the run, and the
    cameras file naming them (played as live)."""
    from vam_engine.synthetic import write_scene_clip

    length = args.seconds + 90  # warm-up and start-up included: no source ends during the run
    cams, lines = [], ["[defaults]", f"fps = {args.fps}", "realtime = true"]
    for k in range(args.sources):
        clip = write_scene_clip(work / f"cam{k}.mp4", width=args.width, height=args.height, fps=args.source_fps,
                                seconds=length, seed=k + 1)
        cams.append(f"cam{k}")
        lines += [f"[cameras.cam{k}]", f'url = "{clip.path}"']
    (work / "cameras.toml").write_text("\n".join(lines) + "\n")
    return cams


def start_server(args, work: Path, port: int) -> subprocess.Popen:
    """``python -m vam_engine.cli serve`` on the cameras file; returns once /api/health answers."""
    import httpx

    server = subprocess.Popen([sys.executable, "-m", "vam_engine.cli", "serve", "--store", str(work / "store"),
                               "--cameras", str(work / "cameras.toml"), "--port", str(port), "--device", args.device,
                               "--log-level", "warning"], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            stop_server(server)
            raise SystemExit(f"serve did not start: {server.stderr.read()[-2000:]}")
        time.sleep(0.3)


def stop_server(server: subprocess.Popen) -> None:
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        server.kill()


def endpoint_rows(loaded: Phase, idle: Phase, seconds: float) -> tuple[list, dict]:
    """Per endpoint: requests, errors, p50/p99 loaded and idle (ms), p99 over idle, req/s."""
    rows, results = [], {}
    for e in ENDPOINTS:
        p50a, p99a = percentiles(loaded.lat[e], 50, 99, scale=1e3)
        p50b, p99b = percentiles(idle.lat[e], 50, 99, scale=1e3)
        r = results[e] = {"requests": len(loaded.lat[e]) + loaded.errors[e], "errors": loaded.errors[e],
                          "p50_ms": p50a, "p99_ms": p99a, "idle_requests": len(idle.lat[e]) + idle.errors[e],
                          "idle_errors": idle.errors[e], "idle_p50_ms": p50b, "idle_p99_ms": p99b,
                          "p99_x_idle": p99a / p99b if p99a and p99b else None,
                          "req_per_s": len(loaded.lat[e]) / seconds}
        rows.append([e, r["requests"], r["errors"], r["req_per_s"], r["p50_ms"], r["p99_ms"], r["idle_p50_ms"],
                     r["idle_p99_ms"], r["p99_x_idle"]])
    return rows, results


def print_report(args, rows: list, phases: list, ingest: dict, state: dict) -> bool:
    """The endpoint, ingest and CPU tables; whether ingest kept real time."""
    loaded, idle = phases
    print(f"\nbench_serve: {args.clients} clients (+1 SSE stream each), {args.sources} live {args.width}x{args.height} "
          f"sources at {args.source_fps} fps sampled at {args.fps} fps, {args.seconds:g} s loaded + "
          f"{args.idle_seconds:g} s idle, think {args.think_s:g} s, {args.http_client} HTTP client")
    print_table(["endpoint", "requests", "errors", "req/s", "p50 ms", "p99 ms", "idle p50", "idle p99", "p99 x idle"],
                rows)
    print()
    print_table(["camera", "x realtime", "lag end s", "lag growth s/s", "dropped", "states"],
                [[cam, f["x_realtime"], f["lag_end_s"], f["lag_slope"], f["dropped"], ",".join(f["states"])]
                 for cam, f in sorted(ingest.items())])
    keeps = bool(ingest) and all(f["x_realtime"] is not None and f["x_realtime"] >= 0.95 and
                                 (f["lag_slope"] is None or f["lag_slope"] < 0.05) for f in ingest.values())
    print()
    print_table(["phase", "server cores", "client cores", "machine cores busy", "of"],
                [[ph.name, ph.cpu.get("server_cores"), ph.cpu.get("client_cores"), ph.cpu.get("machine_cores"),
                  ph.cpu.get("machine_cpus")] for ph in phases])
    print(f"\ningest keeps real time: {'yes' if keeps else 'no'}; SSE streams opened {state['sse_open']} of "
          f"{args.clients}, dropped {state['sse_dropped']}; errors by kind: "
          f"{dict(loaded.error_kinds, **{'idle ' + k: v for k, v in idle.error_kinds.items()}) or 'none'}")
    return keeps


def main(argv=None) -> int:
    args = parse_args(argv)
    from PIL import Image

    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    cams = write_sources(args, work)
    q = io.BytesIO()
    Image.new("RGB", (320, 180), (120, 80, 40)).save(q, format="JPEG")
    port = free_port()
    server = start_server(args, work, port)
    try:
        phases, ingest, state = asyncio.run(run(args, f"http://127.0.0.1:{port}", cams, q.getvalue(), server.pid))
    finally:
        stop_server(server)
    rows, results = endpoint_rows(*phases, args.seconds)
    keeps = print_report(args, rows, phases, ingest, state)
    path = write_json(args.json, {"args": vars(args), "endpoints": results, "ingest": ingest,
                                  "ingest_keeps_real_time": keeps, "sse_opened": state["sse_open"],
                                  "sse_dropped": state["sse_dropped"], "errors_by_kind": phases[0].error_kinds,
                                  "cpu": {ph.name: ph.cpu for ph in phases},
                                  "machine": machine_info()})
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
