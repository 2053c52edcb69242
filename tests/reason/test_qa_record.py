"""QARecorder: the pair is recorded at once, the summary rewrites run in order in the
background, a failure stays in the job, and close cancels what has not started and waits for
what has."""
import threading

import numpy as np
import pytest

from vam_engine.llm import LLMError, ScriptedLLM
from vam_engine.memory import Store
from vam_engine.memory.view import MemoryView
from vam_engine.reason.answer import Answer
from vam_engine.reason.qa_record import QARecorder

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 60


class Embed:
    def embed_texts(self, texts):
        return [np.ones(4, np.float32) for _ in texts]


def _answer(text):
    return Answer(text, True, [], "two_phase")


def test_rewrites_run_in_order_off_the_callers_thread(tmp_path):
    store = Store(tmp_path / "s")
    gate = threading.Event()
    seen = []

    def reply(req):
        assert gate.wait(30)
        seen.append(req.messages[1].content[0])
        return f"summary after {len(seen)}"

    rec = QARecorder(ScriptedLLM(reply), Embed())
    view = MemoryView(store, None, None, None, cameras=["cam"])
    a = rec.record("q1", _answer("a1"), view, 10.0)
    b = rec.record("q2", _answer("a2"), view, 11.0)
    assert [r.question for r in store.qa.records()] == ["q1", "q2"]  # recorded before any rewrite
    assert store.qa.records()[0].cameras == ("cam",) and store.qa.summary(cameras=["cam"]) == ""
    gate.set()
    assert b.wait(30) and a.state == b.state == "done"
    assert store.qa.summary(cameras=["cam"]) == "summary after 2"
    assert store.qa.summary(as_of=10.5, cameras=["cam"]) == "summary after 1"
    assert store.qa.summary() == ""  # the history of every camera is another one
    assert "summary after 1" in seen[1]  # the second rewrite started from the first one's summary
    assert store.qa.retrieve(np.ones(4), 2, cameras=["cam"])[0].question in ("q1", "q2")  # embedded in the background
    rec.close()
    store.close()


def test_a_failed_rewrite_is_kept_in_its_job_and_close_cancels_what_waits(tmp_path):
    store = Store(tmp_path / "s")
    view = MemoryView(store, None, None, None)
    rec = QARecorder(ScriptedLLM(lambda r: "x", fail=lambda r: LLMError("scripted", "down")), None)
    up = rec.record("q", _answer("a"), view, 1.0)
    assert up.wait(30) and up.state == "failed" and "down" in up.error
    assert store.qa.records()[-1].answer == "a" and store.qa.summary() == ""
    rec.close()

    gate, started = threading.Event(), threading.Event()

    def slow(req):
        started.set()
        assert gate.wait(30)
        return "late summary"

    rec = QARecorder(ScriptedLLM(slow), None)
    first = rec.record("q1", _answer("a1"), view, 2.0)
    second = rec.record("q2", _answer("a2"), view, 3.0)
    assert started.wait(30)
    closing = threading.Thread(target=rec.close)
    closing.start()
    assert second.wait(30) and second.state == "cancelled"  # never started
    assert closing.is_alive()  # close waits for the job that is running
    gate.set()
    closing.join(30)
    assert not closing.is_alive() and first.state == "done" and store.qa.summary() == "late summary"
    after = rec.record("q3", _answer("a3"), view, 4.0)  # recorded, nothing more runs
    assert after.state == "cancelled" and store.qa.records()[-1].question == "q3"
    store.close()


def test_a_failed_insert_fails_the_update_not_the_caller(tmp_path):
    store = Store(tmp_path / "s")

    class Broken(MemoryView):
        def remember_answer(self, *a, **kw):
            raise OSError("disk full")

    rec = QARecorder(ScriptedLLM(lambda r: "x"), None)
    up = rec.record("q", _answer("a"), Broken(store, None, None, None), 1.0)
    assert up.wait(0) and up.state == "failed" and "disk full" in up.error and up.qa_id == -1
    assert store.qa.records() == []
    rec.close()
    store.close()
