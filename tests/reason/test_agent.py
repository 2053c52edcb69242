"""The agentic answerer: router, planner actions, repair and fallback paths, stopping rules,
causality, a fuzz of untrusted planner replies, and the schemas' bounds. A real store (the demo
clip, minilm documents) with scripted models."""
import json
import random
import re

import pytest

from support.demo_store import DOOR, documented_demo
from support.scripted import TagScript, verdict
from vam_engine.engine import Engine
from vam_engine.errors import VamError
from vam_engine.llm import LLMError, ScriptedLLM
from vam_engine.llm import prompts
from vam_engine.llm.base import Image
from vam_engine.llm.schemas import (MAX_REPLY_CHARS, AnswerAction, InspectAction, SearchAction, SummarizeAction,
                                    parse_action, parse_route)
from vam_engine.reason.agent import NOT_FOUND, AgenticAnswerer, max_model_calls
from vam_engine.memory.view import MemoryView

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 120


@pytest.fixture(scope="module")
def eng(tmp_path_factory):
    """The shared store: never written to by these tests (views over it have no writer)."""
    e = documented_demo(tmp_path_factory.mktemp("agent"))
    yield e
    e.close()


@pytest.fixture(scope="module")
def sum_eng(tmp_path_factory):
    """A second store for the tests that write summary documents."""
    e = documented_demo(tmp_path_factory.mktemp("agent_sum"))
    yield e
    e.close()


def _view(e, *, as_of=None, cameras=None, writer=False):
    return MemoryView(e.store, e.vectors, e.embedder, e.text_embedder(), e.forest,
                      e.writer.summarize if writer and e.writer else None,
                      as_of=as_of, cameras=cameras)


# -- scripted models ---------------------------------------------------------------------------
def _times(req) -> list[float]:
    return [float(p[2:-1]) for m in req.messages for p in m.content if isinstance(p, str) and re.fullmatch(
        r"t=-?[0-9.]+s", p)]


def _retrieve_as_asked(req) -> str:
    q = json.loads(req.messages[1].content[0])["request"]
    return json.dumps({"type": "tool", "name": "retrieve", "args": {"question": q}})


MATCH = verdict(True, 0.9, "the door", "seen")


def script(planner=(), router=None, verdicts=()) -> TagScript:
    """Replies by role: router and planner replies (their repairs and the planner's final request
    too) in order from lists, the router retrieving the question as asked when not given; the
    inspector says which frames it saw; the anchor verifier replies from ``verdicts`` in order,
    then a match."""
    verdicts = list(verdicts)
    return TagScript({"router*": list(router) if router is not None else _retrieve_as_asked,
                      "planner*": list(planner),
                      "inspector": lambda req: f"inspected frames at {_times(req)}",
                      "anchor_adjudicator": lambda req: verdicts.pop(0) if verdicts else MATCH})


def _ask(view, planner=(), *, router=None, verdicts=(), max_turns=6, question="Who opened the blue door?",
         fail=None):
    llm = ScriptedLLM(script(planner, router, verdicts), fail=fail)
    agent = AgenticAnswerer(llm, max_turns=max_turns)
    ans = agent.answer(question, view)
    assert len(llm.sent) <= agent.max_calls
    assert ans.mode == "agentic" and ans.trace[-1].stage == "done"
    assert ans.found == (not ans.text.startswith(NOT_FOUND)) and ans.text
    json.dumps([e.to_dict() for e in ans.trace])  # the trace serialises as plain data
    return ans, llm


def _tags(llm) -> list[str]:
    return [r.tag for r in llm.sent]


def _plans(llm) -> list:
    """The planner's requests (repairs and the final request included), in order."""
    return [r for r in llm.sent if r.tag.startswith("planner")]


def _planner_entries(ans):
    return [e for e in ans.trace if e.stage == "planner"]


def search(q, top_k=10, inspect_k=0, threshold=0.0, **extra):
    return {"action": "search", "queries": [{"q": q, "top_k": top_k, "inspect_k": inspect_k, "threshold": threshold}],
            **extra}


def answer(response="the answer", ref=None):
    a = {"action": "answer", "response": response}
    if ref is not None:
        a["best_ref"] = {"turn_idx": ref[0], "result_idx": ref[1]}
    return a


def _state(req) -> str:
    """The planner state message (the user text after the system prompt)."""
    return req.messages[1].content[0]


# -- router ------------------------------------------------------------------------------------
def test_router_final_answers_without_memory(eng):
    ans, llm = _ask(_view(eng), router=['{"type": "final", "text": "Hello! Ask me about the cameras."}'],
                    question="hi")
    assert ans.found and ans.text.startswith("Hello") and ans.evidence == []
    assert _tags(llm) == ["router"]
    assert ans.trace[0].action == "final" and "routing" in ans.timings and ans.tokens["completion"] > 0


def test_router_blank_final_is_invalid_and_falls_back_to_retrieve(eng):
    blank = '{"type": "final", "text": "   "}'
    ans, llm = _ask(_view(eng), [answer("nothing")], router=[blank, blank], question="Where is the car?")
    assert _tags(llm) == ["router", "router_repair", "planner"]
    assert ans.trace[0].fallback.startswith("retrieve") and "text" in ans.trace[0].error
    assert "Question: Where is the car?" in _state(_plans(llm)[0])
    assert not ans.found  # the planner answered without any evidence


def test_router_retrieve_rewrites_the_goal(eng):
    route = {"type": "tool", "name": "retrieve", "args": {"question": "When did the red car park?"}}
    ans, llm = _ask(_view(eng), [search("red car parks", sources=["event"]), answer("at 8 s", (1, 0))],
                    router=[route], question="car??")
    assert _state(_plans(llm)[0]).startswith("Question: When did the red car park?")
    assert ans.found and ans.text == "at 8 s" and "red car" in ans.evidence[0].text


