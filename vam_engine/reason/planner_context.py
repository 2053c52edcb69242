"""The agentic planner's state: one question's run (``PlannerRun``), the results found so far,
numbered [turn_idx.result_idx], and how one context turn is rendered for the planner. Turns are
rendered once and only appended, so every planner request's context is a prefix of the next
one's (prefix caches hit)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..memory import Evidence, MemoryView
from .answer import Answer
from .turn import ModelTurns

CONTEXT_TEXT_CHARS = 300  # of each result's text shown to the planner
ANCHOR_GAP_S = 2.0             # hits closer than this in time are one occurrence of an anchor event
ANCHOR_RELATIVE_FLOOR = 0.8    # anchor candidates must score at least this fraction of the best of their source


@dataclass
class Found:
    """One result in the planner's context: [turn_idx.result_idx]."""
    turn_idx: int
    result_idx: int
    evidence: Evidence
    via: str                 # "search" | "inspect" | "summarize"
    note: str | None = None  # the inspector's reply, when the result was looked at

    @property
    def ref(self) -> str:
        return f"{self.turn_idx}.{self.result_idx}"


def render_block(turn_idx: int, label: str, block: list[Found], notes: list[str]) -> str:
    """One context turn: its header, its notes, then one line per result (and what the
    inspector saw of it)."""
    lines = [f"Turn {turn_idx} ({label}): " + (f"{len(block)} new result(s)" if block else "no new results")]
    lines += [f"  note: {n}" for n in notes]
    for f in block:
        ev = f.evidence
        kind = "inspection" if f.via == "inspect" else ev.source
        sim = "" if ev.similarity is None else f", similarity {ev.similarity:.3f}"
        if ev.relevance is not None:  # what the search threshold cuts on: comparable across spaces
            sim += f", relevance {ev.relevance:.2f}"
        text = (ev.text or "").replace("\n", " ")[:CONTEXT_TEXT_CHARS] if f.via != "inspect" else ""
        if ev.pose is not None:  # where its latest moment was taken: "where" questions answer with it
            sim += f", seen at {ev.pose.where()}"
        line = f"  [{f.ref}] camera {ev.camera_id}, {ev.t_start:.2f}-{ev.t_end:.2f} s, {kind}{sim}"
        lines.append(line + (f": {text}" if text else ""))
        if f.note:
            lines.append(f"    looked at: {f.note.replace(chr(10), ' ')[:CONTEXT_TEXT_CHARS]}")
    return "\n".join(lines)


@dataclass
class PlannerRun:
    """The state of one question."""
    question: str
    goal: str
    view: MemoryView
    out: Answer
    blocks: list = field(default_factory=list)    # per context turn: list[Found]
    context: list = field(default_factory=list)   # rendered text per context turn (append-only: prefix-stable)
    seen: set = field(default_factory=set)        # dedupe keys of every result so far
    turns: ModelTurns | None = None               # the question's model requests (set by answer())
    dialogue: list = field(default_factory=list)  # the last question/answer pairs in view, oldest first
    origin: float | None = None                   # "relative" time zero, computed when first needed
    failure: Exception | None = None              # a model failure to raise once the turn's results are kept
    tool_results: dict = field(default_factory=dict)  # (turn_idx, result_idx) -> ToolCitation (tool_actions.py)
    tool_calls: int = 0                           # tool calls made for this question
    tool_words: set = field(default_factory=set)  # words of the web results so far (tool_actions.py: steering)
    steered: set = field(default_factory=set)     # context turns of memory actions that used such words
    asked_words: set = field(default_factory=set)  # words of the outside calls sent (the planner's own)
    budget: Any = None                            # the question's budget (reason/budget.py), set by answer()

    def findings(self) -> list[Found]:
        return [f for b in self.blocks for f in b]

    def lookup(self, turn_idx: int, result_idx: int) -> Found | None:
        if 1 <= turn_idx <= len(self.blocks) and 0 <= result_idx < len(self.blocks[turn_idx - 1]):
            return self.blocks[turn_idx - 1][result_idx]
        return None


def evidence_key(ev: Evidence, kind: str | None = None, extra: str = "") -> tuple:
    """Results are the same evidence when source, camera and interval agree (ms precision)."""
    return (kind or ev.source, ev.camera_id, round(ev.t_start, 3), round(ev.t_end, 3), extra)


def found_rank(f: Found) -> float:
    """The fallback order: highest similarity first; results without one (inspections,
    summaries) after every scored result."""
    return f.evidence.similarity if f.evidence.similarity is not None else -math.inf


def anchor_occurrences(hits) -> list[list]:
    """An anchor's occurrences in time order, [t0, t1, camera or None when several]: hits
    scoring below ANCHOR_RELATIVE_FLOOR of the best of their source are dropped (a search
    always returns top_k hits, related or not); hits within ANCHOR_GAP_S of each other form
    one occurrence."""
    best: dict = {}
    for h in hits:
        best[h.source] = max(best.get(h.source, -math.inf), h.similarity or 0.0)
    hits = [h for h in hits if (h.similarity or 0.0) >= ANCHOR_RELATIVE_FLOOR * max(best[h.source], 0.0)]
    occurrences: list[list] = []
    for h in sorted(hits, key=lambda h: (h.t_start, h.t_end)):
        if occurrences and h.t_start <= occurrences[-1][1] + ANCHOR_GAP_S:
            last = occurrences[-1]
            last[1] = max(last[1], h.t_end)
            if last[2] != h.camera_id:
                last[2] = None
        else:
            occurrences.append([h.t_start, h.t_end, h.camera_id])
    return occurrences
