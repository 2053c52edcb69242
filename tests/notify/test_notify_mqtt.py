"""MQTT against a real broker (Debian's mosquitto, started and stopped here): a fired standing
request's alert arrives on ``vam/<camera>/alerts`` and the monitor's topic, after the Home
Assistant discovery configs of its camera and monitor, and its model-written reply follows on
``vam/<camera>/replies`` naming the alert; "online" is retained and the last will says
"offline" when the process dies; camera states are retained and a removed camera's entities
are cleared; after the broker restarts on the same port the engine reconnects, announces
itself again and what fired meanwhile and then a new alert arrive; a broker with accounts
admits the URL's credentials and never sees them logged."""
import json
import logging
import os
import signal
import subprocess
import time
import sys
from pathlib import Path

import pytest

from support.broker import Broker, Listener
from support.monitors import judge, push_stream
from support.net import free_port
from support.sessions import CFG, push, session_model
from support.waiting import wait_for
from vam_engine.config import EngineConfig
from vam_engine.engine import Engine
from vam_engine.llm import ScriptedLLM
from vam_engine.notify import Notifier, make_notifier, object_id, topic_level

pytestmark = [pytest.mark.mqtt, pytest.mark.usefixtures("watchdog")]
WATCHDOG_S = 120
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path / "broker").start()
    yield b
    b.stop()


@pytest.fixture
def listen():
    made = []

    def make(port, topic="#", **kw):
        made.append(Listener(port, topic, **kw))
        return made[-1]
    yield make
    for ls in made:
        ls.close()


@pytest.fixture
def running(tmp_path):
    """``running(engine config dict, llm script)``: an Engine and its started Notifier; both closed after."""
    made = []

    def make(cfg: dict, script):
        eng = Engine(tmp_path / f"store{len(made)}", cfg, device="cpu", llm=ScriptedLLM(script))
        notifier = make_notifier(eng, eng.config)
        made.append((eng, notifier))
        return eng, notifier.start()
    yield make
    for eng, notifier in made:
        notifier.close(2)
        eng.close()


def mqtt_cfg(broker, **kw) -> dict:
    return {**CFG, "mqtt": {"url": f"mqtt://127.0.0.1:{broker.port}", "state_poll_s": 0.1, **kw}}


def test_an_alert_and_its_reply_arrive_after_the_discovery_of_camera_and_monitor(broker, listen, running):
    ls = listen(broker.port)
    eng, notifier = running(mqtt_cfg(broker), session_model())
    online = ls.wait("online", "vam/available", lambda m: m.payload == b"online")
    engine_cfg = ls.wait("the engine's entity", "homeassistant/binary_sensor/vam_engine/engine/config").json()
    assert engine_cfg["state_topic"] == "vam/available" and engine_cfg["device_class"] == "connectivity"
    push(eng, "cam", 0.0, 1.0)
    watch = eng.turn("Tell me when a red square appears.", session="alice")
    mid = watch.monitor.monitor_id
    monitor_topic = f"homeassistant/event/vam_engine/monitor_{object_id(mid)}/config"
    monitor_cfg = ls.wait("the monitor's discovery", monitor_topic, lambda m: m.payload).json()
    assert monitor_cfg["name"] == "a red square appears" and monitor_cfg["event_types"] == ["alert"]
    assert monitor_cfg["state_topic"] == f"vam/monitors/{topic_level(mid)}/alerts"
    assert monitor_cfg["availability_topic"] == "vam/available" and monitor_cfg["unique_id"].startswith("vam_engine_")

    push(eng, "cam", 1.0, 10.0, red_from=7.0)
    (alert,) = eng.alerts()
    got = ls.wait("the alert", "vam/cam/alerts")
    body = got.json()
    assert body["event_type"] == "alert" and body["alert_id"] == alert.alert_id and body["monitor_id"] == mid
    assert body["camera_id"] == "cam" and body["condition"] == "a red square appears"
    assert body["observed"] == alert.observed and body["t"] == alert.t and body["confidence"] == alert.confidence
    assert body["frames"] == [f"/api/alerts/{alert.alert_id}/frames/{k}" for k in range(len(alert.frame_paths))]
    assert not any(p in got.payload.decode() for p in alert.frame_paths)  # no path on the server
    assert ls.wait("the monitor's alert", monitor_cfg["state_topic"]).json() == body
    camera_cfgs = {t: ls.wait("camera discovery", t) for t in ("homeassistant/sensor/vam_engine/cam_state/config",
                                                                "homeassistant/event/vam_engine/cam_alerts/config")}
    assert all(m.at <= got.at for m in camera_cfgs.values()) and online.at <= got.at
    sensor = camera_cfgs["homeassistant/sensor/vam_engine/cam_state/config"].json()
    assert sensor["state_topic"] == "vam/cam/state" and sensor["value_template"] == "{{ value_json.state }}"
    assert camera_cfgs["homeassistant/event/vam_engine/cam_alerts/config"].json()["state_topic"] == "vam/cam/alerts"

    reply = ls.wait("the reply", "vam/cam/replies")
    turn = eng.session("alice").turns[-1]
    assert reply.at >= got.at and reply.json()["alert_id"] == alert.alert_id and reply.json()["text"] == turn.text
    assert reply.json()["session_id"] == "alice" and reply.json()["event_type"] == "reply"
    # the "once" request ended with its alert: its entity goes (an empty retained config)
    ls.wait("the ended monitor's config cleared", monitor_topic, lambda m: m.payload == b"")

    late = listen(broker.port)  # what a client connecting now is told: the retained messages
    late.wait("online, retained", "vam/available", lambda m: m.retain and m.payload == b"online")
    late.wait("camera discovery, retained", "homeassistant/sensor/vam_engine/cam_state/config", lambda m: m.retain)
    assert late.on(monitor_topic) == [] and late.on("vam/cam/alerts") == []  # an alert is not retained
    lines = notifier.metric_lines()
    assert 'vam_notify_sent_total{sink="mqtt"}' in "\n".join(lines) and 'vam_notify_connected{sink="mqtt"} 1' in lines
    notifier.close(2)
    ls.wait("offline at close", "vam/available", lambda m: m.payload == b"offline")


