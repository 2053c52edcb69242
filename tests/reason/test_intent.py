"""Sorting a user turn: the rules (trigger phrases, cancels, changes, the condition as the request
minus its trigger), the model's reply taken only when it passes the strict schema (an unusable
one falls back to the rules and says why), which standing request a cancel means; and the
dialogue shown to the model bounded by a token budget (newest kept) in the two-phase and the
agentic answerers."""
import json
from types import SimpleNamespace

import pytest

from support.scripted import scripted_llm, texts
from support.sessions import CFG, dialogue_shown, frame
from vam_engine.engine import Engine
from vam_engine.llm import prompts
from vam_engine.llm.base import LLMError
from vam_engine.memory.records import QARecord
from vam_engine.reason.intent import classify_by_model, classify_by_rules, given, pick_targets


@pytest.mark.parametrize("text, kind, condition", [
    ("tell me when a red square appears", "watch", "a red square appears"),
    ("Tell me when a taxi sign appears.", "watch", "a taxi sign appears"),
    ("Please let me know if the courier arrives!", "watch", "the courier arrives"),
    ("Hey, notify me as soon as the door opens", "watch", "the door opens"),
    ("alert me when the light turns green", "watch", "the light turns green"),
    ("Actually, tell me when a blue car parks instead", "change", "a blue car parks"),
    ("stop watching for that", "cancel", None),
    ("Never mind the courier", "cancel", None),
    ("what is on screen?", "question", None),
    ("When did the red car leave?", "question", None),
    ("Can you tell me when the car left?", "question", None),  # about the past: a question
    ("let me know when", "question", None),  # a trigger with nothing to watch for
])
def test_the_rules_read_triggers_cancels_and_questions(text, kind, condition):
    r = classify_by_rules(text)
    assert (r.kind, r.condition, r.by) == (kind, condition, "rules")


def test_the_rules_read_repeats_and_cancel_targets():
    assert classify_by_rules("alert me every time a car parks").repeat is True
    assert classify_by_rules("tell me when a car parks").repeat is False
    assert classify_by_rules("cancel all").target == "all"
    assert classify_by_rules("OK, stop watching everything").target == "all"
    assert classify_by_rules("forget the red square").target == "red square"
    assert classify_by_rules("stop watching for that").target is None


def _standing(*conditions):
    return [SimpleNamespace(monitor_id=f"mon_{k:012x}", request=f"tell me when {c}", condition=c)
            for k, c in enumerate(conditions)]


def test_pick_targets_names_all_an_id_words_or_the_most_recent():
    w = _standing("a red square appears", "the courier arrives", "a dog barks")
    assert pick_targets(classify_by_rules("cancel all"), w) == w
    assert pick_targets(classify_by_rules("never mind the courier"), w) == [w[1]]
    assert pick_targets(classify_by_rules("forget the red square"), w) == [w[0]]
    assert pick_targets(classify_by_rules("stop watching for that"), w) == [w[2]]
    assert pick_targets(classify_by_rules("stop watching the weather"), w) == [w[2]]  # no word shared
    assert pick_targets(given("cancel", "stop", target=w[0].monitor_id), w) == [w[0]]
    assert pick_targets(classify_by_rules("cancel all"), []) == []


def _model(*replies):
    return scripted_llm({"turn_classifier": list(replies)})


def test_the_model_is_taken_when_its_reply_passes_the_schema():
    w = _standing("a red square appears", "the courier arrives")
    llm = _model({"kind": "cancel", "condition": "", "target": 1, "repeat": False},
                 {"kind": "watch", "condition": "  a  green  light ", "target": None, "repeat": True})
    r = classify_by_model(llm, "forget about the delivery guy", w)
    assert (r.kind, r.target, r.by, r.note) == ("cancel", 1, "model", None)
    assert pick_targets(r, w) == [w[1]]  # the model named it; no word of the text did
    sent = json.loads(llm.sent[0].messages[-1].content[0])
    assert sent["message"] == "forget about the delivery guy"
    assert [s["condition"] for s in sent["standing_requests"]] == ["a red square appears", "the courier arrives"]
    r = classify_by_model(llm, "ping me whenever the light is green", w)
    assert (r.kind, r.condition, r.repeat) == ("watch", "a green light", True)
    assert llm.sent[-1].priority_class == "frontend"


