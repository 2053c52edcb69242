"""The streaming driver on a coded clip (each frame shows its index) with a scripted model that
reads back the latest frame each request shows: causality (no request sees a frame after its
question's time, in pause and race mode, baselines included), questions asked at the end of
the stream (OASIS's clips, MM-Lifelong) at the last frame, StreamArena-style monitors on their
2 s period, StreamingBench's Proactive Output polled every second and answered at the first
yes, per-stream isolation of question history, resuming an interrupted run, and the protocol
defaults."""
import json
import threading
import time
from collections import defaultdict

import pytest
from support.clips import read_code, write_clip

from vam_engine.eval import forms
from vam_engine.cli.eval import driver_config
from vam_engine.eval.driver import Driver, DriverConfig, EngineHost, ResultLog
from vam_engine.eval.records import EvalQuestion, EvalResult, EvalVideo, Interval, Segment
from vam_engine.eval.scorers import ref_at
from vam_engine.llm import ScriptedLLM
from vam_engine.llm.base import Image
from vam_engine.memory.store import Store

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 240
STEP_S = 0.1  # the clip's frame i is at i * 0.1 s and shows i in its code blocks
CFG = {"ingest": {"fps": 2.0}, "embed": {"text_model": "minilm"}, "commit": {"max_event_s": 2.0},
       "writer": {"retry_base_s": 0.05}}
ANSWERING = ("two_phase_coarse", "two_phase_fine", "router", "planner", "inspector", "eval_baseline")
EASY = {"proactive": "drain"}  # every due monitor check judged before the next frame: deterministic alerts


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    p = tmp_path_factory.mktemp("clip") / "coded.mp4"
    write_clip(p, [int(i * STEP_S * 1000) for i in range(160)], gop=10)  # 16 s
    return EvalVideo("coded", (Segment(str(p)),))


class Model:
    """Replies by tag; records, per question a request is about (the question text that comes
    last in its last message: earlier turns of the dialogue come before it), the latest frame
    time any of its images shows; fires a monitor once its latest frame is at or after the event."""

    def __init__(self, questions, events=None, replies=None):
        self.questions = list(questions)
        self.events = events or {}    # monitor condition -> event time
        self.replies = replies or {}  # question text -> the answer's text
        self.seen = defaultdict(list)  # question text -> [(tag, latest frame time | None)]
        self.texts = []  # every text part sent that is not a frame's time label
        self.lock = threading.Lock()

    def __call__(self, req):
        texts = [p for m in req.messages for p in m.content if isinstance(p, str)]
        times = [read_code(p.array()) * STEP_S for m in req.messages for p in m.content if isinstance(p, Image)]
        latest = round(max(times), 3) if times else None
        with self.lock:
            self.texts += [t for t in texts if not (t.startswith("t=") and t.endswith("s"))]
            last = "\n".join(p for p in req.messages[-1].content if isinstance(p, str))
            at = {q: last.rfind(q) for q in self.questions if q in last}
            asked = max(at, key=at.get) if at else None
            if req.tag == "monitor":  # the condition as registered (the request carries it as JSON)
                cond = json.loads(req.messages[-1].content[0])["condition"]
                self.seen[cond].append((req.tag, latest))
            elif at and req.tag in ANSWERING:
                self.seen[asked].append((req.tag, latest))
            elif req.tag in ANSWERING:
                self.seen["?"].append((req.tag, latest))
        if req.tag == "monitor":
            hit = latest is not None and latest >= self.events.get(cond, float("inf"))
            return json.dumps({"match": hit, "confidence": 0.9 if hit else 0.1,
                               "observed_event": f"seen at {latest}" if hit else "", "reason": "scripted"})
        if req.tag == "watch_reply":  # the reply to the person who asked, written from what the check saw
            said = json.loads(req.messages[-1].content[0])
            return f"Reply to {said['request']!r}: {said['observed']}"
        if req.tag == "two_phase_coarse":
            return json.dumps({"answer": self.replies.get(asked, f"latest frame {latest}")})
        if req.tag == "eval_baseline":
            return f"baseline saw up to {latest}"
        return "a coded test scene"


