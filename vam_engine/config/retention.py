"""Tiered retention (``retention``)."""
from __future__ import annotations

from pydantic import Field

from .base import Section


class RetentionConfig(Section):
    """Tiered retention (memory/retention.py): the writing engine thins and re-encodes old frames."""

    enabled: bool = Field(True, description="run retention in the background of an engine that writes")
    interval_s: float = Field(60.0, gt=0, description="how often the background pass runs")
    disk_budget_bytes: int | None = Field(None, ge=0, description="thin the oldest tier first above this")
