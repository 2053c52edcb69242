"""Each benchmark loader on small record files written here, malformed records included: a
record that cannot be read is reported with file, line and field, and skipped."""
import json
from datetime import UTC, datetime

import pytest

from vam_engine.eval import loaders


def _jsonl(path, recs):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in recs) + "\n")
    return path


def _videos(tmp_path, *names):
    d = tmp_path / "videos"
    d.mkdir(exist_ok=True)
    for n in names:
        (d / n).write_bytes(b"")
    return d


def _problems(suite):
    return [(p.line, p.field) for p in suite.problems]


def test_jsonl_reads_reactive_mc_and_proactive_and_reports_bad_lines(tmp_path):
    f = _jsonl(tmp_path / "q.jsonl", [
        {"id": "a", "video": "v1.mp4", "time": 3.5, "question": "What colour?", "answer": "red", "category": "rt"},
        {"id": "b", "video": "v1.mp4", "time": "00:01:05", "question": "Which?", "options": ["A. cat", "B. dog"],
         "answer": "B"},
        {"id": "c", "video": "v1.mp4", "time": 1.0, "question": "Tell me when a car comes.", "answer": "car",
         "kind": "proactive", "evidence": [{"t_start": 9.0, "t_end": 12.0}]},
        "{not json",
        {"id": "d", "video": "v1.mp4", "time": -2, "question": "q", "answer": "x"},
        {"id": "e", "video": "v1.mp4", "time": 2, "question": "q", "options": ["cat", "dog"], "answer": "E"},
        {"id": "f", "video": "v1.mp4", "time": 2, "question": "q", "answer": "x", "kind": "proactive"},
        {"id": "g", "video": "v1.mp4", "time": 2, "answer": "x"},
        {"id": "a", "video": "v1.mp4", "time": 4, "question": "again", "answer": "x"},
        {"id": "h", "video": "missing.mp4", "time": 2, "question": "q", "answer": "x"},
    ])
    s = loaders.load(f, "jsonl", _videos(tmp_path, "v1.mp4"))
    assert [q.qid for q in s.questions] == ["a", "b", "c"]
    a, b, c = s.questions
    assert (a.time, a.answer, a.category, a.kind) == (3.5, "red", "rt", "reactive")
    assert b.time == 65.0 and b.gt_option == "B" and b.answer == "dog" and b.options == ("A. cat", "B. dog")
    assert c.kind == "proactive" and c.t_gt == 9.0
    assert _problems(s) == [(4, ""), (5, "time"), (6, "answer"), (7, "evidence"), (8, "question"), (9, "id"),
                            (10, "video")]
    assert all(p.file == str(f) for p in s.problems)
    assert "missing.mp4" in s.problems[-1].problem and "1 question" in s.problems[-1].problem
    assert set(s.videos) == {"v1.mp4"}


def test_streamarena_capabilities_strata_and_proactive_trigger(tmp_path):
    recs = [
        {"video_id": "v", "capability": "RTP", "question": "now?", "query_time": 100, "answer": "x",
         "evidence": [{"t_start": 98, "t_end": 100}]},
        {"video_id": "v", "capability": "HR", "question": "before?", "query_time": 2000, "answer": "y",
         "evidence": [{"t_start": 100, "t_end": 200}, {"t_start": 1500, "t_end": 1600}],
         "reasoning_pattern": "multi_recall"},  # nearest evidence 400 s back: L2
        {"video_id": "v", "capability": "HR", "question": "long ago?", "query_time": 4000, "answer": "z",
         "evidence": [{"t_start": 100, "t_end": 200}]},  # 3800 s: L4
        {"video_id": "v", "capability": "Pro", "question": "tell me when", "query_time": 50, "answer": "w",
         "evidence": [{"t_start": 80, "t_end": 81}], "monitoring_horizon": 30},
        {"video_id": "v", "capability": "Pro", "question": "tell me later", "query_time": 50, "answer": "w",
         "evidence": [{"t_start": 400, "t_end": 401}]},
        {"video_id": "v", "capability": "Magic", "question": "q", "query_time": 1, "answer": "a"},
        {"video_id": "v", "capability": "HR", "question": "q", "query_time": 1, "answer": "a"},
    ]
    f = tmp_path / "sa.json"
    f.write_text(json.dumps(recs))
    s = loaders.load(f, "streamarena", _videos(tmp_path, "v.mp4"))
    got = [(q.group, q.stratum, q.kind, q.t_gt) for q in s.questions]
    assert got == [("RTP", "", "reactive", None), ("HR", "L2", "reactive", None), ("HR", "L4", "reactive", None),
                   ("Pro", "L1", "proactive", 80.0), ("Pro", "L3", "proactive", 400.0)]
    assert s.questions[1].category == "multi_recall"
    assert _problems(s) == [(6, "capability"), (7, "evidence")]