def test_a_monitor_that_fires_and_ends_between_two_polls_is_named_and_its_entity_cleared(broker, listen, running):
    ls = listen(broker.port)
    eng, _ = running(mqtt_cfg(broker, state_poll_s=60), session_model())  # no poll after the first one
    push(eng, "cam", 0.0, 1.0)
    mid = eng.turn("Tell me when a red square appears.", session="alice").monitor.monitor_id
    push(eng, "cam", 1.0, 10.0, red_from=7.0)
    alert = ls.wait("the alert", "vam/cam/alerts")
    assert alert.json()["condition"] == "a red square appears" and alert.json()["monitor_id"] == mid
    topic = f"homeassistant/event/vam_engine/monitor_{object_id(mid)}/config"
    cleared = ls.wait("its config cleared", topic, lambda m: m.payload == b"")
    (made,) = [m for m in ls.on(topic) if m.payload]
    assert made.json()["name"] == "a red square appears" and made.at <= alert.at <= cleared.at


def test_camera_states_are_retained_and_a_removed_camera_is_cleared(broker, listen, running):
    ls = listen(broker.port)
    eng, _ = running(mqtt_cfg(broker), judge())
    eng.add_camera("gone", f"http://127.0.0.1:{free_port()}/live.ts", max_retries=2, backoff_s=0.5,
                   backoff_max_s=0.5)  # about a second connecting: the 0.1 s poll sees it
    off = ls.wait("the camera offline", "vam/gone/state", lambda m: m.payload and m.json()["state"] == "offline")
    st = off.json()
    assert st["event_type"] == "state" and st["camera_id"] == "gone" and st["reconnects"] == 2
    assert st["error"].startswith("gave up after 2 retries")
    states = [m.json()["state"] for m in ls.on("vam/gone/state")]
    assert states[0] == "connecting" and states[-1] == "offline"
    ls.wait("its discovery", "homeassistant/sensor/vam_engine/gone_state/config", lambda m: m.payload)
    late = listen(broker.port, "vam/gone/state")
    assert late.wait("the state, retained", "vam/gone/state", lambda m: m.retain).json()["state"] == "offline"
    eng.remove_camera("gone")
    for topic in ("vam/gone/state", "homeassistant/sensor/vam_engine/gone_state/config",
                  "homeassistant/event/vam_engine/gone_alerts/config"):
        ls.wait(f"{topic} cleared", topic, lambda m: m.payload == b"" and m.retain is False)


