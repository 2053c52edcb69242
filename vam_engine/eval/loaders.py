"""Loaders: benchmark record files -> a LoadedSuite (questions, videos, problems).

Every loader reads record by record; a record it cannot read becomes a RecordProblem (file,
line or entry number, field, problem) and is skipped, never dropped silently. Layouts are the
public releases' as far as ``shared/EVAL_FORMATS.md`` knows them; optional fields may be absent.
"""
from __future__ import annotations

import json
import re
from datetime import UTC
from pathlib import Path

from . import fields as F
from .records import EvalQuestion, EvalVideo, LoadedSuite, RecordProblem, Segment

FORMATS = ("streamarena", "ovo", "streamingbench", "mmlifelong", "jsonl")
VIDEO_EXTS = (".mp4", ".mkv", ".webm", ".avi", ".mov", ".ts")

OVO_GROUPS = {**{t: "RT" for t in ("OCR", "ACR", "ATR", "STU", "FPD", "OJR")},
              **{t: "BT" for t in ("EPM", "ASI", "HLD")}, **{t: "Fwd" for t in ("REC", "SSR", "CRR")}}
SB_TASKS = {  # StreamingBench: abbreviation -> (axis, full name as the release spells it)
    "OP": ("Real-Time", "Object Perception"), "CR": ("Real-Time", "Causal Reasoning"),
    "CS": ("Real-Time", "Clips Summarize"), "ATP": ("Real-Time", "Attribute Perception"),
    "EU": ("Real-Time", "Event Understanding"), "TR": ("Real-Time", "Text-Rich Understanding"),
    "PR": ("Real-Time", "Prospective Reasoning"), "SU": ("Real-Time", "Spatial Understanding"),
    "ACP": ("Real-Time", "Action Perception"), "CT": ("Real-Time", "Counting"),
    "ER": ("Omni-Source", "Emotion Recognition"), "SCU": ("Omni-Source", "Scene Understanding"),
    "SD": ("Omni-Source", "Source Discrimination"), "MA": ("Omni-Source", "Multimodal Alignment"),
    "MCU": ("Contextual", "Misleading Context Understanding"), "ACU": ("Contextual", "Anomaly Context Understanding"),
    "SQA": ("Contextual", "Sequential Question Answering"), "PO": ("Contextual", "Proactive Output"),
}
_SB_BY_NAME = {full.lower(): abbr for abbr, (_, full) in SB_TASKS.items()}
SA_CAPS = ("RTP", "HR", "Tool", "Pro")


def hr_stratum(gap_s: float) -> str:
    """StreamArena HR levels by the evidence-to-query gap: <= 5, 5-15, 15-30, > 30 minutes."""
    return "L1" if gap_s <= 300 else "L2" if gap_s <= 900 else "L3" if gap_s <= 1800 else "L4"


def pro_stratum(horizon_s: float) -> str:
    """StreamArena Pro levels by the monitoring horizon: <= 30 s, 30 s - 4 min, > 4 min."""
    return "L1" if horizon_s <= 30 else "L2" if horizon_s <= 240 else "L3"


class _Reader:
    """Collects questions and problems for one file."""

    def __init__(self, path, benchmark: str):
        self.path = str(path)
        self.suite = LoadedSuite(benchmark=benchmark)
        self._seen: set = set()

    def problem(self, line: int, err: Exception) -> None:
        field = getattr(err, "field", "")
        self.suite.problems.append(RecordProblem(self.path, line, field, getattr(err, "problem", str(err))))

    def add(self, line: int, q: EvalQuestion) -> None:
        if (q.video, q.qid) in self._seen:
            self.problem(line, F.FieldError("id", f"question id {q.qid!r} repeats in video {q.video!r}"))
            return
        self._seen.add((q.video, q.qid))
        self.suite.lines[(q.video, q.qid)] = line
        self.suite.questions.append(q)

    def each(self, entries, fn) -> None:
        for line, rec in entries:
            if isinstance(rec, Exception):
                self.problem(line, rec)
                continue
            try:
                fn(line, rec)
            except (F.FieldError, ValueError, TypeError) as e:
                self.problem(line, e)


