"""Sessions through the engine's API: "tell me when a red square appears" as a turn registers a
standing request bound to the session, acknowledged at once (no alert), and the session gets a
model-written reply within TimeOK of the square's appearance; "stop watching for that" ends it;
a change replaces it; a failed reply model still leaves a reply with the check's observation;
each session keeps its own turns and dialogue; a session bound to cameras refuses others; a
caller that may not watch is refused; ``ask`` in a session records its turns."""
import pytest

from support.scripted import TagScript
from support.sessions import CFG, dialogue_shown, push, session_model
from vam_engine.engine import Engine
from vam_engine.errors import VamError
from vam_engine.llm import LLMError, ScriptedLLM
from vam_engine.memory.sessions import SessionError, SessionLimit, WatchNotAllowed

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 180
APPEARS = 7.0  # the square's appearance, stream time


@pytest.fixture
def make(tmp_path):
    made = []

    def build(script: TagScript | None = None, cfg=None, **llm_kw):
        eng = Engine(tmp_path / f"store{len(made)}", cfg or CFG, device="cpu",
                     llm=ScriptedLLM(script or session_model(), **llm_kw))
        made.append(eng)
        return eng
    yield build
    for eng in made:
        eng.close()


def test_tell_me_when_registers_acknowledges_and_replies_within_time_ok(make):
    script = session_model()
    eng = make(script)
    push(eng, "cam", 0.0, 1.0)
    r = eng.turn("Tell me when a red square appears.", session="alice")
    # acknowledged at once: a watch turn, a monitor bound to the session, no alert
    assert r.kind == "watch" and r.intent.by == "model" and r.intent.condition == "a red square appears"
    assert r.monitor.condition == "a red square appears" and r.monitor.mode == "once" and r.monitor.active
    assert [(t.role, t.kind) for t in r.turns] == [("user", "watch"), ("engine", "watch")]
    assert "a red square appears" in r.text and eng.alerts() == []
    assert [w.monitor_id for w in eng.session("alice").watches] == [r.monitor.monitor_id]
    assert script.asked["turn_classifier"] == 1 and script.asked["watch_reply"] == 0
    push(eng, "cam", 1.0, 12.0, red_from=APPEARS)
    (alert,) = eng.alerts()
    turns = eng.session("alice").turns
    assert [(t.role, t.kind) for t in turns] == [("user", "watch"), ("engine", "watch"), ("engine", "reply")]
    reply = turns[-1]
    assert -0.5 <= reply.t - APPEARS <= 2.0  # TimeOK
    assert reply.text == f"As you asked (Tell me when a red square appears.): {alert.observed} at t={alert.t:g}s."
    assert reply.alert_id == alert.alert_id and reply.monitor_id == r.monitor.monitor_id
    (ev,) = reply.evidence
    assert ev.camera_id == "cam" and ev.t_end == alert.t and ev.frame_paths == alert.frame_paths
    assert script.asked["watch_reply"] == 1 and eng.session("alice").watches == ()  # a once request ended
    assert eng.reply_stats().replies == 1 and eng.reply_stats().fallbacks == 0
    # the request and its reply are the session's dialogue: a follow-up sees them
    follow = eng.turn("what colour was it?", session="alice")
    (coarse,) = [r for r in eng.llm.sent if r.tag == "two_phase_coarse"]
    assert follow.kind == "answer" and dialogue_shown(coarse) == ["Tell me when a red square appears."]
    assert reply.text in "\n".join(p for m in coarse.messages for p in m.content if isinstance(p, str))