def test_router_summarize_writes_documents_the_planner_can_cite(sum_eng):
    route = {"type": "tool", "name": "summarize", "args": {"min_time": 0.0, "max_time": 20.0, "time_mode": "relative",
                                                           "granularity_seconds": 10.0, "prompt": "what happens"}}
    ans, llm = _ask(_view(sum_eng, writer=True), [answer("two windows", (1, 1))], router=[route],
                    question="summarize the first 20 seconds every 10 seconds")
    docs = [e for e in ans.evidence if e.source == "summary"]
    assert [(d.t_start, d.t_end) for d in docs] == [(10.0, 20.0), (0.0, 10.0)]  # the cited one first
    assert docs[0].text.startswith("window summary 10.0-20.0") and docs[0].frame_paths
    assert "Turn 1 (router summarize): 2 new result(s)" in _state(_plans(llm)[0]) and "summarize" in ans.timings


# -- search ------------------------------------------------------------------------------------
def test_search_threshold_inspect_k_and_cited_ref(eng):
    ans, llm = _ask(_view(eng), [search(DOOR, top_k=10, inspect_k=1, threshold=0.5, sources=["event"]),
                                 answer("a person", (1, 0))])
    turn = _planner_entries(ans)[0]
    assert turn.action == "search" and turn.added and turn.error is None and turn.repair_reply is None
    state = _state(_plans(llm)[1])
    sims = [float(s) for s in re.findall(r"similarity ([0-9.]+)", state)]
    assert sims and min(sims) >= 0.5 and len(sims) == len(turn.added)
    inspections = [r for r in llm.sent if r.tag == "inspector"]
    assert len(inspections) == 1 and list(turn.inspections) == ["1.0"]
    top = ans.evidence[0]
    ts = _times(inspections[0])
    assert 1 <= len(ts) <= 8 and all(top.t_start - 1.0 <= t <= top.t_end + 1.0 for t in ts)
    assert "looked at: inspected frames" in state
    assert ans.found and DOOR in top.text and top.similarity >= 0.5
    assert all(0 < ans.timings[k] <= ans.timings["total"] for k in ("retrieval", "inspection", "planning"))


def test_search_results_are_deduplicated_across_turns(eng):
    ans, _ = _ask(_view(eng), [search(DOOR, sources=["event"]), search("blue door", sources=["event"]),
                               answer("x", (1, 0))])
    first, second = _planner_entries(ans)[:2]
    assert len(first.added) == 4 and second.added == []  # the same four events


def test_search_with_a_direct_time_range(eng):
    ans, _ = _ask(_view(eng), [search("anything", threshold=0.0, sources=["event"],
                                      time_range={"mode": "relative", "start": 25.0, "end": 40.0}),
                               answer("x", (1, 0))])
    assert ans.evidence and all(e.t_end >= 25.0 and e.t_start <= 40.0 for e in ans.evidence)


def test_single_anchor_picks_the_nth_occurrence_and_applies_windows(eng):
    second = {"anchor": {"description": DOOR, "occurrence_index": 2, "inspect_k": 0}}
    first_after = {"anchor": {"description": DOOR, "occurrence_index": 1, "inspect_k": 0}, "after_s": 10.0}
    ans, llm = _ask(_view(eng), [search("anything", sources=["event"], time_range=second),
                                 search("something", sources=["event"], time_range=first_after),
                                 answer("x", (1, 0))])
    t1, t2 = _planner_entries(ans)[:2]
    assert any("#2 at 30.00-38.50" in n for n in t1.notes)
    turn1 = [e for e in ans.evidence if e.t_start >= 30.0]
    assert turn1 and len(t1.added) == 1  # only the second door event overlaps its window
    assert any("#1 at 0.00-7.50" in n for n in t2.notes)
    assert {e.t_start for e in ans.evidence} == {30.0, 0.0, 8.0, 16.0}  # [0, 17.5] adds three events
    assert "anchor_adjudicator" not in _tags(llm)  # inspect_k 0: no verification


def test_anchor_verification_rejects_a_candidate(eng):
    no = json.dumps({"match": False, "confidence": 0.9, "observed_event": "a car", "reason": "no door"})
    rng = {"anchor": {"description": DOOR, "occurrence_index": 1, "inspect_k": 20,
                      "verification_prompt": "the door must open"}}
    ans, llm = _ask(_view(eng), [search("anything", sources=["event"], time_range=rng), answer("x", (1, 0))],
                    verdicts=[no])
    checks = [r for r in llm.sent if r.tag == "anchor_adjudicator"]
    assert 1 <= len(checks) <= 4  # at most 4 candidates checked, in one batch
    assert "the door must open" in checks[0].messages[1].content[0]
    notes = _planner_entries(ans)[0].notes
    assert any("#1 at 30.00-38.50" in n for n in notes)  # the first occurrence was rejected


def test_anchor_with_an_unreadable_verdict_counts_unverified(eng):
    rng = {"anchor": {"description": DOOR, "occurrence_index": 1, "inspect_k": 1}}
    ans, _ = _ask(_view(eng), [search("anything", sources=["event"], time_range=rng), answer("x", (1, 0))],
                  verdicts=["not json at all"])
    notes = _planner_entries(ans)[0].notes
    assert any("unverified" in n for n in notes) and any("#1 at 0.00-7.50" in n for n in notes)


def test_between_two_anchors(eng):
    rng = {"start_anchor": {"description": "a red car parks in the driveway", "inspect_k": 0},
           "end_anchor": {"description": "the hallway lights flicker", "inspect_k": 0}}
    ans, _ = _ask(_view(eng), [search("anything", sources=["event"], time_range=rng), answer("x", (1, 0))])
    # the flicker scene's event runs to 24 s: the never-focused blur scene's one kept moment (its
    # sharpest, marked by the gates' view rule) joins it
    assert {(e.t_start, e.t_end) for e in ans.evidence} == {(8.0, 8.0), (16.0, 24.0)}


