"""The webhook notifier (``webhooks``)."""
from __future__ import annotations

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from .base import Section


class WebhookConfig(Section):
    """Alerts, session replies and camera states POSTed as JSON to HTTP endpoints, each body
    signed with HMAC-SHA256 under ``secret`` (header ``X-Vam-Signature: sha256=HEX``;
    vam_engine/notify/webhook.py; docs/integrations.md). ``vam-engine serve --webhook URL``
    (repeatable) sets ``urls`` (in Python: ``vam_engine.notify.make_notifier``, as for ``mqtt``)."""

    # an error never echoes what was given: it may hold the secret
    model_config = ConfigDict(extra="forbid", validate_assignment=True, hide_input_in_errors=True)

    secret: SecretStr | None = Field(None, description="the HMAC-SHA256 key the bodies are signed with; needed "
                                     "when urls are set; never logged or shown (VAM_WEBHOOKS__SECRET keeps it off "
                                     "the command line)")
    urls: list[str] = Field(default_factory=list, max_length=16, repr=False, description="the endpoints (http:// or "
                            "https://), each with its own queue; a comma-separated list in VAM_WEBHOOKS__URLS")
    timeout_s: float = Field(5.0, gt=0, le=120, description="one POST's socket timeout: connecting, sending, and "
                             "each read of the answer (of which 64 KiB at most are read)")
    max_attempts: int = Field(5, ge=1, le=100, description="tries of one event before it is a dead letter "
                              "(counted in /metrics); a 4xx other than 408 and 429 is one at once")
    backoff_s: float = Field(1.0, gt=0, le=600, description="wait after the first failed try; doubles each try")
    backoff_max_s: float = Field(60.0, gt=0, le=3600, description="longest wait between two tries")
    queue_max: int = Field(1000, ge=1, le=1_000_000, description="events waiting per endpoint; beyond it new "
                           "ones are dropped and counted, ingest never waits")
    state_poll_s: float = Field(1.0, gt=0, le=60, description="how often camera states are looked at for changes")

    @field_validator("urls", mode="before")
    @classmethod
    def _split(cls, v):
        return [u.strip() for u in v.split(",") if u.strip()] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _check(self):
        from urllib.parse import urlsplit

        for k, u in enumerate(self.urls):  # an endpoint's path may be its secret (chat webhooks): never echoed
            try:
                parts = urlsplit(u)
                parts.port
            except ValueError as e:
                raise ValueError(f"webhooks.urls[{k}] is not a URL ({e})") from None
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"webhooks.urls[{k}] must be an http:// or https:// URL with a host, got one "
                                 f"starting {parts.scheme or '(no scheme)'}://{parts.hostname or ''}")
        if self.urls and (self.secret is None or not self.secret.get_secret_value()):
            raise ValueError("webhooks.urls are set without webhooks.secret: every body is signed (set "
                             "--webhook-secret or VAM_WEBHOOKS__SECRET)")
        return self
