"""What ``Engine.ask`` returns, and how cited moments become evidence."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from ..memory import Evidence, Moment, Pose, last_pose
from .turn import TraceEntry


@dataclass(frozen=True)
class ToolCitation:
    """A result of an outside tool an answer rests on (reason/tool_actions.py), cited apart
    from the memory's evidence. ``title``, ``url`` and ``text`` are what the provider returned
    (untrusted, cleaned and cut); ``moment_id``, ``camera_id`` and ``t``: the frame an image
    search was asked about."""

    tool: str                  # "web_search" | "image_search"
    query: str | None          # the text searched for (an image search's optional hint)
    title: str
    url: str
    text: str
    moment_id: int | None = None
    camera_id: str | None = None
    t: float | None = None

    def to_json(self) -> dict:
        return asdict(self)


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
    tool_citations: list[ToolCitation] = field(default_factory=list)  # outside results it rests on

    @property
    def position(self) -> Pose | None:
        """Where the best evidence was last seen (its latest moment with a pose), or None."""
        return self.evidence[0].pose if self.evidence else None

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
                    tuple(m.frame_path for m in moments), score, "frame", text, pose=last_pose(moments))


def locate(evidence: list[Evidence], view) -> list[Evidence]:
    """``evidence`` with each one that has no pose yet given the pose of its latest moment in
    ``view`` that has one (evidence made without its moments at hand: the present, provisional
    nodes, a cluster's hits)."""
    ids = [i for e in evidence if e.pose is None for i in e.moment_ids]
    if not ids:
        return evidence
    moments = view.moments_by_id(ids)
    return [e if e.pose is not None else replace(e, pose=last_pose(moments.get(i) for i in e.moment_ids))
            for e in evidence]