def test_an_anchor_that_is_not_found_is_reported_to_the_planner(eng):
    rng = {"anchor": {"description": DOOR, "occurrence_index": 5, "inspect_k": 0}}
    ans, llm = _ask(_view(eng), [search("x", time_range=rng), answer("x")])
    assert any("occurrence 5 asked for" in n for n in _planner_entries(ans)[0].notes)
    state = _state(_plans(llm)[1])
    assert "occurrence 5 asked for" in state and "Turn 1 (search): no new results" in state
    assert not ans.found and ans.text.startswith(NOT_FOUND)


# -- inspect -----------------------------------------------------------------------------------
def test_inspect_by_time_range(eng):
    act = {"action": "inspect", "prompt": "what is visible?", "time_range": {"start": 0.0, "end": 10.0},
           "max_frames": 3}
    ans, llm = _ask(_view(eng), [act, answer("a textured scene", (1, 0))])
    req = [r for r in llm.sent if r.tag == "inspector"][0]
    ts = _times(req)
    assert 1 <= len(ts) <= 3 and all(0.0 <= t <= 10.0 for t in ts)
    assert "what is visible?" in req.messages[1].content[0]
    assert sum(isinstance(p, Image) for p in req.messages[1].content) == len(ts)
    ev = ans.evidence[0]
    assert ans.found and ev.text.startswith("inspected frames at") and len(ev.frame_paths) == len(ts)


def test_inspect_by_ref_looks_at_that_result(eng):
    act = {"action": "inspect", "prompt": "is the dog visible?", "ref": {"turn_idx": 1, "result_idx": 0},
           "max_frames": 16}
    ans, llm = _ask(_view(eng), [search("a dog walks out", sources=["event"], threshold=0.4), act,
                                 answer("yes", (2, 0))])
    hit = re.search(r"\[1\.0\] camera cam, ([0-9.]+)-([0-9.]+) s", _state(_plans(llm)[1]))
    t0, t1 = float(hit.group(1)), float(hit.group(2))
    ts = _times([r for r in llm.sent if r.tag == "inspector"][0])
    assert ts and all(t0 - 1.0 <= t <= t1 + 1.0 for t in ts)
    assert ans.evidence[0].text.startswith("inspected")


def test_inspect_with_a_dangling_ref_goes_through_repair(eng):
    bad = {"action": "inspect", "prompt": "look", "ref": {"turn_idx": 3, "result_idx": 0}}
    ans, llm = _ask(_view(eng), [bad, search(DOOR, sources=["event"]), answer("x", (1, 0))])
    assert _tags(llm)[:3] == ["router", "planner", "planner_repair"]
    repair = llm.sent[2]
    assert repair.messages[-2].role == "assistant" and "turn_idx" in repair.messages[-2].content[0]
    assert "[3.0] is not a result" in repair.messages[-1].content[0]
    turn = _planner_entries(ans)[0]
    assert turn.repaired and turn.action == "search" and ans.found


def test_repeating_the_same_inspection_adds_nothing(eng):
    act = {"action": "inspect", "prompt": "look", "time_range": {"start": 0.0, "end": 5.0}}
    ans, _ = _ask(_view(eng), [act, act, act, answer("x", (1, 0))])
    added = [e.added for e in _planner_entries(ans)]
    assert added[0] and added[1:] == [[], []] and ans.trace[-2].stage == "final"


# -- summarize ---------------------------------------------------------------------------------
def test_summarize_action_writes_window_documents(sum_eng):
    act = {"action": "summarize", "time_range": {"start": 0.0, "end": 30.0}, "granularity_seconds": 15.0,
           "prompt": "who comes and goes", "summary_structure": "quarter"}
    ans, llm = _ask(_view(sum_eng, writer=True), [act, answer("a timeline", (1, 0))])
    docs = ans.evidence
    assert {(d.t_start, d.t_end) for d in docs} == {(0.0, 15.0), (15.0, 30.0)}
    assert all(d.source == "summary" and "focus who comes and goes" in d.text for d in docs)
    kept = [x for x in sum_eng.store.summaries.list() if x.prompt == "who comes and goes"]
    assert kept and all(x.structure == "quarter" for x in kept)  # the planner's label is stored
    # the next planner turn is told which structures exist, and can filter on them
    second = [r for r in llm.sent if r.tag == "planner"][1].messages[1].content[0]
    assert "summary_structure 'quarter', 15 s windows" in second


def test_summarize_is_bounded_in_documents(sum_eng):
    act = {"action": "summarize", "time_range": {"start": 0.0}, "granularity_seconds": 0.5,
           "prompt": "every half second"}
    before = len(sum_eng.writer.llm.sent)
    ans, _ = _ask(_view(sum_eng, writer=True), [act, answer("many", (1, 0))])
    assert 0 < len(ans.evidence) <= 16 and len(sum_eng.writer.llm.sent) - before <= 16
    assert any("widened" in n for n in _planner_entries(ans)[0].notes)


# -- answer ------------------------------------------------------------------------------------
def test_answer_with_an_invalid_best_ref_falls_back_to_the_highest_similarity(eng):
    ans, _ = _ask(_view(eng), [search(DOOR, sources=["event"]), answer("x", (9, 9))])
    final = _planner_entries(ans)[-1]
    assert final.fallback.startswith("best_ref is not a result") and final.best_ref == "1.0"
    sims = [e.similarity for e in ans.evidence]
    assert sims[0] == max(sims) and DOOR in ans.evidence[0].text


