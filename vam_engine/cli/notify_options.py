"""``serve``'s options for MQTT and webhooks (--mqtt, --mqtt-username, --mqtt-password,
--mqtt-ca, --webhook, --webhook-secret), read into the config's ``mqtt`` and ``webhooks``
sections (a flag wins over the config file), and the notifier over them.

A password or secret on the command line is visible to other users of the machine (``ps``):
the environment (``VAM_MQTT__PASSWORD``, ``VAM_WEBHOOKS__SECRET``) or a config file keeps it off."""
from __future__ import annotations

from .common import config_from_args


def add_arguments(sp) -> None:
    sp.add_argument("--mqtt", metavar="URL", help="publish alerts, replies and camera states to this MQTT broker "
                    "(mqtt://host[:port] or mqtts://host[:port], user:password@ allowed), with Home Assistant "
                    "discovery (needs vam_engine[mqtt])")
    sp.add_argument("--mqtt-username", help="the broker account (default: the URL's)")
    sp.add_argument("--mqtt-password", help="its password (default: the URL's; VAM_MQTT__PASSWORD keeps it off "
                                            "the command line)")
    sp.add_argument("--mqtt-ca", metavar="PEM", help="mqtts: the CA certificates to check the broker against")
    sp.add_argument("--webhook", metavar="URL", action="append", help="POST alerts, replies and camera states to "
                    "this URL as signed JSON (repeatable)")
    sp.add_argument("--webhook-secret", help="the HMAC-SHA256 key webhook bodies are signed with "
                                             "(VAM_WEBHOOKS__SECRET keeps it off the command line)")


def overrides(args) -> dict:
    """The config sections the flags set ({} without them)."""
    mqtt = {k: v for k, v in (("url", args.mqtt), ("username", args.mqtt_username),
                              ("password", args.mqtt_password), ("ca", args.mqtt_ca)) if v is not None}
    hooks = {k: v for k, v in (("urls", args.webhook), ("secret", args.webhook_secret)) if v is not None}
    return {**({"mqtt": mqtt} if mqtt else {}), **({"webhooks": hooks} if hooks else {})}


def notify_config(args):
    """The EngineConfig with the flags applied; a bad URL, a missing secret or CA file is an
    error here, before the engine loads."""
    from pathlib import Path

    from ..errors import VamError

    cfg = config_from_args(args, **overrides(args))
    if cfg.mqtt.ca is not None and not Path(cfg.mqtt.ca).is_file():
        raise VamError(f"--mqtt-ca {cfg.mqtt.ca}: no such file")
    if getattr(args, "cluster", None) and (cfg.mqtt.url or cfg.webhooks.urls):
        raise VamError("--mqtt and --webhook serve one engine; with --cluster they are not available yet")
    return cfg


def make_notifier(engine, cfg):
    """The notifier of ``cfg``'s sinks (None: neither MQTT nor webhooks is set), not started."""
    from ..errors import VamError
    from ..notify import make_notifier as notifier_for

    try:
        return notifier_for(engine, cfg)
    except ValueError as e:  # paho-mqtt missing, say
        raise VamError(str(e)) from None
