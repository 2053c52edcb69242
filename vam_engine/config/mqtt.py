"""The MQTT notifier (``mqtt``) and the one parser of its broker URL."""
from __future__ import annotations

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from .base import Section


class MqttConfig(Section):
    """Alerts, session replies and camera states published to an MQTT broker, with Home
    Assistant discovery (vam_engine/notify/mqtt.py; docs/integrations.md). Off while ``url`` is
    None; ``vam-engine serve --mqtt URL`` sets it (in Python: ``vam_engine.notify.make_notifier(engine,
    engine.config).start()``). Needs the extra ``vam_engine[mqtt]``. A
    user:password@ in the URL moves to ``username`` and ``password`` as it is read, so the URL
    kept, shown and logged holds no secret."""

    # an error never echoes what was given: it may hold the password
    model_config = ConfigDict(extra="forbid", validate_assignment=True, hide_input_in_errors=True)

    url: str | None = Field(None, description="the broker: mqtt://host[:port] (1883) or mqtts://host[:port] "
                            "(TLS, 8883); user:password@ in it set username and password; None = off")
    username: str | None = Field(None, description="the broker account (default: the URL's user)")
    password: SecretStr | None = Field(None, description="its password (default: the URL's); never logged or "
                                       "shown (VAM_MQTT__PASSWORD keeps it off the command line)")
    ca: str | None = Field(None, description="mqtts: a PEM file of the CA certificates the broker's certificate "
                           "is checked against (default: the system's)")
    topic_prefix: str = Field("vam", min_length=1, max_length=64, description="the first level of every topic: "
                              "PREFIX/available, PREFIX/CAMERA/alerts, ...")
    discovery: bool = Field(True, description="publish Home Assistant MQTT discovery configs (retained) for the "
                            "cameras and monitors")
    discovery_prefix: str = Field("homeassistant", min_length=1, max_length=64,
                                  description="Home Assistant's discovery prefix")
    node_id: str = Field("vam_engine", pattern=r"^[A-Za-z0-9_-]{1,64}$", description="this engine's id in "
                         "discovery topics and entity ids (one per engine on a broker)")
    client_id: str | None = Field(None, max_length=128, description="the MQTT client id (default: "
                                  "vam-engine-NODE_ID)")
    qos: int = Field(1, ge=0, le=2, description="quality of service of every message")
    keepalive_s: int = Field(30, ge=5, le=3600, description="MQTT keepalive; the broker sends the last will "
                             "\"offline\" after 1.5 times this without a word")
    backoff_s: int = Field(1, ge=1, le=60, description="first wait before reconnecting; doubles each failed try")
    backoff_max_s: int = Field(60, ge=1, le=3600, description="longest wait between two reconnection tries")
    queue_max: int = Field(1000, ge=1, le=1_000_000, description="events waiting for the broker (while it is "
                           "away, say); beyond it new ones are dropped and counted, ingest never waits")
    state_poll_s: float = Field(1.0, gt=0, le=60, description="how often camera states and monitors are looked "
                                "at for changes")

    @field_validator("topic_prefix", "discovery_prefix")
    @classmethod
    def _topic(cls, v: str) -> str:
        if any(c in v for c in "+#\0") or v.startswith("/") or v.endswith("/") or "//" in v or v.startswith("$"):
            raise ValueError(f"must be an MQTT topic without + # $, empty levels or a leading or trailing /, "
                             f"got {v!r}")
        return v

    @model_validator(mode="before")
    @classmethod
    def _credentials_out_of_url(cls, data):
        if isinstance(data, dict) and isinstance(data.get("url"), str):
            _, host, port, user, password = mqtt_url_parts(data["url"])
            data = dict(data)
            data["url"] = f"{data['url'].split(':', 1)[0]}://{_host_text(host)}:{port}"
            if user is not None and data.get("username") is None:
                data["username"] = user
            if password is not None and data.get("password") is None:
                data["password"] = password
        return data


def _host_text(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def mqtt_url_parts(url: str) -> tuple[bool, str, int, str | None, str | None]:
    """(tls, host, port, user, password) of an mqtt:// or mqtts:// URL; ValueError naming what
    is wrong (never echoing a password)."""
    from urllib.parse import unquote, urlsplit

    from ..urls import redact

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ValueError(f"mqtt.url {redact(url)[:100]!r}: {e}") from None
    if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
        raise ValueError(f"mqtt.url must be mqtt://host[:port] or mqtts://host[:port], got {redact(url)[:100]!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"mqtt.url names a broker only (no path or query), got {redact(url)[:100]!r}")
    tls = parts.scheme == "mqtts"
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    return tls, parts.hostname, port or (8883 if tls else 1883), user, password