def test_answer_with_a_valid_best_ref_cites_that_result_first(eng):
    ans, llm = _ask(_view(eng), [search(DOOR, sources=["event"]), answer("x", (1, 3))])
    entry = _planner_entries(ans)[-1]
    assert entry.best_ref == "1.3" and entry.fallback is None
    assert ans.evidence[0].similarity == min(e.similarity for e in ans.evidence)  # the 4th best of four


def test_answer_without_evidence_is_not_found(eng):
    ans, _ = _ask(_view(eng), [answer("probably a cat")])
    assert not ans.found and ans.text.startswith(NOT_FOUND) and "probably a cat" in ans.text and not ans.evidence


# -- repair and fallbacks ----------------------------------------------------------------------
def test_invalid_json_is_repaired_once(eng):
    ans, llm = _ask(_view(eng), ["Sure! I will search.", search(DOOR, sources=["event"]), answer("x", (1, 0))])
    assert _tags(llm)[:3] == ["router", "planner", "planner_repair"]
    rep = llm.sent[2]
    assert rep.messages[:2] == llm.sent[1].messages
    assert rep.messages[2].role == "assistant" and rep.messages[2].content == ["Sure! I will search."]
    assert "not valid JSON" in rep.messages[3].content[0] and "ONLY one valid JSON object" in rep.messages[3].content[0]
    turn = _planner_entries(ans)[0]
    assert turn.repaired and "not valid JSON" in turn.error and ans.found
    assert turn.reply == "Sure! I will search." and [c.tag for c in turn.calls] == ["planner", "planner_repair"]


def test_invalid_twice_on_the_first_turn_runs_a_permissive_search(eng):
    bad = '{"action": "search", "queries": []}'
    ans, llm = _ask(_view(eng), [bad, "nope", answer("x")], question="a person opens the door")
    turn = _planner_entries(ans)[0]
    assert turn.fallback == "permissive search" and turn.action == "search" and turn.repair_error
    assert len(turn.added) >= 4  # threshold 0, every source: all four events at least
    assert ans.found and ans.evidence[0].similarity == max(e.similarity for e in ans.evidence if e.similarity)


def test_invalid_twice_on_a_later_turn_answers_with_the_best_evidence(eng):
    ans, llm = _ask(_view(eng), [search(DOOR, sources=["event"]), "garbage", '{"action": "fly"}',
                                 answer("the final answer", (1, 0))])
    assert _tags(llm)[-1] == "planner" and "Remaining turns: 0" in _state(_plans(llm)[-1])
    assert _planner_entries(ans)[1].fallback == "answer with the best evidence"
    assert ans.found and ans.text == "the final answer"


def test_an_unusable_final_reply_still_ends_with_the_best_evidence(eng):
    ans, _ = _ask(_view(eng), [search(DOOR, sources=["event"]), "garbage", "garbage", "still garbage"])
    assert ans.found and ans.text.startswith("Best evidence") and DOOR in ans.text


# -- stopping ----------------------------------------------------------------------------------
def test_turn_budget_forces_a_final_answer(eng):
    queries = ["a red car parks", "the hallway lights flicker", "a person opens the blue door"]
    ans, llm = _ask(_view(eng), [search(q, top_k=1, sources=["event"]) for q in queries] + [answer("done", (2, 0))],
                    max_turns=3)
    assert [e.turns_left for e in _planner_entries(ans)] == [3, 2, 1]
    assert all(e.added for e in _planner_entries(ans))
    assert ans.trace[-2].stage == "final" and "turn budget" in ans.trace[-2].reason
    assert _tags(llm).count("planner") == 4 and ans.text == "done" and "hallway" in ans.evidence[0].text
    states = [_state(r) for r in _plans(llm)]
    for a, b in zip(states, states[1:]):  # prefix-stable: the context only grows at its end
        assert b.startswith(a[:a.index("\n\nRemaining turns")])


def test_two_turns_without_new_evidence_stop_the_loop(eng):
    same = search(DOOR, sources=["event"])
    ans, llm = _ask(_view(eng), [same, same, same, answer("stopped", (1, 0))], max_turns=6)
    turns = _planner_entries(ans)
    assert len(turns) == 3 and turns[2].reason.startswith("two consecutive turns")
    assert _tags(llm).count("planner") == 4 and ans.text == "stopped"


def test_stagnation_without_any_evidence_is_not_found(eng):
    nothing = search(DOOR, threshold=0.99)
    ans, llm = _ask(_view(eng), [nothing, nothing])
    assert not ans.found and ans.text.startswith(NOT_FOUND) and _tags(llm).count("planner") == 2


# -- model failures ----------------------------------------------------------------------------
def test_llm_error_mid_loop_ends_with_the_best_evidence(eng):
    n = {"planner": 0}

    def fail(req):
        if req.tag == "planner":
            n["planner"] += 1
            if n["planner"] == 2:
                return LLMError("scripted", "server unreachable", retryable=True)
        return None

    ans, _ = _ask(_view(eng), [search(DOOR, sources=["event"])], fail=fail)
    assert ans.found and ans.text.startswith("Best evidence (the model failed") and DOOR in ans.evidence[0].text
    assert any("server unreachable" in (e.error or "") for e in ans.trace)


def test_llm_error_at_the_router_is_not_found(eng):
    ans, _ = _ask(_view(eng), fail=lambda req: LLMError("scripted", "auth failed"))
    assert not ans.found and ans.text.startswith(NOT_FOUND) and "auth failed" in ans.text


def test_llm_error_during_inspection_is_caught(eng):
    ans, _ = _ask(_view(eng), [search(DOOR, inspect_k=2, sources=["event"])],
                  fail=lambda req: LLMError("scripted", "inspector down") if req.tag == "inspector" else None)
    # the search hits are kept (without inspection notes); the loop ends with the best of them
    assert ans.found and "inspector down" in ans.text and DOOR in ans.evidence[0].text
    assert _planner_entries(ans)[0].inspections == {} and _planner_entries(ans)[0].added


