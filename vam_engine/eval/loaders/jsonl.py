"""Our plain format: one question a line, ``{"video", "time", "question", "options"?,
"answer", "kind"?, "category"?, "group"?, "evidence"?, "id"?}``; a proactive line's event time
is ``t_gt`` or ``evidence[0].t_start``. Multiple choice is scored by the harness's option
extraction, open answers by a binary judge; proactive alerts by StreamArena's timing rule."""
from __future__ import annotations

from pathlib import Path

from .. import fields as F
from ..records import EvalQuestion
from .common import Reader


def load_jsonl(path):
    r = Reader(path, "jsonl", "jsonl")
    stem = Path(path).stem
    r.each([(f"line {n}", rec) for n, rec in F.read_jsonl(path)], lambda record, rec: _line(r, record, rec, stem))
    return r.suite


def _line(r: Reader, record: str, rec, stem: str) -> None:
    kind = F.text(rec, ("kind",), required=False) or "reactive"
    if kind not in ("reactive", "proactive"):
        raise F.FieldError("kind", f"must be reactive or proactive, got {kind!r}")
    opts = F.bare_options(rec)
    if opts is None:
        letter, ref = None, F.text(rec, ("answer",))
    else:
        letter = F.gt_letter(F.first(rec, ("answer", "gt")), opts, "answer")
        ref = F.option_text(opts[F.LETTERS.index(letter)])
    ev = F.intervals(F.first(rec, ("evidence",), required=False), "evidence")
    t_gt = F.seconds(rec, ("t_gt",), required=False)
    if kind == "proactive" and t_gt is None:
        if not ev:
            raise F.FieldError("evidence", "a proactive question needs evidence[0].t_start (the event's time)")
        t_gt = ev[0].t_start
    cat = F.text(rec, ("category",), required=False) or kind
    video = F.text(rec, ("video",))
    r.stream(video, (video,))
    r.add(EvalQuestion(F.text(rec, ("id", "qid"), required=False) or f"{stem}:{record.split()[-1]}", video,
                       F.seconds(rec, ("time",)), F.text(rec, ("question",)), ref, kind=kind, category=cat,
                       group=F.text(rec, ("group",), required=False) or cat, options=opts, gt_option=letter,
                       evidence=ev, t_gt=t_gt, benchmark="jsonl", rule="option" if opts else "judge_binary",
                       record=record))