def _run(tmp_path, clip, questions, model, cfg=None, results=None, **kw):
    llm = ScriptedLLM(model)
    host = EngineHost(tmp_path / "stores", CFG, llm, per_video=True)
    d = Driver(host, llm, cfg or DriverConfig(**EASY), results or tmp_path / "results.jsonl", **kw)
    try:
        return d.run({clip.video_id: clip}, {clip.video_id: questions})
    finally:
        host.close()


def _q(qid, t, text, **kw):
    return EvalQuestion(qid, "coded", t, text, kw.pop("answer", f"ref-{qid}-zz"), **kw)


@pytest.mark.parametrize("reactive", ["pause", "race"])
def test_no_model_request_sees_a_frame_after_the_question(tmp_path, clip, reactive):
    qs = [_q("a", 2.2, "What is here at first?"), _q("b", 6.05, "What now?"),
          _q("c", 6.05, "And the same moment?", options=("A. x", "B. y"), gt_option="A"),
          _q("d", 11.0, "What is here later on?")]
    m = Model([q.question for q in qs])
    cfg = DriverConfig(reactive=reactive, baselines=("uniform", "last4"), uniform_k=8)
    t0 = time.monotonic()
    out = _run(tmp_path, clip, qs, m, cfg)
    wall = time.monotonic() - t0
    assert out.status == "completed" and len(out.results) == 3 * len(qs)
    for q in qs:
        shown = [t for tag, t in m.seen[q.question] if t is not None]
        tags = {tag for tag, _ in m.seen[q.question]}
        assert "two_phase_coarse" in tags and "eval_baseline" in tags
        assert shown and max(shown) <= q.time + 1e-6, (q.qid, m.seen[q.question])
        assert max(shown) >= q.time - 0.6  # the present is up to date: the last pushed frame is shown
    assert "?" not in m.seen
    for q in qs:  # the ground truth never reaches the model
        assert not any(q.answer in t for t in m.texts)
    eng = [r for r in out.results if r.method == "engine"]
    assert len(eng) == len(qs) and all(r.error is None and 0 < r.latency_s < wall for r in eng)
    assert all(all(b <= q.time + 1e-6 for _, b in r.evidence) for q, r in zip(qs, eng))
    assert all(r.response.startswith("baseline saw up to") for r in out.results if r.method == "uniform")


def test_questions_at_the_end_are_asked_after_the_last_frame(tmp_path, clip):
    # OASIS's OVO-Bench clips: time 99999 means "once the clip has been streamed"
    qs = [_q("early", 4.0, "What is here early?"),
          _q("end", 99999, "What is at the end of the clip?", options=("A. x", "B. y"), gt_option="B",
             at_end=True, rule="oasis_mc", benchmark="ovo", prompt=forms.multiple_choice(
                 "What is at the end of the clip?", ("A. x", "B. y"), forms.OASIS_MC_REPLY))]
    m = Model([q.question for q in qs], replies={"What is at the end of the clip?": "<answer>B</answer>"})
    out = _run(tmp_path, clip, qs, m, DriverConfig(baselines=("uniform",), uniform_k=8))
    res = {(r.qid, r.method): r for r in out.results}
    end = res[("end", "engine")]
    assert end.t_query == pytest.approx(15.5) and end.score == 1.0 and end.extracted == "B"
    seen = [t for tag, t in m.seen["What is at the end of the clip?"] if tag == "two_phase_coarse"]
    assert seen and max(seen) == pytest.approx(15.5)   # the present at the stream's end
    base = [t for tag, t in m.seen["What is at the end of the clip?"] if tag == "eval_baseline"]
    assert base == [pytest.approx(15.5)]  # the uniform baseline spreads over the stream, not up to 99999 s
    assert res[("early", "engine")].t_query == 4.0