# -- causality ---------------------------------------------------------------------------------
def test_nothing_after_as_of_is_seen_or_sent(sum_eng):
    as_of = 20.0
    plan = [search("a person opens the blue door and walks out", top_k=50, inspect_k=5, threshold=0.0),
            {"action": "inspect", "prompt": "what happens?", "time_range": {"start": 0.0, "end": 40.0},
             "max_frames": 16},
            {"action": "inspect", "prompt": "more?", "ref": {"turn_idx": 1, "result_idx": 0}},
            search("anything", threshold=0.0, time_range={"anchor": {"description": DOOR, "occurrence_index": 1},
                                                          "after_s": 100.0}),
            {"action": "summarize", "time_range": {"start": 0.0, "end": 40.0}, "granularity_seconds": 10.0,
             "prompt": "causal"},
            answer("x", (1, 0))]
    view = _view(sum_eng, as_of=as_of, writer=True)
    ans, llm = _ask(view, plan)
    assert ans.found and ans.evidence
    assert all(e.t_end <= as_of for e in ans.evidence)
    times = {m.frame_path: (m.t_abs if m.t_abs is not None else m.t_rel) for m in sum_eng.store.moments.list("cam")}
    sent = [p for r in llm.sent for m in r.messages for p in m.content if isinstance(p, Image)]
    assert sent and all(times[p.data] <= as_of for p in sent)
    assert all(t <= as_of for r in llm.sent for t in _times(r))
    assert all(float(x) <= as_of for r in llm.sent if r.tag.startswith("planner")
               for x in re.findall(r"-([0-9.]+) s", _state(r)))
    router = json.loads(llm.sent[0].messages[1].content[0])
    assert router["now_s"] == as_of and router["cameras"] == ["cam"]


def test_a_camera_with_nothing_is_not_found(eng):
    ans, _ = _ask(_view(eng, cameras=["nobody"]), [search(DOOR), search("door")])
    assert not ans.found and not ans.evidence


def test_bad_arguments_are_refused():
    with pytest.raises(VamError):
        AgenticAnswerer(None)
    with pytest.raises(VamError):
        AgenticAnswerer(ScriptedLLM([]), max_turns=0)
    with pytest.raises(VamError):
        AgenticAnswerer(ScriptedLLM([])).answer("   ", None)


# -- fuzz --------------------------------------------------------------------------------------
def _fuzz_reply(rng: random.Random) -> str:
    """One untrusted planner reply: about half are valid actions of every kind; the rest are
    garbage, wrong types, out-of-bound values, extra keys, mixed time-range forms, huge strings
    and dangling refs."""
    bad = rng.random() < 0.5  # when set, each field below may come out wrong

    def pick(good, wrong):
        return rng.choice(wrong) if bad and rng.random() < 0.25 else good

    def text(good):
        return pick(good, ["", "   ", "x" * 1001, "x" * 100_000, 5, None, ["door"]])

    def ref():
        return {"turn_idx": pick(rng.randint(1, 4), [0, -1, "1", 1.5]),
                "result_idx": pick(rng.randint(0, 14), [-1, None, 10_001])}

    def anchor(desc):
        a = {"description": text(desc), "occurrence_index": pick(rng.choice([1, 1, 2, 3]), [0, 101, "2"]),
             "inspect_k": pick(rng.choice([0, 1, 4, 20]), [21, -1]), "top_k": pick(rng.choice([1, 10, 50]), [0, 51])}
        if rng.random() < 0.3:
            a["verification_prompt"] = pick("the door must open", ["v" * 401])
        return a

    def time_range():
        kind = rng.randrange(4)
        if kind == 0:
            t0 = pick(rng.uniform(0, 40), [-1.0, "5", None, 1e308])
            tr = {"mode": pick(rng.choice(["relative", "absolute"]), ["auto", "utc"]), "start": t0}
            if rng.random() < 0.7:
                tr["end"] = pick(rng.uniform(20, 60), [-5.0, 0.0, True])
            return tr
        if kind == 1:
            tr = {"anchor": anchor(rng.choice([DOOR, "a red car parks", "lights flicker"]))}
            if rng.random() < 0.6:
                tr["before_s"] = pick(rng.choice([0.0, 5.0, 30.0, 604800]), [604801, -1, "10"])
                tr["after_s"] = pick(rng.choice([0.0, 10.0, 100.0]), [604800.5, None])
        else:
            tr = {"start_anchor": anchor("a red car parks"), "end_anchor": anchor("the hallway lights flicker")}
        if bad and rng.random() < 0.2:  # mixed forms
            tr.update(rng.choice([{"start": 1.0}, {"anchor": anchor(DOOR)}, {"start_anchor": anchor(DOOR)}]))
        return tr

    def action():
        kind = pick(rng.choice(["search", "search", "inspect", "summarize", "answer"]), ["fly", None, 3])
        if kind == "search":
            a = {"action": "search", "queries": [
                {"q": text(rng.choice([DOOR, "a red car", "lights", "dog"])),
                 "top_k": pick(rng.randint(1, 30), [0, 201, "5", 5.0, True]),
                 "inspect_k": pick(rng.choice([0, 0, 1, 3, 50]), [51, -1]),
                 "threshold": pick(rng.choice([0.0, 0.3, 0.5, 0.65]), [-1, None, "0.5"])}
                for _ in range(pick(rng.choice([1, 1, 2, 3]), [0, 9]))]}
            if rng.random() < 0.4:
                a["time_range"] = time_range()
            if rng.random() < 0.3:
                a["sources"] = pick(rng.choice([["event"], ["summary", "event"], ["frame"]]),
                                    [["frame", "frame"], [], ["video"]])
            if rng.random() < 0.1:
                a["summary_filter"] = {"summary_structure": "x", "granularity_seconds": pick(60.0, [0, 86401])}
        elif kind == "inspect":
            a = {"action": "inspect", "prompt": text("look closely"), "max_frames": pick(rng.randint(1, 16), [0, 17])}
            if rng.random() < 0.5:
                a["ref"] = ref()  # may dangle: refs are drawn without looking at the context
            else:
                a["time_range"] = time_range()
            if bad and rng.random() < 0.2:
                a.update(ref=ref(), time_range=time_range())
        elif kind == "summarize":
            a = {"action": "summarize", "time_range": time_range(),
                 "granularity_seconds": pick(rng.choice([5.0, 10.0, 60.0, 86400]), [0, -1, 86400.5]),
                 "prompt": text("what happens")}
        else:
            a = {"action": kind, "response": text("a person opened the door")}
            if rng.random() < 0.7:
                a["best_ref"] = ref()
        if rng.random() < 0.3:
            a["thought"] = pick("because", [3, "t" * 3000])
        if bad and rng.random() < 0.15:
            a[rng.choice(["extra", "visual_ref", "joint_inspection"])] = 1
        return a

    r = rng.random()
    if r < 0.06:
        return rng.choice(["", "null", "[]", "42", '"answer"', "{", "{}", "not json", "```json\n{}\n```", "[" * 5000,
                           '{"action": null}', "NaN", '{"action": "search", "queries": [{"q": "door", "top_k": NaN}]}',
                           '{"action": "search", "queries": [{"q": "door", "threshold": Infinity}]}'])
    if r < 0.09:
        return "x" * 100_000
    reply = json.dumps(action())
    return f"```json\n{reply}\n```" if rng.random() < 0.1 else reply