def test_hr_and_pro_strata_boundaries():
    assert [loaders.hr_stratum(g) for g in (300, 300.1, 900, 901, 1800, 1801)] == ["L1", "L2", "L2", "L3", "L3", "L4"]
    assert [loaders.pro_stratum(h) for h in (30, 31, 240, 241)] == ["L1", "L2", "L2", "L3"]


def test_ovo_per_video_layout_flat_records_and_forward_probes(tmp_path):
    recs = [
        {"info": {"video_path": "a.mp4", "dataset": "x"}, "breakpoint": [
            {"question": "What text?", "options": ["A. stop", "B. go"], "gt": "B", "time": 12, "task": "OCR", "id": 1},
            {"question": "Earlier?", "options": ["yes", "no"], "gt": 0, "time": 30, "task": "EPM", "id": 2},
            {"question": "bad task", "options": ["A. x"], "gt": "A", "time": 1, "task": "XYZ", "id": 3}]},
        {"id": 7, "task": "REC", "video": "a.mp4", "question": "How many times so far?",
         "test_info": [{"realtime": 5, "count": 1}, {"realtime": 9, "count": 2}]},
        {"id": 8, "task": "SSR", "video": "a.mp4", "question": "Is step 2 done?",
         "test_info": [{"realtime": 4, "type": 0}, {"realtime": 8, "type": 1}]},
        {"id": 9, "task": "ASI", "video": "a.mp4", "realtime": 3, "question": "q", "options": ["A. a", "B. b"], "gt": "C"},
    ]
    f = tmp_path / "ovo.json"
    f.write_text(json.dumps(recs))
    s = loaders.load(f, "ovo", _videos(tmp_path, "a.mp4"))
    got = [(q.qid, q.category, q.group, q.time, q.gt_option, q.answer) for q in s.questions]
    assert got == [("1", "OCR", "RT", 12.0, "B", "go"), ("2", "EPM", "BT", 30.0, "A", "yes"),
                   ("7.0", "REC", "Fwd", 5.0, None, "1"), ("7.1", "REC", "Fwd", 9.0, None, "2"),
                   ("8.0", "SSR", "Fwd", 4.0, None, "No"), ("8.1", "SSR", "Fwd", 8.0, None, "Yes")]
    assert _problems(s) == [(1, "breakpoint[2].task"), (4, "gt")]


