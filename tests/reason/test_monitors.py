"""Monitors (reason/monitor.py, engine.watch): once and repeat, the repeat gap, the cap, the
confidence threshold, the trigger time, vigilance, hostile verdicts, restart and deletion.

The streams are pushed at 2 fps: a dark noisy background, and "the event" is a bright square in
the frame's top-left quarter. The scripted model looks at the latest frame it is shown and says
whether the square is there, so a test knows exactly when a monitor must fire.
"""
import json
import random
import threading
from pathlib import Path

import numpy as np
import pytest

from support.monitors import CFG, frame, judge, latest_image, push_stream, shows_event, square_verdict
from support.scripted import images
from vam_engine import Engine
from vam_engine.errors import VamError
from vam_engine.llm.scripted import ScriptedLLM


@pytest.fixture
def make_engine(tmp_path):
    made = []

    def make(llm, store="store", **cfg):
        e = Engine(tmp_path / store, {**CFG, **cfg}, device="cpu", llm=llm)
        made.append(e)
        return e
    yield make
    for e in made:
        e.close()


def test_once_fires_at_the_first_check_that_sees_the_event(make_engine):
    llm = ScriptedLLM(judge())
    eng = make_engine(llm)
    got = []
    called = eng.subscribe_alerts(callback=got.append)  # a callback subscriber
    sub = eng.subscribe_alerts()  # a queue subscriber
    m = eng.watch("a bright square appears", cameras=["cam"])
    assert [x.monitor_id for x in eng.monitors()] == [m.monitor_id] and m.active
    push_stream(eng, "cam", 0.0, 20.0, event_spans=[(9.0, 20.0)])
    alerts = eng.alerts()
    assert len(alerts) == 1
    a = alerts[0]
    # checks run every 2 s of stream time from the first frame: 0, 2, ..., 8, 10 -> the first
    # check after the event starts observes up to t=10.0
    assert a.t == pytest.approx(10.0)
    assert a.monitor_id == m.monitor_id and a.camera_id == "cam" and a.confidence == pytest.approx(0.9)
    assert a.observed == "a bright square" and a.t_abs is None
    assert len(a.frame_paths) == 4 and all(Path(p).is_file() for p in a.frame_paths)
    assert got == [a] and sub.get(timeout=1) == a
    # once: the monitor ended with its alert, and no later check calls the model
    assert eng.monitors() == [] and not eng.monitors(include_ended=True)[0].active
    calls = len(llm.sent)
    push_stream(eng, "cam", 20.0, 30.0, event_spans=[(20.0, 30.0)])
    assert len(llm.sent) == calls and len(eng.alerts()) == 1
    assert sub.get(timeout=0.1) is None and called.get(timeout=0.1) is None  # nothing more; no queue for callbacks
    sub.close()
    called.close()


def test_trigger_time_is_the_last_observed_frame(make_engine):
    seen = []

    def reply(req):
        times = [float(p[2:-1]) for m in req.messages for p in m.content if isinstance(p, str) and p.startswith("t=")]
        seen.append(times)
        return square_verdict(shows_event(latest_image(req)))
    eng = make_engine(ScriptedLLM(reply), monitors={"vigilance": False})
    eng.watch("square", frames=3, every_s=1.5)
    push_stream(eng, "cam", 0.0, 12.0, event_spans=[(6.2, 12.0)])
    (a,) = eng.alerts()
    assert a.t == pytest.approx(seen[-1][-1]) and seen[-1] == sorted(seen[-1]) and len(seen[-1]) == 3
    # every check looked at frames at or before its own time, the latest one being the check's
    assert all(max(ts) == ts[-1] for ts in seen)
    assert 6.2 <= a.t <= 6.2 + 1.5 + 0.5


