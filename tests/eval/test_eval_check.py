"""``vam-engine eval FILE --check [--json]``: no videos, no model; the questions per task, a
top-level count, every skipped or repaired record with file, record and reason. On the whole
real files (when ../shared/benchmarks is there): every file recognised, every record read,
and the exact question counts."""
import json
import os
from pathlib import Path

import pytest

from vam_engine import cli
from vam_engine.cli import eval as eval_cli

EX = Path(__file__).parents[1] / "data" / "benchmarks"
REPO = Path(__file__).parents[2]
BENCHMARKS = Path(os.environ.get("VAM_BENCHMARKS_DIR", REPO.parent / "shared" / "benchmarks"))


def _check(path, capsys, *extra):
    rc = cli.main(["eval", str(path), "--check", "--json", *extra])
    return rc, json.loads(capsys.readouterr().out)


def test_check_counts_tasks_without_videos_or_model(capsys):
    rc, d = _check(EX / "ovo-bench/ovo_bench_new.json", capsys)
    assert rc == eval_cli.EXIT_COMPLETED
    assert d["format"] == "ovo" and d["benchmark"] == "ovo" and d["questions"] == 68
    assert d["tasks"] == {"EPM": 2, "HLD": 2, "ASI": 2, "STU": 2, "OJR": 3, "ATR": 3, "FPD": 2, "ACR": 2, "OCR": 2,
                          "CRR": 10, "SSR": 25, "REC": 13}
    assert d["groups"] == {"BT": 6, "RT": 14, "Fwd": 48} and d["skipped"] == 0 and d["kept_with_repair"] == 2
    assert {p["record"] for p in d["problems"]} == {"[13]", "[26].test_info[5]"}
    assert all(set(p) == {"file", "record", "field", "problem", "action"} for p in d["problems"])


def test_check_text_and_skipped_records_exit_3(tmp_path, capsys):
    recs = json.loads((EX / "streamingbench/questions_proactive.json").read_text())
    recs[1]["questions"][0]["ground_truth_time_stamp"] = "later"
    f = tmp_path / "po.json"
    f.write_text(json.dumps(recs))
    rc, d = _check(f, capsys)
    assert rc == eval_cli.EXIT_UNREADABLE and d["questions"] == 2 and d["skipped"] == 1
    assert d["problems"] == [{"file": str(f), "record": "[1].questions[0]", "field": "ground_truth_time_stamp",
                              "problem": d["problems"][0]["problem"], "action": "skipped"}]
    assert cli.main(["eval", str(f), "--check"]) == eval_cli.EXIT_UNREADABLE
    out = capsys.readouterr().out
    assert "2 questions over 2 streams" in out and "Proactive Output" in out and "skipped: " in out


def test_check_with_a_format_that_does_not_fit(capsys):
    rc, d = _check(EX / "oasis/eval_ovo_bench.json", capsys, "--format", "ovo")
    assert rc == eval_cli.EXIT_UNREADABLE and d["questions"] == 0 and d["skipped"] == 9
    assert cli.main(["eval", str(EX / "nope.json"), "--check"]) == 2


# the whole releases: questions per file (every record read; OVO-Bench's forward records count their probes)
WHOLE = {
    "ovo-bench/ovo_bench_new.json": 3035,
    "oasis/eval_ovo_bench.json": 1468,
    "streamingbench/questions_real.json": 2500,
    "streamingbench/questions_real_stream.json": 2495,
    "streamingbench/questions_omni.json": 1500,
    "streamingbench/questions_omni_stream.json": 1500,
    "streamingbench/questions_sqa.json": 250,
    "streamingbench/questions_sqa_stream.json": 250,
    "streamingbench/questions_proactive.json": 250,
    "streamingbench/questions_proactive_50.json": 51,
    "oasis/StreamingBench/Real_Time_Visual_Understanding.json": 2500,
    "oasis/StreamingBench/Misleading_Context_Recognition.json": 250,
    "oasis/StreamingBench/Anomaly_Context_Understanding.json": 250,
    "oasis/StreamingBench/Sequential_Question_Answering.json": 250,
    "oasis/eval_streambench.json": 1838,
    "mmlifelong_schema_example.json": 2,
    "streamarena_schema_example.json": 4,
}


@pytest.mark.skipif(not BENCHMARKS.is_dir(), reason=f"the benchmark files are not here ({BENCHMARKS}; "
                                                    "set VAM_BENCHMARKS_DIR)")
def test_whole_benchmark_files(capsys):
    files = sorted(str(p.relative_to(BENCHMARKS)) for p in BENCHMARKS.rglob("*.json"))
    assert files == sorted(WHOLE)
    counts = {}
    for rel in files:
        rc, d = _check(BENCHMARKS / rel, capsys)  # no --format: every layout is recognised
        assert rc == eval_cli.EXIT_COMPLETED and d["skipped"] == 0, (rel, [p for p in d["problems"]
                                                                          if p["action"] == "skipped"])
        counts[rel] = d["questions"]
        if rel == "ovo-bench/ovo_bench_new.json":
            assert (d["tasks"]["REC"], d["tasks"]["SSR"], d["tasks"]["CRR"]) == (698, 629, 240)
            assert d["streams"] == 644
        if rel == "streamingbench/questions_real.json":
            assert sum(d["tasks"].values()) == 2500 and d["streams"] == 499 and len(d["tasks"]) == 10
        if rel == "oasis/eval_streambench.json":
            assert d["streams"] == 307
    assert counts == WHOLE


@pytest.mark.skipif(not BENCHMARKS.is_dir(), reason="the benchmark files are not here")
def test_excerpts_are_verbatim_copies():
    manifest = json.loads((EX / "excerpts.json").read_text())["records"]
    for rel, idx in manifest.items():
        src = json.loads((BENCHMARKS / rel).read_text())
        assert json.loads((EX / rel).read_text()) == [src[i] for i in idx], rel
