"""Role prompts: prefix-stable requests, decoding per role, and the strict anchor verdict."""
import json

import numpy as np
import pytest

from vam_engine.llm import prompts, schemas
from vam_engine.llm.base import Image


def test_requests_put_the_fixed_system_prompt_first_and_frames_last_in_time_order():
    frames = [(np.full((8, 8, 3), i, np.uint8), float(i)) for i in range(3)]
    a = prompts.event_document("cam", 0.0, 2.0, frames)
    b = prompts.event_document("other", 5.0, 9.0, frames[:1])
    assert a.messages[0].content == b.messages[0].content == [prompts.EVENT_WRITER]
    assert a.tag == "event_writer" and (a.sampling.temperature, a.sampling.max_tokens) == (0.1, 700)
    user = a.messages[1].content
    assert json.loads(user[0])["time_range"] == {"start_s": 0.0, "end_s": 2.0, "clock": "stream"}
    assert user[1::2] == ["t=0.00s", "t=1.00s", "t=2.00s"] and all(isinstance(p, Image) for p in user[2::2])
    # changing a role's request does not change the shared table of settings
    a.sampling.max_tokens = 5
    assert prompts.SAMPLING["event_writer"].max_tokens == 700
    adj = prompts.anchor("x" * 1000, frames)
    assert adj.sampling.json_object and adj.sampling.temperature == 0.0
    assert len(json.loads(adj.messages[1].content[0])["target_event"]) == 400


def test_anchor_verdict_is_strict():
    ok = schemas.parse_anchor('```json\n{"match": true, "confidence": 0.8, "observed_event": "a door opens",'
                              ' "reason": "frame 2"}\n```')
    assert ok.match is True and ok.confidence == 0.8
    bad = ['{"match": true, "confidence": 0.8, "observed_event": "x", "reason": "y", "extra": 1}',  # extra key
           '{"match": "yes", "confidence": 0.8, "observed_event": "x", "reason": "y"}',  # wrong type
           '{"match": true, "confidence": 1.5, "observed_event": "x", "reason": "y"}',  # out of bounds
           '[1, 2]', 'the frames show a door', '', '[' * 100_000, None]
    for text in bad:
        with pytest.raises(ValueError):
            schemas.parse_anchor(text)


def test_clean_document_trims_bounds_and_refuses_empty():
    assert prompts.clean_document("  a line \n") == "a line"
    assert len(prompts.clean_document("x" * 10_000)) == prompts.MAX_DOC_CHARS
    with pytest.raises(ValueError, match="empty"):
        prompts.clean_document(" \n ")


def test_repair_cuts_a_runaway_reply_and_says_so():
    req = prompts.two_phase_coarse(["memory"], ["frames"], ["question"])
    short = prompts.repair(req, "not json", "reply is not valid JSON")
    assert short.tag == "two_phase_coarse_repair" and short.messages[:4] == req.messages
    assert short.messages[4].role == "assistant" and short.messages[4].content == ["not json"]
    ask = short.messages[5].content[0]
    assert "reply is not valid JSON" in ask and 'e.g. {"answer": "...", "sufficient": true} or {"retrieve": "..."}' in ask
    assert "cut" not in ask  # nothing was cut
    long = prompts.repair(req, "y" * 50_000, "e" * 10_000)
    assert long.messages[4].content == ["y" * prompts.REPAIR_REPLY_CHARS]
    ask = long.messages[5].content[0]
    assert f"first {prompts.REPAIR_REPLY_CHARS} of 50000 characters" in ask and len(ask) < 1000
    # a repair of a repair keeps the role's tag, and the sampling is a copy
    again = prompts.repair(long, "z", "still bad")
    assert again.tag == "two_phase_coarse_repair" and again.sampling is not req.sampling
    assert prompts.repair(prompts.plan("q?", "", 3), None, "x").messages[2].content == [""]