def test_a_standing_request_survives_a_restart_and_still_replies_to_its_session(tmp_path):
    with Engine(tmp_path / "s", CFG, device="cpu", llm=ScriptedLLM(session_model())) as eng:
        push(eng, "cam", 0.0, 1.0)
        watch = eng.turn("tell me when a red square appears", session="alice")
    with Engine(tmp_path / "s", CFG, device="cpu", llm=ScriptedLLM(session_model())) as eng:
        assert [w.monitor_id for w in eng.session("alice").watches] == [watch.monitor.monitor_id]
        push(eng, "cam", 1.0, 10.0, red_from=APPEARS)  # the first ingest resumes the store's monitors
        turns = eng.session("alice").turns
        assert [t.kind for t in turns] == ["watch", "watch", "reply"]
        assert turns[-1].monitor_id == watch.monitor.monitor_id and -0.5 <= turns[-1].t - APPEARS <= 2.0


def test_stop_watching_ends_the_request_and_no_reply_comes(make):
    script = session_model()
    eng = make(script)
    push(eng, "cam", 0.0, 1.0)
    watch = eng.turn("Tell me when a red square appears.", session="bob")
    push(eng, "cam", 1.0, 3.0)
    stop = eng.turn("stop watching for that", session="bob")
    assert stop.kind == "cancel" and stop.ended == (watch.monitor.monitor_id,)
    assert "a red square appears" in stop.text and eng.session("bob").watches == ()
    push(eng, "cam", 3.0, 12.0, red_from=APPEARS)
    assert eng.alerts() == [] and script.asked["watch_reply"] == 0
    assert [(t.role, t.kind) for t in eng.session("bob").turns] == [
        ("user", "watch"), ("engine", "watch"), ("user", "cancel"), ("engine", "cancel")]
    again = eng.turn("stop watching for that", session="bob")  # nothing left to cancel
    assert again.kind == "cancel" and again.ended == () and "no standing request" in again.text


def test_a_change_replaces_the_request_and_the_rules_read_it(make):
    # the rules alone (sessions.classifier "rules"): no model call sorts the turns
    script = session_model()
    eng = make(script, {**CFG, "sessions": {"classifier": "rules"}})
    push(eng, "cam", 0.0, 1.0)
    first = eng.turn("let me know when a blue car parks", session="c")
    second = eng.turn("Actually, tell me when a red square appears instead", session="c")
    assert first.intent.by == second.intent.by == "rules" and script.asked["turn_classifier"] == 0
    assert second.kind == "watch" and second.intent.kind == "change" and second.ended == (first.monitor.monitor_id,)
    assert second.monitor.condition == "a red square appears"
    assert [w.condition for w in eng.session("c").watches] == ["a red square appears"]
    push(eng, "cam", 1.0, 10.0, red_from=APPEARS)
    assert [t.monitor_id for t in eng.session("c").turns if t.kind == "reply"] == [second.monitor.monitor_id]


def test_a_malformed_classifier_reply_falls_back_to_the_rules(make):
    script = session_model(turn_classifier=['{"kind": "watch"}', "not json at all",
                                            '{"kind": "question", "condition": "", "target": 0, "repeat": false}'])
    eng = make(script)
    push(eng, "cam", 0.0, 1.0)
    w = eng.turn("tell me when a red square appears", session="d")  # a watch without a condition
    assert w.kind == "watch" and w.intent.by == "rules" and "condition" in w.intent.note
    assert w.monitor.condition == "a red square appears"  # the request minus its trigger
    q = eng.turn("what is on screen now?", session="d")  # not JSON: the rules say question
    assert q.kind == "answer" and q.intent.by == "rules" and "not valid JSON" in q.intent.note
    assert q.text == "answer to: what is on screen now?"
    c = eng.turn("never mind the red square", session="d")  # a question with a target: refused, rules
    assert c.kind == "cancel" and c.intent.by == "rules" and c.ended == (w.monitor.monitor_id,)
    assert script.asked["turn_classifier"] == 3 and script.asked_like("turn_classifier_repair") == 0