def test_fuzzed_planner_replies_never_escape_and_always_end(eng):
    rng = random.Random(1234)
    views = [_view(eng), _view(eng, as_of=20.0)]
    planner_replies = 0
    runs = 0
    while planner_replies < 1200:
        runs += 1
        max_turns = rng.randint(1, 4)
        routes = [json.dumps({"type": "tool", "name": "retrieve", "args": {"question": "the door?"}})] * 6 + [
            '{"type": "final", "text": ""}', "garbage",
            json.dumps({"type": "tool", "name": "summarize", "args": {"min_time": 0, "granularity_seconds": 5,
                                                                      "prompt": "p"}})]
        verdicts = [verdict(True, 0.9, "d", "r"), "[[[", verdict(False, 0.9, "d", "r")]
        fuzz = TagScript({"router*": lambda req: rng.choice(routes), "planner*": lambda req: _fuzz_reply(rng),
                          "inspector": lambda req: rng.choice(["", "a door", "y" * 100_000])},
                         default=lambda req: rng.choice(verdicts))

        fail = None
        if rng.random() < 0.03:
            fail = lambda req: LLMError("fuzz", "down") if rng.random() < 0.2 else None  # noqa: E731
        llm = ScriptedLLM(fuzz, fail=fail)
        agent = AgenticAnswerer(llm, max_turns=max_turns)
        view = rng.choice(views)
        ans = agent.answer("Who opened the blue door?", view)
        planner_replies += fuzz.asked_like("planner")
        # bounded: every planner turn is at most a reply and a repair, plus one final request
        assert fuzz.asked_like("planner") <= 2 + 2 * max_turns + 1 - 2  # the router's two calls are not planner calls
        assert len(llm.sent) <= max_model_calls(max_turns)
        assert len([e for e in ans.trace if e.stage == "planner"]) <= max_turns
        assert ans.trace[-1].stage == "done" and ans.mode == "agentic"
        assert ans.trace[-1].detail["model_calls"] == len(llm.sent)
        assert isinstance(ans.text, str) and ans.text
        assert ans.found == (not ans.text.startswith(NOT_FOUND))
        if view.as_of is not None:
            assert all(e.t_end <= view.as_of for e in ans.evidence)
    assert runs >= 100


# -- schemas -----------------------------------------------------------------------------------
def _search_obj(**q):
    return {"action": "search", "queries": [{"q": "door", **q}]}


def test_search_bounds():
    a = parse_action(json.dumps(_search_obj()))
    assert isinstance(a, SearchAction) and (a.queries[0].top_k, a.queries[0].inspect_k, a.queries[0].threshold) == (
        10, 0, 0.65) and a.sources == ["frame", "event", "summary", "ocr", "object"]
    assert parse_action(json.dumps(_search_obj(top_k=5, inspect_k=50))).queries[0].inspect_k == 5  # clipped
    assert parse_action(json.dumps(_search_obj(top_k=200, threshold=3))).queries[0].top_k == 200
    for bad in [dict(top_k=0), dict(top_k=201), dict(inspect_k=-1), dict(inspect_k=51), dict(threshold=-0.1),
                dict(top_k="5"), dict(top_k=5.0), dict(top_k=True), dict(q=""), dict(q="  "), dict(q="x" * 1001),
                dict(extra=1)]:
        with pytest.raises(ValueError):
            parse_action(json.dumps(_search_obj(**bad)))
    with pytest.raises(ValueError, match="queries"):
        parse_action('{"action": "search", "queries": []}')
    with pytest.raises(ValueError, match="queries"):
        parse_action(json.dumps({"action": "search", "queries": [{"q": "a"}] * 9}))
    for sources in [[], ["video"], ["event", "event"]]:
        with pytest.raises(ValueError):
            parse_action(json.dumps({**_search_obj(), "sources": sources}))
    with pytest.raises(ValueError, match="finite"):
        parse_action('{"action": "search", "queries": [{"q": "a", "threshold": NaN}]}')


