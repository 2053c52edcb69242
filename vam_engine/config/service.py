"""``vam-engine serve``'s per-token shares (``service``)."""
from __future__ import annotations

from pydantic import Field

from .base import Section


class ServiceConfig(Section):
    """``vam-engine serve``: each token's share of the pools every token draws from, so that one
    token cannot take a whole pool; a request over its token's share gets 429 naming the limit
    (docs/service.md lists every bound)."""

    monitors_per_token: int = Field(4, ge=1, le=1024, description="active monitors one token may hold: those it "
                                    "started (POST /api/monitors) and its sessions' standing requests together "
                                    "(the engine holds monitors.max_active in all)")
    session_streams_per_token: int = Field(8, ge=1, le=4096, description="session streams one token may have open "
                                           "at once (the server holds --max-session-streams, 64, in all)")
    asks_per_token: int = Field(4, ge=1, le=256, description="questions and session turns one token may have "
                                "answered at once (the server answers 8 at once in all)")
    summaries_per_token: int = Field(1, ge=1, le=256, description="summarize calls one token may have running at "
                                     "once (the server runs 2 at once in all)")
    clips_per_token: int = Field(1, ge=1, le=64, description="clips (GET /api/clips) one token may have encoded "
                                 "at once (the engine encodes clips.max_encodes, 2, at once in all)")
    streams_per_token: int = Field(16, ge=1, le=4096, description="alert streams (SSE) and WebSockets one token may "
                                   "have open at once (the server accepts 256 connections in all)")
    lane_requests_per_token: int = Field(16, ge=1, le=4096, description="pages, frames and searches one token may "
                                         "have running or waiting at once in each handler lane (read, search: a "
                                         "few threads each, requests served in arrival order)")
    thumbnail_cache_mb: int = Field(64, ge=0, le=65536, description="thumbnails (frames asked for with ?w=) the "
                                    "server keeps made, in MB at most, shared by every token (least recently used "
                                    "go first; 0: none kept)")
