"""The two-tier model scheduler (llm/scheduler.py) and role routing (llm/roles.py).

Ordering is controlled, never timed: the body's generate blocks on an event until the test has
queued what it needs, and the body records the order in which batches reached it."""
import threading

import pytest

from support.waiting import wait_for
from vam_engine.config import EngineConfig, LLMConfig
from vam_engine.errors import VamError
from vam_engine.llm import (LLMError, LLMRequest, LLMResponse, Message, PriorityScheduler, RoleRouter,
                            SchedulerPolicy, ScriptedLLM, describe_llm, make_llm)
from vam_engine.llm.base import BACKEND, FRONTEND
from vam_engine.llm.scheduler import schedule_http, schedule_local

WAIT_S = 30  # only a bound on a hang; no assertion depends on how long anything takes


def req(tag: str, text: str = "x", priority=None) -> LLMRequest:
    return LLMRequest([Message("user", [text])], tag=tag, priority=priority)


class GatedBody:
    """Replies with each request's text; calls whose batch holds a request tagged in ``gated``
    wait for ``gate``. Records every batch (its texts) in arrival order and how many calls are
    in flight."""

    def __init__(self, gated=("event_writer",)):
        self.name = "gated"
        self.gate = threading.Event()
        self.gated = set(gated)
        self.batches: list[list[str]] = []
        self.in_flight = 0
        self.max_in_flight = {FRONTEND: 0, BACKEND: 0}
        self._flight = {FRONTEND: 0, BACKEND: 0}
        self._lock = threading.Lock()
        self.closed = False

    def generate(self, requests):
        cls = requests[0].priority_class
        with self._lock:
            self.batches.append([r.messages[0].content[0] for r in requests])
            self._flight[cls] += 1
            self.max_in_flight[cls] = max(self.max_in_flight[cls], self._flight[cls])
        try:
            if any(r.tag in self.gated for r in requests):
                assert self.gate.wait(WAIT_S), "the test never opened the gate"
            if any(r.tag == "bad" for r in requests):
                raise LLMError(self.name, "a bad request in the batch")
            return [LLMResponse(text=r.messages[0].content[0]) for r in requests]
        finally:
            with self._lock:
                self._flight[cls] -= 1

    def flight(self, cls):
        with self._lock:
            return self._flight[cls]

    def close(self):
        self.closed = True


def until(cond, what: str):
    wait_for(what, cond, WAIT_S, every=0.002)


def holding(body, llm, text: str) -> "Caller":
    """A backend call whose batch has reached ``body`` and waits there on its gate."""
    hold = Caller(llm, [req("event_writer", text)])
    hold.start()
    until(lambda: body.flight(BACKEND) == 1, "a backend batch holding the body")
    return hold


class Caller(threading.Thread):
    def __init__(self, llm, requests):
        super().__init__(daemon=True)
        self.llm, self.requests = llm, requests
        self.result = self.error = None

    def run(self):
        try:
            self.result = [r.text for r in self.llm.generate(self.requests)]
        except Exception as e:  # noqa: BLE001 - the test looks at it
            self.error = e

    def finish(self):
        self.join(WAIT_S)
        assert not self.is_alive(), "generate() never returned"
        return self


def test_priority_class_from_role_or_explicit():
    assert req("event_writer").priority_class == BACKEND
    assert req("node_merger_repair").priority_class == BACKEND  # a repair is its role's
    assert req("qa_summarizer").priority_class == BACKEND
    assert req("two_phase_fine").priority_class == FRONTEND
    assert req("").priority_class == FRONTEND
    assert req("planner", priority=BACKEND).priority_class == BACKEND
    with pytest.raises(ValueError, match="priority"):
        req("planner", priority="urgent")


def test_frontend_request_behind_50_queued_backend_requests_finishes_first():
    body = GatedBody()
    llm = schedule_local(body, max_batch=8)
    try:
        first = holding(body, llm, "in-flight")
        backend = [Caller(llm, [req("event_writer", f"b{i}-{j}") for j in range(10)]) for i in range(5)]
        for c in backend:
            c.start()
        until(lambda: llm.stats().queued[BACKEND] == 50, "50 backend requests queued")
        front = Caller(llm, [req("two_phase_coarse", "answer")])
        front.start()
        until(lambda: llm.stats().queued[FRONTEND] == 1, "the frontend request queued")
        body.gate.set()
        assert front.finish().result == ["answer"]
        for c in [first, *backend]:
            c.finish()
            assert c.error is None and len(c.result) == len(c.requests)
        # the batch in flight, then the frontend request, then the 50 backend ones
        assert body.batches[0] == ["in-flight"] and body.batches[1] == ["answer"]
        assert sorted(t for b in body.batches[2:] for t in b) == sorted(
            r.messages[0].content[0] for c in backend for r in c.requests)
        assert all(len(b) <= 8 for b in body.batches)
    finally:
        body.gate.set()
        llm.close()
    assert body.closed