def test_inspect_and_summarize_bounds():
    ok = {"action": "inspect", "prompt": "look", "ref": {"turn_idx": 1, "result_idx": 0}}
    assert isinstance(parse_action(json.dumps(ok)), InspectAction)
    for bad in [{"max_frames": 0}, {"max_frames": 17}, {"prompt": ""}, {"ref": {"turn_idx": 0, "result_idx": 0}},
                {"ref": {"turn_idx": 1, "result_idx": -1}}, {"time_range": {"start": 0.0}}, {"ref": None}]:
        with pytest.raises(ValueError):
            parse_action(json.dumps({**ok, **bad}))
    s = {"action": "summarize", "time_range": {"start": 0.0, "end": 60.0}, "granularity_seconds": 86400, "prompt": "p"}
    assert isinstance(parse_action(json.dumps(s)), SummarizeAction)
    for bad in [{"granularity_seconds": 0}, {"granularity_seconds": 86400.01}, {"prompt": ""}, {"time_range": None},
                {"summary_structure": "s" * 65}]:
        with pytest.raises(ValueError):
            parse_action(json.dumps({**s, **bad}))


def test_time_range_forms():
    def tr(rng):
        return parse_action(json.dumps({"action": "inspect", "prompt": "p", "time_range": rng}))

    anchor = {"description": "door opens"}
    assert tr({"start": 1.0}).time_range.end is None
    a = tr({"anchor": {**anchor, "top_k": 3, "inspect_k": 20}, "before_s": 604800, "after_s": 0}).time_range
    assert a.anchor.inspect_k == 3 and a.anchor.occurrence_index == 1
    assert tr({"start_anchor": anchor, "end_anchor": anchor}).time_range.end_anchor is not None
    for bad in [{}, {"start": 5.0, "end": 1.0}, {"end": 5.0}, {"start": -1.0}, {"start": 1.0, "anchor": anchor},
                {"anchor": anchor, "start_anchor": anchor, "end_anchor": anchor}, {"start_anchor": anchor},
                {"anchor": anchor, "before_s": 604801}, {"anchor": anchor, "after_s": -1},
                {"start": 1.0, "before_s": 5}, {"mode": "auto", "start": 1.0},
                {"anchor": {**anchor, "occurrence_index": 0}}, {"anchor": {**anchor, "occurrence_index": 101}},
                {"anchor": {**anchor, "verification_prompt": "v" * 401}}, {"anchor": {**anchor, "top_k": 51}},
                {"anchor": {**anchor, "inspect_k": 21}}, {"anchor": {"description": ""}}]:
        with pytest.raises(ValueError):
            tr(bad)


def test_answer_and_unknown_actions():
    a = parse_action('{"action": "answer", "response": "yes", "best_ref": {"turn_idx": 2, "result_idx": 0}}')
    assert isinstance(a, AnswerAction) and a.best_ref.turn_idx == 2
    assert parse_action('```json\n{"action": "answer", "response": "yes"}\n```').best_ref is None
    for bad, msg in [('{"action": "answer", "response": ""}', "response"), ('{"action": "fly"}', "action"),
                     ('{"response": "x"}', "action"), ("[1]", "object"), ("no", "JSON"),
                     ("[" * 10_000, "JSON|deeply"), ("x" * (MAX_REPLY_CHARS + 1), "characters"),
                     ('{"action": "answer", "response": "' + "r" * 8001 + '"}', "response")]:
        with pytest.raises(ValueError, match=msg):
            parse_action(bad)


def test_route_schema():
    assert parse_route('{"type": "final", "text": "hi"}').text == "hi"
    r = parse_route('{"type": "tool", "name": "summarize", "args": {"min_time": 0, "granularity_seconds": 60, '
                    '"prompt": "p"}}')
    assert r.args.max_time is None and r.args.time_mode == "relative"
    def summarize(**args):
        base = {"min_time": 0, "granularity_seconds": 60, "prompt": "p"}
        return json.dumps({"type": "tool", "name": "summarize", "args": {**base, **args}})

    assert parse_route(summarize(max_time=5, min_time=5)).args.max_time == 5
    for bad in ['{"type": "final", "text": ""}', '{"type": "final", "text": "x", "extra": 1}',
                '{"type": "tool", "name": "retrieve", "args": {"question": "q", "k": 1}}',
                '{"type": "tool", "name": "search", "args": {}}', '{"type": "answer"}',
                summarize(min_time=10, max_time=5), summarize(min_time=-1), summarize(granularity_seconds=0),
                summarize(granularity_seconds=86401), summarize(prompt=""), summarize(time_mode="auto"),
                summarize(summary_structure="s" * 65), summarize(extra=1)]:
        with pytest.raises(ValueError):
            parse_route(bad)


def test_router_and_planner_requests_are_prefix_stable():
    r = prompts.route("where is the car?", 12.5, ["a", "b"])
    assert r.tag == "router" and r.messages[0].content == [prompts.ROUTER]
    assert (r.sampling.temperature, r.sampling.max_tokens, r.sampling.json_object) == (0.0, 300, True)
    a = prompts.plan("q?", "Turn 1 (search): 1 new result(s)", 3)
    b = prompts.plan("q?", "Turn 1 (search): 1 new result(s)\nTurn 2 (inspect): no new results", 2)
    assert a.messages[0].content == b.messages[0].content == [prompts.PLANNER]
    assert (a.sampling.temperature, a.sampling.max_tokens, a.sampling.json_object) == (0.1, 500, True)
    sa, sb = a.messages[1].content[0], b.messages[1].content[0]
    cut = sa.index("Remaining turns")
    assert sb.startswith(sa[:cut].rstrip("\n"))  # only the budget and what follows the context change
    assert "answer" in prompts.plan("q?", "", 0).messages[1].content[0]
    rep = prompts.repair(a, "z" * 100_000, "bad thing")
    assert rep.tag == "planner_repair" and len(rep.messages[2].content[0]) == 2000
    assert "bad thing" in rep.messages[3].content[0] and "first 2000 of 100000 characters" in rep.messages[3].content[0]