def test_after_the_broker_restarts_on_the_same_port_the_engine_reconnects_and_alerts_arrive(tmp_path, listen, running):
    broker = Broker(tmp_path / "broker", persistent=True).start()  # the listener's session outlives a restart
    try:
        ls = listen(broker.port, session="restart-listener")
        eng, notifier = running(mqtt_cfg(broker, backoff_s=1, backoff_max_s=2), judge())
        sink = notifier.sinks[0]
        mon = eng.watch("a bright square", "cam", mode="repeat", repeat_gap_s=1.0)
        push_stream(eng, "cam", 0.0, 6.0, [(2.0, 4.0)])
        first = ls.wait("the first alert", "vam/cam/alerts").json()
        assert first["monitor_id"] == mon.monitor_id and first["condition"] == "a bright square"

        broker.stop()
        wait_for("the sink to notice the broker is gone", lambda: not sink.stats().connected, 10)
        push_stream(eng, "cam", 6.0, 12.0, [(8.0, 10.0)])  # fires while the broker is away: held in the outbox
        assert len(eng.alerts()) == 2
        wait_for("the alert waiting in the outbox", lambda: sink.stats().queued == 1, 5)
        restarted = time.monotonic()
        broker.start()
        wait_for("the sink to reconnect", lambda: sink.stats().connected and sink.stats().connections == 2, 15)
        held = ls.wait("the alert held while away", "vam/cam/alerts",
                       lambda m: m.json()["alert_id"] == eng.alerts()[1].alert_id)
        push_stream(eng, "cam", 12.0, 18.0, [(14.0, 16.0)])
        new = ls.wait("a new alert after the restart", "vam/cam/alerts",
                      lambda m: m.json()["alert_id"] == eng.alerts()[-1].alert_id)
        assert len(eng.alerts()) == 3 and new.at >= held.at
        # on reconnecting the engine announced itself again: online, discovery, before what waited
        # (the broker told the session the last will it sent going down, then its retained value)
        again = [m for m in ls.on("vam/available") if m.at >= restarted and not m.retain]
        assert any(m.payload == b"online" and m.at <= held.at for m in again) and again[-1].payload == b"online"
        cfg = f"homeassistant/event/vam_engine/monitor_{object_id(mon.monitor_id)}/config"
        assert any(m.at >= restarted and m.json()["name"] == "a bright square" for m in ls.on(cfg))
        assert any(m.at >= restarted for m in ls.on("homeassistant/event/vam_engine/cam_alerts/config"))
        assert sink.stats().dropped == 0 and sink.stats().sent >= 3
    finally:
        broker.stop()


def test_a_broker_that_comes_up_after_the_engine_gets_what_waited(tmp_path, listen, running):
    b = Broker(tmp_path / "late-broker")  # not started yet
    try:
        eng, notifier = running(mqtt_cfg(b, backoff_s=1, backoff_max_s=1), judge())
        eng.watch("a bright square", "cam", mode="repeat", repeat_gap_s=1.0)
        push_stream(eng, "cam", 0.0, 6.0, [(2.0, 4.0)])
        sink = notifier.sinks[0]
        wait_for("the monitor and its alert waiting", lambda: sink.stats().queued == 2 and not sink.stats().connected, 5)
        b.start()
        ls = listen(b.port)
        got = ls.wait("the alert once the broker is up", "vam/cam/alerts", timeout=20)
        assert got.json()["alert_id"] == eng.alerts()[0].alert_id and sink.stats().connections == 1
    finally:
        b.stop()


LAST_WILL_SCRIPT = """
import sys, time
from vam_engine.config import MqttConfig
from vam_engine.notify import MqttSink
sink = MqttSink(MqttConfig(url=sys.argv[1]))
sink.start()
while not sink.stats().connected:
    time.sleep(0.05)
print("connected", flush=True)
time.sleep(600)
"""


def test_the_last_will_says_offline_when_the_process_dies(broker, listen, tmp_path):
    ls = listen(broker.port, "vam/available")
    script = tmp_path / "sink.py"
    script.write_text(LAST_WILL_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, str(script), f"mqtt://127.0.0.1:{broker.port}"], stdout=subprocess.PIPE,
                         env=env, text=True)
    try:
        assert p.stdout.readline().strip() == "connected"
        ls.wait("online", "vam/available", lambda m: m.payload == b"online")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    ls.wait("the last will", "vam/available", lambda m: m.payload == b"offline")
    late = listen(broker.port, "vam/available")
    late.wait("offline, retained", "vam/available", lambda m: m.retain and m.payload == b"offline")