def test_backend_gets_a_batch_after_every_n_frontend_batches():
    body = GatedBody(gated=("hold",))
    llm = PriorityScheduler(body, SchedulerPolicy(workers=1, max_batch=1, backend_every=2))
    try:
        hold = Caller(llm, [req("hold", "hold")])
        hold.start()
        until(lambda: body.flight(FRONTEND) == 1, "the holding batch reached the body")
        back = Caller(llm, [req("summary_writer", f"B{i}") for i in range(3)])
        back.start()
        until(lambda: llm.stats().queued[BACKEND] == 3, "backend queued")
        fronts = [Caller(llm, [req("planner", f"F{i}")]) for i in range(12)]
        for c in fronts:
            c.start()
        until(lambda: llm.stats().queued[FRONTEND] == 12, "frontend queued")
        body.gate.set()
        for c in [hold, back, *fronts]:
            assert c.finish().error is None
        order = [b[0][0] for b in body.batches[1:]]
        # two frontend batches, then one backend, while backend waits; then the rest of the frontend
        assert order[:9] == list("FFBFFBFFB") and set(order[9:]) == {"F"}
    finally:
        body.gate.set()
        llm.close()


class RefillingBody(GatedBody):
    """Each frontend batch queues a new frontend call before it returns: the frontend queue is
    never empty when the scheduler picks the next batch, the worst case for the backend."""

    def __init__(self):
        super().__init__(gated=())
        self.llm = None
        self.stop = threading.Event()
        self.callers = []

    def generate(self, requests):
        out = super().generate(requests)
        if requests[0].priority_class == FRONTEND and not self.stop.is_set():
            before = self.llm.stats().submitted[FRONTEND]
            c = Caller(self.llm, [req("router", "q")])
            c.start()
            self.callers.append(c)
            until(lambda: self.llm.stats().submitted[FRONTEND] > before, "the next frontend call queued")
        return out


@pytest.mark.parametrize("every", [1, 3])
def test_backend_work_completes_while_frontend_requests_keep_arriving(every):
    body = RefillingBody()
    llm = body.llm = schedule_local(body, max_batch=2, backend_every=every)
    try:
        first = Caller(llm, [req("router", "q")])
        first.start()
        until(lambda: llm.stats().completed[FRONTEND] >= 5, "frontend traffic flowing")
        back = Caller(llm, [req("event_writer", f"doc{i}") for i in range(20)])
        back.start()
        assert back.finish().error is None and back.result == [f"doc{i}" for i in range(20)]
        # while the backend waited, a backend batch followed every `every` frontend batches
        order = ["B" if b[0].startswith("doc") else "F" for b in body.batches]
        first_b, last_b = order.index("B"), len(order) - 1 - order[::-1].index("B")
        assert "F" * (every + 1) not in "".join(order[first_b:last_b + 1])
    finally:
        body.stop.set()
        for c in [first, *body.callers]:
            c.finish()
        llm.close()


def test_http_adapter_reserves_a_connection_for_the_frontend():
    body = GatedBody()
    llm = schedule_http(body, concurrency=3)  # backend: at most 2 of 3
    assert llm.policy.backend_slots == 2 and llm.policy.max_batch == 1
    try:
        backend = Caller(llm, [req("event_writer", f"d{i}") for i in range(10)])
        backend.start()
        until(lambda: body.flight(BACKEND) == 2 and llm.stats().queued[BACKEND] == 8,
              "two backend requests in flight, eight queued")
        # every backend request is stuck at the server, and the frontend still gets through
        front = Caller(llm, [req("planner", "answer")])
        front.start()
        assert front.finish().result == ["answer"]
        assert backend.is_alive() and body.max_in_flight[BACKEND] == 2
        body.gate.set()
        assert backend.finish().result == [f"d{i}" for i in range(10)]
        assert body.max_in_flight[BACKEND] == 2
    finally:
        body.gate.set()
        llm.close()


def test_make_llm_schedules_the_http_body_with_one_connection_kept_for_answers():
    llm = make_llm(LLMConfig(backend="openai", url="http://127.0.0.1:9/v1", model="m", concurrency=4))
    try:
        assert isinstance(llm, PriorityScheduler) and llm.name == "openai:http://127.0.0.1:9/v1#m"
        assert llm.policy.workers == 4 and llm.policy.backend_slots == 3
    finally:
        llm.close()
    llm = make_llm(LLMConfig(backend="openai", url="http://127.0.0.1:9/v1", model="m", concurrency=4,
                             backend_slots=1, backend_every=7))
    try:
        assert llm.policy.backend_slots == 1 and llm.policy.backend_every == 7
    finally:
        llm.close()
    with pytest.raises(ValueError, match="backend_slots"):
        LLMConfig(concurrency=2, backend_slots=3)


