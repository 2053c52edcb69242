"""The background memory writer (``writer``)."""
from __future__ import annotations

from pydantic import Field

from .base import Section


class WriterConfig(Section):
    """The background memory writer (reason/writer.py): event documents and forest summaries."""

    enabled: bool = Field(True, description="write event documents and forest summaries when an LLM is set")
    frames_per_event: int = Field(8, ge=1, le=32, description="representative frames sent per event")
    queue_events: int = Field(256, ge=1, description="events waiting for the writer before ingest is slowed")
    retry_base_s: float = Field(5.0, gt=0, description="first retry delay of a failed write; doubles each try")
    retry_max_s: float = Field(600.0, gt=0, description="longest delay between two tries of a failed write")
    max_attempts: int = Field(8, ge=1, description="tries before an event gets a placeholder document")
    clips: bool = Field(False, description="send each event's clip (an MP4 with its sound where the source had one; "
                                           "config clips) as the video to a model that takes video, its keyframes "
                                           "as the fallback when the server refuses video")
