"""Engine.ask end to end with a scripted model: pushed frames feed the present, the answer
cites what the model was shown, auto falls back to the agentic loop, bad arguments are refused."""
import json
import threading

import numpy as np
import pytest

from support.scripted import TagScript
from vam_engine.engine import Engine
from vam_engine.errors import VamError
from vam_engine.llm import LLMError, ScriptedLLM
from vam_engine.llm.base import Image

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 240


def _texture(i: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    return np.repeat(np.repeat(rng.integers(30, 226, (6, 8, 3), dtype=np.uint8), 30, 0), 30, 1)


class Model(TagScript):
    """Documents events; answers the coarse stage directly when ``direct`` (fails it when None),
    else asks for retrieval and answers the fine stage; the agentic planner searches once then
    answers."""

    def __init__(self, direct: bool | None):
        super().__init__({"event_writer": "a textured scene on the robot camera",
                          "node_merger": "merged textured scenes",
                          "two_phase_coarse": self._coarse, "two_phase_fine": self._fine,
                          "qa_summarizer": "asked about the scene",
                          "router": {"type": "tool", "name": "retrieve", "args": {"question": "textured scene"}},
                          "planner": self._plan}, default="ok")
        self.direct = direct
        self.planned = 0
        self.sufficient = None

    def _coarse(self, req):
        if self.direct is None:
            raise LLMError("scripted", "the coarse stage is down")
        return {"answer": "a textured scene"} if self.direct else {"retrieve": "textured scene"}

    def _fine(self, req):  # "sufficient" only when told: without it two-phase has not found it
        return {"answer": "seen", **({"sufficient": self.sufficient} if self.sufficient is not None else {})}

    def _plan(self, req):
        self.planned += 1
        if self.planned == 1:
            return {"action": "search", "queries": [{"q": "textured scene", "top_k": 5, "inspect_k": 0,
                                                     "threshold": 0.0}], "thought": "look first"}
        return {"action": "answer", "response": "agentic: a textured scene",
                "best_ref": {"turn_idx": 1, "result_idx": 0}, "thought": "t"}


def _engine(path, model):
    cfg = {"ingest": {"fps": 2.0}, "embed": {"text_model": "minilm"}, "commit": {"max_event_s": 2.0},
           "writer": {"retry_base_s": 0.05}}
    return Engine(path, cfg, device="cpu", llm=ScriptedLLM(model))


def test_two_phase_answer_cites_the_present_and_reports_its_turns(tmp_path):
    llm_model = Model(direct=True)
    with _engine(tmp_path / "s", llm_model) as eng:
        for i in range(40):
            eng.push("robot", _texture(i), i * 0.5)
        eng.end_push("robot")
        assert eng.wait_for_documents(timeout=120)
        ans = eng.ask("what does the robot see?", mode="two_phase")
        assert ans.found and ans.text == "a textured scene" and ans.mode == "two_phase"
        assert ans.evidence and all(e.camera_id == "robot" and e.t_end <= 19.5 for e in ans.evidence)
        assert ans.trace and ans.timings["total"] > 0 and ans.tokens["prompt"] > 0
        coarse = [r for r in eng.llm.sent if r.tag == "two_phase_coarse"][-1]
        shown = [p for m in coarse.messages for p in m.content if isinstance(p, Image)]
        assert 1 <= len(shown) <= 16 + 32  # the present: short window and medium buffer


def test_as_of_hides_later_frames_from_the_model(tmp_path):
    with _engine(tmp_path / "s", Model(direct=True)) as eng:
        for i in range(40):
            eng.push("robot", _texture(i), i * 0.5)
        eng.end_push("robot")
        assert eng.wait_for_documents(timeout=120)
        ans = eng.ask("what was there?", as_of=6.0, mode="two_phase")
        assert all(e.t_end <= 6.0 for e in ans.evidence)
        coarse = [r for r in eng.llm.sent if r.tag == "two_phase_coarse"][-1]
        times = [float(p[2:-1]) for m in coarse.messages for p in m.content
                 if isinstance(p, str) and p.startswith("t=") and p.endswith("s")]
        assert times and max(times) <= 6.0


def test_auto_falls_back_to_the_agentic_loop_when_two_phase_finds_nothing(tmp_path):
    with _engine(tmp_path / "s", Model(direct=None)) as eng:  # its coarse stage fails: two-phase finds nothing
        for i in range(20):
            eng.push("robot", _texture(i), i * 0.5)
        eng.end_push("robot")
        assert eng.wait_for_documents(timeout=120)
        ans = eng.ask("what does the robot see?")
        assert ans.mode == "agentic" and ans.found and ans.text.startswith("agentic:")
        stages = [t.stage for t in ans.trace]
        assert any(str(s).startswith("coarse") for s in stages) and "router" in stages
        assert {"router", "two_phase_coarse"} <= {r.tag for r in eng.llm.sent}
        assert ans.evidence and ans.evidence[0].camera_id == "robot"


def test_arguments_are_checked(tmp_path):
    with Engine(tmp_path / "plain", {}, device="cpu") as eng:
        with pytest.raises(VamError, match="needs an LLM"):
            eng.ask("anything")
    with _engine(tmp_path / "s", Model(direct=True)) as eng:
        for bad, match in [("", "non-empty"), ("x" * 5000, "4000")]:
            with pytest.raises(VamError, match=match):
                eng.ask(bad)
        with pytest.raises(VamError, match="mode"):
            eng.ask("q", mode="fast")
        with pytest.raises(VamError, match="as_of"):
            eng.ask("q", as_of=float("nan"))
        with pytest.raises(VamError, match="max_turns"):
            eng.ask("q", max_turns=0)


# -- answers that do not wait; the QA history; the dialogue -------------------------------------


class BlockingEmbedder:
    """The engine's image embedder, whose embed_images waits on ``gate`` (open by default)."""

    def __init__(self, inner):
        self.inner = inner
        self.gate = threading.Event()
        self.gate.set()
        self.blocked = threading.Event()  # set while a call waits on the gate

    def embed_images(self, *args, **kw):
        if not self.gate.is_set():
            self.blocked.set()
            self.gate.wait(60)
            self.blocked.clear()
        return self.inner.embed_images(*args, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_ask_answers_while_ingest_is_held_up_by_a_blocked_embedder(tmp_path, monkeypatch):
    from vam_engine.engine import core

    made = []
    real = core.make_image_embedder
    monkeypatch.setattr(core, "make_image_embedder", lambda *a, **kw: made.append(BlockingEmbedder(real(*a, **kw)))
                        or made[-1])
    eng = _engine(tmp_path / "s", Model(direct=True))
    try:
        (emb,) = made
        for i in range(20):
            eng.push("robot", _texture(i), i * 0.5)
        assert eng.flush(timeout=60)
        emb.gate.clear()
        for i in range(20, 30):
            eng.push("robot", _texture(i), i * 0.5)
        assert emb.blocked.wait(30)  # ingest is stuck in the embedder
        ans = eng.ask("what does the robot see?", mode="two_phase")
        assert ans.found and emb.blocked.is_set() and not emb.gate.is_set()  # returned while ingest waits
        assert ans.timings["response_s"] >= ans.timings["total"] > 0

        done = threading.Event()
        waited = threading.Thread(target=lambda: (eng.ask("and now?", mode="two_phase", wait_for_ingest=True),
                                                  done.set()))
        waited.start()
        assert not done.wait(1.0)  # the opt-in waits for the queued frames
        emb.gate.set()
        waited.join(60)
        assert done.is_set()
        with pytest.raises(VamError, match="wait_for_ingest"):
            eng.ask("q", wait_for_ingest="yes")
    finally:
        emb.gate.set()
        eng.close()


class GatedSummarizer(Model):
    """Model, but the QA summarizer's reply waits on ``gate``."""

    def __init__(self):
        super().__init__(direct=True)
        self.gate = threading.Event()
        self.summaries = 0
        self.replies["qa_summarizer"] = self._summary

    def _summary(self, req) -> str:
        assert self.gate.wait(60)
        self.summaries += 1
        return f"summary {self.summaries}"


@pytest.fixture(scope="module")
def robot(tmp_path_factory):
    model = GatedSummarizer()
    eng = _engine(tmp_path_factory.mktemp("ask") / "s", model)
    for i in range(30):
        eng.push("robot", _texture(i), i * 0.5)
    eng.end_push("robot")
    assert eng.wait_for_documents(timeout=120)
    yield eng, model
    model.gate.set()
    eng.close()


def test_the_qa_summary_is_rewritten_after_the_answer_is_returned(robot):
    eng, model = robot
    model.gate.clear()
    before = eng.store.qa.summary(cameras=["robot"])
    ans = eng.ask("what does the robot see?", mode="two_phase", camera="robot")
    # returned while the summary rewrite is still held up; the pair itself is already recorded
    assert ans.found and ans.background.state in ("queued", "running") and eng.store.qa.summary(cameras=["robot"]) == before
    rec = eng.store.qa.records()[-1]
    assert (rec.question, rec.answer, rec.cameras) == ("what does the robot see?", ans.text, ("robot",))
    assert "qa_summary" not in {e.stage for e in ans.trace} and "qa_summary" not in ans.timings
    model.gate.set()
    assert ans.background.wait(30) and ans.background.state == "done"
    assert eng.store.qa.summary(cameras=["robot"]) == f"summary {model.summaries}" and ans.background.seconds > 0
    q = eng.text_embedder().embed_texts(["what does the robot see?"])[0]
    assert eng.store.qa.retrieve(q, 1, cameras=["robot"])[0].qa_id == rec.qa_id  # embedded in the background too
    assert eng.wait_for_answers(timeout=30)


def test_both_paths_record_their_answer_scoped_by_camera(robot):
    eng, model = robot
    model.gate.set()
    model.planned = 0
    ans = eng.ask("what is the robot looking at?", mode="agentic", camera=["robot"])
    assert ans.mode == "agentic" and ans.found
    rec = eng.store.qa.records()[-1]
    assert (rec.question, rec.answer, rec.cameras) == ("what is the robot looking at?", ans.text, ("robot",))
    assert rec.t == pytest.approx(ans.asked_at)
    ans = eng.ask("anything at all?", mode="two_phase")  # no camera: every camera
    assert eng.store.qa.records()[-1].cameras is None and eng.store.qa.records()[-1].answer == ans.text
    assert eng.wait_for_answers(timeout=30)


def test_a_follow_up_question_sees_the_previous_turn(robot):
    eng, model = robot
    model.gate.set()
    model.planned = 0
    first = eng.ask("when did the texture change?", mode="agentic", camera="robot")
    model.planned = 0
    sent = len(eng.llm.sent)
    eng.ask("and before that?", mode="agentic", camera="robot")
    router = next(r for r in eng.llm.sent[sent:] if r.tag == "router")
    dialogue = json.loads(router.messages[1].content[0])["dialogue"]
    assert dialogue[-1]["question"] == "when did the texture change?" and dialogue[-1]["answer"] == first.text[:600]
    planner = next(r for r in eng.llm.sent[sent:] if r.tag == "planner")
    text = planner.messages[1].content[0]
    assert "when did the texture change?" in text and text.index(first.text[:100]) < text.index("Question:")
    # as_of before the first question: it is not part of that question's dialogue
    sent = len(eng.llm.sent)
    model.planned = 0
    eng.ask("and before that?", mode="agentic", camera="robot", as_of=first.asked_at - 1.0)
    router = next(r for r in eng.llm.sent[sent:] if r.tag == "router")
    assert all(d["question"] != "when did the texture change?"
               for d in json.loads(router.messages[1].content[0])["dialogue"])


@pytest.mark.parametrize("verdict, mode", [(None, "agentic"), (False, "agentic"), (True, "two_phase")])
def test_auto_keeps_two_phase_only_on_the_models_sufficient_verdict(robot, verdict, mode):
    eng, model = robot
    model.gate.set()
    model.direct, model.sufficient, model.planned = False, verdict, 0
    try:
        ans = eng.ask("what did the robot see at the start?")
    finally:
        model.direct, model.sufficient = True, None
    assert ans.mode == mode and ans.found
    assert ans.text == ("seen" if mode == "two_phase" else "agentic: a textured scene")
    assert "two_phase_fine" in {c.tag for e in ans.trace for c in e.calls}
    assert eng.store.qa.records()[-1].answer == ans.text  # the answer returned is the one recorded
