"""The scorers against hand-computed values: option extraction, TimeOK at its exact
boundaries, Ref@300 on overlapping and disjoint intervals, the text match, and the LLM judge
through a loopback OpenAI-compatible server with its verdict cache."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vam_engine.eval.scorers import (
    Judge,
    bins,
    extract_option,
    match_answer,
    parse_verdict,
    ref_at,
    time_ok,
)
from vam_engine.llm import OpenAIChat, ScriptedLLM

OPTS = ("A. a cat", "B. a red car", "C. a dog running", "D. red")


@pytest.mark.parametrize("reply,want", [
    ("B", "B"), ("(B)", "B"), ("B.", "B"), ("B. a red car", "B"), ("B) something", "B"), ("C: a dog", "C"),
    ("**C**", "C"), ("  d  ", None),  # lower case alone is not a letter pick (a word, "d")
    ("The answer is (C).", "C"), ("Answer: D", "D"), ("I pick option B because", "B"),
    ("a red car", "B"),                     # the option's text
    ("I think a dog running across", "C"),
    ("red", "D"),                           # "red" alone is D's whole text, inside B's only as a part
    ("A cat is sitting there", "A"),        # the article, but A's own text follows it
    ("A dog runs", None),                   # the article "A", and no option's text
    ("E", None), ("", None), (None, None), ("none of them", None),
    ("Answer: B or C", None),               # not an answer: no single pick
])
def test_option_extraction(reply, want):
    assert extract_option(reply, OPTS) == want


def test_option_extraction_needs_options():
    assert extract_option("B", None) is None
    assert extract_option("B", ("A. x",)) is None  # B is not an option of a one-option question


@pytest.mark.parametrize("t_pred,t_gt,ok", [
    (10.5, 11.0, True),    # exactly 0.5 s early
    (10.49, 11.0, False),
    (12.0, 10.0, True),    # exactly 2.0 s late
    (12.01, 10.0, False),
    (12.1, 10.1, True),    # 2.0 s in floats (12.1 - 10.1 = 1.9999999999999982 or so)
    (10.0, 10.0, True), (None, 10.0, False),
])
def test_time_ok_boundaries(t_pred, t_gt, ok):
    assert time_ok(t_pred, t_gt) is ok


def test_ref_at_300_on_bins():
    assert bins([(0, 300)]) == {0}            # an end on an edge stays in its bin
    assert bins([(299, 301)]) == {0, 1}
    assert bins([(600, 600)]) == {2}          # a point
    # overlapping: pred bins {0,1,2}, gt bins {1,2,3}: 2 / 4
    assert ref_at([(10, 800)], [(400, 1100)]) == pytest.approx(0.5)
    # disjoint
    assert ref_at([(0, 100)], [(900, 1000)]) == 0.0
    # the same bin, different seconds: 1
    assert ref_at([(310, 320)], [(450, 590)]) == 1.0
    # several predicted intervals: {0} u {4} vs {0}: 1 / 2
    assert ref_at([(0, 10), (1250, 1260)], [(100, 200)]) == pytest.approx(0.5)
    assert ref_at([], [(0, 10)]) == 0.0
    assert ref_at([(0, 60)], [(0, 600)], bin_s=60) == pytest.approx(1 / 10)


def test_match_answer_whole_words():
    assert match_answer("It is a red car.", "red")
    assert not match_answer("I am bored", "red")
    assert match_answer("The counter shows 42", "42")
    assert not match_answer(None, "x") and not match_answer("x", "")


def test_parse_verdict():
    assert parse_verdict('{"correct": true}') is True
    assert parse_verdict('Sure. {"correct": false}') is False
    assert parse_verdict("Yes, it matches") is True
    assert parse_verdict("incorrect") is False
    assert parse_verdict("maybe") is None


def test_judge_caches_verdicts_on_disk(tmp_path):
    asked = []

    def reply(req):
        payload = json.loads(req.messages[-1].content[0])
        asked.append(payload)
        assert req.sampling.temperature == 0.0
        return json.dumps({"correct": "taxi" in payload["response"].lower()})

    cache = tmp_path / "judge.jsonl"
    j = Judge(ScriptedLLM(reply, name="judge-a"), cache)
    assert j("What sign?", "taxi", "A TAXI sign") is True
    assert j("What sign?", "taxi", "a stop sign") is False
    assert j("What sign?", "taxi", "A TAXI sign") is True  # from the cache
    assert j("What sign?", "taxi", "") is False           # nothing to judge: not asked
    assert len(asked) == 2 and j.calls == 2
    j2 = Judge(ScriptedLLM(lambda r: pytest.fail("the cache should answer"), name="judge-a"), cache)
    assert j2("What sign?", "taxi", "a stop sign") is False and j2.calls == 0
    # another judge model does not reuse judge-a's verdicts
    j3 = Judge(ScriptedLLM(['{"correct": true}'], name="judge-b"), cache)
    assert j3("What sign?", "taxi", "a stop sign") is True and j3.calls == 1


def test_judge_unreadable_verdict_is_an_error(tmp_path):
    j = Judge(ScriptedLLM(["hmm"]), tmp_path / "c.jsonl")
    with pytest.raises(ValueError, match="cannot read a verdict"):
        j("q", "ref", "resp")
    assert not (tmp_path / "c.jsonl").exists()


class _FakeOpenAI(BaseHTTPRequestHandler):
    bodies: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        user = json.loads(body["messages"][-1]["content"][0]["text"]) if isinstance(
            body["messages"][-1]["content"], list) else json.loads(body["messages"][-1]["content"])
        verdict = user["reference"].lower() in user["response"].lower()
        out = json.dumps({"choices": [{"message": {"content": json.dumps({"correct": verdict})},
                                       "finish_reason": "stop"}],
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
        assert j("Colour?", "red", "It is red.") is True
        assert j("Colour?", "red", "It is blue.") is False
        assert len(_FakeOpenAI.bodies) == 2
        assert all(b["temperature"] == 0.0 and b["model"] == "judge-model" for b in _FakeOpenAI.bodies)
        j2 = Judge(OpenAIChat(url, "judge-model", max_retries=0), cache)
        assert j2("Colour?", "red", "It is red.") is True and j2("Colour?", "red", "It is blue.") is False
        assert len(_FakeOpenAI.bodies) == 2  # a re-run costs nothing
    finally:
        httpd.shutdown()
        httpd.server_close()