def test_streamingbench_axes_sqa_and_proactive_output(tmp_path):
    recs = [
        {"video_name": "s1", "questions": [
            {"question": "What object?", "options": ["A. cup", "B. pen"], "answer": "A", "time_stamp": "00:00:10",
             "task_type": "Object Perception", "question_id": "s1-0"},
            {"question": "And then?", "options": ["A. cup", "B. pen"], "answer": "B", "time": 20, "task": "SQA",
             "question_id": "s1-1"},
            {"question": "Say when it boils", "answer": "boiling", "time": 25, "task": "PO", "ground_truth_time": 40,
             "question_id": "s1-2"},
            {"question": "Who speaks?", "options": ["A. a", "B. b"], "answer": "A", "time": 30, "task": "SD",
             "question_id": "s1-3"},
            {"question": "PO without time", "answer": "x", "time": 35, "task": "PO", "question_id": "s1-4"},
            {"question": "no time", "options": ["A. a"], "answer": "A", "task": "OP", "question_id": "s1-5"}]},
    ]
    f = tmp_path / "sb.json"
    f.write_text(json.dumps(recs))
    s = loaders.load(f, "streamingbench", _videos(tmp_path, "s1.mp4"))
    got = [(q.qid, q.category, q.group, q.kind, q.time) for q in s.questions]
    assert got == [("s1-0", "OP", "Real-Time", "reactive", 10.0), ("s1-1", "SQA", "Contextual", "reactive", 20.0),
                   ("s1-2", "PO", "Contextual", "proactive", 25.0), ("s1-3", "SD", "Omni-Source", "reactive", 30.0)]
    assert s.questions[2].t_gt == 40.0
    assert _problems(s) == [(1, "questions[4].ground_truth_time"), (1, "questions[5].time")]


def test_mmlifelong_absolute_times_over_days(tmp_path):
    day = lambda d, h, m=0: datetime(2024, 5, d, h, m, tzinfo=UTC).timestamp()
    vids = tmp_path / "videos"
    vids.mkdir()
    for name in ("20240501_080000.mp4", "20240503_120000.mp4"):
        (vids / name).write_bytes(b"")
    recs = [
        {"id": "m1", "query_time": "2024-05-03T12:30:00Z", "question": "What did I eat on the first day?",
         "options": ["A. soup", "B. rice"], "answer": "B", "clue_interval": [day(1, 8, 10), day(1, 8, 15)]},
        {"id": "m2", "query_time": day(3, 13), "question": "Where?", "answer": "kitchen", "type": "location"},
        {"id": "m3", "query_time": "yesterday", "question": "q", "answer": "a"},
        {"id": "m4", "query_time": "2024-04-30T00:00:00", "question": "before the stream", "answer": "a"},
    ]
    f = tmp_path / "mm.json"
    f.write_text(json.dumps(recs))
    s = loaders.load(f, "mmlifelong", vids)
    v = s.videos["lifelong"]
    assert v.origin_abs == day(1, 8)
    assert [seg.offset_s for seg in v.segments] == [0.0, 2 * 86400 + 4 * 3600]
    m1, m2 = s.questions
    assert m1.time == 2 * 86400 + 4.5 * 3600 and m1.gt_option == "B" and m1.answer == "rice"
    assert (m1.evidence[0].t_start, m1.evidence[0].t_end) == (600.0, 900.0)
    assert m2.time == 2 * 86400 + 5 * 3600 and m2.category == "location"
    assert v.axis(m1.time) == day(3, 12, 30)
    assert _problems(s) == [(3, "query_time"), (4, "query_time")]


def test_mmlifelong_segments_manifest(tmp_path):
    vids = tmp_path / "videos"
    vids.mkdir()
    (vids / "segments.jsonl").write_text('{"file": "a.mp4", "start": 1000}\n{"file": "b.mp4", "start": 500}\n')
    assert [(p.rsplit("/", 1)[-1], t) for p, t in loaders.lifelong_segments(vids)] == [("b.mp4", 500.0), ("a.mp4", 1000.0)]
    (vids / "segments.jsonl").write_text('{"file": "a.mp4"}\n')
    with pytest.raises(ValueError, match="segments.jsonl:1: field 'start'"):
        loaders.lifelong_segments(vids)


def test_unreadable_files_and_unknown_format_fail_fast(tmp_path):
    with pytest.raises(ValueError, match="no such records file"):
        loaders.load(tmp_path / "none.jsonl", "jsonl")
    bad = tmp_path / "bad.json"
    bad.write_text("[{]")
    with pytest.raises(ValueError, match="bad.json: not valid JSON"):
        loaders.load(bad, "ovo")
    with pytest.raises(ValueError, match="--format must be one of"):
        loaders.load(bad, "csv")