def test_streamarena_case_is_a_monitor_on_its_2s_period_never_prompted_again(tmp_path, clip):
    cond = "Tell me when the scene shows frame code 100."
    qs = [_q("p", 3.0, cond, kind="proactive", t_gt=10.0, answer="seen", benchmark="streamarena",
             rule="judge_binary"),
          _q("p2", 1.0, "Tell me when something never seen appears.", kind="proactive", t_gt=4.0,
             answer="ref-never-zz", benchmark="streamarena", rule="judge_binary"),
          _q("r", 12.0, "What is here now?")]
    m = Model([q.question for q in qs], events={cond: 10.0})
    out = _run(tmp_path, clip, qs, m, DriverConfig(tail_s=2.0, baselines=("last4",), **EASY))
    assert out.status == "completed"
    res = {(r.qid, r.method): r for r in out.results}
    p = res[("p", "engine")]
    assert p.t_pred is not None and 0.0 <= p.t_pred - 10.0 <= 2.0 + 0.5 + 1e-6  # a check every 2 s, frames at 2 fps
    # the answer is the session's reply turn, written by the model from the alert's observation
    assert p.response == f"Reply to {cond!r}: seen at {p.t_pred}"
    assert p.time_ok is True and p.score == 1.0 and p.scorer == "match"
    checks = [t for tag, t in m.seen[cond] if tag == "monitor"]
    assert all(b - a >= 2.0 - 0.5 - 1e-6 for a, b in zip(checks, checks[1:])), checks  # StreamMind's 2 s period
    miss = res[("p2", "engine")]
    assert miss.t_pred is None and miss.time_ok is False and miss.score == 0.0 and miss.error == "no alert"
    for q in qs[:2]:  # registered at its time, then only monitor checks: never asked as a question
        tags = [tag for tag, _ in m.seen[q.question]]
        assert tags and set(tags) == {"monitor"}
        assert min(t for _, t in m.seen[q.question]) >= q.time - 1e-6
    assert not any("ref-never-zz" in t for t in m.texts)
    assert res[("p", "last4")].score is None and res[("p", "last4")].error.startswith("unsupported")
    # posed through the user-turn entry: the stream's session holds each request, its acknowledgement,
    # the reply to the one that fired, and the spoken cancel of the one whose window ran out
    (store_dir,) = [d for d in (tmp_path / "stores").iterdir() if d.is_dir()]
    store = Store(store_dir, create=False)
    try:
        (sess,) = store.sessions.list(include_ended=True)
        turns = store.sessions.turns(sess.session_id)
        asked = {t.text: t for t in turns if t.role == "user" and t.kind == "watch"}
        assert set(asked) == {cond, qs[1].question}
        for t in asked.values():  # each acknowledged at once, by the next turn, naming the same monitor
            ack = turns[turns.index(t) + 1]
            assert (ack.role, ack.kind, ack.monitor_id) == ("engine", "watch", t.monitor_id) and t.monitor_id
        hit, missed = asked[cond].monitor_id, asked[qs[1].question].monitor_id
        assert [(t.role, t.kind, t.monitor_id) for t in turns if t.kind == "cancel"] == [
            ("user", "cancel", missed), ("engine", "cancel", missed)]  # its window ran out: cancelled
        assert [(t.role, t.monitor_id) for t in turns if t.kind == "reply"] == [("engine", hit)]
        (reply,) = [t for t in turns if t.kind == "reply"]
        assert reply.text == p.response and reply.t == p.t_pred and reply.alert_id is not None
        bound = {w.monitor_id: w.request for w in store.sessions.watches(sess.session_id, include_ended=True)}
        assert bound == {hit: cond, missed: qs[1].question}
    finally:
        store.close()


def test_a_monitored_case_under_the_default_live_protocol(tmp_path, clip):
    # proactive="realtime": the stream runs at 1x while the monitor waits, checks are never waited for
    cond = "Tell me when frame code 50 shows."
    qs = [_q("p", 3.0, cond, kind="proactive", t_gt=5.0, answer="seen", benchmark="streamarena", rule="judge_binary")]
    m = Model([cond], events={cond: 5.0})
    (r,) = _run(tmp_path, clip, qs, m, DriverConfig(tail_s=2.0)).results
    assert r.t_pred is not None and r.t_pred >= 5.0 and r.error is None
    assert r.time_ok == (r.t_pred - 5.0 <= 2.0 + 1e-9) and r.score == float(r.time_ok)