def test_a_failing_shared_batch_fails_only_the_caller_with_the_bad_request():
    body = GatedBody()
    llm = schedule_local(body, max_batch=8)
    try:
        hold = holding(body, llm, "hold")
        bad = Caller(llm, [LLMRequest([Message("user", ["bad"])], tag="bad")])
        good = Caller(llm, [req("planner", "good")])
        bad.start()
        good.start()
        until(lambda: llm.stats().queued[FRONTEND] == 2, "both queued")
        body.gate.set()
        assert good.finish().result == ["good"]
        assert isinstance(bad.finish().error, LLMError)
        assert ["bad", "good"] in body.batches  # they did share a batch first
    finally:
        body.gate.set()
        llm.close()


def test_close_fails_what_is_queued_and_refuses_new_requests():
    body = GatedBody()
    llm = schedule_local(body, max_batch=1)
    hold = holding(body, llm, "hold")
    queued = Caller(llm, [req("event_writer", "later")])
    queued.start()
    until(lambda: llm.stats().queued[BACKEND] == 1, "queued")
    closer = threading.Thread(target=llm.close, daemon=True)
    closer.start()
    assert isinstance(queued.finish().error, LLMError)
    body.gate.set()
    closer.join(WAIT_S)
    assert hold.finish().result == ["hold"] and body.closed
    with pytest.raises(LLMError, match="after close"):
        llm.generate([req("planner")])


# -- roles ---------------------------------------------------------------------------------------

def test_role_router_sends_each_request_to_its_roles_model_in_order():
    light = ScriptedLLM(lambda r: f"light:{r.tag}", name="light")
    main = ScriptedLLM(lambda r: f"main:{r.tag}", name="main")
    router = RoleRouter(main, {"router": light})
    out = router.generate([req("planner"), req("router"), req("router_repair"), req("event_writer")])
    assert [r.text for r in out] == ["main:planner", "light:router", "light:router_repair", "main:event_writer"]
    assert router.name == "main"
    assert [r.tag for r in light.sent] == ["router", "router_repair"]


def test_make_llm_builds_one_scheduled_body_per_distinct_role_model():
    cfg = LLMConfig(backend="openai", url="http://127.0.0.1:9/v1", model="big",
                    roles={"router": "openai:http://127.0.0.1:9/v1#light",
                           "anchor_adjudicator": "openai:http://127.0.0.1:9/v1#light"})
    assert describe_llm(cfg) == "openai:http://127.0.0.1:9/v1#big"
    llm = make_llm(cfg)
    try:
        assert isinstance(llm, RoleRouter) and llm.name.endswith("#big")
        light = llm.body_for(req("router"))
        assert light.name.endswith("#light") and light is llm.body_for(req("anchor_adjudicator"))
        assert isinstance(light, PriorityScheduler) and llm.body_for(req("planner")) is llm.default
        assert light.body.timeout_s == cfg.timeout_s  # the other fields are the main model's
    finally:
        llm.close()


@pytest.mark.parametrize("roles, problem", [
    ({"routr": "openai:http://h/v1#m"}, r"llm\.roles\.routr: unknown role 'routr'; roles are .*router"),
    ({"router": "gpt4"}, r"llm\.roles\.router: LLM spec 'gpt4' is not one of"),
    ({"router": "none"}, r"llm\.roles\.router: 'none' is not a model"),
    ({"planner": "local:/no/such/dir"}, r"llm\.roles\.planner: llm\.model '/no/such/dir' is not a directory"),
])
def test_bad_roles_config_names_the_role_and_the_problem(roles, problem):
    cfg = EngineConfig.load(llm={"backend": "openai", "url": "http://h/v1", "model": "m", "roles": roles})
    with pytest.raises(VamError, match=problem):
        describe_llm(cfg.llm)
    with pytest.raises(VamError, match=problem):
        make_llm(cfg.llm)


def test_roles_need_a_main_model_and_a_mapping():
    with pytest.raises(VamError, match=r"llm\.roles\.router: roles need a main model"):
        describe_llm(LLMConfig(roles={"router": "openai:http://h/v1#m"}))
    with pytest.raises(VamError, match=r"llm"):
        EngineConfig.load(llm={"roles": ["router"]})