def test_repeat_fires_again_only_after_the_gap_without_a_match(make_engine):
    eng = make_engine(ScriptedLLM(judge()), monitors={"vigilance": False})
    eng.watch("square", mode="repeat", every_s=1.0, repeat_gap_s=3.0)
    # checks each second. Present 4-10 (continuous: one alert at 4; the last match at 9), absent
    # at the check of 10, present again at 11: 11 - 9 = 2 s < the gap, no alert; matches to 13,
    # absent 14-17, present at 18: 18 - 13 = 5 s >= the gap, a second alert
    spans = [(4.0, 10.0), (11.0, 14.0), (18.0, 22.0)]
    push_stream(eng, "cam", 0.0, 24.0, event_spans=spans)
    assert [a.t for a in eng.alerts()] == pytest.approx([4.0, 18.0])
    assert eng.monitors()[0].active  # repeat monitors stay


def test_confidence_threshold(make_engine):
    eng = make_engine(ScriptedLLM(judge(confidence=0.55)))
    low = eng.watch("square", cameras="a", min_confidence=0.6)
    high = eng.watch("square", cameras="b", min_confidence=0.5)
    for cam in ("a", "b"):
        push_stream(eng, cam, 0.0, 8.0, event_spans=[(2.0, 8.0)])
    assert eng.alerts(monitor_id=low.monitor_id) == []
    assert [a.camera_id for a in eng.alerts(monitor_id=high.monitor_id)] == ["b"]


def test_at_most_eight_active_monitors(make_engine):
    eng = make_engine(ScriptedLLM(judge()))
    ms = [eng.watch(f"condition {k}") for k in range(8)]
    with pytest.raises(VamError, match="8 monitors are active, at most 8"):
        eng.watch("a ninth")
    assert eng.unwatch(ms[0].monitor_id) and not eng.unwatch(ms[0].monitor_id)
    eng.watch("a ninth, now that one ended")
    assert len(eng.monitors()) == 8


@pytest.mark.parametrize("kwargs,match", [
    ({"condition": ""}, "condition must be a non-empty"),
    ({"condition": "x", "mode": "always"}, "mode must be one of"),
    ({"condition": "x", "min_confidence": 1.5}, "min_confidence"),
    ({"condition": "x", "every_s": 0}, "every_s"),
    ({"condition": "x", "frames": 0}, "frames must be"),
    ({"condition": "x", "images": [np.zeros((4, 4), np.uint8)]}, "reference image 0"),
    ({"condition": "x", "images": ["/no/such.jpg"]}, "cannot read it"),
])
def test_bad_watch_arguments_name_the_field(make_engine, kwargs, match):
    eng = make_engine(ScriptedLLM(judge()))
    with pytest.raises(ValueError, match=match):
        eng.watch(**kwargs)
    assert eng.monitors() == []


def test_watch_needs_a_model(tmp_path):
    with Engine(tmp_path / "s", CFG, device="cpu") as eng:
        with pytest.raises(VamError, match="needs an LLM"):
            eng.watch("anything")


def test_vigilance_skips_unchanged_frames(make_engine):
    calls = {}
    for vigilance in (True, False):
        llm = ScriptedLLM(judge())
        eng = make_engine(llm, store=f"s{vigilance}", monitors={"vigilance": vigilance})
        eng.watch("square")
        push_stream(eng, "cam", 0.0, 60.0, event_spans=[(40.0, 60.0)])
        stats = eng.monitor_stats()
        calls[vigilance] = len(llm.sent)
        assert stats.model_calls == len(llm.sent) and stats.alerts == 1
        assert [a.t for a in eng.alerts()] == pytest.approx([40.0])
        if vigilance:
            # the static scene is judged once, then the event's change is judged: 2 calls for 21 checks
            assert stats.skipped_unchanged == stats.checks - 2
    assert calls[False] == 21 and calls[True] == 2


