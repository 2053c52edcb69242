"""The reasoning layer's model turn: send, parse, one repair, timings, usage and the typed trace."""
import json
import time

import pytest

from vam_engine.llm import prompts
from vam_engine.llm.base import LLMError, LLMResponse
from vam_engine.llm.schemas import parse_fine
from vam_engine.llm.scripted import ScriptedLLM
from vam_engine.reason.turn import ModelTurns, TraceEntry
from vam_engine.reason.answer import Answer


def _setup(replies, **kw):
    llm = ScriptedLLM(list(replies), **kw)
    ans = Answer("", False, [], "test")
    return llm, ans, ModelTurns(llm, ans)


def _request():
    return prompts.two_phase_fine(prompts.two_phase_coarse(["m"], ["f"], ["q"]), '{"retrieve": "x"}', ["parts"])


def test_a_valid_reply_needs_no_repair():
    llm, ans, turns = _setup(['{"answer": "yes"}'], delay_s=0.02)
    entry = TraceEntry("fine")
    t0 = time.perf_counter()
    turn = turns.ask(_request(), parse_fine, "fine", entry)
    wall = time.perf_counter() - t0
    assert turn.parsed.answer == "yes" and turn.request.tag == "two_phase_fine" and turn.reply == '{"answer": "yes"}'
    assert [r.tag for r in llm.sent] == ["two_phase_fine"] and turns.calls == 1
    assert entry.reply == '{"answer": "yes"}' and entry.error is None and entry.repair_reply is None
    assert not entry.repaired and [c.tag for c in entry.calls] == ["two_phase_fine"]
    assert entry.calls[0].prompt_tokens > 0 and 0.02 <= entry.seconds <= wall  # the model call, timed
    assert ans.tokens["prompt"] == entry.calls[0].prompt_tokens and "fine" in ans.timings
    assert "fine_prefill" in ans.timings


def test_an_invalid_reply_gets_exactly_one_repair():
    llm, ans, turns = _setup(["nope", '{"answer": "fixed"}'])
    entry = TraceEntry("fine")
    turn = turns.ask(_request(), parse_fine, "fine", entry)
    assert turn.parsed.answer == "fixed" and turn.request.tag == "two_phase_fine_repair"
    assert [r.tag for r in llm.sent] == ["two_phase_fine", "two_phase_fine_repair"]
    repair = llm.sent[1]
    assert repair.messages[-2].content == ["nope"] and "not valid JSON" in repair.messages[-1].content[0]
    assert entry.repaired and "not valid JSON" in entry.error and entry.repair_reply == '{"answer": "fixed"}'
    assert len(entry.calls) == 2 and turns.calls == 2


def test_two_invalid_replies_give_none_and_the_last_request():
    llm, ans, turns = _setup(["nope", "x" * 10_000])
    entry = TraceEntry("fine")
    turn = turns.ask(_request(), parse_fine, "fine", entry)
    assert turn.parsed is None and turn.request.tag == "two_phase_fine_repair" and turn.reply == "x" * 10_000
    assert not entry.repaired and entry.repair_error and len(entry.repair_reply) == 2000  # cut in the trace
    assert len(llm.sent) == 2


def test_no_repair_when_asked_not_to():
    llm, _, turns = _setup(["nope"])
    entry = TraceEntry("final")
    turn = turns.ask(_request(), parse_fine, "planning", entry, repair=False)
    assert turn.parsed is None and entry.error and entry.repair_reply is None and len(llm.sent) == 1


def test_a_model_failure_propagates_after_it_is_timed():
    llm, ans, turns = _setup(["unused"], fail=lambda r: LLMError("scripted", "down"))
    entry = TraceEntry("fine")
    with pytest.raises(LLMError, match="down"):
        turns.ask(_request(), parse_fine, "fine", entry)
    assert "fine" in ans.timings and entry.calls == [] and turns.calls == 1


def test_a_wrong_number_of_replies_is_a_model_failure():
    class Short:
        name = "short"

        def generate(self, requests):
            return [LLMResponse(text="a")]

    ans = Answer("", False, [], "test")
    with pytest.raises(LLMError, match="1 responses for 2 requests"):
        ModelTurns(Short(), ans).send([_request(), _request()], "inspection")
    assert ModelTurns(Short(), ans).send([], "inspection") == []


def test_trace_entries_serialise_without_their_defaults():
    _, _, turns = _setup(["nope", '{"answer": "fixed"}'])
    entry = TraceEntry("fine", detail={"nodes": [[1, 0.5]]})
    turns.ask(_request(), parse_fine, "fine", entry)
    d = entry.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["stage"] == "fine" and d["repaired"] is True and d["detail"] == {"nodes": [[1, 0.5]]}
    assert [c["tag"] for c in d["calls"]] == ["two_phase_fine", "two_phase_fine_repair"]
    assert "turn" not in d and "notes" not in d and "fallback" not in d
    assert TraceEntry("done").to_dict() == {"stage": "done"}
