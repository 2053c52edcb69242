"""The vector spaces (``vectors``)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Section


class VectorConfig(Section):
    """The vector spaces (vectors/space.py): exact numpy scans, a FAISS HNSW or IVF index from
    ann_min_size on; on CUDA the rows are mirrored in a resident torch tensor."""

    index: Literal["flat", "ivf", "hnsw", "auto"] = Field("auto", description="auto: flat below ann_min_size")
    ann_min_size: int = Field(200_000, ge=1, description="vectors above which auto switches to HNSW")
    snapshot_every: int = Field(10_000, ge=1, description="changes between index snapshots")
