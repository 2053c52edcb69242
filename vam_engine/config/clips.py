"""MP4 clips of any interval (``clips``)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Section


class ClipsConfig(Section):
    """MP4 clips of any interval (engine/clips.py, ``GET /api/clips``, ``vam-engine clip``): cut from
    the source file while it is readable, else built from the retained frames."""

    max_s: float = Field(300.0, gt=0, le=86400, description="the longest clip, in seconds (a longer range is "
                                                            "refused)")
    max_encodes: int = Field(2, ge=1, le=64, description="clips encoded at once; more are refused (the API "
                                                         "answers 429)")
    cache_bytes: int = Field(256 << 20, ge=0, description="encoded clips kept in memory for the next request "
                                                          "(least recently used go first); 0 = off")
    crf: int = Field(28, ge=0, le=51, description="H.264 quality (libx264 crf: lower is better and larger)")
    preset: Literal["ultrafast", "superfast", "veryfast", "faster", "fast", "medium"] = Field(
        "veryfast", description="libx264 speed preset")
    max_side: int = Field(1280, ge=16, le=8192, description="a larger source is scaled down to fit this square")