def test_streamingbench_proactive_output_polls_every_second_and_answers_at_the_first_yes(tmp_path, clip):
    question = 'When the code reaches 100, output "one hundred".'
    poll = forms.sb_poll(question, "one hundred")
    hit = _q("po", 3.0, question, kind="proactive", t_gt=10.0, answer="one hundred", benchmark="streamingbench",
             rule="sb_proactive", prompt=poll)
    quiet = 'When a dragon appears, output "dragon".'
    miss = _q("po2", 2.0, quiet, kind="proactive", t_gt=5.0, answer="dragon", benchmark="streamingbench",
              rule="sb_proactive", prompt=forms.sb_poll(quiet, "dragon"))
    m = Model([poll, question, forms.sb_poll(quiet, "dragon")], events={poll: 10.0},
              replies={question: "Now: one hundred"})
    out = _run(tmp_path, clip, [hit, miss], m)
    res = {r.qid: r for r in out.results}
    r = res["po"]
    assert 10.0 <= r.t_pred <= 11.5 and r.time_ok is True and r.score == 1.0 and r.response == "Now: one hundred"
    checks = [t for tag, t in m.seen[poll] if tag == "monitor"]
    assert checks and all(b - a <= 1.0 + 1e-6 for a, b in zip(checks, checks[1:])), checks  # polled each second
    answered = [t for tag, t in m.seen[question] if tag == "two_phase_coarse"]
    assert answered and max(answered) <= r.t_pred + 1e-6  # asked at the alert's time
    assert res["po2"].error == "no alert" and res["po2"].score == 0.0
    late = [t for tag, t in m.seen[forms.sb_poll(quiet, "dragon")] if tag == "monitor"]
    assert late and max(late) <= 5.0 + 4.0 + 0.5  # polling ends at t_gt + 4 s


def test_each_stream_starts_without_another_streams_question_history(tmp_path, clip):
    other = EvalVideo("coded2", clip.segments)
    q1 = [_q("a", 2.0, "Which code shows first?"), _q("b", 6.0, "Which code shows next?")]
    q2 = [EvalQuestion("c", "coded2", 7.0, "What does the second stream show?", "r")]
    m = Model([q.question for q in q1 + q2], replies={"Which code shows first?": "zebra-answer-first"})
    llm = ScriptedLLM(m)
    host = EngineHost(tmp_path / "stores", CFG, llm)  # the default: a fresh store per stream
    try:
        Driver(host, llm, DriverConfig(**EASY), tmp_path / "r.jsonl").run(
            {"coded": clip, "coded2": other}, {"coded": q1, "coded2": q2})
    finally:
        host.close()
    texts = {q.qid: [] for q in q1 + q2}
    for req in llm.sent:
        body = "\n".join(p for msg in req.messages for p in msg.content if isinstance(p, str))
        for q in q1 + q2:
            if q.question in body and req.tag in ANSWERING:
                texts[q.qid].append(body)
    assert any("zebra-answer-first" in t for t in texts["b"])  # within a stream, the history is there
    assert texts["c"] and not any("zebra-answer-first" in t or "Which code" in t for t in texts["c"])


def _deterministic(results):
    out = []
    for r in results:
        d = r.to_json()
        for k in EvalResult.TIMING_FIELDS:
            d.pop(k)
        out.append(d)
    return out


def test_resume_after_interruption_gives_the_same_results(tmp_path, clip):
    qs = [_q(str(i), t, f"Question number {i}?") for i, t in enumerate((1.0, 3.0, 5.0, 7.0, 9.0))]
    # a paused clock with memory caught up before each question: a deterministic model gives the same
    # results on every replay (live, what the history holds by a question's time depends on timing)
    cfg = DriverConfig(baselines=("last4",), reactive="pause", settle=True)
    whole = _run(tmp_path / "whole", clip, qs, Model([q.question for q in qs]), cfg)
    assert whole.status == "completed"
    stop = threading.Event()
    n = []

    def count(r):
        n.append(r)
        if len(n) == 3:
            stop.set()

    path = tmp_path / "split" / "results.jsonl"
    first = _run(tmp_path / "split", clip, qs, Model([q.question for q in qs]), cfg, results=path, stop=stop,
                 on_result=count)
    assert first.status == "interrupted" and 3 <= len(ResultLog(path).read()) < 2 * len(qs)
    with open(path, "a") as f:
        f.write('{"qid": "torn')  # the torn last line of a killed run
    again = _run(tmp_path / "split", clip, qs, Model([q.question for q in qs]), cfg, results=path)
    assert again.status == "completed" and len(again.results) == 2 * len(qs)
    assert _deterministic(ResultLog(path).read()) == _deterministic(ResultLog(tmp_path / "whole" / "results.jsonl").read())
    m = Model([q.question for q in qs])  # a finished stream is not replayed
    assert _run(tmp_path / "split", clip, qs, m, cfg, results=path).status == "completed" and not m.seen