def test_relative_times_on_an_absolute_axis_count_from_the_first_moment(tmp_path):
    """A live camera's axis is unix seconds: "relative" 0..2 s is its first two seconds,
    "absolute" uses the axis as is."""
    import numpy as np

    t0 = 1_700_000_000.0
    with Engine(tmp_path / "live", {"ingest": {"fps": 2.0}}, device="cpu") as live:
        for i in range(12):
            rgb = np.repeat(np.repeat(np.random.default_rng(i).integers(30, 226, (6, 8, 3), dtype=np.uint8), 30, 0),
                            30, 1)
            live.push("door", rgb, i * 0.5, t_abs=t0 + i * 0.5)
        live.end_push("door")
        assert live.flush(timeout=60)
        view = MemoryView(live.store, live.vectors, live.embedder, None)
        rel = {"action": "inspect", "prompt": "look", "time_range": {"mode": "relative", "start": 0.0, "end": 2.0}}
        ab = {"action": "inspect", "prompt": "look", "time_range": {"mode": "absolute", "start": t0 + 4.0,
                                                                     "end": t0 + 5.5}}
        ans, llm = _ask(view, [rel, ab, answer("x", (1, 0))])
        first, second = [_times(r) for r in llm.sent if r.tag == "inspector"]
        assert first and all(t0 <= t <= t0 + 2.0 for t in first)
        assert second and all(t0 + 4.0 <= t <= t0 + 5.5 for t in second)


def test_tiny_local_model_runs_the_whole_loop_within_its_budget(eng, tmp_path, monkeypatch):
    """A random-weight Qwen2-VL never writes valid JSON: every turn goes through the repair and
    the fallbacks, and the run still ends within its budget with an answer or "Not found"."""
    from vam_engine.synthetic.tiny_qwen import build_tiny_qwen2_vl
    from vam_engine.llm.base import Sampling
    from vam_engine.llm.local_qwen import LocalQwenVL

    for role in ("router", "planner", "inspector", "anchor_adjudicator"):  # short replies keep it fast
        monkeypatch.setitem(prompts.SAMPLING, role, Sampling(temperature=0.0, max_tokens=16, json_object=True))
    llm = LocalQwenVL(build_tiny_qwen2_vl(tmp_path / "tiny"))
    try:
        ans = AgenticAnswerer(llm, max_turns=3).answer("Who opened the blue door?", _view(eng, as_of=25.0))
    finally:
        llm.close()
    assert ans.mode == "agentic" and ans.text
    assert ans.found != ans.text.startswith(NOT_FOUND)
    entries = _planner_entries(ans)
    assert 1 <= len(entries) <= 3 and any(e.repaired or e.fallback for e in entries)
    assert all(e.t_end <= 25.0 for e in ans.evidence)
    assert ans.tokens["prompt"] > 0 and ans.tokens["cached"] > 0  # repairs continue from the cached prompt


# -- the VAM planner fields visual_ref, joint_inspection, inspection_prompt ----------------------
def test_visual_ref_searches_for_the_look_of_an_earlier_result(eng):
    first = search(DOOR, top_k=3, sources=["event"])
    again = search("the same place", top_k=5, sources=["frame"], visual_ref={"ref": {"turn_idx": 1, "result_idx": 0}})
    ans, llm = _ask(_view(eng), [first, again, answer("there", (2, 0))])
    e1, e2 = _planner_entries(ans)[:2]
    assert e1.added and e2.added and e2.error is None
    ref = next(f for f in ans.evidence if f.source == "event")
    frames = [f for f in ans.evidence if f.source == "frame"]
    # the referred result's middle frame is the image query: the best frame hit is that frame
    mid = ref.frame_paths[len(ref.frame_paths) // 2]
    best = max(frames, key=lambda f: f.similarity or 0.0)
    assert mid in best.frame_paths and best.similarity == pytest.approx(1.0, abs=0.02)
    # a dangling or frameless visual_ref is an invalid action (repaired like any other)
    bad = search("x", visual_ref={"ref": {"turn_idx": 5, "result_idx": 0}})
    ans, llm = _ask(_view(eng), [first, bad, answer("x", (1, 0))])
    assert "visual_ref.ref: [5.0] is not a result" in _planner_entries(ans)[1].error


def test_joint_inspection_looks_at_the_picks_together_with_its_own_prompt(eng):
    act = search(DOOR, top_k=6, inspect_k=3, joint_inspection=True, inspection_prompt="which door is open?")
    ans, llm = _ask(_view(eng), [act, answer("the blue one", (1, 0))])
    inspections = [r for r in llm.sent if r.tag == "inspector"]
    assert len(inspections) == 1  # one request for all three picks
    payload = json.loads(inspections[0].messages[1].content[0])
    assert payload["question"] == "which door is open?" and payload["results_shown"] == 3
    assert sum(isinstance(p, Image) for p in inspections[0].messages[1].content) <= 16
    notes = list(_planner_entries(ans)[0].inspections.values())
    assert len(notes) == 3 and len(set(notes)) == 1
    # apart (the default), one request per pick, asked the inspection_prompt
    act = search(DOOR, top_k=6, inspect_k=2, inspection_prompt="which door is open?")
    ans, llm = _ask(_view(eng), [act, answer("the blue one", (1, 0))])
    inspections = [r for r in llm.sent if r.tag == "inspector"]
    assert len(inspections) == 2
    assert all(json.loads(r.messages[1].content[0])["question"] == "which door is open?" for r in inspections)
    for bad in ({"joint_inspection": 1}, {"joint_inspection": "yes"}, {"inspection_prompt": ""},
                {"visual_ref": {"ref": {"turn_idx": 1, "result_idx": 0}, "extra": 1}}, {"visual_ref": 1}):
        with pytest.raises(ValueError, match="invalid search action"):
            parse_action(json.dumps({**search("door"), **bad}))