@pytest.mark.parametrize("reply, problem", [
    ({"kind": "watch", "condition": "x" * 301, "target": None, "repeat": False}, "at most 300"),
    ({"kind": "watch", "condition": "a\x00b", "target": None, "repeat": False}, "control characters"),
    ({"kind": "watch", "condition": "a car", "target": None, "repeat": False, "why": "extra"}, "why"),
    ({"kind": "shout", "condition": "", "target": None, "repeat": False}, "kind"),
    ({"kind": "cancel", "condition": "", "target": "2", "repeat": False}, "target"),
    ("Sure! I will watch for it.", "not valid JSON"),
])
def test_an_unusable_model_reply_falls_back_to_the_rules(reply, problem):
    r = classify_by_model(_model(reply), "tell me when a red square appears", [])
    assert (r.kind, r.condition, r.by) == ("watch", "a red square appears", "rules")
    assert problem in r.note


def test_a_failed_model_falls_back_and_an_unknown_id_means_the_most_recent():
    llm = scripted_llm({"turn_classifier": "x"}, fail=lambda req: LLMError("scripted", "unreachable"))
    r = classify_by_model(llm, "what is here?", [])
    assert (r.kind, r.by) == ("question", "rules") and "unreachable" in r.note
    w = _standing("a red square appears", "a dog barks")
    r = classify_by_model(_model({"kind": "cancel", "condition": "", "target": 7, "repeat": False}), "stop", w)
    assert r.target is None and pick_targets(r, w) == [w[1]]


# -- the dialogue's token budget --------------------------------------------------------------------
def test_fit_dialogue_keeps_the_newest_pairs_within_the_budget():
    recs = [QARecord(k, float(k), None, f"q{k} " + "x" * 96, "a" * 300) for k in range(10)]
    each = prompts.estimate_tokens(recs[0].question + recs[0].answer) + 6  # 100 + 6 for the line's frame
    assert prompts.fit_dialogue(recs, 3 * each) == recs[-3:]
    assert prompts.fit_dialogue(recs, 3 * each - 1) == recs[-2:]
    assert prompts.fit_dialogue(recs, 0) == [] and prompts.fit_dialogue(recs, 10**6) == recs
    long = [QARecord(0, 0.0, None, "q" * 5000, "a" * 5000)]  # cut to DIALOGUE_CHARS each before counting
    assert prompts.fit_dialogue(long, 2 * prompts.DIALOGUE_CHARS // 4 + 6) == long


@pytest.mark.parametrize("budget", [200, 2000])
def test_the_dialogue_shown_is_bounded_by_tokens_newest_kept(tmp_path, budget):
    long_answer = "a long answer " * 30  # 420 characters: about 105 tokens a pair with its question
    llm = scripted_llm({"two_phase_coarse": lambda req: {"answer": long_answer, "sufficient": True},
                        "router": {"type": "final", "text": "hello"}, "qa_summarizer": "s"})
    cfg = {**CFG, "sessions": {"dialogue_tokens": budget}}
    with Engine(tmp_path / "s", cfg, device="cpu", llm=llm) as eng:
        eng.push("cam", frame(False), 0.0)
        asked = [f"question number {k}?" for k in range(12)]
        for q in asked:
            eng.ask(q, session="s", mode="two_phase")
        eng.ask("and now?", session="s", mode="agentic")
    coarse = [r for r in llm.sent if r.tag == "two_phase_coarse"][-1]
    shown = dialogue_shown(coarse)
    routed = json.loads(texts([r for r in llm.sent if r.tag == "router"][-1])[-1])["dialogue"]
    assert shown == asked[11 - len(shown):11]  # the last question's dialogue: the ones before it, newest kept
    assert [d["question"] for d in routed] == asked[12 - len(routed):]
    cost = sum(prompts.estimate_tokens(q + long_answer) + 6 for q in shown)
    assert cost <= budget
    if budget == 200:
        assert len(shown) == 1 and len(routed) == 1  # a long history cut to the newest pair
    else:
        assert len(shown) == 11 and len(routed) == 12  # every pair fits
