"""What every loader shares: a Reader that collects questions, streams and problems for one
file, reporting (never dropping) what it cannot read."""
from __future__ import annotations

from .. import fields as F
from ..records import KEPT, SKIPPED, EvalQuestion, LoadedSuite, RecordProblem


class Reader:
    """Collects one file's questions. ``add`` refuses a question id seen before in the file
    (ids are unique per question); ``note`` records a quirk the loader repaired (the question
    is kept); ``each`` turns a record's error into a skipped-record problem."""

    def __init__(self, path, benchmark: str, layout: str):
        self.path = str(path)
        self.suite = LoadedSuite(benchmark=benchmark, layout=layout)
        self._ids: dict = {}    # qid -> record
        self._asked: dict = {}  # (stream, time, question, options) -> record

    def problem(self, record: str, err: Exception, field_prefix: str = "") -> None:
        field = getattr(err, "field", "")
        if field_prefix:
            field = f"{field_prefix}.{field}" if field else field_prefix
        self.suite.problems.append(RecordProblem(self.path, record, field, getattr(err, "problem", str(err)), SKIPPED))

    def note(self, record: str, field: str, text: str) -> None:
        self.suite.problems.append(RecordProblem(self.path, record, field, text, KEPT))

    def stream(self, stream_id: str, videos: tuple) -> None:
        self.suite.streams.setdefault(stream_id, tuple(videos))

    def add(self, q: EvalQuestion) -> None:
        if q.qid in self._ids:
            raise F.FieldError("id", f"question id {q.qid!r} repeats (first at {self._ids[q.qid]})")
        key = (q.video, q.time, q.question, q.options, q.prompt)
        if key in self._asked:
            self.note(q.record, "question", f"the same question at the same time repeats in this stream (also at "
                                            f"{self._asked[key]}); both are asked and scored")
        self._asked.setdefault(key, q.record)
        self._ids[q.qid] = q.record
        self.suite.questions.append(q)

    def each(self, items, fn) -> None:
        """``fn(record, rec)`` for each (record, rec) pair; a FieldError / ValueError / TypeError
        skips that record with a problem (a parsed-as-error JSONL line arrives as the error)."""
        for record, rec in items:
            if isinstance(rec, Exception):
                self.problem(record, rec)
                continue
            try:
                fn(record, rec)
            except (F.FieldError, ValueError, TypeError) as e:
                self.problem(record, e)

    def each_nested(self, record: str, items, fn, name: str) -> None:
        """The questions inside one entry (``name``: the list's field): each one's error skips
        that question only, reported at ``record.name[k]``."""
        if not isinstance(items, list):
            raise F.FieldError(name, "must be a list")
        for k, item in enumerate(items):
            where = f"{record}.{name}[{k}]"
            try:
                fn(where, k, item)
            except (F.FieldError, ValueError, TypeError) as e:
                self.problem(where, e)


def json_list(path) -> list:
    data = F.read_json(path)
    if not isinstance(data, list):
        raise ValueError(f"{path}: the records must be a JSON list, got {type(data).__name__}")
    return data


def entries(data) -> list:
    """(record path, entry) pairs of a JSON list."""
    return [(f"[{i}]", rec) for i, rec in enumerate(data)]
