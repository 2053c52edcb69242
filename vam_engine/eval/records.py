"""The records of an evaluation run: questions read from a benchmark, the videos they are
asked over, the results of each method, and the problems met reading the records."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

KINDS = ("reactive", "proactive")
ENGINE = "engine"  # the method name of the engine itself; baselines are named by baselines.BASELINES


@dataclass(frozen=True)
class Interval:
    """An evidence interval in seconds on the question's time axis."""
    t_start: float
    t_end: float

    def __post_init__(self):
        if not (math.isfinite(self.t_start) and math.isfinite(self.t_end)) or self.t_end < self.t_start:
            raise ValueError(f"an interval needs finite t_start <= t_end, got [{self.t_start}, {self.t_end}]")


@dataclass(frozen=True)
class Segment:
    """One file of a video: where it starts on the video's axis (seconds)."""
    path: str
    offset_s: float = 0.0


@dataclass(frozen=True)
class EvalVideo:
    """A stream the questions of one video are asked over: one file, or several files at offsets
    (MM-Lifelong: recordings over days). ``origin_abs``: unix seconds of t = 0 when the
    benchmark's times are absolute (then the engine's camera axis is absolute too)."""
    video_id: str
    segments: tuple  # of Segment, by offset
    origin_abs: float | None = None

    def axis(self, t: float) -> float:
        """A video-axis time on the engine's camera axis."""
        return t if self.origin_abs is None else self.origin_abs + t


@dataclass(frozen=True)
class EvalQuestion:
    """One benchmark question, asked at ``time`` seconds of its video (relative to the video's
    start; ``EvalVideo.axis`` maps it to the camera axis)."""
    qid: str
    video: str                       # the video id (or path) as the record names it
    time: float                      # the query time
    question: str
    answer: str                      # the reference answer (for multiple choice: the option's text or letter)
    kind: str = "reactive"           # "reactive" | "proactive"
    category: str = ""               # the benchmark's task (OCR, EPM, HR, ...)
    group: str = ""                  # the table axis it is averaged in (RT/BT/Fwd, Real-Time/..., RTP/HR/Tool/Pro)
    options: tuple | None = None     # ("A. ...", "B. ...") for multiple choice
    gt_option: str | None = None     # the correct letter of a multiple-choice question
    evidence: tuple = ()             # of Interval, video axis
    t_gt: float | None = None        # proactive: when the awaited event happens (video axis)
    stratum: str = ""                # HR L1-L4 / Pro L1-L3 (StreamArena), else ""
    benchmark: str = "jsonl"
    context: str = ""                # text asked with the question (StreamingBench SQA: the earlier turn)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"question {self.qid}: kind must be reactive or proactive, got {self.kind!r}")
        if not math.isfinite(self.time) or self.time < 0:
            raise ValueError(f"question {self.qid}: time must be a finite non-negative number, got {self.time!r}")
        if self.kind == "proactive" and self.t_gt is None:
            raise ValueError(f"question {self.qid}: a proactive question needs the event's time (t_gt)")


@dataclass(frozen=True)
class RecordProblem:
    """A record that could not be read: skipped, and reported with where it is and why."""
    file: str
    line: int          # 1-based line (JSONL) or entry number (JSON lists)
    field: str         # the field at fault ("" when the record is not an object at all)
    problem: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" + (f" field {self.field!r}" if self.field else "")
        return f"{where}: {self.problem}"


@dataclass
class LoadedSuite:
    """What a loader read: the questions (in asking order per video), the videos they need, and
    the records it skipped."""
    questions: list = field(default_factory=list)   # of EvalQuestion
    videos: dict = field(default_factory=dict)      # video id -> EvalVideo
    problems: list = field(default_factory=list)    # of RecordProblem
    benchmark: str = "jsonl"
    lines: dict = field(default_factory=dict)       # (video, qid) -> the record's line, for later problems

    def by_video(self) -> dict:
        """Video id -> its questions by time (a stable sort: ties keep the record order)."""
        out: dict = {}
        for q in self.questions:
            out.setdefault(q.video, []).append(q)
        return {v: sorted(qs, key=lambda q: q.time) for v, qs in out.items()}


@dataclass
class EvalResult:
    """One method's result on one question, as written to results.jsonl."""
    qid: str
    video: str
    method: str                       # "engine" | "uniform" | "last4"
    kind: str
    category: str
    group: str
    stratum: str
    t_query: float
    response: str | None = None       # None: the method could not answer (error, or not supported)
    option: str | None = None         # the extracted letter (multiple choice)
    correct: bool | None = None       # None: not scored (unsupported method, error)
    scorer: str = ""                  # "option" | "judge" | "match"
    latency_s: float | None = None    # t_response - t_query, wall seconds
    prefill_s: float | None = None    # the answer's prefill time, when its timings give it
    prompt_tokens: int = 0
    completion_tokens: int = 0
    t_pred: float | None = None       # proactive: the first alert's trigger-observation time (video axis)
    time_ok: bool | None = None
    evidence: list = field(default_factory=list)  # predicted [t_start, t_end] pairs, video axis
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
