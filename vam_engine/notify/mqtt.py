"""Events published to an MQTT broker, with Home Assistant discovery: ``MqttSink(MqttConfig)``.

The topic tree (PREFIX is ``mqtt.topic_prefix``, "vam"; a camera's or monitor's id is one topic
level, its ``/ + #`` and NUL made ``_`` with a short hash of the id added, so no two ids share
a topic; the payload carries the exact id):

    PREFIX/available                    "online" (retained) while connected; the last will "offline"
    PREFIX/<camera>/state               the camera's state (JSON, retained)
    PREFIX/<camera>/alerts              each alert on the camera (JSON)
    PREFIX/<camera>/replies             each reply to a fired standing request, naming its alert
    PREFIX/monitors/<monitor>/alerts    each alert of that monitor (the monitor's own entity)

Discovery (``mqtt.discovery``; retained configs under ``mqtt.discovery_prefix``, NODE is
``mqtt.node_id``): ``binary_sensor/NODE/engine/config`` (the engine connected), for each camera
``sensor/NODE/<camera>_state/config`` and ``event/NODE/<camera>_alerts/config``, for each
active monitor ``event/NODE/monitor_<monitor>/config``; an ended monitor's and a removed
camera's configs are cleared (an empty retained message), so their entities go.

One thread takes events from the bounded outbox (notify/outbox.py) and publishes them while
connected; paho's network thread connects, and after a loss reconnects waiting ``backoff_s``
doubling to ``backoff_max_s``. On every (re)connection the sink first publishes "online", the
discovery configs and the last state of each camera (a restarted broker without persistence
has lost its retained messages), then what waited in the outbox. The password is never logged."""
from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time

from ..config import MqttConfig, mqtt_url_parts
from .events import Event, SinkStats
from .outbox import Outbox

log = logging.getLogger(__name__)
ONLINE, OFFLINE = "online", "offline"
_LEVEL_UNSAFE = re.compile(r"[/+#\x00]")
_OBJECT_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _safe(text: str, unsafe: re.Pattern, limit: int) -> str:
    """``text`` with what ``unsafe`` matches made ``_``, and a hash of the exact text when that
    changed it (or it had to be cut): distinct ids stay distinct."""
    clean = unsafe.sub("_", text)[:limit]
    if clean == text and text:
        return text
    return f"{clean}_{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def topic_level(ident: str) -> str:
    """A camera or monitor id as one topic level."""
    return _safe(ident, _LEVEL_UNSAFE, 200)


def object_id(ident: str) -> str:
    """An id as Home Assistant's discovery object id ([A-Za-z0-9_-])."""
    return _safe(ident, _OBJECT_UNSAFE, 64)


class Topics:
    """Every topic the sink publishes on (module doc)."""

    def __init__(self, prefix: str, discovery_prefix: str, node: str):
        self.prefix, self.discovery_prefix, self.node = prefix, discovery_prefix, node
        self.available = f"{prefix}/available"

    def camera(self, camera_id: str, what: str) -> str:  # what: state | alerts | replies
        return f"{self.prefix}/{topic_level(camera_id)}/{what}"

    def monitor_alerts(self, monitor_id: str) -> str:
        return f"{self.prefix}/monitors/{topic_level(monitor_id)}/alerts"

    def config(self, component: str, obj: str) -> str:
        return f"{self.discovery_prefix}/{component}/{self.node}/{obj}/config"


class Discovery:
    """Home Assistant MQTT discovery: (topic, config) of the engine, a camera, a monitor."""

    def __init__(self, topics: Topics):
        self.t = topics
        node = topics.node
        self.engine_device = {"identifiers": [f"vam_engine_{node}"], "name": f"vam_engine {node}",
                              "manufacturer": "vam_engine", "model": "streaming visual memory"}
        self._available = {"availability_topic": topics.available, "payload_available": ONLINE,
                           "payload_not_available": OFFLINE}

    def engine(self) -> list[tuple[str, dict]]:
        node = self.t.node
        return [(self.t.config("binary_sensor", "engine"), {
            "name": "Connected", "unique_id": f"{node}_engine", "state_topic": self.t.available,
            "payload_on": ONLINE, "payload_off": OFFLINE, "device_class": "connectivity",
            "device": self.engine_device})]

    def camera(self, camera_id: str) -> list[tuple[str, dict]]:
        node, obj = self.t.node, object_id(camera_id)
        device = {"identifiers": [f"{node}_camera_{obj}"], "name": camera_id, "manufacturer": "vam_engine",
                  "model": "camera", "via_device": self.engine_device["identifiers"][0]}
        state = self.t.camera(camera_id, "state")
        return [(self.t.config("sensor", f"{obj}_state"), {
                    "name": "State", "unique_id": f"{node}_{obj}_state", "state_topic": state,
                    "value_template": "{{ value_json.state }}", "json_attributes_topic": state,
                    "icon": "mdi:cctv", "device": device, **self._available}),
                (self.t.config("event", f"{obj}_alerts"), {
                    "name": "Alert", "unique_id": f"{node}_{obj}_alerts",
                    "state_topic": self.t.camera(camera_id, "alerts"), "event_types": ["alert"],
                    "icon": "mdi:bell-alert", "device": device, **self._available})]

    def monitor(self, monitor_id: str, condition: str | None) -> list[tuple[str, dict]]:
        node, obj = self.t.node, object_id(monitor_id)
        name = (condition or monitor_id)[:100]
        return [(self.t.config("event", f"monitor_{obj}"), {
            "name": name, "unique_id": f"{node}_monitor_{obj}", "state_topic": self.t.monitor_alerts(monitor_id),
            "event_types": ["alert"], "icon": "mdi:eye", "device": self.engine_device, **self._available})]


