"""Recording answers in the QA history, off the response path.

``Engine.ask`` records every answer it returns (two-phase or agentic) with ``QARecorder.record``:
the question/answer pair is inserted at once, in the caller's thread (one small row: a
follow-up question asked right after sees it in its dialogue), scoped by the view's cameras.
The rest is background work, done by one worker thread in the order the answers came:
embedding the pair (so later questions can retrieve it as a similar answer) and rewriting the
rolling QA summary with one model call (OASIS: s_qa <- LLM(s_qa, (q, a))). One worker keeps the
rewrites in order: each starts from the summary the previous one wrote.

``close`` cancels the work not started yet and waits (bounded) for the job running; a job's
``QAUpdate`` says how it ended. A failure there never reaches an answer already returned: it
is kept in the job's ``error`` and trace.
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field

from ..llm import prompts
from ..memory import MemoryView
from .answer import Answer
from .turn import ModelTurns, TraceEntry

QA_SUMMARY_CHARS = 2000


@dataclass
class QAUpdate:
    """The background part of recording one answer."""
    qa_id: int                     # -1: the pair could not be recorded
    t: float
    state: str = "queued"          # queued | running | done | failed | cancelled
    error: str | None = None
    seconds: float = 0.0           # wall time of the background work
    timings: dict = field(default_factory=dict)
    trace: list = field(default_factory=list)
    _done: threading.Event = field(default_factory=threading.Event, repr=False)

    def wait(self, timeout: float | None = None) -> bool:
        """True once the work ended (done, failed or cancelled); False on timeout."""
        return self._done.wait(timeout)

    def _end(self, state: str, error: str | None = None) -> None:
        self.state, self.error = state, error
        self._done.set()


@dataclass
class _Job:
    update: QAUpdate
    question: str
    answer: str
    view: MemoryView


class QARecorder:
    def __init__(self, llm, text_embedder, *, close_timeout_s: float = 30.0):
        """``llm``: the model the summary is rewritten with; ``text_embedder``: embeds the pairs
        (None: they are kept, never retrieved by similarity)."""
        self.llm = llm
        self.text_embedder = text_embedder
        self.close_timeout_s = close_timeout_s
        self._jobs: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def record(self, question: str, answer: Answer, view: MemoryView, t: float) -> QAUpdate:
        """Insert the pair now at time ``t`` (scope: the view's cameras); queue its embedding and
        the summary rewrite. An insert that fails (a store error) fails the update, never the
        answer it records."""
        try:
            qa_id = view.remember_answer(float(t), question, answer.text, None)
        except Exception as e:  # noqa: BLE001 - a store error (sqlite's too) must not lose the answer
            update = QAUpdate(-1, float(t))
            update._end("failed", f"recording the answer: {type(e).__name__}: {e}")
            return update
        update = QAUpdate(qa_id, float(t))
        with self._lock:
            if self._closed:
                update._end("cancelled", "the recorder is closed")
                return update
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="vam-qa-recorder", daemon=True)
                self._thread.start()
            self._jobs.put(_Job(update, question, answer.text, view))
        return update

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every job queued so far has ended; False on timeout."""
        marker = threading.Event()
        with self._lock:
            if self._thread is None or self._closed:
                return True
            self._jobs.put(marker)
        return marker.wait(timeout)

    def close(self) -> None:
        """Cancel the queued jobs and wait up to ``close_timeout_s`` for the running one."""
        with self._lock:
            self._closed = True
            thread = self._thread
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if isinstance(job, _Job):
                job.update._end("cancelled", "the engine closed first")
            elif isinstance(job, threading.Event):
                job.set()
        self._jobs.put(None)
        if thread is not None:
            thread.join(self.close_timeout_s)

    # -- the worker ------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if isinstance(job, threading.Event):
                job.set()
                continue
            if self._closed:
                job.update._end("cancelled", "the engine closed first")
                continue
            self._run(job)
            job.view.release_thread()  # this thread's store connection: the store may close next

    def _run(self, job: _Job) -> None:
        up = job.update
        up.state = "running"
        t0 = time.perf_counter()
        holder = Answer("", True, [], "qa_update")  # collects the timings and usage of the model call
        try:
            if self.text_embedder is not None:
                t = time.perf_counter()
                emb = self.text_embedder.embed_texts([f"{job.question}\n{job.answer}"])[0]
                job.view.set_answer_embedding(up.qa_id, emb)
                holder.add_time("embed", time.perf_counter() - t)
            previous = job.view.qa_summary(at=up.t)
            entry = TraceEntry("qa_summary")
            holder.trace.append(entry)
            reply = ModelTurns(self.llm, holder).send(
                [prompts.qa_summary_update(previous, job.question, job.answer, up.t)], "qa_summary", entry)[0]
            text = reply.strip()[:QA_SUMMARY_CHARS]
            if text:
                job.view.set_qa_summary(up.t, text)
            state, error = "done", None
        except Exception as e:  # noqa: BLE001 - LLMError, VamError, ...: kept, never raised into ingest or ask
            state, error = "failed", f"{type(e).__name__}: {e}"
        up.seconds = time.perf_counter() - t0
        up.timings, up.trace = dict(holder.timings), holder.trace
        up._end(state, error)