def _mc(rec, line, answer_names=("answer",), gt_names=("gt", "gt_option", "correct")):
    """(options, gt letter, reference answer text) of a record that may be multiple choice."""
    opts = F.options(rec)
    gt = F.first(rec, gt_names, required=False)
    ans = F.first(rec, answer_names, required=gt is None or opts is None)
    if opts is None:
        return None, None, F.text({"answer": ans}, ("answer",))
    letter = F.gt_letter(gt if gt is not None else ans, opts, gt_names[0] if gt is not None else answer_names[0])
    ref = F.option_text(opts[F.LETTERS.index(letter)])
    return opts, letter, ref


# -- StreamArena ---------------------------------------------------------------------------------
def load_streamarena(path) -> LoadedSuite:
    r = _Reader(path, "streamarena")

    def one(line, rec):
        cap = F.text(rec, ("capability",))
        cap = {c.lower(): c for c in SA_CAPS}.get(cap.lower().replace("proactive", "pro"), None)
        if cap is None:
            raise F.FieldError("capability", f"must be one of {', '.join(SA_CAPS)}, got {rec.get('capability')!r}")
        t = F.seconds(rec, ("query_time", "time"))
        ev = F.intervals(F.first(rec, ("evidence",), required=cap in ("HR", "Pro")), "evidence")
        stratum, t_gt = "", None
        if cap == "HR":
            stratum = hr_stratum(t - max(e.t_end for e in ev))  # the nearest evidence sets the gap
        if cap == "Pro":
            horizon = F.first(rec, ("monitoring_horizon",), required=False)
            t_gt = ev[0].t_start if ev else t + F.to_seconds(horizon, "monitoring_horizon")
            if t_gt < t:
                raise F.FieldError("evidence", f"the trigger time {t_gt} is before the query time {t}")
            stratum = pro_stratum(t_gt - t)
        vid = F.text(rec, ("video_id", "video"))
        qid = F.text(rec, ("question_id", "id", "qid"), required=False) or f"{vid}#{line}"
        r.add(line, EvalQuestion(qid, vid, t, F.text(rec, ("question",)), F.text(rec, ("answer",)),
                                 kind="proactive" if cap == "Pro" else "reactive",
                                 category=str(rec.get("reasoning_pattern") or cap) if cap == "HR" else cap,
                                 group=cap, evidence=ev, t_gt=t_gt, stratum=stratum, benchmark="streamarena"))

    r.each(F.read_entries(path), one)
    return r.suite


