"""The report layouts on hand-made results: OVO-Bench task accuracies, its RT / BT / Forward
averages, RT+BT and overall; StreamingBench axes with empty replies left out; StreamBench's
class mean and judge score; MM-Lifelong's half credit and Ref@300; StreamArena strata; the
ratio rows, the papers' published rows, the robust tables' label; JSON and CSV."""
import csv
import json

import pytest

from vam_engine.eval import report
from vam_engine.eval.records import EvalResult


def _r(method, cat, group, score, *, robust=None, stratum="", kind="reactive", latency=1.0, ref=None, grade=None,
       qid=None):
    return EvalResult(qid or f"{cat}{score}{latency}", "v", method, kind, cat, group, stratum, 0.0, response="x",
                      score=score, score_robust=score if robust is None else robust, latency_s=latency, ref300=ref,
                      judge_score=grade, prompt_tokens=10, completion_tokens=2)


def _rows(table):
    return dict(table.rows)


def test_ovo_averages_rt_bt_and_overall():
    rs = ([_r("engine", "OCR", "RT", 1), _r("engine", "OCR", "RT", 0),   # OCR 50
           _r("engine", "ACR", "RT", 1),                                    # ACR 100 -> RT 75
           _r("engine", "EPM", "BT", 0), _r("engine", "EPM", "BT", 1, latency=2),
           _r("engine", "EPM", "BT", 1, latency=3),                         # EPM 66.7 -> BT 66.7
           _r("engine", "REC", "Fwd", 0), _r("engine", "SSR", "Fwd", 1)]    # Fwd 50
          + [_r("last4", "OCR", "RT", 1), _r("last4", "ACR", "RT", 0), _r("last4", "EPM", "BT", 0),
             _r("last4", "REC", "Fwd", 1), _r("last4", "SSR", "Fwd", 1)])
    t = report.build(rs, "ovo")[0]
    assert t.columns == ["OCR", "ACR", "RT avg", "EPM", "BT avg", "REC", "SSR", "Fwd avg", "RT+BT", "overall"]
    rt, bt, fwd = 75.0, 200 / 3, 50.0
    assert _rows(t)["engine"] == pytest.approx([50.0, 100.0, rt, bt, bt, 0.0, 100.0, fwd, (rt + bt) / 2,
                                                (rt + bt + fwd) / 3])
    assert _rows(t)["last4"] == pytest.approx([100.0, 0.0, 50.0, 0.0, 0.0, 100.0, 100.0, 100.0, 25.0, 50.0])
    ratio = _rows(t)["engine/last4"]
    assert ratio[0] == 0.5 and ratio[3] is None and ratio[8] == pytest.approx(round(((rt + bt) / 2) / 25, 2))
    vam = _rows(t)["paper: VAM, Gemini 3 Flash (VAM Tab. 1)"]
    assert vam[t.columns.index("RT+BT")] == 68.41 and vam[t.columns.index("overall")] == 61.95


def test_ovo_without_forward_tasks_has_no_overall():
    rs = [_r("engine", "OCR", "RT", 1), _r("engine", "EPM", "BT", 0)]
    row = _rows(report.build(rs, "ovo")[0])["engine"]
    assert row[-2:] == [50.0, None]  # RT+BT, overall (needs the forward average too)


def test_streamingbench_axes_leave_empty_replies_out():
    rs = [_r("engine", "OP", "Real-Time", 1), _r("engine", "OP", "Real-Time", None),   # an empty reply
          _r("engine", "CT", "Real-Time", 0), _r("engine", "SQA", "Contextual", 1),
          _r("engine", "MCU", "Contextual", 0)]
    t = report.build(rs, "streamingbench")[0]
    assert t.columns == ["OP", "CT", "Real-Time", "MCU", "SQA", "Contextual", "overall"]
    assert _rows(t)["engine"] == pytest.approx([100.0, 0.0, 50.0, 0.0, 100.0, 50.0, 50.0])
    assert _rows(t)["paper: OASIS, Qwen3-VL-8B (OASIS Tab. 2)"][2] == 78.22