def test_one_axis_over_several_videos_and_ref_at_300(tmp_path, clip):
    # MM-Lifelong: the videos end to end on one axis, questions asked once all of it is streamed
    video = EvalVideo("lifelong", (Segment(clip.segments[0].path, 0.0), Segment(clip.segments[0].path, 600.0)))
    qs = [EvalQuestion("0", "lifelong", 0.0, "What happened across the month?", "x", at_end=True,
                       evidence=(Interval(601.0, 609.0),), benchmark="mmlifelong", rule="judge_lifelong")]
    m = Model([qs[0].question])
    llm = ScriptedLLM(m)
    host = EngineHost(tmp_path / "stores", CFG, llm)
    try:
        out = Driver(host, llm, DriverConfig(**EASY), tmp_path / "r.jsonl").run({"lifelong": video}, {"lifelong": qs})
    finally:
        host.close()
    (r,) = out.results
    assert r.t_query == pytest.approx(615.5)
    shown = [t for tag, t in m.seen[qs[0].question] if t is not None]
    assert shown and max(shown) == pytest.approx(15.5)  # the second video's last frame (its code restarts at 0)
    assert r.evidence and all(0.0 <= a <= b <= 615.5 + 1e-6 for a, b in r.evidence)
    assert r.ref300 == ref_at(r.evidence[:1], [(601.0, 609.0)])


def test_videos_run_concurrently_and_the_model_outlives_each_engine(tmp_path, clip):
    closed = []

    class Closing(ScriptedLLM):
        def close(self):
            closed.append(True)

    v2 = EvalVideo("coded2", clip.segments)
    qs1 = [_q("a", 2.0, "First video?"), _q("b", 4.0, "First video later?")]
    qs2 = [EvalQuestion("c", "coded2", 3.0, "Second video?", "r")]
    m = Model(["First video?", "First video later?", "Second video?"])
    llm = Closing(m)
    host = EngineHost(tmp_path / "stores", CFG, llm)
    try:
        out = Driver(host, llm, DriverConfig(concurrency=2), tmp_path / "r.jsonl").run(
            {"coded": clip, "coded2": v2}, {"coded": qs1, "coded2": qs2})
    finally:
        host.close()
    assert out.status == "completed" and [r.qid for r in out.results] == ["a", "b", "c"]
    assert all(r.error is None for r in out.results) and not closed  # the caller closes the model it made
    for q in qs1 + qs2:
        assert max(t for _, t in m.seen[q.question] if t is not None) <= q.time + 1e-6


def test_protocol_defaults_are_the_live_protocols():
    d = DriverConfig()
    assert (d.reactive, d.proactive, d.settle, d.store, d.max_side, d.monitor_every_s, d.pace) == \
        ("race", "realtime", False, "per_video", None, 2.0, "fast")

    class Args:
        fps, mode, concurrency, proactive, settle, baseline, uniform_k = 2.0, "auto", 1, "realtime", False, "", 32
        max_side, store, monitor_every, pace, reactive = None, "per_video", 2.0, "fast", "auto"

    assert driver_config(Args, "streamarena").reactive == "pause"  # StreamArena stops the clock at a question
    assert driver_config(Args, "ovo").reactive == "race" and driver_config(Args, "streamingbench").reactive == "race"
    Args.reactive = "pause"
    assert driver_config(Args, "ovo").reactive == "pause"
    with pytest.raises(ValueError, match="proactive"):
        DriverConfig(proactive="sometimes")