# -- OVO-Bench -----------------------------------------------------------------------------------
def load_ovo(path) -> LoadedSuite:
    """Either one entry per video ``{"info": {"video_path"}, "breakpoint": [...]}`` or flat
    records ``{"id", "task", "video", "realtime", "question", "options", "gt"}``; forward-active
    records (REC, SSR, CRR) with ``test_info: [{"realtime", "count" | "type"}]`` become one
    question per probe time (the model is asked again as the evidence unfolds)."""
    r = _Reader(path, "ovo")

    def question(line, rec, vid, k=None):
        task = F.text(rec, ("task",)).upper()
        if task not in OVO_GROUPS:
            raise F.FieldError("task", f"unknown OVO-Bench task {task!r} (one of {', '.join(OVO_GROUPS)})")
        qid = F.text(rec, ("id", "question_id"), required=False) or f"{vid}#{line}"
        qtext = F.text(rec, ("question",))
        probes = F.first(rec, ("test_info",), required=False)
        if probes is not None:  # forward-active: a yes/no or count answer per probe
            if not isinstance(probes, list) or not probes:
                raise F.FieldError("test_info", "must be a non-empty list of probes")
            for j, p in enumerate(probes):
                t = F.seconds(p, ("realtime", "time"))
                ans = F.first(p, ("count", "type", "answer"))
                if task in ("SSR", "CRR") and ans in (0, 1):
                    ans = "Yes" if ans == 1 else "No"
                r.add(line, EvalQuestion(f"{qid}.{j}", vid, t, qtext, str(ans), category=task, group="Fwd",
                                         benchmark="ovo"))
            return
        opts, letter, ref = _mc(rec, line)
        r.add(line, EvalQuestion(qid, vid, F.seconds(rec, ("time", "realtime")), qtext, ref,
                                 category=task, group=OVO_GROUPS[task], options=opts, gt_option=letter,
                                 benchmark="ovo"))

    def one(line, rec):
        if isinstance(rec, dict) and "breakpoint" in rec:
            info = F.first(rec, ("info",))
            vid = F.text(info, ("video_path", "video"))
            bps = F.first(rec, ("breakpoint",))
            if not isinstance(bps, list):
                raise F.FieldError("breakpoint", "must be a list of questions")
            for k, bp in enumerate(bps):
                try:
                    question(line, bp, vid, k)
                except (F.FieldError, ValueError, TypeError) as e:
                    err = F.FieldError(f"breakpoint[{k}].{getattr(e, 'field', '')}", getattr(e, "problem", str(e)))
                    r.problem(line, err)
        else:
            question(line, rec, F.text(rec, ("video", "video_path")))

    r.each(F.read_entries(path), one)
    return r.suite


# -- StreamingBench ------------------------------------------------------------------------------
def load_streamingbench(path) -> LoadedSuite:
    """Entries ``{"video" | "video_name" | "video_path", "questions": [...]}`` (or flat
    records with a ``video`` field); a question has ``question, options, answer | gt,
    time | time_stamp, task | task_type, question_id``. PO (proactive output) records need the
    event's time (``ground_truth_time`` or ``t_gt``)."""
    r = _Reader(path, "streamingbench")

    def question(line, rec, vid):
        raw = F.text(rec, ("task", "task_type"))
        abbr = raw.upper() if raw.upper() in SB_TASKS else _SB_BY_NAME.get(raw.lower())
        if abbr is None:
            raise F.FieldError("task", f"unknown StreamingBench task {raw!r}")
        qid = F.text(rec, ("question_id", "id"), required=False) or f"{vid}#{line}"
        t = F.seconds(rec, ("time", "time_stamp", "timestamp"))
        if abbr == "PO":
            t_gt = F.seconds(rec, ("ground_truth_time", "t_gt", "gt_time"))
            r.add(line, EvalQuestion(qid, vid, t, F.text(rec, ("question",)), F.text(rec, ("answer", "ground_truth_output")),
                                     kind="proactive", category=abbr, group=SB_TASKS[abbr][0], t_gt=t_gt,
                                     benchmark="streamingbench"))
            return
        opts, letter, ref = _mc(rec, line)
        r.add(line, EvalQuestion(qid, vid, t, F.text(rec, ("question",)), ref, category=abbr,
                                 group=SB_TASKS[abbr][0], options=opts, gt_option=letter,
                                 benchmark="streamingbench"))

    def one(line, rec):
        qs = F.first(rec, ("questions", "breakpoint"), required=False)
        if qs is None:
            question(line, rec, F.text(rec, ("video", "video_name", "video_path")))
            return
        vid = F.text(rec, ("video", "video_name", "video_path"))
        if not isinstance(qs, list):
            raise F.FieldError("questions", "must be a list")
        for k, q in enumerate(qs):
            try:
                question(line, q, vid)
            except (F.FieldError, ValueError, TypeError) as e:
                r.problem(line, F.FieldError(f"questions[{k}].{getattr(e, 'field', '')}", getattr(e, "problem", str(e))))

    r.each(F.read_entries(path), one)
    return r.suite


