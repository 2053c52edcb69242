"""``vam-engine serve --mqtt URL --webhook URL``: the running service announces itself on a real
broker whose account the URL names, shows the deliveries in /metrics, and says "offline" when
stopped; the password and the webhook secret appear in no output. A webhook without a secret,
a URL that is not MQTT, a missing CA file and --cluster are refused before anything loads."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from support.broker import Broker, Listener
from support.net import free_port
from support.waiting import wait_for
from support.webhook_receiver import Receiver
from vam_engine.cli import main

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 180
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.mqtt
def test_serve_with_mqtt_and_a_webhook_announces_counts_and_says_offline(tmp_path):
    broker = Broker(tmp_path / "broker", users={"vam": "TOPSECRET-pw", "reader": "r"}).start()
    receiver = Receiver()
    ls = Listener(broker.port, "vam/available", username="reader", password="r")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VAM_WEBHOOKS__SECRET": "TOPSECRET-key", "VAM_RETENTION__ENABLED": "0"}
    p = subprocess.Popen([sys.executable, "-m", "vam_engine.cli", "serve", "--store", str(tmp_path / "store"),
                          "--port", str(port), "--device", "cpu", "--log-level", "debug",
                          "--mqtt", f"mqtt://vam:TOPSECRET-pw@127.0.0.1:{broker.port}", "--webhook", receiver.url],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ls.wait("online", "vam/available", lambda m: m.payload == b"online", timeout=120)
        text = wait_for("metrics", lambda: httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text, 60,
                        ignore=(httpx.HTTPError,))
        lines = text.splitlines()
        assert 'vam_notify_connected{sink="mqtt"} 1' in lines and 'vam_notify_dead_letters_total{sink="webhook-0"} 0' in lines
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        ls.wait("offline once stopped", "vam/available", lambda m: m.payload == b"offline")
        assert "TOPSECRET" not in out + err + text
        assert f"alerts, replies and camera states to MQTT broker 127.0.0.1:{broker.port}, webhook 0 (127.0.0.1)" in err
    finally:
        if p.poll() is None:
            p.kill()
        ls.close(), receiver.close(), broker.stop()


@pytest.mark.parametrize("flags, says", [
    (["--webhook", "http://127.0.0.1:9/x"], "without webhooks.secret"),
    (["--mqtt", "http://vam:TOPSECRET@127.0.0.1"], "mqtt.url must be mqtt://"),
    (["--mqtt", "mqtts://127.0.0.1", "--mqtt-ca", "/no/such/ca.pem"], "--mqtt-ca /no/such/ca.pem: no such file"),
    (["--mqtt", "mqtt://127.0.0.1", "--cluster", "local"], "with --cluster they are not available"),
])
def test_serve_refuses_bad_notify_flags_before_anything_loads(tmp_path, capsys, flags, says):
    assert main(["serve", "--store", str(tmp_path / "s"), "--device", "cpu", *flags]) == 2
    err = capsys.readouterr().err
    assert says in err and "TOPSECRET" not in err
    assert not (tmp_path / "s").exists()  # refused before the engine made a store
