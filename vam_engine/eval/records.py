"""The records of an evaluation run: questions read from a benchmark, the streams they are
asked over, the results of each method, and the problems met reading the records."""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..numerics import time_range

KINDS = ("reactive", "proactive")
ENGINE = "engine"  # the method name of the engine itself; baselines are named by baselines.BASELINES

# How a reply is scored (scorers.py has each rule; the loader sets it from the benchmark):
RULES = (
    "ovo_mc",          # OVO-Bench multiple choice: the letter occurs in the reply
    "ovo_yesno",       # OVO-Bench SSR / CRR probes: "Y"/"N" exactly, else "Yes"/"No" occurs
    "ovo_count",       # OVO-Bench REC probes: every digit of the reply joined equals the count
    "sb_mc",           # StreamingBench multiple choice: the reply's first character; empty replies left out
    "sb_proactive",    # StreamingBench Proactive Output: on time (+-2 s) and the reply holds the output
    "oasis_mc",        # OASIS: the text in <answer>...</answer> (else the reply) equals the letter
    "judge_binary",    # StreamArena / our JSONL: a binary judge on the answer's factual core
    "judge_streambench",  # StreamBench: a judge's yes/no and 0-5 score
    "judge_lifelong",  # MM-Lifelong: a judge's 0-5 score, >= 4 -> 1, 3 -> 0.5, else 0
    "option",          # our JSONL multiple choice: the harness's option extraction
)


@dataclass(frozen=True)
class Interval:
    """An evidence interval in seconds on the stream's time axis."""
    t_start: float
    t_end: float

    def __post_init__(self):
        time_range((self.t_start, self.t_end), "an interval (t_start, t_end)")


@dataclass(frozen=True)
class Segment:
    """One file of a stream: where it starts on the stream's axis (seconds)."""
    path: str
    offset_s: float = 0.0


@dataclass(frozen=True)
class EvalVideo:
    """A stream the questions of one stream id are asked over: one file, or several files at
    offsets on one axis (MM-Lifelong: a month of recordings in order)."""
    video_id: str
    segments: tuple  # of Segment, by offset


@dataclass(frozen=True)
class EvalQuestion:
    """One benchmark question (or one probe of a forward-active record), asked at ``time``
    seconds of its stream; ``at_end``: asked once the whole stream has been replayed (OASIS's
    OVO-Bench clips, MM-Lifelong), ``time`` then only orders it among such questions."""
    qid: str
    video: str                       # the stream id (questions of one stream share a replay and a history)
    time: float                      # the query time
    question: str                    # the benchmark's question (or the probe's subject: activity, step)
    answer: str                      # the reference: option text, "Yes"/"No", a count, free text
    kind: str = "reactive"           # "reactive" | "proactive"
    category: str = ""               # the benchmark's task (OCR, REC, OP, SQA, SF, HR, ...)
    group: str = ""                  # the table axis it is averaged in (RT/BT/Fwd, Real-Time/..., RTP/HR/Tool/Pro)
    options: tuple | None = None     # ("A. ...", "B. ...") for multiple choice, letters as the record writes them
    gt_option: str | None = None     # the correct letter of a multiple-choice question
    evidence: tuple = ()             # of Interval, stream axis
    t_gt: float | None = None        # proactive: when the awaited event happens (stream axis)
    stratum: str = ""                # HR L1-L4 / Pro L1-L3 (StreamArena), else ""
    benchmark: str = "jsonl"
    context: str = ""                # text asked before the question (StreamingBench SQA: earlier turns and answers)
    prompt: str = ""                 # the text sent (the benchmark's question form); "" -> built from the fields
    rule: str = ""                   # the official scoring rule (RULES); "" -> by the benchmark
    at_end: bool = False
    record: str = ""                 # where the record is in its file ("[12].questions[3]")

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"question {self.qid}: kind must be reactive or proactive, got {self.kind!r}")
        if not math.isfinite(self.time) or self.time < 0:
            raise ValueError(f"question {self.qid}: time must be a finite non-negative number, got {self.time!r}")
        if self.kind == "proactive" and self.t_gt is None:
            raise ValueError(f"question {self.qid}: a proactive question needs the event's time (t_gt)")
        if self.rule and self.rule not in RULES:
            raise ValueError(f"question {self.qid}: unknown scoring rule {self.rule!r}")