# -- MM-Lifelong ---------------------------------------------------------------------------------
def load_mmlifelong(path) -> LoadedSuite:
    """Records ``{"id", "stream"?, "query_time", "question", "options"?, "answer",
    "clue_interval" | "evidence", "type"?}`` with absolute times (unix seconds or ISO 8601).
    The loader keeps them absolute; ``attach_videos`` makes them relative to the stream's
    origin (its earliest recording's start)."""
    r = _Reader(path, "mmlifelong")

    def one(line, rec):
        t_abs = F.absolute(F.first(rec, ("query_time", "time", "timestamp")), "query_time")
        opts, letter, ref = _mc(rec, line)
        ev = F.intervals(F.first(rec, ("clue_interval", "evidence", "clue"), required=False), "clue_interval",
                         convert=F.absolute)
        vid = F.text(rec, ("stream", "video"), required=False) or "lifelong"
        qid = F.text(rec, ("id", "question_id", "qid"), required=False) or f"{vid}#{line}"
        cat = F.text(rec, ("type", "category", "task"), required=False) or "QA"
        r.add(line, EvalQuestion(qid, vid, t_abs, F.text(rec, ("question",)), ref, category=cat, group="MM-Lifelong",
                                 options=opts, gt_option=letter, evidence=ev, benchmark="mmlifelong"))

    r.each(F.read_entries(path), one)
    return r.suite


def _rebase(q: EvalQuestion, origin: float) -> EvalQuestion:
    """An absolute-time question on its stream's relative axis."""
    from dataclasses import replace

    from .records import Interval

    return replace(q, time=q.time - origin, evidence=tuple(Interval(e.t_start - origin, e.t_end - origin)
                                                           for e in q.evidence))


_STAMP = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})[T_ -]?(\d{2})[-:]?(\d{2})[-:]?(\d{2})")


def lifelong_segments(folder: Path) -> list[tuple[str, float]]:
    """(file, unix start) of a lifelong stream's recordings: from ``segments.jsonl``
    (``{"file", "start"}`` a line) when present, else from a timestamp in each file name
    (``20240501_101500.mp4``, ``2024-05-01T10-15-00.mp4``, read as UTC)."""
    man = folder / "segments.jsonl"
    out = []
    if man.is_file():
        for line, rec in F.read_entries(man):
            if isinstance(rec, Exception):
                raise ValueError(f"{man}:{line}: {rec}")
            try:
                out.append((str(folder / F.text(rec, ("file", "path"))), F.absolute(F.first(rec, ("start",)), "start")))
            except F.FieldError as e:
                raise ValueError(f"{man}:{line}: field {e.field!r}: {e.problem}") from None
    else:
        from datetime import datetime

        for p in sorted(folder.iterdir()):
            m = _STAMP.search(p.name)
            if p.suffix.lower() in VIDEO_EXTS and m:
                d = datetime(*map(int, m.groups()), tzinfo=UTC)
                out.append((str(p), d.timestamp()))
    return sorted(out, key=lambda s: s[1])


# -- our plain JSONL -----------------------------------------------------------------------------
def load_jsonl(path) -> LoadedSuite:
    """One question a line: ``{"video", "time", "question", "options"?, "answer", "kind"?,
    "category"?, "evidence"?, "id"?, "group"?}``; a proactive line's event time is
    ``evidence[0].t_start`` (or ``t_gt``)."""
    r = _Reader(path, "jsonl")
    stem = Path(path).stem

    def one(line, rec):
        kind = F.text(rec, ("kind",), required=False) or "reactive"
        if kind not in ("reactive", "proactive"):
            raise F.FieldError("kind", f"must be reactive or proactive, got {kind!r}")
        opts, letter, ref = _mc(rec, line)
        ev = F.intervals(F.first(rec, ("evidence",), required=False), "evidence")
        t_gt = F.seconds(rec, ("t_gt",), required=False)
        if kind == "proactive" and t_gt is None:
            if not ev:
                raise F.FieldError("evidence", "a proactive question needs evidence[0].t_start (the event's time)")
            t_gt = ev[0].t_start
        cat = F.text(rec, ("category",), required=False) or kind
        r.add(line, EvalQuestion(F.text(rec, ("id", "qid"), required=False) or f"{stem}:{line}",
                                 F.text(rec, ("video",)), F.seconds(rec, ("time",)), F.text(rec, ("question",)),
                                 ref, kind=kind, category=cat, group=F.text(rec, ("group",), required=False) or cat,
                                 options=opts, gt_option=letter, evidence=ev, t_gt=t_gt, benchmark="jsonl"))

    r.each(F.read_entries(path), one)
    return r.suite


