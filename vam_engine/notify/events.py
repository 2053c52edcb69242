"""What the engine tells the outside: alerts, replies to fired standing requests, camera states
and monitors, each as one ``Event`` whose ``body`` is the JSON message every sink sends as it
is (docs/integrations.md has the fields). Built from the engine's records here, once, so MQTT
and webhooks carry the same bytes.

Model-written text (an alert's observation, a reply) is untrusted: it travels as a JSON string
value, cut to ``MAX_TEXT`` characters, never as a topic, a header or markup. No field holds a
path on the server: an alert's frames are API paths (``/api/alerts/<id>/frames/<k>``) that a
client fetches from the service with its token."""
from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from typing import Protocol

from ..ingest import alert_clip_url

MAX_TEXT = 2000
KINDS = ("alert", "reply", "state", "monitor")
# a camera state's fields that make a change worth telling (as the WebSocket's camera_status)
STATE_KEY_FIELDS = ("state", "reconnects", "error")
STATE_FIELDS = ("state", "since", "reconnects", "error", "input_fps", "last_frame_t", "lag_s", "frames_dropped",
                "gaps")


@dataclass(frozen=True)
class Event:
    """One message: ``kind`` (one of KINDS), the camera it is about (None: a monitor's), an id
    that stays the same across retries, and the JSON ``body``."""

    kind: str
    camera_id: str | None
    event_id: str
    body: dict

    def json_bytes(self) -> bytes:
        return json.dumps(self.body, allow_nan=False, separators=(",", ":"), default=str).encode()


class EventSink(Protocol):
    """Where events go (MQTT, a webhook): ``offer`` never blocks (False: the sink's queue was
    full and the event is dropped, counted); the sink delivers on its own thread."""

    name: str                   # the metric label: "mqtt", "webhook-0", ...
    where: str                  # what a log line names: "MQTT broker host:port", "webhook 0 (host)"; no secret
    kinds: frozenset[str]       # the kinds it takes

    def offer(self, event: Event) -> bool: ...
    def start(self) -> None: ...
    def close(self, timeout: float) -> None: ...
    def stats(self) -> "SinkStats": ...


@dataclass
class SinkStats:
    """Counts since the sink started; ``connected`` None where a sink has no connection."""

    sent: int = 0
    dropped: int = 0            # offered while the queue was full
    retries: int = 0
    dead_letters: int = 0       # given up after its tries (or refused for good by the receiver)
    queued: int = 0
    connected: bool | None = None
    connections: int = 0        # successful (re)connections


def _text(s) -> str | None:
    return None if s is None else str(s)[:MAX_TEXT]


def alert_event(alert, condition: str | None = None) -> Event:
    """An Alert (memory records) as the message ``alert``; ``condition``: its monitor's, when known."""
    n = len(alert.frame_paths or ())
    body = {"event_type": "alert", "event_id": f"alert-{alert.alert_id}", "alert_id": alert.alert_id,
            "monitor_id": alert.monitor_id, "condition": _text(condition), "camera_id": alert.camera_id,
            "t": alert.t, "t_abs": alert.t_abs, "confidence": alert.confidence, "observed": _text(alert.observed),
            "created_at": alert.created_at, "moment_ids": list(alert.moment_ids or ()),
            "frames": [f"/api/alerts/{alert.alert_id}/frames/{k}" for k in range(n)],
            "clip": alert_clip_url(alert.camera_id, alert.t)}
    return Event("alert", alert.camera_id, body["event_id"], body)


def reply_event(turn) -> Event:
    """A session's reply turn (kind "reply", the model's words to the person who asked) as the
    message ``reply``, naming the alert it answers."""
    camera = turn.evidence[0].camera_id if turn.evidence else None
    body = {"event_type": "reply", "event_id": f"reply-{turn.turn_id}", "alert_id": turn.alert_id,
            "monitor_id": turn.monitor_id, "session_id": turn.session_id, "camera_id": camera,
            "text": _text(turn.text), "t": turn.t, "turn_id": turn.turn_id, "created_at": turn.wall}
    return Event("reply", camera, body["event_id"], body)


def state_event(camera_id: str, status: dict | None, at: float) -> Event:
    """A live camera's state (CameraStatus.to_json(); None: the camera was removed)."""
    fields = {k: (status or {}).get(k) for k in STATE_FIELDS}
    if status is None:
        fields["state"] = "removed"
    fields["error"] = _text(fields["error"])
    for k, v in fields.items():  # JSON has no NaN or infinity
        if isinstance(v, float) and not math.isfinite(v):
            fields[k] = None
    body = {"event_type": "state", "event_id": f"state-{uuid.uuid4().hex[:16]}", "camera_id": camera_id,
            **fields, "created_at": at}
    return Event("state", camera_id, body["event_id"], body)


def monitor_event(monitor_id: str, condition: str | None, active: bool, at: float, cameras=None) -> Event:
    """A monitor started (``active``) or ended: what discovery turns into an entity (or removes)."""
    body = {"event_type": "monitor", "event_id": f"monitor-{uuid.uuid4().hex[:16]}", "monitor_id": monitor_id,
            "condition": _text(condition), "cameras": list(cameras) if cameras is not None else None,
            "active": active, "created_at": at}
    return Event("monitor", None, body["event_id"], body)


def state_key(status: dict | None) -> tuple:
    return tuple((status or {}).get(k) for k in STATE_KEY_FIELDS)