SKIPPED = "skipped"  # the record could not be read: no question from it
KEPT = "kept"        # read with the repair the problem names (a data quirk): its questions are asked


@dataclass(frozen=True)
class RecordProblem:
    """A record that could not be read (``action`` "skipped") or was read with a repair
    (``action`` "kept"): where it is, which field, and why."""
    file: str
    record: str        # "[276].questions[1]" (JSON lists) or "line 5" (JSONL)
    field: str         # the field at fault ("" when the record is not an object at all)
    problem: str
    action: str = SKIPPED

    def __str__(self) -> str:
        where = f"{self.file} {self.record}" + (f" field {self.field!r}" if self.field else "")
        return f"{where}: {self.problem} ({self.action})"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class LoadedSuite:
    """What a loader read: the questions (record order), the video names each stream plays in
    order, the videos resolved for them, and the records skipped or repaired."""
    questions: list = field(default_factory=list)   # of EvalQuestion
    streams: dict = field(default_factory=dict)     # stream id -> tuple of video names (as the records name them)
    videos: dict = field(default_factory=dict)      # stream id -> EvalVideo (after attach_videos)
    problems: list = field(default_factory=list)    # of RecordProblem
    benchmark: str = "jsonl"
    layout: str = "jsonl"                           # the file layout the loader read
    notes: list = field(default_factory=list)       # protocol notes for the report (what the file leaves out)
    offsets: dict = field(default_factory=dict)     # MM-Lifelong: video id -> its start on the stream axis (records)

    @property
    def skipped(self) -> list:
        return [p for p in self.problems if p.action == SKIPPED]

    def by_video(self) -> dict:
        """Stream id -> its questions in asking order: by time (a stable sort: ties keep the
        record order), questions asked at the end after every timed one."""
        out: dict = {}
        for q in self.questions:
            out.setdefault(q.video, []).append(q)
        return {v: sorted(qs, key=lambda q: (q.at_end, q.time)) for v, qs in out.items()}


@dataclass
class EvalResult:
    """One method's result on one question, as written to results.jsonl. ``score``: the credit
    under the benchmark's official rule (1, 0, 0.5 for MM-Lifelong's middle grade; None: left
    out of the count, as StreamingBench leaves out empty replies, or not scored);
    ``score_robust``: the same reply under the harness's robust extraction."""
    qid: str
    video: str
    method: str                       # "engine" | "uniform" | "last4"
    kind: str
    category: str
    group: str
    stratum: str
    t_query: float                    # the stream time the question was asked at (the stream's end for at_end)
    response: str | None = None       # None: the method could not answer (error, or not supported)
    extracted: str | None = None      # what the official rule read from the reply (a letter, a number, ...)
    score: float | None = None
    score_robust: float | None = None
    judge_score: float | None = None  # the judge's 0-5 grade, where its scale has one
    scorer: str = ""                  # the rule, or "judge:<name>", or "match" (no judge)
    latency_s: float | None = None    # t_response - t_query, wall seconds
    prefill_s: float | None = None    # the answer's prefill time, when its timings give it
    prompt_tokens: int = 0
    completion_tokens: int = 0
    t_pred: float | None = None       # proactive: the first alert's trigger-observation time (stream axis)
    time_ok: bool | None = None
    evidence: list = field(default_factory=list)  # predicted [t_start, t_end] pairs, stream axis
    ref300: float | None = None
    error: str | None = None

    # fields that change from run to run (wall-clock): excluded when runs are compared
    TIMING_FIELDS = ("latency_s", "prefill_s")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> EvalResult:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def key(self) -> tuple:
        return (self.video, self.qid, self.method)


def camera_id(video_id: str) -> str:
    """The engine camera a stream is replayed into: its video id made a safe camera id."""
    cam = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(video_id).stem if "/" in video_id else video_id)
    return cam[:120] or "video"
