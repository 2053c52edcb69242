"""The streaming driver: causality (a scripted model that reads back which frame each image is
never sees one later than the question's time, in pause and race mode, baselines included),
proactive cases (a monitor registered at the query time, never prompted again, timed by its
alert), and resuming an interrupted run to the same results file."""
import json
import threading
import time
from collections import defaultdict

import pytest

from support.clips import read_code, write_clip
from support.scripted import TagScript, images, texts, verdict
from vam_engine.eval.driver import Driver, DriverConfig, EngineHost, ResultLog
from vam_engine.eval.records import EvalQuestion, EvalResult, EvalVideo, Segment
from vam_engine.llm import ScriptedLLM

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 240
STEP_S = 0.1  # the clip's frame i is at i * 0.1 s and shows i in its code blocks
CFG = {"ingest": {"fps": 2.0}, "embed": {"text_model": "minilm"}, "commit": {"max_event_s": 2.0},
       "writer": {"retry_base_s": 0.05}}
ANSWERING = ("two_phase_coarse", "two_phase_fine", "router", "planner", "inspector", "eval_baseline")


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    p = tmp_path_factory.mktemp("clip") / "coded.mp4"
    write_clip(p, [int(i * STEP_S * 1000) for i in range(160)], gop=10)  # 16 s
    return EvalVideo("coded", (Segment(str(p)),))


def _latest(req) -> float | None:
    """The latest frame time any image of the request shows (each frame carries its index)."""
    times = [read_code(p.array()) * STEP_S for p in images(req)]
    return round(max(times), 3) if times else None


class Model(TagScript):
    """Replies by tag; records, per question a request is about (the question text that comes
    last in its last message: earlier turns of the dialogue come before it), the latest frame
    time any of its images shows; fires a monitor once its latest frame is at or after the event."""

    def __init__(self, questions, events=None):
        super().__init__({"monitor": self._monitor,
                          "two_phase_coarse": lambda req: {"answer": f"latest frame {_latest(req)}"},
                          "eval_baseline": lambda req: f"baseline saw up to {_latest(req)}"},
                         default="a coded test scene")
        self.questions = list(questions)
        self.events = events or {}  # monitor condition -> event time
        self.seen = defaultdict(list)  # question text -> [(tag, latest frame time | None)]
        self.texts = []  # every text part sent that is not a frame's time label
        self.lock = threading.Lock()

    def __call__(self, req):
        latest = _latest(req)
        with self.lock:
            self.texts += [t for t in texts(req) if not (t.startswith("t=") and t.endswith("s"))]
            last = "\n".join(p for p in req.messages[-1].content if isinstance(p, str))
            at = {q: last.rfind(q) for q in self.questions if q in last}
            if at and (req.tag in ANSWERING or req.tag == "monitor"):
                self.seen[max(at, key=at.get)].append((req.tag, latest))
            elif req.tag in ANSWERING:
                self.seen["?"].append((req.tag, latest))
        return super().__call__(req)

    def _monitor(self, req) -> str:
        cond = json.loads(req.messages[-1].content[0])["condition"]
        latest = _latest(req)
        hit = latest is not None and latest >= self.events.get(cond, float("inf"))
        return verdict(hit, 0.9 if hit else 0.1, f"seen at {latest}" if hit else "")


def _run(tmp_path, clip, questions, model, cfg=None, results=None, **kw):
    llm = ScriptedLLM(model)
    host = EngineHost(tmp_path / "stores", CFG, llm, per_video=True)
    d = Driver(host, llm, cfg or DriverConfig(), results or tmp_path / "results.jsonl", **kw)
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
    t0 = time.perf_counter()
    out = _run(tmp_path, clip, qs, m, cfg)
    wall = time.perf_counter() - t0
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
    uni = [r for r in out.results if r.method == "uniform"]
    assert all(r.response.startswith("baseline saw up to") for r in uni)


