"""A question's budget (reason/budget.py): how images are shared among cameras (ranked) and among
retrieved nodes (even), which cameras a question ranks first (named, matching the memory's text
side, recent alerts, activity) over a real store's signals (memory/cameras.py), and the planner's
inspections over many cameras kept to the budget's best cameras. The 64-camera end-to-end check
is tests/benchmarks/test_bench_scale.py."""
from __future__ import annotations

import math

import pytest

from support.scripted import scripted_llm
from support.server import build_engine
from vam_engine.memory import CameraSignal
from vam_engine.reason import AgenticAnswerer
from vam_engine.reason.budget import (Budget, QuestionBudget, fair_shares, named_cameras, rank_cameras,
                                      ranked_shares, summary_line)

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 240


def test_ranked_shares_stay_in_the_cap_and_leave_every_later_camera_its_floor(rng):
    for _ in range(300):
        wants = [int(x) for x in rng.integers(0, 50, int(rng.integers(1, 9)))]
        cap, floor = int(rng.integers(1, 40)), int(rng.integers(1, 6))
        shares = ranked_shares(wants, cap, floor)
        assert sum(shares) <= cap and all(0 <= s <= w for s, w in zip(shares, wants))
        if sum(wants) <= cap:
            assert shares == wants
        if sum(min(w, floor) for w in wants) <= cap:  # room for every floor: each gets it
            assert all(s >= min(w, floor) for s, w in zip(shares, wants))
            # what is left over goes to the first cameras: a later one never exceeds its floor
            # while an earlier one still wants more
            for i, (s, w) in enumerate(zip(shares, wants)):
                if s < w:
                    assert all(t <= min(v, floor) for t, v in zip(shares[i + 1:], wants[i + 1:]))
    assert ranked_shares([40, 40, 40, 40], 16, 4) == [4, 4, 4, 4]
    assert ranked_shares([40, 2, 40], 16, 4) == [10, 2, 4]


def test_fair_shares_fill_the_cap_as_evenly_as_the_wants_allow(rng):
    for _ in range(300):
        wants = [int(x) for x in rng.integers(0, 20, int(rng.integers(1, 7)))]
        cap = int(rng.integers(0, 60))
        shares = fair_shares(wants, cap)
        assert sum(shares) == min(cap, sum(wants)) and all(0 <= s <= w for s, w in zip(shares, wants))
        short = [s for s, w in zip(shares, wants) if s < w]  # items left wanting
        if short:  # none of them got less than another item's share minus one
            assert min(short) >= max(shares) - 1
    assert fair_shares([16, 16], 32) == [16, 16] and fair_shares([16, 16, 4, 4], 32) == [12, 12, 4, 4]


def test_named_cameras_are_whole_words_in_question_order():
    cams = ["dock", "dock-3", "dock-30", "Gate"]
    assert named_cameras("was the truck at dock-30 before DOCK-3?", cams) == ["dock-30", "dock-3"]
    assert named_cameras("what is at the gate now", cams) == ["Gate"]
    assert named_cameras("anything at the docks?", cams) == []
    assert named_cameras("who rang at the front door?", ["front_door", "front", "door-2"]) == ["front_door", "front"]


def test_rank_cameras_orders_named_then_matching_then_alerts_then_activity():
    sig = [CameraSignal("a", last_moment_t=90.0), CameraSignal("b", matches=2, score=3.0, last_moment_t=10.0),
           CameraSignal("c", matches=1, score=9.0, last_moment_t=5.0), CameraSignal("d", last_alert_t=80.0,
                                                                                     last_moment_t=20.0),
           CameraSignal("e", last_alert_t=1.0, last_moment_t=95.0), CameraSignal("f")]
    ranked = rank_cameras("what happened on f?", "abcdef", sig, now=100.0, span_s=60.0)
    assert [c.camera_id for c in ranked] == ["f", "c", "b", "d", "e", "a"]
    assert ranked[0].reasons == ("named",) and ranked[1].reasons == ("matches", "active")
    assert "alert" in ranked[3].reasons and "alert" not in ranked[4].reasons  # e's alert is older than the span
    # span 0: any alert counts
    assert [c.camera_id for c in rank_cameras("?", "ae", sig, now=100.0, span_s=0)] == ["e", "a"]
    line = summary_line(ranked[-1])
    assert line == "- camera a: no event described yet; last activity t=90.00s"


@pytest.fixture(scope="module")
def eng(tmp_path_factory):
    e = build_engine(tmp_path_factory.mktemp("budget") / "store", n=24)  # front: red scenes, yard: green
    yield e
    e.close()