def test_vigilance_sees_a_small_local_change(make_engine):
    def reply(req):
        img = latest_image(req)
        return square_verdict(bool(img[-6:, -6:].mean() > 120))
    llm = ScriptedLLM(reply)
    eng = make_engine(llm)
    eng.watch("a small light in the corner")
    for k in range(40):
        t = k / 2
        f = frame(t, False)
        if t >= 12.0:
            f[-6:, -6:] = 255  # 36 of 3072 pixels: under 1.2% of the frame
        eng.push("cam", f, t)
        assert eng.wait_for_monitors(10)
    assert [a.t for a in eng.alerts()] == pytest.approx([12.0])


HOSTILE = [
    "", "not json", "[]", "null", "{", '{"match": true}',
    '{"match": true, "confidence": 0.99, "observed_event": "x", "reason": "y", "fire": true}',
    '{"match": "true", "confidence": 0.99, "observed_event": "x", "reason": "y"}',
    '{"match": true, "confidence": "0.99", "observed_event": "x", "reason": "y"}',
    '{"match": true, "confidence": 1.5, "observed_event": "x", "reason": "y"}',
    '{"match": true, "confidence": NaN, "observed_event": "x", "reason": "y"}',
    '{"match": true, "confidence": 0.9, "observed_event": "' + "x" * 5000 + '", "reason": "y"}',
    '{"match": 1, "confidence": 0.9, "observed_event": "x", "reason": "y"}',
    "x" * 100_000, "[" * 5000,
]


def _fuzzed_verdict(rng: random.Random) -> tuple[str, bool]:
    """A reply and whether a monitor at min_confidence 0.6 must fire on it."""
    if rng.random() < 0.3:
        return rng.choice(HOSTILE), False
    v = {"match": rng.choice([True, False, "yes", 1, None]), "confidence": rng.choice([0.0, 0.59, 0.6, 0.95, 1.0,
                                                                                       -0.1, 2, "high"]),
         "observed_event": rng.choice(["a square", "", 7, "z" * 2500]), "reason": rng.choice(["r", None])}
    for k in [k for k in v if rng.random() < 0.1]:
        del v[k]
    if rng.random() < 0.1:
        v[rng.choice(["alert", "camera", "t"])] = "now"
    ok = (set(v) == {"match", "confidence", "observed_event", "reason"} and isinstance(v["match"], bool)
          and isinstance(v["confidence"], (int, float)) and not isinstance(v["confidence"], bool)
          and 0 <= v["confidence"] <= 1 and isinstance(v["observed_event"], str) and len(v["observed_event"]) <= 2000
          and isinstance(v["reason"], str))
    return json.dumps(v), ok and v["match"] is True and v["confidence"] >= 0.6


def test_fuzzed_and_hostile_verdicts_never_fire_wrongly_or_raise(make_engine):
    rng = random.Random(7)
    script = []
    eng = make_engine(ScriptedLLM(lambda req: script[-1][0]), monitors={"vigilance": False})
    m = eng.watch("square", mode="repeat", every_s=1.0, repeat_gap_s=0.0)
    t = 0.0
    expected = 0
    for _ in range(200):
        script.append(_fuzzed_verdict(rng))
        expected += script[-1][1]
        for _ in range(2):  # two frames per second: one check each second
            eng.push("cam", frame(t, False), t)
            t += 0.5
        assert eng.wait_for_monitors(10)
    stats = eng.monitor_stats()
    assert len(eng.alerts(monitor_id=m.monitor_id)) == expected == stats.alerts
    assert stats.malformed >= sum(1 for r, _ in script if r in HOSTILE) and stats.errors == 0


def test_model_failure_never_reaches_ingest(make_engine):
    from vam_engine.llm.base import LLMError
    eng = make_engine(ScriptedLLM(judge(), fail=lambda req: LLMError("test", "down")))
    eng.watch("square")
    push_stream(eng, "cam", 0.0, 6.0, event_spans=[(0.0, 6.0)])
    assert eng.alerts() == [] and eng.monitor_stats().errors == eng.monitor_stats().model_calls > 0
    assert eng.flush(10) and len(eng.moments("cam")) >= 1  # ingest went on