def test_proactive_case_is_a_monitor_never_prompted_again(tmp_path, clip):
    cond = "Tell me when the scene shows frame code 100."
    qs = [_q("p", 3.0, cond, kind="proactive", t_gt=10.0, answer="seen"),
          _q("p2", 1.0, "Tell me when something never seen appears.", kind="proactive", t_gt=4.0,
             answer="ref-never-zz"),
          _q("r", 12.0, "What is here now?")]
    m = Model([q.question for q in qs], events={cond: 10.0})
    out = _run(tmp_path, clip, qs, m, DriverConfig(tail_s=2.0, baselines=("last4",)))
    assert out.status == "completed"
    res = {(r.qid, r.method): r for r in out.results}
    p = res[("p", "engine")]
    assert p.t_pred is not None and 0.0 <= p.t_pred - 10.0 <= 1.0 + 0.5 + 1e-6  # a check a second, 2 fps
    assert p.time_ok is True and p.correct is True and p.scorer == "match"
    assert p.response.startswith("seen at")
    miss = res[("p2", "engine")]
    assert miss.t_pred is None and miss.time_ok is False and miss.correct is False and miss.error == "no alert"
    # registered at its time, then only monitor checks: never asked as a question again
    for q in qs[:2]:
        tags = [tag for tag, _ in m.seen[q.question]]
        assert tags and set(tags) == {"monitor"}
        assert min(t for _, t in m.seen[q.question]) >= q.time - 1e-6
    assert not any("ref-never-zz" in t for t in m.texts)  # the ground truth never reaches the model
    # the baseline does not answer proactive cases; it is not scored on them
    assert res[("p", "last4")].correct is None and res[("p", "last4")].error.startswith("unsupported")


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
    whole = _run(tmp_path / "whole", clip, qs, Model([q.question for q in qs]),
                 DriverConfig(baselines=("last4",)))
    assert whole.status == "completed"

    stop = threading.Event()
    n = []

    def count(r):
        n.append(r)
        if len(n) == 3:
            stop.set()

    path = tmp_path / "split" / "results.jsonl"
    first = _run(tmp_path / "split", clip, qs, Model([q.question for q in qs]), DriverConfig(baselines=("last4",)),
                 results=path, stop=stop, on_result=count)
    assert first.status == "interrupted" and 3 <= len(ResultLog(path).read()) < 2 * len(qs)
    with open(path, "a") as f:
        f.write('{"qid": "torn')  # the torn last line of a killed run
    again = _run(tmp_path / "split", clip, qs, Model([q.question for q in qs]), DriverConfig(baselines=("last4",)),
                 results=path)
    assert again.status == "completed"
    assert _deterministic(ResultLog(path).read()) == _deterministic(ResultLog(tmp_path / "whole" / "results.jsonl").read())
    assert len(again.results) == 2 * len(qs)


def test_a_finished_video_is_not_replayed(tmp_path, clip):
    qs = [_q("a", 1.0, "First?")]
    path = tmp_path / "results.jsonl"
    assert _run(tmp_path, clip, qs, Model(["First?"]), results=path).status == "completed"
    m = Model(["First?"])
    again = _run(tmp_path, clip, qs, m, results=path)
    assert again.status == "completed" and not m.seen and len(again.results) == 1


def test_absolute_multi_segment_stream_and_ref_at_300(tmp_path, clip):
    origin = 300.0 * 5666666  # on a 5-minute edge, so the bins are easy to work out
    day = 86400.0
    video = EvalVideo("life", (Segment(clip.segments[0].path, 0.0), Segment(clip.segments[0].path, day)), origin)
    from vam_engine.eval.records import Interval

    qs = [EvalQuestion("near", "life", day + 5.0, "What is here now?", "x", evidence=(Interval(day + 1, day + 9),),
                       benchmark="mmlifelong"),
          EvalQuestion("far", "life", day + 6.0, "What was here yesterday?", "x", evidence=(Interval(1.0, 9.0),),
                       benchmark="mmlifelong")]
    m = Model([q.question for q in qs])
    llm = ScriptedLLM(m)
    host = EngineHost(tmp_path / "stores", CFG, llm, per_video=False)
    try:
        out = Driver(host, llm, DriverConfig(), tmp_path / "r.jsonl").run({"life": video}, {"life": qs})
        shown = [t for tag, t in m.seen["What is here now?"] if t is not None]
        assert shown and max(shown) <= 5.0 + 1e-6  # the second recording's frames up to the question
    finally:
        host.close()
    near, far = out.results
    assert near.evidence and all(day <= a <= b <= day + 5.0 + 1e-6 for a, b in near.evidence)
    assert near.ref300 == 1.0  # the predicted interval lies in the annotated 5-minute bin
    assert far.ref300 == 0.0   # a day apart


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
    host = EngineHost(tmp_path / "stores", CFG, llm, per_video=True)  # each video's engine closes
    try:
        out = Driver(host, llm, DriverConfig(concurrency=2), tmp_path / "r.jsonl").run(
            {"coded": clip, "coded2": v2}, {"coded": qs1, "coded2": qs2})
    finally:
        host.close()
    assert out.status == "completed" and [r.qid for r in out.results] == ["a", "b", "c"]
    assert all(r.error is None for r in out.results) and not closed  # the caller closes the model it made
    for q in qs1 + qs2:
        assert max(t for _, t in m.seen[q.question] if t is not None) <= q.time + 1e-6

