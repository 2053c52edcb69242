"""Conversations (``sessions``)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Section


class SessionConfig(Section):
    """Conversations (``Engine.turn``, ``Engine.ask(session=...)``): each session its own
    dialogue, standing "tell me when" requests and replies."""

    dialogue_tokens: int = Field(600, ge=0, le=32_000, description="the last question/answer pairs shown to the "
                                 "model, at most this many tokens (estimated at 4 characters a token), newest kept")
    classifier: Literal["model", "rules"] = Field("model", description="how a user turn is sorted: a model call at "
                                                  "frontend priority with a strict schema (the rules when its reply "
                                                  "is unusable), or the rules alone")
    max_turns_kept: int = Field(500, ge=10, le=100_000, description="turns kept per session; older ones go")
    ended_per_owner: int = Field(64, ge=0, le=100_000, description="ended sessions kept per owner (the part of a "
                                 "session id up to its first '/': the service's token), newest kept; older ones "
                                 "are deleted with their turns and question history when a session is created or "
                                 "ended")
    ended_max_age_s: float = Field(30 * 86400.0, ge=0, description="an ended session is deleted with its turns "
                                   "this long after it ended (checked when a session is created or ended; "
                                   "0 = no age rule)")
    max_watches: int = Field(4, ge=1, le=64, description="standing requests (monitors) per session at once")
    watch_every_s: float = Field(2.0, gt=0, le=3600, description="a standing request's check period (StreamMind)")
    watch_min_confidence: float = Field(0.6, ge=0, le=1, description="a standing request fires at this confidence")
    reply_workers: int = Field(2, ge=1, le=64, description="replies to fired requests written at once")
