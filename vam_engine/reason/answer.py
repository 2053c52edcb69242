"""What ``Engine.ask`` returns, and how cited moments become evidence."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..memory.records import Evidence, Moment
from .turn import TraceEntry


@dataclass
class Answer:
    """What ``Engine.ask`` returns."""
    text: str
    found: bool                      # False: a clear "not found" (no evidence supports an answer)
    evidence: list[Evidence]         # the cited evidence, best first
    mode: str                        # "two_phase" | "agentic"
    trace: list[TraceEntry] = field(default_factory=list)  # every step: stage, replies, action, model calls
    tokens: dict = field(default_factory=lambda: {"prompt": 0, "completion": 0, "cached": 0})
    timings: dict = field(default_factory=dict)        # seconds per stage, "total" and "response_s"
    asked_at: float | None = None    # the question's present (camera axis): where the QA history keeps it
    background: object | None = None  # Engine.ask: the QA-history work still running (reason.qa_record.QAUpdate)

    def add_usage(self, response) -> None:
        self.tokens["prompt"] += response.prompt_tokens
        self.tokens["completion"] += response.completion_tokens
        self.tokens["cached"] += response.cached_tokens

    def add_time(self, stage: str, seconds: float) -> None:
        self.timings[stage] = self.timings.get(stage, 0.0) + seconds


def moment_evidence(moments: list[Moment], score: float = 0.0, text: str | None = None) -> Evidence | None:
    """One camera's moments as one cited interval."""
    if not moments:
        return None
    ts = [m.t for m in moments]
    return Evidence(moments[0].camera_id, min(ts), max(ts), tuple(m.moment_id for m in moments),
                    tuple(m.frame_path for m in moments), score, "frame", text)