class MqttSink:
    name = "mqtt"
    kinds = frozenset({"alert", "reply", "state", "monitor"})

    def __init__(self, config: MqttConfig):
        if config.url is None:
            raise ValueError("mqtt.url is not set: nothing to connect to")
        try:
            import paho.mqtt.client as mqtt
        except ImportError:
            raise ValueError("MQTT needs paho-mqtt: pip install 'vam_engine[mqtt]'") from None
        self.config = config
        self._tls, self._host, self._port, _, _ = mqtt_url_parts(config.url)
        self.where = f"MQTT broker {self._host}:{self._port}"
        self.topics = Topics(config.topic_prefix, config.discovery_prefix, config.node_id)
        self.discovery = Discovery(self.topics)
        self._outbox = Outbox(config.queue_max)
        self._stats = SinkStats(connected=False)
        self._lock = threading.Lock()
        self._connected = threading.Event()
        self._stop = threading.Event()
        self._generation = 0        # successful connections so far; the publisher announces each
        self._cameras: dict[str, dict | None] = {}  # camera -> its last state body (None: none yet)
        self._monitors: dict[str, str | None] = {}  # active monitor -> condition
        self._holding: Event | None = None  # taken from the outbox, waiting for the connection
        self._paho_dropped = 0
        self._queue_full_rc = mqtt.MQTT_ERR_QUEUE_SIZE
        self._thread: threading.Thread | None = None
        self._client = self._make_client(mqtt)

    def _make_client(self, mqtt):
        cfg = self.config
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=cfg.client_id or f"vam-engine-{cfg.node_id}")
        if cfg.username is not None:
            client.username_pw_set(cfg.username, cfg.password.get_secret_value() if cfg.password else None)
        if self._tls:
            import ssl

            client.tls_set(ca_certs=cfg.ca, cert_reqs=ssl.CERT_REQUIRED)
        client.will_set(self.topics.available, OFFLINE, qos=cfg.qos, retain=True)
        client.reconnect_delay_set(cfg.backoff_s, max(cfg.backoff_s, cfg.backoff_max_s))
        client.max_queued_messages_set(cfg.queue_max)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        return client

    # -- the engine's side ----------------------------------------------------------------------
    def offer(self, event: Event) -> bool:
        return not self._stop.is_set() and self._outbox.put(event)

    def stats(self) -> SinkStats:
        with self._lock:
            s = SinkStats(**vars(self._stats))
            s.dropped, s.connected = self._outbox.dropped + self._paho_dropped, self._connected.is_set()
            s.queued = len(self._outbox) + (self._holding is not None)
        return s

    def start(self) -> None:
        if self._thread is not None:
            return
        self._client.connect_async(self._host, self._port, keepalive=self.config.keepalive_s)
        self._client.loop_start()  # paho's network thread: connects, and reconnects with backoff
        self._thread = threading.Thread(target=self._run, name="vam-mqtt", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Publish what is queued (for up to ``timeout`` s while connected), then "offline", and disconnect."""
        if self._thread is not None:
            deadline = time.monotonic() + timeout
            while (len(self._outbox) or self._holding is not None) and self._connected.is_set() \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            self._stop.set()
            self._thread.join(timeout)
        if self._connected.is_set():
            info = self._client.publish(self.topics.available, OFFLINE, qos=self.config.qos, retain=True)
            try:
                info.wait_for_publish(min(timeout, 2.0))
            except (RuntimeError, ValueError):  # the connection went meanwhile: the last will says it
                pass
        self._client.disconnect()
        self._client.loop_stop()
        left = len(self._outbox) + (self._holding is not None)
        if left:
            log.warning("%s: %d events not published at close", self.where, left)

    # -- paho's callbacks (its network thread) --------------------------------------------------
    def _on_connect(self, client, userdata, flags, reason_code, properties=None) -> None:
        if reason_code.is_failure:
            log.warning("%s refused the connection: %s (trying again)", self.where, reason_code)
            return
        with self._lock:
            self._generation += 1
            self._stats.connections += 1
        log.info("connected to %s", self.where)
        self._connected.set()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties=None) -> None:
        was = self._connected.is_set()
        self._connected.clear()
        if was and not self._stop.is_set():
            log.warning("lost %s (%s); reconnecting", self.where, reason_code)

    # -- the publisher thread -------------------------------------------------------------------
    def _run(self) -> None:
        announced = 0
        while not self._stop.is_set():
            if self._holding is None:
                self._holding = self._outbox.get(timeout=0.2)
            if not self._connected.wait(0.2):
                continue  # what it holds waits with it: taken while connected, it goes out once connected again
            if announced != self._generation:
                announced = self._generation
                self._announce()
            event, self._holding = self._holding, None
            if event is not None:
                try:
                    self._publish_event(event)
                except Exception:  # noqa: BLE001 - a bug in one event must not stop the publisher
                    log.exception("%s: event %s not published", self.where, event.event_id)

    def _publish(self, topic: str, payload, retain: bool = False) -> None:
        data = payload if isinstance(payload, (str, bytes)) else json.dumps(payload, separators=(",", ":"), default=str)
        info = self._client.publish(topic, data, qos=self.config.qos, retain=retain)
        # NO_CONN: the connection went after the check; paho keeps a qos 1-2 message and sends it on
        # reconnecting. QUEUE_SIZE: paho's own queue (bounded by queue_max too) is full: dropped.
        if info.rc == self._queue_full_rc:
            with self._lock:
                self._paho_dropped += 1

    def _announce(self) -> None:
        """After a (re)connection: "online", the discovery configs, each camera's last state."""
        self._publish(self.topics.available, ONLINE, retain=True)
        if self.config.discovery:
            for topic, cfg in self.discovery.engine():
                self._publish(topic, cfg, retain=True)
        for cam, state in list(self._cameras.items()):
            self._discover_camera(cam)
            if state is not None:
                self._publish(self.topics.camera(cam, "state"), state, retain=True)
        for mid, condition in list(self._monitors.items()):
            self._discover_monitor(mid, condition)

    def _discover_camera(self, camera_id: str) -> None:
        if self.config.discovery:
            for topic, cfg in self.discovery.camera(camera_id):
                self._publish(topic, cfg, retain=True)

    def _discover_monitor(self, monitor_id: str, condition: str | None) -> None:
        if self.config.discovery:
            for topic, cfg in self.discovery.monitor(monitor_id, condition):
                self._publish(topic, cfg, retain=True)

    def _forget(self, configs: list[tuple[str, dict]]) -> None:
        if self.config.discovery:
            for topic, _ in configs:
                self._publish(topic, b"", retain=True)  # an empty retained config removes the entity

    def _publish_event(self, event: Event) -> None:
        body, cam = event.body, event.camera_id
        if event.kind == "monitor":
            return self._monitor(body)
        removed = event.kind == "state" and body.get("state") == "removed"
        if cam is not None and cam not in self._cameras and not removed:
            self._cameras[cam] = None
            self._discover_camera(cam)
        if event.kind == "state":
            if removed:
                self._cameras.pop(cam, None)
                self._forget(self.discovery.camera(cam))
                self._publish(self.topics.camera(cam, "state"), b"", retain=True)
            else:
                self._cameras[cam] = body
                self._publish(self.topics.camera(cam, "state"), body, retain=True)
        elif event.kind == "alert":
            mid = body.get("monitor_id")
            if mid is not None and mid not in self._monitors:  # an alert before its monitor was seen
                self._monitor({"monitor_id": mid, "condition": body.get("condition"), "active": True})
            self._publish(self.topics.camera(cam, "alerts"), event.json_bytes())
            if mid is not None:
                self._publish(self.topics.monitor_alerts(mid), event.json_bytes())
        elif event.kind == "reply" and cam is not None:
            self._publish(self.topics.camera(cam, "replies"), event.json_bytes())
        with self._lock:
            self._stats.sent += 1
        return None

    def _monitor(self, body: dict) -> None:
        mid = body["monitor_id"]
        if body.get("active"):
            if mid not in self._monitors or self._monitors[mid] != body.get("condition"):
                self._monitors[mid] = body.get("condition")
                self._discover_monitor(mid, body.get("condition"))
        elif mid in self._monitors:
            self._monitors.pop(mid)
            self._forget(self.discovery.monitor(mid, None))
