"""The agentic planner's context: the results found so far, numbered [turn_idx.result_idx], and
how one context turn is rendered for the planner. Turns are rendered once and only appended,
so every planner request's context is a prefix of the next one's (prefix caches hit)."""
from __future__ import annotations

from dataclasses import dataclass

from ..memory.records import Evidence

CONTEXT_TEXT_CHARS = 300  # of each result's text shown to the planner


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
        line = f"  [{f.ref}] camera {ev.camera_id}, {ev.t_start:.2f}-{ev.t_end:.2f} s, {kind}{sim}"
        lines.append(line + (f": {text}" if text else ""))
        if f.note:
            lines.append(f"    looked at: {f.note.replace(chr(10), ' ')[:CONTEXT_TEXT_CHARS]}")
    return "\n".join(lines)
