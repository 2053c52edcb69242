"""The report layouts on hand-made results: OVO-Bench averages of task accuracies, StreamArena
strata and latency, StreamingBench axes, MM-Lifelong Ref@300, the ratio rows, JSON and CSV."""
import csv
import json

import pytest

from vam_engine.eval import report
from vam_engine.eval.records import EvalResult


def _r(method, cat, group, ok, *, stratum="", kind="reactive", latency=1.0, ref=None, qid=None):
    return EvalResult(qid or f"{cat}{ok}{latency}", "v", method, kind, cat, group, stratum, 0.0,
                      response="x", correct=ok, latency_s=latency, ref300=ref, prompt_tokens=10, completion_tokens=2)


def _rows(table):
    return dict(table.rows)


def test_ovo_group_averages_are_means_of_task_accuracies():
    rs = ([_r("engine", "OCR", "RT", True), _r("engine", "OCR", "RT", False),  # OCR 50
           _r("engine", "ACR", "RT", True),                                      # ACR 100 -> RT 75
           _r("engine", "EPM", "BT", False), _r("engine", "EPM", "BT", True, latency=2),
           _r("engine", "EPM", "BT", True, latency=3),                           # EPM 66.7 -> BT 66.7
           _r("engine", "REC", "Fwd", False)]                                    # Fwd 0
          + [_r("last4", "OCR", "RT", True), _r("last4", "ACR", "RT", False), _r("last4", "EPM", "BT", False),
             _r("last4", "REC", "Fwd", True)])
    t = report.ovo_tables(rs)[0]
    assert t.columns == ["OCR", "ACR", "RT avg", "EPM", "BT avg", "REC", "Fwd avg", "overall"]
    eng = _rows(t)["engine"]
    assert eng == pytest.approx([50.0, 100.0, 75.0, 200 / 3, 200 / 3, 0.0, 0.0, (75 + 200 / 3 + 0) / 3])
    assert _rows(t)["last4"] == pytest.approx([100.0, 0.0, 50.0, 0.0, 0.0, 100.0, 100.0, 50.0])
    ratio = _rows(t)["engine/last4"]
    assert ratio[0] == 0.5 and ratio[3] is None and ratio[-1] == pytest.approx(round(((75 + 200 / 3) / 3) / 50, 2))


def test_streamarena_strata_and_latency():
    rs = [_r("engine", "RTP", "RTP", True, latency=2.0), _r("engine", "RTP", "RTP", False, latency=4.0),
          _r("engine", "single_point", "HR", True, stratum="L1", latency=10.0),
          _r("engine", "multi_count", "HR", False, stratum="L4", latency=20.0),
          _r("engine", "Tool", "Tool", True, latency=30.0),
          _r("engine", "Pro", "Pro", True, stratum="L2", kind="proactive", latency=None),
          _r("engine", "Pro", "Pro", False, stratum="L2", kind="proactive", latency=None, qid="p2")]
    acc, lat = report.streamarena_tables(rs)
    assert acc.columns == ["RTP", "HR avg", "HR L1", "HR L2", "HR L3", "HR L4", "Tool", "Pro avg", "Pro L1",
                           "Pro L2", "Pro L3"]
    assert _rows(acc)["engine"] == [50.0, 50.0, 100.0, None, None, 0.0, 100.0, 50.0, None, 50.0, None]
    # mean latency per capability; pooled weighs questions (5 reactive: 66 / 5)
    assert _rows(lat)["engine"] == pytest.approx([3.0, 15.0, 30.0, 66 / 5])


def test_streamingbench_axes_are_question_weighted():
    rs = [_r("engine", "OP", "Real-Time", True), _r("engine", "OP", "Real-Time", True),
          _r("engine", "CT", "Real-Time", False), _r("engine", "SQA", "Contextual", True)]
    t = report.streamingbench_tables(rs)[0]
    assert t.columns == ["OP", "CT", "Real-Time", "SQA", "Contextual", "overall"]
    assert _rows(t)["engine"] == pytest.approx([100.0, 0.0, 200 / 3, 100.0, 100.0, 75.0])


def test_mmlifelong_and_files(tmp_path):
    rs = [_r("engine", "QA", "MM-Lifelong", True, ref=0.5), _r("engine", "QA", "MM-Lifelong", False, ref=0.0)]
    tables = report.build(rs, "mmlifelong")
    assert _rows(tables[0])["engine"] == [50.0, 25.0]
    cost = _rows(tables[-1])["engine"]
    assert cost == pytest.approx([1.0, 1.0, None, 10.0, 2.0])  # QA latency, pooled, no prefill, tokens
    jp, cp = report.write(tables, tmp_path, {"status": "completed"})
    data = json.loads(jp.read_text())
    assert data["status"] == "completed" and data["tables"][0]["rows"][0]["values"] == {"Acc.": 50.0, "Ref@300": 25.0}
    rows = list(csv.reader(cp.open()))
    assert rows[0] == ["table", "unit", "method", "column", "value"] and ["MM-Lifelong", "%", "engine", "Acc.", "50.0"] in rows
    text = report.render(tables)
    assert "MM-Lifelong (%)" in text and "50.0" in text and " - " in text
