"""The sinks a config asks for: ``make_sinks(config)`` (an EngineConfig's ``mqtt`` and
``webhooks`` sections), and ``make_notifier(engine, config)`` over them (None: neither is set)."""
from __future__ import annotations

from ..config import EngineConfig
from .events import EventSink
from .source import Notifier


def make_sinks(config: EngineConfig) -> list[EventSink]:
    sinks: list[EventSink] = []
    if config.mqtt.url is not None:
        from .mqtt import MqttSink

        sinks.append(MqttSink(config.mqtt))
    hooks = config.webhooks
    if hooks.urls:
        from .webhook import WebhookSink

        secret = hooks.secret.get_secret_value().encode()
        sinks += [WebhookSink(url, secret, index=k, timeout_s=hooks.timeout_s, max_attempts=hooks.max_attempts,
                              backoff_s=hooks.backoff_s, backoff_max_s=hooks.backoff_max_s, queue_max=hooks.queue_max)
                  for k, url in enumerate(hooks.urls)]
    return sinks


def make_notifier(engine, config: EngineConfig) -> Notifier | None:
    sinks = make_sinks(config)
    if not sinks:
        return None
    polls = ([config.mqtt.state_poll_s] if config.mqtt.url else []) + ([config.webhooks.state_poll_s]
                                                                       if config.webhooks.urls else [])
    return Notifier(engine, sinks, poll_s=min(polls))