def test_camera_signals_read_the_memory_text_side_causally(eng):
    view = eng.view()
    by = {s.camera_id: s for s in view.camera_signals("which camera saw the red scene?")}
    assert set(by) == {"front", "yard"}
    # "red" is on front's documents only, "scene" on every camera's (it weighs less); "which",
    # "camera", "saw", "the": words that say nothing about what to look for are not matched
    assert (by["front"].matches, by["yard"].matches) == (2, 1)
    assert by["front"].score == pytest.approx(math.log(1 + 2 / 1) + math.log(1 + 2 / 2))
    assert by["yard"].score == pytest.approx(math.log(1 + 2 / 2))
    for s in by.values():
        assert s.last_moment_t == view.latest_time(s.camera_id) and s.last_document.startswith("a ")
        assert s.last_event_t is not None and s.last_event_t <= s.last_moment_t and s.last_alert_t is None
    # nothing that ends after as_of: just before front's first document ends, no document of it
    first = min(e.t_end for e in eng.store.events.documented("front"))
    early = {s.camera_id: s for s in eng.view(as_of=first - 1e-3).camera_signals("red scene")}
    assert early["front"].matches == 0 and early["front"].last_document is None
    assert early["front"].last_moment_t == eng.view(as_of=first - 1e-3).latest_time("front")
    at = {s.camera_id: s for s in eng.view(as_of=first).camera_signals("red scene")}
    assert at["front"].matches == 2 and at["front"].last_event_t == first
    # a span that starts after every document finds none; a scoped view reads its cameras only
    assert not any(s.matches for s in view.camera_signals("red scene", since=1e6))
    assert [s.camera_id for s in eng.view(cameras=["yard"]).camera_signals("green")] == ["yard"]
    ranking = QuestionBudget(Budget(), "where was the green scene?").ranking(view)
    assert ranking[0].camera_id == "yard" and "matches" in ranking[0].reasons


def test_an_inspection_over_many_cameras_looks_at_the_budgets_best(eng):
    """max_images 4 and min_camera_images 4: one camera at a time; an inspection of a time range
    over every camera reads only the question's best (yard: the question's words match it)."""
    plan = [{"action": "inspect", "time_range": {"mode": "relative", "start": 0.0, "end": 12.0},
             "prompt": "what colour is the scene?", "max_frames": 16, "thought": "look"},
            {"action": "answer", "response": "green", "best_ref": {"turn_idx": 1, "result_idx": 0}, "thought": "t"}]
    llm = scripted_llm({"router": {"type": "tool", "name": "retrieve", "args": {"question": "green scene"}},
                        "planner*": plan, "inspector": "a green scene"}, default="ok")
    budget = QuestionBudget(Budget(max_images=4, min_camera_images=4), "what colour was the green scene?")
    ans = AgenticAnswerer(llm, budget=budget).answer("what colour was the green scene?", eng.view())
    (inspection,) = [r for r in llm.sent if r.tag == "inspector"]
    shown = [p for m in inspection.messages for p in m.content if not isinstance(p, str)]
    assert len(shown) == 4  # max_frames 16 asked, the budget's 4 sent
    assert {e.camera_id for e in ans.evidence} == {"yard"}
    assert budget.account.requests["inspection"]["images"] == 4
    assert any("left out by the budget" in n and "yard" in n for n in budget.account.notes)


def _coarse_of(eng, budget: Budget, question: str):
    llm = scripted_llm({"two_phase_coarse*": {"answer": "seen", "sufficient": True}}, default="summary")
    qb = QuestionBudget(budget, question)
    from vam_engine.reason import TwoPhaseAnswerer

    ans = TwoPhaseAnswerer(llm, None, eng.text_embedder(), update_qa=False, use_qa=False, budget=qb).answer(
        question, eng.view())
    assert ans.found
    return llm.sent[0], qb.account, ans


def test_the_coarse_request_holds_to_the_token_budget_and_summarises_who_does_not_fit(eng):
    q = "what is on the green yard camera?"
    # two cameras: shown whole, as before the budget (ask.whole_cameras 2), even over a small budget
    req, account, _ = _coarse_of(eng, Budget(max_images=2, max_tokens=1000), q)
    cost = Budget().cost(req)
    assert [c for c, _, _ in account.shown] == ["yard", "front"] and cost[0] > 2
    assert account.requests["coarse"] == {"images": cost[0], "tokens": cost[1]}
    assert any("over the budget" in n for n in account.notes)
    # the budget binding (whole_cameras 0): the tokens after the text leave room for a few of
    # yard's frames (it matches the question), none for front, which gets one line instead
    b = Budget(max_images=16, max_tokens=1400, whole_cameras=0)
    req, account, ans = _coarse_of(eng, b, q)
    images, tokens = b.cost(req)
    assert tokens <= 1400 and 0 < images < 4
    assert [c for c, _, _ in account.shown] == ["yard"] and account.shown[0][2] == images
    assert account.summarised == ["front"] and account.trimmed["yard"] > 0
    frames = "\n".join(p for p in req.messages[2].content if isinstance(p, str))
    assert "Other cameras in view, not shown here" in frames and "- camera front: last event to t=" in frames
    assert "Camera front" not in frames
    assert {e.camera_id for e in ans.evidence} == {"yard"}  # a coarse answer cites what it saw