def test_streamingbench_proactive_table():
    rs = [EvalResult("p1", "v", "engine", "proactive", "PO", "Contextual", "", 0.0, response="3", score=1.0,
                     t_pred=30.0, time_ok=True),
          EvalResult("p2", "v", "engine", "proactive", "PO", "Contextual", "", 0.0, response="no", score=0.0,
                     t_pred=40.0, time_ok=False),
          EvalResult("p3", "v", "engine", "proactive", "PO", "Contextual", "", 0.0, score=0.0, time_ok=False)]
    po = [t for t in report.build(rs, "streamingbench") if "Proactive" in t.title][0]
    assert _rows(po)["engine"] == pytest.approx([100 / 3, 100 / 3, 200 / 3])


def test_streambench_class_mean_and_judge_score():
    rs = [_r("engine", "SF", "SF", 1, grade=5), _r("engine", "SF", "SF", 0, grade=1), _r("engine", "OS", "OS", 1,
                                                                                          grade=4)]
    t = report.build(rs, "streambench")[0]
    assert t.columns == ["OS", "SF", "Avg", "score 0-5"]
    assert _rows(t)["engine"] == pytest.approx([100.0, 50.0, 75.0, 10 / 3])


def test_mmlifelong_half_credit_and_ref300():
    rs = [_r("engine", "single_point", "MM-Lifelong", 1.0, ref=0.5), _r("engine", "multi_count", "MM-Lifelong", 0.5,
                                                                          ref=0.0)]
    t = report.build(rs, "mmlifelong")[0]
    assert _rows(t)["engine"] == pytest.approx([75.0, 25.0])
    assert _rows(t)["paper: VAM (VAM Tab. 3)"] == [17.11, 3.65]


def test_streamarena_strata_and_latency():
    rs = [_r("engine", "RTP", "RTP", 1, latency=2.0), _r("engine", "RTP", "RTP", 0, latency=4.0),
          _r("engine", "single_point", "HR", 1, stratum="L1", latency=10.0),
          _r("engine", "multi_recall", "HR", 0, stratum="L4", latency=20.0),
          _r("engine", "Pro", "Pro", 1, stratum="L2", kind="proactive", latency=None)]
    acc, lat = report.build(rs, "streamarena")[:2]
    assert _rows(acc)["engine"] == pytest.approx([50.0, 50.0, 100.0, None, None, 0.0, None, 100.0, None, 100.0, None])
    assert _rows(acc)["paper: StreamMind (StreamArena Tab. 3)"][0] == 44.5
    assert _rows(lat)["engine"] == pytest.approx([3.0, 15.0, None, 9.0])


def test_robust_tables_are_labelled_and_use_the_robust_score():
    rs = [_r("engine", "OCR", "RT", 1, robust=0), _r("engine", "EPM", "BT", 0, robust=1)]
    official = report.build(rs, "ovo", "official")
    both = report.build(rs, "ovo", "both")
    assert len(both) == len(official) + 1
    robust = both[1]
    assert robust.title.endswith(report.ROBUST_TITLE) and official[0].title == "OVO-Bench accuracy"
    assert _rows(robust)["engine"][:2] == [0.0, 0.0] and _rows(official[0])["engine"][:2] == [100.0, 100.0]
    assert not any(label.startswith("paper:") for label, _ in robust.rows)  # not comparable with published numbers
    with pytest.raises(ValueError, match="scoring"):
        report.build(rs, "ovo", "lenient")


def test_write_json_and_csv(tmp_path):
    rs = [_r("engine", "x", "x", 1), _r("uniform", "x", "x", 0)]
    tables = report.build(rs, "jsonl")
    jp, cp = report.write(tables, tmp_path, {"status": "completed"})
    data = json.loads(jp.read_text())
    assert data["status"] == "completed" and data["tables"][0]["rows"][0]["values"]["overall"] == 100.0
    rows = list(csv.reader(cp.open()))
    assert rows[0] == ["table", "unit", "method", "column", "value"]
    assert ["Accuracy per category", "%", "engine", "overall", "100.0"] in rows
    assert "engine/uniform" in report.render(tables)
