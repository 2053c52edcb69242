"""``Engine.ask``'s checks and the choice between its answerers (kept out of engine.py so the
engine stays a thin API)."""
from __future__ import annotations

import math

from .errors import VamError

MODES = ("auto", "two_phase", "agentic")


def check_ask(question, as_of, mode, max_turns, wait_for_ingest) -> None:
    """Raise VamError naming the first bad argument of ``ask``."""
    if not isinstance(question, str) or not question.strip():
        raise VamError("ask needs a non-empty question")
    if len(question) > 4000:
        raise VamError(f"the question is {len(question)} characters long; at most 4000")
    if mode not in MODES:
        raise VamError(f"mode must be auto, two_phase or agentic, got {mode!r}")
    if as_of is not None and not (isinstance(as_of, (int, float)) and math.isfinite(as_of)):
        raise VamError(f"as_of must be a finite time in seconds, got {as_of!r}")
    if not (isinstance(max_turns, int) and 1 <= max_turns <= 20):
        raise VamError(f"max_turns must be an integer in 1..20, got {max_turns!r}")
    if not isinstance(wait_for_ingest, bool):
        raise VamError(f"wait_for_ingest must be True or False, got {wait_for_ingest!r}")


def answer_in_mode(model, two_phase, question: str, view, mode: str, max_turns: int):
    """The answer of ``mode``: two-phase, the agentic loop, or (auto) two-phase then the agentic
    loop when two-phase reports not found (its trace, tokens and timings kept in front).
    ``model`` is the engine's WatchedModel: a model failure raises instead of answering."""
    answer = None
    if mode in ("auto", "two_phase"):
        answer = two_phase.answer(question, view)
        # a model that failed is an error, not a "not found" answer; in auto mode the agentic
        # loop still gets its chance unless no server answers at all
        model.raise_if_failed(unreachable_only=mode == "auto")
    if mode == "agentic" or (mode == "auto" and not answer.found):
        from .reason.agent import AgenticAnswerer

        agentic = AgenticAnswerer(model, max_turns=max_turns).answer(question, view)
        if not agentic.found:
            model.raise_if_failed()
        if answer is not None:  # auto: keep the two-phase turns in the trace
            agentic.trace = answer.trace + agentic.trace
            for k, v in answer.tokens.items():
                agentic.tokens[k] += v
            for k, v in answer.timings.items():
                agentic.add_time(k, v)
        answer = agentic
    return answer
