"""Where automation listens: the engine's alerts, replies to fired standing requests, camera
states and monitors as JSON events (events.py), handed by ``Notifier`` (source.py) to sinks
that deliver on their own threads from bounded queues: MQTT with Home Assistant discovery
(mqtt.py) and signed webhooks (webhook.py). docs/integrations.md is the user's page."""
from .build import make_notifier, make_sinks
from .events import KINDS, Event, EventSink, SinkStats, alert_event, monitor_event, reply_event, state_event
from .mqtt import MqttSink, Topics, object_id, topic_level
from .outbox import Outbox
from .source import Notifier
from .webhook import SIGNATURE_HEADER, WebhookSink, sign, verify

__all__ = ["KINDS", "SIGNATURE_HEADER", "Event", "EventSink", "MqttSink", "Notifier", "Outbox", "SinkStats", "Topics",
           "WebhookSink", "alert_event", "make_notifier", "make_sinks", "monitor_event", "object_id", "reply_event",
           "sign", "state_event", "topic_level", "verify"]
