"""The base every section shares: unknown keys are errors and assignments are checked."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A config section: a key it does not declare is an error (a typo is never ignored), and a
    value assigned later is checked as one given at load."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
