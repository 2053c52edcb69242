"""The planner's find_entity and last_seen actions over what perception stored (the session store
of support/perception_store.py), with a scripted model: the results come from the question's
view (its cameras and ``as_of``), need no model call, and the answer cites boxes on frames."""
import json

import pytest

from support.scripted import TagScript
from vam_engine.llm import ScriptedLLM
from vam_engine.llm.schemas import FindEntityAction, parse_action
from vam_engine.engine import Engine


def answerer(planner_replies):
    return ScriptedLLM(TagScript({"router*": {"type": "tool", "name": "retrieve", "args": {"question": "q"}},
                                  "planner*": list(planner_replies), "qa_summarizer": "asked"}))


ANSWER = {"action": "answer", "response": "done", "best_ref": {"turn_idx": 1, "result_idx": 0}}


def ask(store, replies, **kw):
    with Engine(store, {"writer": {"enabled": False}}, llm=answerer(replies)) as eng:
        return eng.ask("where is the cat?", mode="agentic", **kw)


def test_find_entity_cites_the_things_boxes(perception_store, copy_store):
    a = ask(copy_store(perception_store["store"]), [{"action": "find_entity", "label": "cat", "query": "orange"}, ANSWER])
    assert a.found and a.text == "done"
    ev = a.evidence
    assert {e.camera_id for e in ev} == {"gate", "yard"} and all(e.source == "object" for e in ev)
    assert ev[0].camera_id == "gate"  # seen there last: first
    assert all(e.boxes and all(b.label == "cat" and b.moment_id in e.moment_ids for b in e.boxes) for e in ev)
    assert "entity" in ev[0].text and "orange" in ev[0].text
    planner = [t for t in a.trace if t.stage == "planner"]
    assert planner[0].action == "find_entity" and planner[0].added


def test_last_seen_answers_from_the_view(perception_store, copy_store):
    store = copy_store(perception_store["store"])  # answers are recorded in the store's QA history
    a = ask(store, [{"action": "last_seen", "query": "cat"}, ANSWER], as_of=12.0)
    assert a.found and len(a.evidence) == 1
    ev = a.evidence[0]
    assert ev.camera_id == "yard" and ev.t_end <= 12.0 and ev.boxes[0].label == "cat"  # nothing after as_of
    gate_only = ask(store, [{"action": "last_seen", "query": "person"},
                                                {"action": "find_entity", "label": "person"}], camera="gate")
    assert not gate_only.found  # the person was on the yard: the gate view has none of it


def test_entity_actions_are_strict():
    assert isinstance(parse_action(json.dumps({"action": "find_entity", "query": "K 482"})), FindEntityAction)
    for bad in ({"action": "find_entity"}, {"action": "find_entity", "label": "car", "limit": 51},
                {"action": "last_seen"}, {"action": "last_seen", "query": "cup", "camera": "x"}):
        with pytest.raises(ValueError):
            parse_action(json.dumps(bad))