def test_a_failed_reply_model_still_replies_with_the_observation(make):
    eng = make(session_model(), fail=lambda req: LLMError("scripted", "down") if req.tag == "watch_reply" else None)
    push(eng, "cam", 0.0, 1.0)
    eng.turn("tell me when a red square appears", session="e")
    push(eng, "cam", 1.0, 10.0, red_from=APPEARS)
    (alert,) = eng.alerts()
    reply = eng.session("e").turns[-1]
    assert reply.kind == "reply" and reply.text == f"{alert.observed} (camera cam, t={alert.t:.2f}s)"
    assert eng.reply_stats().fallbacks == 1


def test_two_sessions_keep_their_own_turns_and_dialogue(make):
    script = session_model()
    eng = make(script)
    push(eng, "cam", 0.0, 2.0)
    eng.turn("what colour is the wall?", session="alice")
    eng.ask("is anyone at the door?", session="bob")  # ask in a session: its turns too
    eng.turn("and the floor?", session="alice")
    eng.turn("and the window?", session="bob")
    seen = [dialogue_shown(req) for req in eng.llm.sent if req.tag == "two_phase_coarse"]
    assert seen == [[], [], ["what colour is the wall?"], ["is anyone at the door?"]]
    assert [t.text for t in eng.session("alice").turns] == [
        "what colour is the wall?", "answer to: what colour is the wall?", "and the floor?", "answer to: and the floor?"]
    assert [t.kind for t in eng.session("bob").turns] == ["question", "answer", "question", "answer"]
    assert [s.session_id for s in eng.sessions()] == ["alice", "bob"]
    assert eng.session("nobody") is None


def test_bound_cameras_ended_sessions_limits_and_read_only_callers(make):
    eng = make(cfg={**CFG, "sessions": {"max_watches": 1}})
    push(eng, "front", 0.0, 1.0)
    push(eng, "yard", 0.0, 1.0)
    s = eng.create_session("f", camera="front")
    assert s.cameras == ("front",)
    with pytest.raises(SessionError, match="exists already"):
        eng.create_session("f")
    with pytest.raises(SessionError, match="'yard' is outside it"):
        eng.turn("what is here?", session="f", camera="yard")
    with pytest.raises(SessionError, match="outside"):
        eng.ask("what is here?", session="f", camera=["front", "yard"])
    w = eng.turn("tell me when a red square appears", session="f")
    assert w.monitor.cameras == ("front",)  # the session's cameras by default
    with pytest.raises(SessionLimit, match="at most 1"):
        eng.turn("tell me when a dog barks", session="f")
    with pytest.raises(WatchNotAllowed, match="write token"):
        eng.turn("tell me when a red square appears", session="g", may_watch=False)
    assert eng.turn("what is here?", session="g", may_watch=False).kind == "answer"
    assert eng.end_session("f") and not eng.end_session("f")
    assert eng.monitors() == [] and eng.session("f").ended_at is not None
    with pytest.raises(SessionError, match="has ended"):
        eng.turn("what is here?", session="f")
    assert [x.session_id for x in eng.sessions()] == ["g"]
    assert [x.session_id for x in eng.sessions(include_ended=True)] == ["f", "g"]
    with pytest.raises(VamError, match="intent must be one of"):
        eng.turn("x", session="g", intent="shout")


def test_turns_kept_per_session_are_bounded_and_new_turns_are_published(make):
    eng = make(cfg={**CFG, "sessions": {"max_turns_kept": 10, "classifier": "rules"}})
    push(eng, "cam", 0.0, 1.0)
    got = []
    sub = eng.subscribe_turns(got.append)
    for k in range(7):
        eng.turn(f"question number {k}?", session="h")
    sub.close()
    turns = eng.session("h").turns
    assert len(turns) == 10 and turns[0].text == "question number 2?"  # the newest ten
    assert [t.turn_id for t in got] == list(range(1, 15)) and {t.session_id for t in got} == {"h"}
    assert [t.turn_id for t in eng.session("h", after=12).turns] == [13, 14]
    assert [t.turn_id for t in eng.session("h", last=3).turns] == [12, 13, 14]
