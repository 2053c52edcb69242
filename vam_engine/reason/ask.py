"""Asking: the one body of ``ask`` that the engine and the cluster's router both run.

``ask_question`` checks the arguments, answers in the asked mode (two-phase, the agentic loop,
or two-phase then the agentic loop), times it, and records the answer in the QA history off
the response path. What differs between callers is only what they pass in: the view (one
store's, or the router's fan-out over shards), the present and the QA recorder.
"""
from __future__ import annotations

import math
import time

from ..errors import VamError
from ..llm import LLMError, prompts
from ..memory import check_session_id
from .answer import locate
from .turn import TraceEntry

MODES = ("auto", "two_phase", "agentic")


def check_ask(question, as_of, mode, max_turns, wait_for_ingest=False, *, session=None, read_only=False) -> None:
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
    if session is not None:
        check_session_id(session)
    if not isinstance(read_only, bool):
        raise VamError(f"read_only must be True or False, got {read_only!r}")


class WatchedModel:
    """The model as the answerers see it during one ``ask``. They end with what they have when
    the model fails (an answer saying "not found"); this keeps the first LLMError so that
    ``ask`` raises it instead: an unreachable server is an error, not an answer."""

    def __init__(self, llm):
        self._llm = llm
        self.name = getattr(llm, "name", "llm")
        self.error: LLMError | None = None

    def generate(self, requests):
        try:
            return self._llm.generate(requests)
        except LLMError as e:
            if self.error is None:
                self.error = e
            raise

    def __getattr__(self, name):
        return getattr(self._llm, name)

    def raise_if_failed(self, *, unreachable_only: bool = False) -> None:
        """Raise the first LLMError since the last call (all of them, or only one saying no
        server answers: another stage could not do better); then forget it."""
        error, self.error = self.error, None
        if error is not None and (error.unreachable or not unreachable_only):
            raise error


def answer_in_mode(model: WatchedModel, two_phase, question: str, view, mode: str, max_turns: int, *,
                   dialogue_tokens: int = prompts.DIALOGUE_TOKENS, tools=None):
    """The answer of ``mode``: two-phase, the agentic loop, or (auto) two-phase then the agentic
    loop when two-phase reports not found (its trace, tokens and timings kept in front). A model
    failure raises instead of answering."""
    from .agent import AgenticAnswerer

    answer = None
    if mode in ("auto", "two_phase"):
        answer = two_phase.answer(question, view)
        # a model that failed is an error, not a "not found" answer; in auto mode the agentic
        # loop still gets its chance unless no server answers at all
        model.raise_if_failed(unreachable_only=mode == "auto")
    if mode == "agentic" or (mode == "auto" and not answer.found):
        agentic = AgenticAnswerer(model, max_turns=max_turns, dialogue_tokens=dialogue_tokens,
                                  tools=tools).answer(question, view)
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


def ask_question(question: str, view, llm, present, texts, qa, *, mode: str = "auto", max_turns: int = 6,
                 started: float | None = None, dialogue_tokens: int = prompts.DIALOGUE_TOKENS, tools=None):
    """Answer ``question`` over ``view`` (a MemoryView, or anything with its reads) with ``llm``,
    the cameras' ``present`` (what TwoPhaseAnswerer reads) and the text embedder ``texts``;
    record it with ``qa`` (a QARecorder) after the answer is made. ``started``: when the caller
    began (perf_counter), so ``timings["response_s"]`` is what the caller waited.
    ``dialogue_tokens``: the budget of the earlier question/answer pairs shown (newest kept).
    ``tools``: the outside tools the agentic planner may call (tools.Toolbox; None: none)."""
    from .two_phase import TwoPhaseAnswerer

    t0 = time.perf_counter() if started is None else started
    question = question.strip()
    model = WatchedModel(llm)
    # the answer is recorded below, off the response path, whichever path made it
    two_phase = TwoPhaseAnswerer(model, present, texts, update_qa=False, dialogue_tokens=dialogue_tokens)
    answer = answer_in_mode(model, two_phase, question, view, mode, max_turns, dialogue_tokens=dialogue_tokens,
                            tools=tools)
    try:
        answer.evidence = locate(answer.evidence, view)  # every citation says where it was seen
    except VamError as e:  # a position is extra: an answer without one is still an answer
        answer.trace.append(TraceEntry("locate", error=f"{type(e).__name__}: {e}"))
    answer.timings["total"] = time.perf_counter() - t0
    t = answer.asked_at if answer.asked_at is not None else view.now()
    answer.background = qa.record(question, answer, view, 0.0 if t is None else t)
    answer.timings["response_s"] = time.perf_counter() - t0
    return answer
