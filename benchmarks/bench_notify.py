"""What MQTT and webhooks cost the engine: the time an alert's handover takes on the thread that
fired it, and what reaches a live destination, how fast and how late.

A ``Notifier`` over a stand-in engine whose alerts come from the engine's own ``AlertHub``
(reason/monitor.py: what a monitor's thread calls for each stored alert) is handed ``--alerts``
alerts, one every ``--every-ms``. Destinations, one per row: none (the baseline: the notifier
with no sink), MQTT to a live mosquitto on loopback, MQTT to a port where nothing listens, a
webhook to a live loopback receiver, a webhook to a dead port (its tries backing off). Per row:
the handover's p50 and p99 on the firing thread (``AlertHub.publish``) and its ratio to the
baseline's p50, then events delivered, dropped (a full queue: ``--queue-max``) and the
delivery latency p50/p99 (alert created -> the destination has it) for the live ones.

Target: the handover stays within a few microseconds whatever the destination does (a dead
broker or receiver costs the firing thread nothing more than a live one): ratio to baseline
<= 3 at p50 on every row.

    python benchmarks/bench_notify.py                       # 2000 alerts, one every 0.5 ms
    python benchmarks/bench_notify.py --alerts 500 --every-ms 2

Prints the table and writes benchmarks/results/bench_notify.json. Needs mosquitto and paho-mqtt.
"""
from __future__ import annotations

import argparse
import http.server
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import percentiles, print_table, write_json

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vam_engine.config import MqttConfig  # noqa: E402
from vam_engine.memory import Alert  # noqa: E402
from vam_engine.notify import MqttSink, Notifier, WebhookSink  # noqa: E402
from vam_engine.reason.monitor import AlertHub  # noqa: E402


class StandIn:
    """What the notifier reads of an engine: alerts from a real AlertHub, no monitors, no cameras."""

    def __init__(self):
        self.hub = AlertHub()

    def subscribe_alerts(self, callback=None):
        return self.hub.subscribe(callback)

    def monitors(self, include_ended=False):
        return []

    def status(self):
        return []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(workdir: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    conf = workdir / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    proc = subprocess.Popen([shutil.which("mosquitto") or "/usr/sbin/mosquitto", "-c", str(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, port
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("mosquitto did not start")


class Arrivals:
    """When each alert id reached the destination (wall clock)."""

    def __init__(self):
        self.at: dict[int, float] = {}
        self.lock = threading.Lock()

    def saw(self, alert_id: int) -> None:
        with self.lock:
            self.at.setdefault(alert_id, time.time())


def mqtt_listener(port: int, arrivals: Arrivals):
    import json

    import paho.mqtt.client as mqtt

    ready = threading.Event()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-listener")
    c.on_connect = lambda cl, u, f, rc, p=None: cl.subscribe("vam/+/alerts", qos=1)
    c.on_subscribe = lambda *a: ready.set()
    c.on_message = lambda cl, u, m: arrivals.saw(json.loads(m.payload)["alert_id"])
    c.connect("127.0.0.1", port)
    c.loop_start()
    ready.wait(10)
    return c


def http_receiver(arrivals: Arrivals):
    import json

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            arrivals.saw(json.loads(body)["alert_id"])
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def run_row(name: str, sinks, args, arrivals: Arrivals | None) -> dict:
    eng = StandIn()
    notifier = Notifier(eng, sinks, poll_s=1.0).start()
    time.sleep(0.5)  # connected (the live ones) before the first alert
    handover, created = [], {}
    for k in range(1, args.alerts + 1):
        now = time.time()
        alert = Alert(k, "mon_bench", "cam", float(k), None, 0.9, "a bright square", (k,), (), now)
        created[k] = now
        t0 = time.perf_counter()
        eng.hub.publish(alert)
        handover.append(time.perf_counter() - t0)
        time.sleep(args.every_ms / 1000)
    if arrivals is not None:
        deadline = time.monotonic() + 30
        while len(arrivals.at) < args.alerts and time.monotonic() < deadline:
            time.sleep(0.05)
    stats = [s.stats() for s in sinks]
    notifier.close(0.5)
    lat = [arrivals.at[k] - created[k] for k in arrivals.at] if arrivals is not None else []
    p50, p99 = percentiles(handover, 50, 99, scale=1e6)
    d50, d99 = percentiles(lat, 50, 99, scale=1e3) if lat else (None, None)
    return {"destination": name, "handover_p50_us": p50, "handover_p99_us": p99,
            "delivered": len(arrivals.at) if arrivals is not None else 0,
            "dropped": sum(s.dropped for s in stats), "dead_letters": sum(s.dead_letters for s in stats),
            "delivery_p50_ms": d50, "delivery_p99_ms": d99}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alerts", type=int, default=2000)
    ap.add_argument("--every-ms", type=float, default=0.5)
    ap.add_argument("--queue-max", type=int, default=1000)
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        broker, port = start_broker(Path(tmp))
        try:
            rows.append(run_row("none (baseline)", [], args, None))
            arrivals = Arrivals()
            listener = mqtt_listener(port, arrivals)
            rows.append(run_row("mqtt, live broker", [MqttSink(MqttConfig(
                url=f"mqtt://127.0.0.1:{port}", queue_max=args.queue_max, discovery=False))], args, arrivals))
            listener.disconnect()
            rows.append(run_row("mqtt, no broker", [MqttSink(MqttConfig(
                url=f"mqtt://127.0.0.1:{free_port()}", queue_max=args.queue_max))], args, None))
        finally:
            broker.terminate()
            broker.wait(10)
    arrivals = Arrivals()
    srv = http_receiver(arrivals)
    url = f"http://127.0.0.1:{srv.server_address[1]}/hook"
    rows.append(run_row("webhook, live receiver", [WebhookSink(url, b"k", queue_max=args.queue_max)], args, arrivals))
    srv.shutdown()
    rows.append(run_row("webhook, dead port", [WebhookSink(f"http://127.0.0.1:{free_port()}/h", b"k", backoff_s=0.5,
                                                           queue_max=args.queue_max)], args, None))
    base = rows[0]["handover_p50_us"]
    for r in rows:
        r["x_baseline_p50"] = r["handover_p50_us"] / base if base else None
    print_table(["destination", "handover p50 us", "p99 us", "x baseline", "delivered", "dropped", "dead",
                 "delivery p50 ms", "p99 ms"],
                [[r["destination"], r["handover_p50_us"], r["handover_p99_us"], r["x_baseline_p50"], r["delivered"],
                  r["dropped"], r["dead_letters"], r["delivery_p50_ms"], r["delivery_p99_ms"]]
                 for r in rows])
    path = write_json("bench_notify", {"args": vars(args), "rows": rows,
                                       "target": "handover p50 <= 3x the baseline's on every row"})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
