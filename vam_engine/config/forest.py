"""Each camera's event forest (``forest``)."""
from __future__ import annotations

from pydantic import Field

from .base import Section


class ForestConfig(Section):
    """Each camera's event forest (memory/forest/, OASIS)."""

    root_cap: int = Field(4, ge=1, description="roots per camera; above it the best adjacent pair merges")
    keyframes: int = Field(16, ge=1, description="keyframes per node, spread evenly in time")
    merge_lambda: float = Field(0.1, ge=0, description="merge score: cos(e_j, e_k) - lambda (d_j + d_k)")