def test_reply_parsing_lives_in_schemas_not_in_prompts():
    assert not hasattr(prompts, "extract_json") and not hasattr(prompts, "parse_coarse")
    assert schemas.extract_json('```json\n{"a": 1}\n```') == {"a": 1}
    with pytest.raises(ValueError, match="one JSON object, got list"):
        schemas.extract_json("[1]")
    assert schemas.parse_coarse('{"retrieve": "people"}').retrieve == "people"
    assert schemas.parse_fine('{"answer": "yes"}').answer == "yes"
    # an insufficient answer may say what to look for; a think step goes first (OASIS's Think)
    r = schemas.parse_coarse('{"think": "dark frames", "answer": "a", "sufficient": false, "retrieve": "r"}')
    assert (r.think, r.answer, r.sufficient, r.retrieve) == ("dark frames", "a", False, "r")
    assert schemas.parse_coarse('<think>\nhmm\n</think>{"retrieve": "people"}').retrieve == "people"
    assert schemas.parse_intent('{"retrieve": "a red car"}').retrieve == "a red car"
    for bad, msg in [('{"answer": "a", "retrieve": "r"}', '"sufficient" is false'), ("{}", "one of"),
                     ('{"think": "x"}', "one of"), ('{"retrieve": "r", "sufficient": false}', "with .answer. only"),
                     ('{"answer": " "}', "blank"), ('{"answer": 5}', "invalid coarse reply")]:
        with pytest.raises(ValueError, match=msg):
            schemas.parse_coarse(bad)
    for bad in ('{"retrieve": " "}', '{"retrieve": "x", "answer": "y"}', "people"):
        with pytest.raises(ValueError):
            schemas.parse_intent(bad)
    with pytest.raises(ValueError, match="invalid fine reply"):
        schemas.parse_fine('{"answer": "a", "more": 1}')


def test_the_sufficient_verdict_is_strict_and_goes_with_answers_only():
    assert schemas.parse_fine('{"answer": "yes", "sufficient": true}').sufficient is True
    assert schemas.parse_fine('{"answer": "unclear", "sufficient": false}').sufficient is False
    assert schemas.parse_fine('{"answer": "yes"}').sufficient is None  # no verdict: not found
    assert schemas.parse_coarse('{"answer": "a cat", "sufficient": false}').sufficient is False
    for bad, msg in [('{"answer": "a", "sufficient": "true"}', "sufficient"),
                     ('{"answer": "a", "sufficient": 1}', "sufficient")]:
        with pytest.raises(ValueError, match=msg):
            schemas.parse_fine(bad)
        with pytest.raises(ValueError, match=msg):
            schemas.parse_coarse(bad)
    with pytest.raises(ValueError, match='"sufficient" goes with "answer" only'):
        schemas.parse_coarse('{"retrieve": "people", "sufficient": true}')


def test_router_and_planner_requests_carry_the_dialogue_and_the_summary_kinds():
    from vam_engine.memory.records import QARecord
    from vam_engine.memory.records import SummaryKind

    turns = [QARecord(1, 12.5, None, "when did the dog come in?", "at 12 s, through the blue door")]
    route = prompts.route("and before that?", 30.0, ["cam"], turns)
    payload = json.loads(route.messages[1].content[0])
    assert payload["dialogue"] == [{"t_s": 12.5, "question": "when did the dog come in?",
                                    "answer": "at 12 s, through the blue door"}]
    assert payload["request"] == "and before that?"
    plan = prompts.plan("and before that?", "", 3, dialogue=turns,
                        structures=[SummaryKind("minutes", 60.0, 4), SummaryKind(None, 15.0, 1)])
    text = plan.messages[1].content[0]
    assert text.index("when did the dog come in?") < text.index("Question: and before that?")
    assert "summary_structure 'minutes', 60 s windows: 4 document(s)" in text
    assert "no structure label, 15 s windows: 1 document(s)" in text
    bare = prompts.plan("q", "", 3).messages[1].content[0]
    assert bare.startswith("Question: q") and "Summary documents" not in bare
