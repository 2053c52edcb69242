"""The scorers against hand-computed values: each benchmark's official rule beside the robust
extraction on replies the two judge differently ("B or C", "Chopping: B", "<answer>C</answer>",
"(B)", empty replies, "3 or 4" for a count), applied to real questions from the excerpts;
TimeOK in each benchmark's window; Ref@300; the judge on each scale with its disk cache."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vam_engine.eval import loaders
from vam_engine.eval.grade import Grader
from vam_engine.eval.judges import Judge, lifelong_credit, parse_graded, parse_verdict
from vam_engine.eval.records import EvalResult
from vam_engine.eval.scorers import (
    TIME_WINDOWS,
    bins,
    extract_count,
    extract_option,
    extract_yes_no,
    match_answer,
    oasis_mc,
    ovo_count,
    ovo_mc,
    ovo_yesno,
    ref_at,
    sb_mc,
    time_ok,
)
from vam_engine.llm import OpenAIChat, ScriptedLLM

EX = Path(__file__).parents[1] / "data" / "benchmarks"
OPTS = ("A. a cat", "B. a red car", "C. a dog running", "D. red")


# reply, letter -> (OVO-Bench: letter occurs, StreamingBench: first character (None: left out),
#                   OASIS: <answer> text equals, robust extraction)
@pytest.mark.parametrize("reply,letter,want", [
    ("B or C", "C", (1, 0, 0, 0)),
    ("Chopping: B", "B", (1, 0, 0, 0)),
    ("Chopping: B", "C", (1, 1, 0, 0)),      # the C of "Chopping" is the first character and occurs
    ("<answer>C</answer>", "C", (1, 0, 1, 1)),
    ("(B)", "B", (1, 0, 0, 1)),
    ("", "B", (0, None, 0, 0)),             # StreamingBench leaves an empty reply out of the count
    (None, "B", (0, 0, 0, 0)),              # a failed call is wrong everywhere
    ("b", "B", (0, 0, 1, 0)),               # OASIS upper-cases; OVO-Bench's substring test is case-sensitive
    ("A cat.", "A", (1, 1, 0, 1)),
    ("The answer is D", "D", (1, 0, 0, 1)),
    ("B", "B", (1, 1, 1, 1)),
])
def test_multiple_choice_official_rules_and_robust_extraction(reply, letter, want):
    robust = extract_option(reply, OPTS)
    got = (ovo_mc(reply, letter), sb_mc(reply, letter), oasis_mc(reply, letter),
           float(robust is not None and robust == letter))
    assert got == want


@pytest.mark.parametrize("reply,answer,official,robust", [
    ("Y", "Yes", 1, 1), ("N", "No", 1, 1), ("Yes.", "Yes", 1, 1),
    ("yes", "Yes", 0, 1),                    # "Yes" does not occur in "yes"
    ("Not sure", "No", 1, 0),                # "No" occurs in "Not sure"
    ("Yes and No", "No", 1, 0), ("Yes and No", "Yes", 1, 0),
    ("N", "Yes", 0, 0), (None, "Yes", 0, 0), ("", "No", 0, 0),
])
def test_ovo_yes_no_probes(reply, answer, official, robust):
    assert ovo_yesno(reply, answer) == official
    assert float(extract_yes_no(reply) == answer) == robust


@pytest.mark.parametrize("reply,count,official,robust", [
    ("3 or 4", "3", 0, 0), ("3 or 4", "34", 1, 0),  # every digit joined: "34"
    ("3", "3", 1, 1), ("three", "3", 0, 1), ("I count 12 times", "12", 1, 1), ("1, 2", "12", 1, 0),
    ("<answer>5</answer>", "5", 1, 1), (None, "0", 0, 0), ("none", "0", 0, 0),
])
def test_ovo_counts(reply, count, official, robust):
    assert ovo_count(reply, count) == official
    c = extract_count(reply)
    assert float(c is not None and str(c) == count) == robust


def _q(rel, qid):
    return next(q for q in loaders.read(EX / rel).questions if q.qid == qid)


def _graded(q, response, judge=None, **kw):
    r = EvalResult(q.qid, q.video, "engine", q.kind, q.category, q.group, q.stratum, q.time, response=response, **kw)
    Grader(judge)(q, r)
    return r


def test_real_questions_routed_to_their_benchmarks_rule():
    epm = _q("ovo-bench/ovo_bench_new.json", "0")                  # gt C
    assert (_graded(epm, "B or C").score, _graded(epm, "B or C").score_robust) == (1.0, 0.0)
    sb = _q("streamingbench/questions_real.json", "0.0")           # gt C
    assert (_graded(sb, "B or C").score, _graded(sb, "C. The individual").score) == (0.0, 1.0)
    empty = _graded(sb, "")
    assert empty.score is None and empty.score_robust == 0.0 and empty.scorer == "sb_mc"
    oasis = _q("oasis/StreamingBench/Real_Time_Visual_Understanding.json", "Real-Time Visual Understanding_sample_1_1")
    r = _graded(oasis, "I think so. <answer>D</answer>")
    assert (r.score, r.extracted) == (1.0, "D")
    assert (_graded(oasis, "D.").score, _graded(oasis, "D.").score_robust) == (0.0, 1.0)
    rec = _q("ovo-bench/ovo_bench_new.json", "1558.0")             # count 1
    assert (_graded(rec, "1 or 2").score, _graded(rec, "1 or 2").extracted) == (0.0, "12")
    crr = _q("ovo-bench/ovo_bench_new.json", "1468.2")             # Yes
    assert _graded(crr, "Y").score == 1.0 and _graded(crr, "No").score == 0.0


def test_streamingbench_proactive_output_window_and_content():
    po = _q("streamingbench/questions_proactive.json", "0.0")      # t_gt 29, output "3"
    on = _graded(po, "The score is 3 now", t_pred=31.0)
    assert (on.time_ok, on.score) == (True, 1.0)
    assert _graded(po, "The score is 3 now", t_pred=27.0).score == 1.0   # 2 s early is in
    late = _graded(po, "The score is 3 now", t_pred=31.5)
    assert (late.time_ok, late.score) == (False, 0.0)
    assert _graded(po, "No score yet", t_pred=29.0).score == 0.0
    po3 = _q("streamingbench/questions_proactive.json", "2.0")     # output "Score 112"
    r = _graded(po3, "score 112", t_pred=857.0)
    assert (r.score, r.score_robust) == (0.0, 1.0)                  # the official test is case-sensitive


@pytest.mark.parametrize("t_pred,t_gt,window,ok", [
    (10.5, 11.0, "streamarena", True), (10.49, 11.0, "streamarena", False),
    (12.0, 10.0, "streamarena", True), (12.01, 10.0, "streamarena", False),
    (12.1, 10.1, "streamarena", True),     # 2.0 s in floats
    (8.0, 10.0, "streamingbench", True), (7.99, 10.0, "streamingbench", False),
    (12.0, 10.0, "streamingbench", True), (None, 10.0, "streamingbench", False),
])
def test_time_ok_windows(t_pred, t_gt, window, ok):
    assert time_ok(t_pred, t_gt, TIME_WINDOWS[window]) is ok


def test_option_extraction():
    for reply, want in [("B", "B"), ("(B)", "B"), ("B. a red car", "B"), ("**C**", "C"), ("  d  ", None),
                        ("The answer is (C).", "C"), ("a red car", "B"), ("red", "D"), ("A cat is sitting", "A"),
                        ("A dog runs", None), ("E", None), ("Answer: B or C", None), ("<answer>D</answer>", "D")]:
        assert extract_option(reply, OPTS) == want, reply
    assert extract_option("B", ("A. x",)) is None
    # letters as the release writes them (A, C, B, D): "C" picks the second option
    assert extract_option("C", ("A. x", "C. y", "B. z", "D. w")) == "C"


def test_ref_at_300_on_bins():
    assert bins([(0, 300)]) == {0} and bins([(299, 301)]) == {0, 1} and bins([(600, 600)]) == {2}
    assert ref_at([(10, 800)], [(400, 1100)]) == pytest.approx(0.5)
    assert ref_at([(0, 100)], [(900, 1000)]) == 0.0
    assert ref_at([(310, 320)], [(450, 590)]) == 1.0
    assert ref_at([], [(0, 10)]) == 0.0
    # MM-Lifelong's schema example: one predicted interval (bin 833) against clue bins {0, 833, 861}
    assert ref_at([(249900, 250030)], [(30, 40), (250000, 250020), (258500, 258510)]) == pytest.approx(1 / 3)


def test_match_answer_whole_words():
    assert match_answer("It is a red car.", "red") and not match_answer("I am bored", "red")
    assert not match_answer(None, "x") and not match_answer("x", "")


def test_verdict_parsing_on_each_scale():
    assert parse_verdict('Sure. {"correct": false}') is False and parse_verdict("maybe") is None
    assert parse_graded('{"pred": "yes", "score": 4}', "streambench").score == 1.0
    v = parse_graded('{"pred": "no", "score": "2"}', "streambench")
    assert (v.score, v.grade) == (0.0, 2.0)
    assert parse_graded('{"pred": "maybe", "score": 2}', "streambench") is None
    assert [lifelong_credit(g) for g in (5, 4, 3, 2, 0)] == [1.0, 1.0, 0.5, 0.0, 0.0]
    assert parse_graded('{"score": 3}', "lifelong").score == 0.5 and parse_graded('{"score": 9}', "lifelong") is None


def test_judge_scales_and_cache(tmp_path):
    asked = []

    def reply(req):
        payload = json.loads(req.messages[-1].content[0])
        asked.append((req.messages[0].content[0][:40], payload))
        assert req.sampling.temperature == 0.0
        if '"pred"' in req.messages[0].content[0]:
            return json.dumps({"pred": "yes", "score": 4})
        if "scale from 0 to 5" in req.messages[0].content[0]:
            return json.dumps({"score": 3})
        return json.dumps({"correct": "taxi" in payload["response"].lower()})

    cache = tmp_path / "judge.jsonl"
    j = Judge(ScriptedLLM(reply, name="judge-a"), cache)
    assert j("What sign?", "taxi", "A TAXI sign") is True and j("What sign?", "taxi", "a stop sign") is False
    assert j.grade("streambench", "Where?", "on the table", "table").grade == 4.0
    assert j.grade("lifelong", "What?", "pasta", "pasta with tomato").score == 0.5
    assert j("What sign?", "taxi", "A TAXI sign") is True  # from the cache
    assert j.grade("lifelong", "What?", "pasta", "").score == 0.0  # nothing to judge: not asked
    assert len(asked) == 4 and j.calls == 4
    j2 = Judge(ScriptedLLM(lambda r: pytest.fail("the cache should answer"), name="judge-a"), cache)
    assert j2.grade("streambench", "Where?", "on the table", "table") == j.grade("streambench", "Where?",
                                                                                  "on the table", "table")
    assert j2("What sign?", "taxi", "a stop sign") is False and j2.calls == 0
    j3 = Judge(ScriptedLLM(['{"correct": true}'], name="judge-b"), cache)  # another judge: its own verdicts
    assert j3("What sign?", "taxi", "a stop sign") is True and j3.calls == 1
    bad = Judge(ScriptedLLM(["hmm"]), tmp_path / "c.jsonl")
    with pytest.raises(ValueError, match="cannot read a binary verdict"):
        bad("q", "ref", "resp")
    assert not (tmp_path / "c.jsonl").exists()


def test_open_answers_judged_on_their_benchmarks_scale(tmp_path):
    seen = []

    def reply(req):
        seen.append(json.loads(req.messages[-1].content[0])["response"])
        if '"pred"' in req.messages[0].content[0]:
            return json.dumps({"pred": "yes", "score": 5})
        return json.dumps({"score": 3})

    judge = Judge(ScriptedLLM(reply, name="j"), tmp_path / "c.jsonl")
    sb = next(q for q in loaders.read(EX / "oasis/eval_streambench.json").questions if q.qid == "0.0")
    r = _graded(sb, "Let me look. <answer>Yes, it is on the table.</answer>", judge)
    assert (r.score, r.judge_score, r.scorer, seen[-1]) == (1.0, 5.0, "judge:j", "Yes, it is on the table.")
    life = loaders.read(EX / "mmlifelong_schema_example.json").questions[0]
    r = _graded(life, "Pasta, I think", judge)
    assert (r.score, r.judge_score) == (0.5, 3.0)
    nojudge = _graded(life, "tomato pasta it was")
    assert (nojudge.score, nojudge.scorer) == (1.0, "match")


class _FakeOpenAI(BaseHTTPRequestHandler):
    bodies: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        content = body["messages"][-1]["content"]
        user = json.loads(content[0]["text"] if isinstance(content, list) else content)
        out = json.dumps({"choices": [{"message": {"content": json.dumps(
            {"correct": user["reference"].lower() in user["response"].lower()})}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


def test_judge_over_http_and_its_cache(tmp_path):
    _FakeOpenAI.bodies = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    t = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        cache = tmp_path / "judge.jsonl"
        j = Judge(OpenAIChat(url, "judge-model", max_retries=0), cache)
        assert j("Colour?", "red", "It is red.") is True and j("Colour?", "red", "It is blue.") is False
        assert len(_FakeOpenAI.bodies) == 2
        assert all(b["temperature"] == 0.0 and b["model"] == "judge-model" for b in _FakeOpenAI.bodies)
        j2 = Judge(OpenAIChat(url, "judge-model", max_retries=0), cache)
        assert j2("Colour?", "red", "It is red.") is True and j2("Colour?", "red", "It is blue.") is False
        assert len(_FakeOpenAI.bodies) == 2  # a re-run costs nothing
    finally:
        httpd.shutdown()
        httpd.server_close()
