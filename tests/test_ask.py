"""Engine.ask end to end with a scripted model: pushed frames feed the present, the answer
cites what the model was shown, auto falls back to the agentic loop, bad arguments are refused."""
import json

import numpy as np
import pytest

from vam_engine.engine import Engine
from vam_engine.errors import VamError
from vam_engine.llm import LLMError, ScriptedLLM
from vam_engine.llm.base import Image

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 240


def _texture(i: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    return np.repeat(np.repeat(rng.integers(30, 226, (6, 8, 3), dtype=np.uint8), 30, 0), 30, 1)


def _task(req) -> str:
    content = req.messages[-1].content
    first = content[0] if content and isinstance(content[0], str) else ""
    try:
        return json.loads(first).get("task", req.tag)
    except (ValueError, AttributeError):
        return req.tag


class Model:
    """Documents events; answers the coarse stage directly when ``direct``, else asks for
    retrieval and answers the fine stage; the agentic planner searches once then answers."""

    def __init__(self, direct: bool):
        self.direct = direct
        self.planned = 0

    def __call__(self, req) -> str:
        tag = req.tag
        if tag == "event_writer":
            return "a textured scene on the robot camera"
        if tag == "node_merger":
            return "merged textured scenes"
        if tag == "two_phase_coarse" and self.direct is None:
            raise LLMError("scripted", "the coarse stage is down")
        if tag == "two_phase_coarse":
            return json.dumps({"answer": "a textured scene"} if self.direct else {"retrieve": "textured scene"})
        if tag == "two_phase_fine":
            return json.dumps({"answer": "seen"})
        if tag == "qa_summarizer":
            return "asked about the scene"
        if tag == "router":
            return json.dumps({"type": "tool", "name": "retrieve", "args": {"question": "textured scene"}})
        if tag == "planner":
            self.planned += 1
            if self.planned == 1:
                return json.dumps({"action": "search", "queries": [{"q": "textured scene", "top_k": 5,
                                                                    "inspect_k": 0, "threshold": 0.0}],
                                   "thought": "look first"})
            return json.dumps({"action": "answer", "response": "agentic: a textured scene",
                               "best_ref": {"turn_idx": 1, "result_idx": 0}, "thought": "t"})
        return "ok"


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
