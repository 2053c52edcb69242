"""One reasoning "model turn", the way both answerers take it: send a request, parse the reply
against its schema, send ONE repair request when it does not parse, time it, and record it as a
``TraceEntry`` of the answer.

Every reply is untrusted. ``parse`` raises ValueError naming the first problem (the parsers of
``llm.schemas``); that message goes into the repair request so the model knows what to fix. A
model failure (``LLMError``) is not caught here: the answerer decides what a failure ends.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Sequence

from ..llm import LLMError, LLMRequest, LLMResponse, prompts

TRACE_REPLY_CHARS = 2000  # of each reply kept in the trace
TRACE_ERROR_CHARS = 500   # of each parse error kept in the trace


@dataclass
class ModelCall:
    """One request sent: its role tag and its reply's usage."""
    tag: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    prefill_s: float
    total_s: float
    finish_reason: str | None


@dataclass
class TraceEntry:
    """One step of an answer: a model turn (router, planner, final, coarse, fine, qa_summary)
    or a bookkeeping step ("done", "error", a failed stage)."""
    stage: str
    turn: int | None = None              # planner turn, 1-based
    turns_left: int | None = None        # planner turns left, this one included
    action: str | None = None            # what the step decided ("search", "answer", "retrieve", ...)
    intent: str | None = None            # two-phase: what the fine pass retrieves for
    reply: str | None = None             # the first reply, cut to TRACE_REPLY_CHARS
    error: str | None = None             # why that reply was unusable, or what failed
    repair_reply: str | None = None      # the repair's reply; None: no repair was sent
    repair_error: str | None = None      # why the repair's reply was unusable too
    repaired: bool = False               # the repair's reply parsed
    fallback: str | None = None          # what was done instead of an unusable reply
    reason: str | None = None            # why the answer ended here
    best_ref: str | None = None          # agentic: the cited result, "turn.result"
    context_turn: int | None = None      # agentic: the context turn this step's results became
    added: list[str] = field(default_factory=list)             # agentic: refs of the new results
    inspections: dict[str, str] = field(default_factory=dict)  # agentic: ref -> what the inspector saw
    notes: list[str] = field(default_factory=list)             # what went wrong on the way, for the model and us
    calls: list[ModelCall] = field(default_factory=list)       # every request of this step, in order
    seconds: float = 0.0                 # wall time of those requests
    detail: dict = field(default_factory=dict)  # what the step saw (plain JSON data: ids, counts, times)

    def to_dict(self) -> dict:
        """The entry as plain JSON data; fields still at their default are left out."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            default = f.default_factory() if callable(f.default_factory) else f.default
            if f.name == "stage" or v != default:
                out[f.name] = [asdict(c) for c in v] if f.name == "calls" else v
        return out


@dataclass
class Turn:
    """The outcome of ``ModelTurns.ask``: the parsed reply (None: unusable, repair included),
    and the last request sent with its reply text (a follow-up request continues from them)."""
    parsed: Any
    request: LLMRequest
    reply: str


def _text(r: LLMResponse) -> str:
    return r.text if isinstance(r.text, str) else ""


class ModelTurns:
    """The model requests of one answer: every request is timed into ``answer.timings``
    (``<timing>`` and ``<timing>_prefill``), its usage added to ``answer.tokens``, and counted."""

    def __init__(self, llm, answer):
        self.llm = llm
        self.answer = answer
        self.calls = 0  # requests sent so far

    def send(self, requests: Sequence[LLMRequest], timing: str, entry: TraceEntry | None = None) -> list[str]:
        """Reply texts of ``requests`` (one batch), in order; each call is recorded in ``entry``
        when given. Raises LLMError, also when the model returns the wrong number of replies."""
        requests = list(requests)
        if not requests:
            return []
        self.calls += len(requests)
        t0 = time.perf_counter()
        try:
            responses = self.llm.generate(requests)
        finally:
            dt = time.perf_counter() - t0
            self.answer.add_time(timing, dt)
            if entry is not None:
                entry.seconds += dt
        if len(responses) != len(requests):
            raise LLMError(getattr(self.llm, "name", "llm"),
                           f"{len(responses)} responses for {len(requests)} requests")
        for req, r in zip(requests, responses):
            self.answer.add_usage(r)
            self.answer.add_time(f"{timing}_prefill", r.prefill_s)
            if entry is not None:
                entry.calls.append(ModelCall(req.tag, r.prompt_tokens, r.cached_tokens, r.completion_tokens,
                                             r.prefill_s, r.total_s, r.finish_reason))
        return [_text(r) for r in responses]

    def ask(self, request: LLMRequest, parse: Callable[[str], Any], timing: str, entry: TraceEntry, *,
            repair: bool = True) -> Turn:
        """One model turn: ``request``, its reply parsed by ``parse``; when that raises
        ValueError (and ``repair``), ONE repair request (``prompts.repair``: the request, the bad
        reply, what was wrong) and its reply parsed. Replies and errors go into ``entry``."""
        reply = self.send([request], timing, entry)[0]
        entry.reply = reply[:TRACE_REPLY_CHARS]
        try:
            return Turn(parse(reply), request, reply)
        except ValueError as e:
            problem = str(e)
        entry.error = problem[:TRACE_ERROR_CHARS]
        if not repair:
            return Turn(None, request, reply)
        fix = prompts.repair(request, reply, problem)
        reply = self.send([fix], timing, entry)[0]
        entry.repair_reply = reply[:TRACE_REPLY_CHARS]
        try:
            parsed = parse(reply)
        except ValueError as e:
            entry.repair_error = str(e)[:TRACE_ERROR_CHARS]
            return Turn(None, fix, reply)
        entry.repaired = True
        return Turn(parsed, fix, reply)