def test_active_monitors_survive_a_restart(tmp_path):
    with Engine(tmp_path / "s", CFG, device="cpu", llm=ScriptedLLM(judge())) as eng:
        m = eng.watch("square", images=[frame(0, True)])
        push_stream(eng, "cam", 0.0, 4.0)
    with Engine(tmp_path / "s", CFG, device="cpu", llm=ScriptedLLM(judge())) as eng:
        assert [x.monitor_id for x in eng.monitors()] == [m.monitor_id] and eng.monitors()[0].n_images == 1
        push_stream(eng, "cam", 4.0, 12.0, event_spans=[(8.0, 12.0)])  # no watch call: it resumed
        (a,) = eng.alerts()
        assert a.monitor_id == m.monitor_id and a.t == pytest.approx(8.0)
    with Engine(tmp_path / "s", CFG, device="cpu") as reader:  # the alert is durable
        assert [x.alert_id for x in reader.alerts()] == [a.alert_id]


def test_reference_images_reach_the_model(make_engine):
    llm = ScriptedLLM(judge())
    eng = make_engine(llm)
    ref = frame(0, True)
    eng.watch("this square", images=[ref])
    push_stream(eng, "cam", 0.0, 2.0)
    shown = images(llm.sent[0])
    assert len(shown) == 2  # the reference, then the one frame the present holds at t=0
    assert np.abs(shown[0].array().astype(int) - ref).mean() < 8  # JPEG round trip of the reference


def test_alerts_go_with_their_camera_and_time_range(make_engine):
    eng = make_engine(ScriptedLLM(judge()), monitors={"vigilance": False})
    only_a = eng.watch("square", cameras=["a"], mode="repeat", every_s=1.0, repeat_gap_s=2.0)
    both = eng.watch("square", cameras=["a", "b"], mode="repeat", every_s=1.0, repeat_gap_s=2.0)
    spans = [(2.0, 4.0), (8.0, 10.0)]
    for cam in ("a", "b"):
        push_stream(eng, cam, 0.0, 12.0, event_spans=spans)
    eng.flush()
    assert len(eng.alerts(camera="a")) == 4 and len(eng.alerts(camera="b")) == 2
    files = [p for a in eng.alerts() for p in a.frame_paths]
    # the committed moments of an alert's span are protected from retention
    protected = {r[0] for r in eng.store.db.conn().execute("SELECT moment_id FROM moments WHERE protected=1")}
    assert set().union(*[set(a.moment_ids) for a in eng.alerts()]) <= protected
    out = eng.delete(cameras=["b"], time_range=(6.0, 12.0))
    assert out.alerts == 1 and [a.t for a in eng.alerts(camera="b")] == pytest.approx([2.0])
    out = eng.delete(cameras=["a"])
    assert out.alerts == 4 and out.monitors == 1
    assert [m.monitor_id for m in eng.monitors()] == [both.monitor_id]
    assert eng.monitors()[0].cameras == ("b",) and eng.store.monitors.get(only_a.monitor_id) is None
    gone = [p for p in files if not Path(p).exists()]
    assert len(gone) == 5 * 4  # the five deleted alerts' frames, four each


def test_checks_never_block_ingest(make_engine):
    release = threading.Event()

    def slow(req):
        release.wait(10)
        return square_verdict(False)
    eng = make_engine(ScriptedLLM(slow), monitors={"vigilance": False, "max_pending": 2})
    eng.watch("square", every_s=0.5)
    push_stream(eng, "cam", 0.0, 10.0, wait=False)  # 20 frames while the model is stuck
    stats = eng.monitor_stats()
    assert stats.checks == 20 and stats.dropped == 20 - 1 - 2
    release.set()
    assert eng.wait_for_monitors(10) and eng.monitor_stats().model_calls == 3