def test_a_broker_with_accounts_admits_the_urls_credentials_and_they_are_never_logged(tmp_path, listen, caplog):
    b = Broker(tmp_path / "broker", users={"vam": "TOPSECRET-pw", "reader": "r"}).start()
    try:
        ls = listen(b.port, username="reader", password="r")
        good = EngineConfig.load(mqtt={"url": f"mqtt://vam:TOPSECRET-pw@127.0.0.1:{b.port}"})
        assert "TOPSECRET" not in repr(good) and good.mqtt.username == "vam" and "@" not in good.mqtt.url
        bad = EngineConfig.load(mqtt={"url": f"mqtt://127.0.0.1:{b.port}", "username": "vam",
                                      "password": "TOPSECRET-wrong", "client_id": "wrong", "backoff_s": 1})
        caplog.set_level(logging.DEBUG, logger="vam_engine")
        with Engine(tmp_path / "s", CFG, device="cpu") as eng:
            good_n, bad_n = Notifier(eng, make_notifier(eng, good).sinks), Notifier(eng, make_notifier(eng, bad).sinks)
            good_n.start(), bad_n.start()
            try:
                ls.wait("online", "vam/available", lambda m: m.payload == b"online")
                wait_for("the refusal logged", lambda: "refused the connection" in caplog.text, 10)
                assert not bad_n.sinks[0].stats().connected and bad_n.sinks[0].stats().connections == 0
                text = "\n".join(good_n.metric_lines() + bad_n.metric_lines())
            finally:
                good_n.close(2), bad_n.close(2)
        assert "TOPSECRET" not in caplog.text and "TOPSECRET" not in text
    finally:
        b.stop()


def test_topics_keep_distinct_ids_distinct_and_the_config_refuses_bad_urls():
    assert topic_level("cam") == "cam" and topic_level("a/b") != topic_level("a_b") != topic_level("a+b")
    assert "/" not in topic_level("a/b") and "#" not in topic_level("x#") and "+" not in topic_level("+")
    assert object_id("front door") != object_id("front_door") and object_id("ok-1_2") == "ok-1_2"
    for bad, what in (({"url": "http://h"}, "mqtt.url must be mqtt://"), ({"url": "mqtt://h/x"}, "no path"),
                      ({"url": "mqtt://h", "topic_prefix": "a/#"}, "topic_prefix"),
                      ({"url": "mqtt://h", "node_id": "a b"}, "node_id"), ({"url": "mqtt://h", "qos": 3}, "qos")):
        with pytest.raises(Exception, match="invalid config") as e:
            EngineConfig.load(mqtt=bad)
        assert what in str(e.value), str(e.value)
    assert json.loads(json.dumps(EngineConfig.load(mqtt={"url": "mqtts://h"}).mqtt.url)) == "mqtts://h:8883"


def test_mqtts_checks_the_brokers_certificate_against_the_given_ca(tmp_path, listen):
    from support.broker import tls_files
    from vam_engine.notify import MqttSink

    ca, cert, key = tls_files(tmp_path / "tls")
    b = Broker(tmp_path / "broker", tls=(cert, key)).start()
    trusted = MqttSink(EngineConfig.load(mqtt={"url": f"mqtts://127.0.0.1:{b.port}", "ca": str(ca)}).mqtt)
    # the system's CAs do not know the test CA: refused, and it keeps trying
    untrusted = MqttSink(EngineConfig.load(mqtt={"url": f"mqtts://127.0.0.1:{b.port}", "client_id": "untrusted"}).mqtt)
    try:
        ls = listen(b.port, "vam/available", tls_ca=str(ca))
        trusted.start(), untrusted.start()
        ls.wait("online over TLS", "vam/available", lambda m: m.payload == b"online")
        assert trusted.stats().connected and trusted.stats().connections == 1
        time.sleep(1.5)
        assert not untrusted.stats().connected and untrusted.stats().connections == 0
    finally:
        trusted.close(2), untrusted.close(2)
        b.stop()
