"""Asking: ``Answering``, the one part that answers. ``Engine.ask`` and ``Engine.turn`` delegate
to it, and so do the service's ask and turn routes (through the engine) and the cluster's
router, which holds one of its own; what differs between them is only what they hand it.

It receives what it uses at construction: ``views`` (what a question reads: its causal view,
the cameras' present, the time now; one store's, or the router's fan-out over shards), the
models, the config (the dialogue budget, the session policy's bounds), the outside tools, the
session store with the monitors its standing requests register, and how to wait for ingest.

A question is checked, answered in the asked mode (two-phase, the agentic loop, or two-phase
then the agentic loop), located, timed, and recorded in the QA history off the response path.
In a session (sessions.py holds the policy) it is answered in the session's cameras and becomes
two turns; ``turn`` sorts what a user says first. What one question is shown is decided in one
place, ``Answering._answerers``: both answerers are made there, per question, from the question,
its view and the present, with the question's budget of images and tokens (budget.py: made
once, handed to both; its account is the answer's "budget" trace entry).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ..errors import VamError
from ..ingest import camera_list
from ..numerics import finite_time
from ..llm import LLMError
from ..memory import check_session_id
from .agent import AgenticAnswerer
from .answer import Answer, locate
from .budget import Budget, QuestionBudget
from .qa_record import QARecorder
from .sessions import Sessions, TurnOptions, TurnResult
from .turn import TraceEntry
from .two_phase import TwoPhaseAnswerer

MODES = ("auto", "two_phase", "agentic")


def check_ask(question, as_of, mode, max_turns, wait_for_ingest=False, *, session=None, read_only=False) -> None:
    """Raise VamError naming the first bad argument of ``ask``."""
    if not isinstance(question, str) or not question.strip():
        raise VamError("ask needs a non-empty question")
    if len(question) > 4000:
        raise VamError(f"the question is {len(question)} characters long; at most 4000")
    if mode not in MODES:
        raise VamError(f"mode must be auto, two_phase or agentic, got {mode!r}")
    finite_time(as_of, "as_of", optional=True)
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


def answer_in_mode(model: WatchedModel, two_phase: TwoPhaseAnswerer, agentic: AgenticAnswerer, question: str,
                   view, mode: str) -> Answer:
    """The answer of ``mode``: two-phase, the agentic loop, or (auto) two-phase then the agentic
    loop when two-phase reports not found (its trace, tokens and timings kept in front). A model
    failure raises instead of answering."""
    answer = None
    if mode in ("auto", "two_phase"):
        answer = two_phase.answer(question, view)
        # a model that failed is an error, not a "not found" answer; in auto mode the agentic
        # loop still gets its chance unless no server answers at all
        model.raise_if_failed(unreachable_only=mode == "auto")
    if mode == "agentic" or (mode == "auto" and not answer.found):
        looped = agentic.answer(question, view)
        if not looped.found:
            model.raise_if_failed()
        if answer is not None:  # auto: keep the two-phase turns in the trace
            looped.trace = answer.trace + looped.trace
            for k, v in answer.tokens.items():
                looped.tokens[k] += v
            for k, v in answer.timings.items():
                looped.add_time(k, v)
        answer = looped
    return answer


@dataclass(frozen=True)
class Question:
    """One question as asked (checked by ``check_ask``): its text (stripped), bound, mode, the
    planner's turns, the session whose history it reads and joins ("" for none), whether the
    asker may write the memory, and when the caller began (perf_counter)."""

    text: str
    as_of: float | None
    mode: str
    max_turns: int
    session: str
    read_only: bool
    started: float


class Answering:
    """``views``: ``view(as_of, cameras, session=, write=)`` (a question's causal view),
    ``present()`` (the cameras' present for one question) and, with a session store,
    ``now(cameras)`` (their newest frame's time: a turn's when it names none); ``models``:
    ``name`` (None: no model), ``llm`` (built at first use) and ``text_embedder()``; ``config``:
    the EngineConfig; ``sessions``: the session store (None: a session names only the question
    history a question reads and joins: a cluster's router, for now), with ``monitors``, where
    its standing requests are registered and whose alerts are replied to; ``tools``: the agentic
    planner's outside tools (None: none); ``flush()``: waits for every frame already queued
    (``wait_for_ingest``; None: nothing is ingested here)."""

    def __init__(self, views, models, config, *, sessions=None, monitors=None, tools=None, flush=None):
        self.views = views
        self.models = models
        self.config = config
        self.tools = tools
        self._flush = flush
        self.sessions = None if sessions is None else Sessions(sessions, config, monitors, models, views,
                                                                remember=self._remember_reply)
        self._qa: QARecorder | None = None  # the QA-history recorder, started by the first answer
        self._lock = threading.Lock()

    # -- questions -------------------------------------------------------------------------------
    def ask(self, question: str, as_of: float | None = None, camera=None, mode: str = "auto", *,
            max_turns: int = 6, wait_for_ingest: bool = False, session: str | None = None,
            read_only: bool = False) -> Answer:
        """See ``Engine.ask``."""
        check_ask(question, as_of, mode, max_turns, wait_for_ingest, session=session, read_only=read_only)
        self._need_model("ask")
        started = time.perf_counter()
        if wait_for_ingest:
            if self._flush is None:
                raise VamError("wait_for_ingest: nothing is ingested here to wait for")
            self._flush()
        q = Question(question.strip(), as_of, mode, max_turns, session or "", read_only, started)
        if session is None or self.sessions is None:
            return self._answer(q, camera)
        sess = self.sessions.open(session)
        answer = self._answer(q, self.sessions.scope(sess, camera))
        self.sessions.record_exchange(session, question, answer)  # the question turn as the user wrote it
        return answer

    def turn(self, text: str, *, session: str, camera=None, as_of: float | None = None, mode: str = "auto",
             max_turns: int = 6, intent: str | None = None, condition: str | None = None,
             target: str | None = None, every_s: float | None = None, may_watch: bool = True,
             read_only: bool = False, watch_quota=None) -> TurnResult:
        """See ``Engine.turn``."""
        check_ask(text, as_of, mode, max_turns, session=session, read_only=read_only)
        self._need_model("turn")
        if self.sessions is None:
            raise VamError("turn needs a session store, and this one answers without")
        started = time.perf_counter()
        opts = TurnOptions(camera, as_of, intent, condition, target, every_s, may_watch, watch_quota)
        sess, cams, read = self.sessions.read_turn(text, session, opts)
        if read.kind == "question":
            q = Question(text.strip(), as_of, mode, max_turns, session, read_only, started)
            answer = self._answer(q, cams)
            stored = self.sessions.record_exchange(session, q.text, answer)
            out = TurnResult("answer", answer.text, session, tuple(stored), read, answer=answer)
        else:
            out = self.sessions.act(text, sess, cams, read, opts)
        out.timings.update(read.timings)
        out.timings["total_s"] = time.perf_counter() - started
        return out

    def _need_model(self, what: str) -> None:
        if self.models.name is None:
            raise VamError(f"{what} needs an LLM: set llm.backend (local or openai), --llm, or pass llm=...")

    def _answer(self, q: Question, cameras) -> Answer:
        """The one ask body: ``q`` over the causal view of ``cameras``."""
        view = self.views.view(q.as_of, cameras, session=q.session, write=not q.read_only)
        llm = self.models.llm
        model = WatchedModel(llm)
        two_phase, agentic, budget = self._answerers(model, q, view, self.views.present(), cameras)
        answer = answer_in_mode(model, two_phase, agentic, q.text, view, q.mode)
        answer.trace.append(TraceEntry("budget", detail=budget.account.detail()))
        try:
            answer.evidence = locate(answer.evidence, view)  # every citation says where it was seen
        except VamError as e:  # a position is extra: an answer without one is still an answer
            answer.trace.append(TraceEntry("locate", error=f"{type(e).__name__}: {e}"))
        missing = getattr(view, "missing_cameras", None)
        if missing is not None:  # a view over shards: never silently partial
            answer.missing_cameras = tuple(sorted(missing))
            answer.missing_shards = tuple(sorted(view.missing_shards))
        answer.timings["total"] = time.perf_counter() - q.started
        t = answer.asked_at if answer.asked_at is not None else view.now()
        # recorded off the response path (its embedding and the summary rewrite), whichever path made it
        answer.background = self._qa_recorder(llm).record(q.text, answer, view, 0.0 if t is None else t)
        answer.timings["response_s"] = time.perf_counter() - q.started
        return answer

    def _answerers(self, model: WatchedModel, q: Question, view, present, cameras=None):
        """(two-phase, agentic, the question's budget): what this question is shown, for both
        answerers (see the module docstring): the present, the budget of images and tokens
        (``ask``: reason/budget.py), the dialogue budget (``sessions.dialogue_tokens``), the
        outside tools (their cache kept apart per asker: the part of the session before its first
        "/", the service's token, and the cameras asked about)."""
        dialogue = self.config.sessions.dialogue_tokens
        ask = self.config.ask
        budget = QuestionBudget(Budget.from_config(ask), q.text)  # one account for both answerers
        # the answer is recorded by ``_answer``, off the response path, whichever answerer made it
        two_phase = TwoPhaseAnswerer(model, present, self.models.text_embedder(), update_qa=False,
                                     dialogue_tokens=dialogue, k_f=ask.k_f, k_q=ask.k_q,
                                     keyframes_per_node=ask.keyframes_per_node, budget=budget)
        cams = None if cameras is None else tuple(sorted(set(camera_list(cameras))))
        agentic = AgenticAnswerer(model, max_turns=q.max_turns, dialogue_tokens=dialogue, tools=self.tools,
                                  budget=budget, tool_scope=(q.session.split("/", 1)[0], cams))
        return two_phase, agentic, budget

    # -- the QA history --------------------------------------------------------------------------
    def _qa_recorder(self, llm) -> QARecorder:
        with self._lock:
            if self._qa is None:
                self._qa = QARecorder(llm, self.models.text_embedder())
            self._qa.llm = llm  # the summary is rewritten by the model that answered (one wrapped since included)
            return self._qa

    def _remember_reply(self, watch, reply) -> None:
        """A standing request and its reply join the session's question history (its cameras')."""
        view = self.views.view(None, watch.cameras, session=watch.session_id, write=False)
        self._qa_recorder(self.models.llm).record(watch.request, Answer(reply.text, True, list(reply.evidence),
                                                                        "reply"), view, reply.t)

    def wait_for_answers(self, timeout: float | None = None) -> bool:
        """Wait until the QA-history work of every answer returned so far (embedding, summary
        rewrite) has ended; False on timeout."""
        qa = self._qa
        return qa is None or qa.wait_idle(timeout)

    def close(self) -> None:
        """The sessions' replies first (they record in the QA history), then the recorder."""
        errors = []
        for part in (self.sessions, self._qa):
            if part is not None:
                try:
                    part.close()
                except Exception as e:  # noqa: BLE001 - raised after the other part is closed
                    errors.append(e)
        if errors:
            raise errors[0]
