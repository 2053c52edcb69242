"""The store's commits and frame files (``store``)."""
from __future__ import annotations

from pydantic import Field

from .base import Section


class StoreConfig(Section):
    """The store's commits and frame files (memory/)."""

    jpeg_quality: int = Field(90, ge=1, le=100, description="JPEG quality of a kept frame as first written "
                                                            "(retention re-encodes older tiers lower)")
    commit_every: int = Field(64, ge=1, description="samples per transaction at most")
    commit_interval_s: float = Field(1.0, gt=0, description="longest wait before pending rows commit")
    record_samples: bool = Field(True, description="keep every sample's gate statistics, dropped ones too")
    encode_threads: int = Field(2, ge=1, description="JPEG encoder threads")
