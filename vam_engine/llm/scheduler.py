"""Two-tier model scheduling (docs/design.md section 2, StreamMind): frontend requests (answers,
monitor checks) never wait behind queued backend work (event documents, forest merges,
summaries, QA-summary rewrites).

``PriorityScheduler`` wraps any body behind the same ``generate`` contract. Callers' requests
go into two FIFO queues by ``LLMRequest.priority_class``; ``workers`` threads take batches of at
most ``max_batch`` requests of ONE class (a frontend batch is never slowed by backend rows) and
send them to the body. The rules, in order, each time a worker is free:

1. Frontend first: a queued frontend request starts before any queued backend request, so it
   waits at most for the batches already in flight.
2. Reservation: at most ``backend_slots`` workers run backend batches at once. With
   ``backend_slots < workers`` a worker is always free for the frontend, so a frontend request
   waits for no backend request at all (the HTTP adapter: N-1 of N connections).
3. No starvation: while backend work waits, after ``backend_every`` frontend batches in a row the
   next free backend slot takes a backend batch, so backend work gets at least 1 batch in
   ``backend_every + 1`` however fast frontend requests arrive.

Batches cross callers (the writer's and an answer's requests share a batch of their class).
When such a batch fails, each caller's requests are sent again on their own, so one caller's bad
request fails only that caller; when a caller's request fails, its requests still queued are
dropped (its ``generate`` raises; it retries the whole call), as ``OpenAIChat`` does.

The adapters: ``schedule_local`` (one worker: the local body runs one batch at a time) and
``schedule_http`` (one worker per connection, one request per call, N-1 for the backend).
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Sequence

from .base import BACKEND, FRONTEND, LLMError, LLMRequest, LLMResponse


@dataclass(frozen=True)
class SchedulerPolicy:
    workers: int = 1        # batches in flight at once
    max_batch: int = 8      # requests per call to the body
    backend_slots: int = 1  # workers that may run backend batches at once
    backend_every: int = 4  # frontend batches in a row, while backend waits, before a backend batch

    def __post_init__(self):
        for name in ("workers", "max_batch", "backend_slots", "backend_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"scheduler {name} must be an integer >= 1, got {value!r}")
        if self.backend_slots > self.workers:
            raise ValueError(f"scheduler backend_slots ({self.backend_slots}) cannot exceed workers "
                             f"({self.workers})")


@dataclass
class SchedulerStats:
    """Requests by class: submitted, completed (replied or failed), queued now; batches sent."""
    submitted: dict
    completed: dict
    queued: dict
    batches: dict


class _Call:
    """One ``generate`` call: its tickets, and whether one of them failed."""
    __slots__ = ("error", "left", "done")

    def __init__(self, n: int):
        self.error: BaseException | None = None
        self.left = n
        self.done = threading.Event()


class _Ticket:
    __slots__ = ("request", "cls", "call", "response", "error")

    def __init__(self, request: LLMRequest, call: _Call):
        self.request = request
        self.cls = request.priority_class
        self.call = call
        self.response: LLMResponse | None = None
        self.error: BaseException | None = None


class PriorityScheduler:
    """``body`` behind the two-tier rules above; thread-safe. ``name`` and other attributes
    (``tokenize``, ``cache_info``, ...) are the body's. ``close()`` fails what is still queued,
    waits for the batches in flight, then closes the body."""

    def __init__(self, body, policy: SchedulerPolicy | None = None):
        self.body = body
        self.policy = policy or SchedulerPolicy()
        self.name = getattr(body, "name", "llm")
        self._cond = threading.Condition()
        self._queues = {FRONTEND: deque(), BACKEND: deque()}
        self._running = {FRONTEND: 0, BACKEND: 0}
        self._frontend_streak = 0  # frontend batches started in a row while backend waited
        self._submitted = {FRONTEND: 0, BACKEND: 0}
        self._completed = {FRONTEND: 0, BACKEND: 0}
        self._batches = {FRONTEND: 0, BACKEND: 0}
        self._threads: list[threading.Thread] = []
        self._closed = False

    def __getattr__(self, name):
        # only reached for names this class does not define: the body's extras
        if name == "body":
            raise AttributeError(name)
        return getattr(self.body, name)

    # -- the LLM contract ----------------------------------------------------------------------

    def generate(self, requests: Sequence[LLMRequest]) -> list[LLMResponse]:
        requests = list(requests)
        if not requests:
            return []
        call = _Call(len(requests))
        tickets = [_Ticket(r, call) for r in requests]
        with self._cond:
            if self._closed:
                raise LLMError(self.name, "generate() called after close()")
            self._start_workers()
            for t in tickets:
                self._queues[t.cls].append(t)
                self._submitted[t.cls] += 1
            self._cond.notify_all()
        call.done.wait()
        if call.error is not None:
            errors = [t.error for t in tickets if t.error is not None]
            fatal = [e for e in errors if not (isinstance(e, LLMError) and e.retryable)]
            raise (fatal or errors)[0]
        return [t.response for t in tickets]

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            dropped = [t for q in self._queues.values() for t in q]
            for q in self._queues.values():
                q.clear()
            self._cond.notify_all()
        for t in dropped:
            self._finish(t, None, LLMError(self.name, "closed before the request was sent"))
        for th in self._threads:
            th.join()
        self.body.close()

    def stats(self) -> SchedulerStats:
        with self._cond:
            return SchedulerStats(dict(self._submitted), dict(self._completed),
                                  {k: len(q) for k, q in self._queues.items()}, dict(self._batches))

    # -- workers ------------------------------------------------------------------------------

    def _start_workers(self) -> None:
        # started at the first request (under the lock): a scheduler never used costs no thread
        while len(self._threads) < self.policy.workers:
            th = threading.Thread(target=self._work, name=f"vam-llm-sched-{len(self._threads)}", daemon=True)
            self._threads.append(th)
            th.start()

    def _take(self, cls: str) -> list:
        q, out = self._queues[cls], []
        while q and len(out) < self.policy.max_batch:
            t = q.popleft()
            if t.call.error is not None:  # its call failed already: do not send the rest
                self._drop(t)
                continue
            out.append(t)
        return out

    def _drop(self, t: _Ticket) -> None:
        # under the lock; the call has failed, so nothing waits on this ticket's reply
        self._completed[t.cls] += 1
        t.call.left -= 1
        if t.call.left == 0:
            t.call.done.set()

    def _pick(self) -> tuple[str, list]:
        """The next batch by the rules of the module docstring (under the lock): (class, tickets),
        or (class, []) when nothing can start now."""
        p = self.policy
        front, back = self._queues[FRONTEND], self._queues[BACKEND]
        back_free = bool(back) and self._running[BACKEND] < p.backend_slots
        if back_free and (not front or self._frontend_streak >= p.backend_every):
            self._frontend_streak = 0
            batch = self._take(BACKEND)
            if batch:
                return BACKEND, batch
        if front:
            batch = self._take(FRONTEND)
            if batch and back:
                self._frontend_streak += 1
            if batch:
                return FRONTEND, batch
        if back_free:  # the frontend tickets were all dropped
            return BACKEND, self._take(BACKEND)
        return FRONTEND, []

    def _work(self) -> None:
        while True:
            with self._cond:
                while True:
                    cls, batch = self._pick()
                    if batch:
                        break
                    if self._closed:
                        return
                    self._cond.wait()
                self._running[cls] += 1
                self._batches[cls] += 1
            try:
                self._run(batch)
            finally:
                with self._cond:
                    self._running[cls] -= 1
                    self._cond.notify_all()

    def _run(self, batch: list) -> None:
        try:
            out = self.body.generate([t.request for t in batch])
            if len(out) != len(batch):
                raise LLMError(self.name, f"{len(out)} responses for {len(batch)} requests")
        except BaseException as e:  # noqa: BLE001 - handed to the caller; the worker lives on
            calls = list(dict.fromkeys(t.call for t in batch))
            if len(calls) > 1:  # not every caller's fault: send each caller's requests alone
                for c in calls:
                    self._run([t for t in batch if t.call is c])
                return
            for t in batch:
                self._finish(t, None, e)
            return
        for t, r in zip(batch, out):
            self._finish(t, r, None)

    def _finish(self, t: _Ticket, response, error) -> None:
        with self._cond:
            t.response, t.error = response, error
            if error is not None and t.call.error is None:
                t.call.error = error
            self._completed[t.cls] += 1
            t.call.left -= 1
            if t.call.left == 0:
                t.call.done.set()


def schedule_local(body, *, max_batch: int, backend_every: int = 4) -> PriorityScheduler:
    """The local body runs one batch at a time: one worker; a frontend request waits at most
    for the batch in flight."""
    return PriorityScheduler(body, SchedulerPolicy(workers=1, max_batch=max_batch, backend_slots=1,
                                                   backend_every=backend_every))


def schedule_http(body, *, concurrency: int, backend_slots: int | None = None,
                  backend_every: int = 4) -> PriorityScheduler:
    """An HTTP body: one worker per connection, one request per call (the server batches), and
    the backend on at most ``backend_slots`` connections (default N-1, at least 1), so the
    frontend always has one."""
    slots = max(1, concurrency - 1) if backend_slots is None else backend_slots
    return PriorityScheduler(body, SchedulerPolicy(workers=concurrency, max_batch=1, backend_slots=slots,
                                                   backend_every=backend_every))