LOADERS = {"streamarena": load_streamarena, "ovo": load_ovo, "streamingbench": load_streamingbench,
           "mmlifelong": load_mmlifelong, "jsonl": load_jsonl}


def load(path, fmt: str, videos_dir=None) -> LoadedSuite:
    """Read ``path`` in format ``fmt`` and resolve its videos under ``videos_dir`` (questions
    whose video is missing are reported as problems too)."""
    if fmt not in LOADERS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if not Path(path).is_file():
        raise ValueError(f"{path}: no such records file")
    suite = LOADERS[fmt](path)
    attach_videos(suite, videos_dir, str(path))
    return suite


def resolve_video(name: str, videos_dir) -> str | None:
    """A record's video as a file: the path itself, DIR/name, or DIR/name + a video extension."""
    cands = [Path(name)]
    if videos_dir is not None:
        d = Path(videos_dir)
        cands += [d / name, d / Path(name).name] + [d / (name + e) for e in VIDEO_EXTS]
    for c in cands:
        if c.is_file():
            return str(c)
    return None


def attach_videos(suite: LoadedSuite, videos_dir, records_path: str = "") -> None:
    """Fill ``suite.videos``; the questions of a video that cannot be found are removed and
    reported (one problem per video, naming how many questions it takes with it)."""
    missing: dict = {}
    first_line: dict = {}
    for q in suite.questions:
        first_line.setdefault(q.video, suite.lines.get((q.video, q.qid), 0))
        if q.video in suite.videos or q.video in missing:
            continue
        if suite.benchmark == "mmlifelong":
            folder = Path(videos_dir or ".") / q.video if (Path(videos_dir or ".") / q.video).is_dir() \
                else Path(videos_dir or ".")
            segs = lifelong_segments(folder) if folder.is_dir() else []
            if segs:
                origin = segs[0][1]
                suite.videos[q.video] = EvalVideo(q.video, tuple(Segment(p, s - origin) for p, s in segs), origin)
                continue
        else:
            p = resolve_video(q.video, videos_dir)
            if p is not None:
                suite.videos[q.video] = EvalVideo(q.video, (Segment(p, 0.0),))
                continue
        missing[q.video] = 0
    kept = []
    for q in suite.questions:
        if q.video in missing:
            missing[q.video] += 1
        elif suite.benchmark == "mmlifelong":  # absolute times -> relative to the stream's origin
            origin = suite.videos[q.video].origin_abs
            if q.time < origin:
                suite.problems.append(RecordProblem(records_path, suite.lines.get((q.video, q.qid), 0), "query_time",
                                                    f"question {q.qid!r} is asked before its stream's first recording"))
                continue
            kept.append(_rebase(q, origin))
        else:
            kept.append(q)
    suite.questions = kept
    for v, n in missing.items():
        suite.problems.append(RecordProblem(records_path, first_line[v], "video",
                                            f"video {v!r} not found (under {videos_dir}); its {n} question(s) skipped"))


def dump_problems(problems, path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"file": p.file, "line": p.line, "field": p.field, "problem": p.problem}) + "\n" for p in problems)
