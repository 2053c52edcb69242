"""MM-Lifelong (the month split as public adapters read the release): a list of ``{index,
question, answer, question_type, clue_interval: [{video_id, intervals: [[s, e], ...]}],
total_intervals: [[s, e], ...]}`` (day and week splits spell it ``clue_intervals``).

There is no query time and there are no options: every question is open-ended and asked once
the whole stream (every video, in order, on one axis) has been replayed. ``clue_interval``
seconds are relative to each video; ``total_intervals`` lie on the stream's axis and are the
evidence Ref@300 scores against. Pairing the two gives where each named video starts on the
axis (``suite.offsets``); videos/attach checks the replayed stream against it."""
from __future__ import annotations

from .. import fields as F
from ..records import EvalQuestion
from .common import Reader, entries, json_list

STREAM = "lifelong"
OFFSET_TOLERANCE_S = 1.0


def load_mmlifelong(path):
    r = Reader(path, "mmlifelong", "mmlifelong")
    offsets: dict = {}  # video id -> (offset on the stream axis, the record that set it)
    r.each(entries(json_list(path)), lambda record, rec: _record(r, record, rec, offsets))
    r.suite.offsets = {v: o for v, (o, _) in offsets.items()}
    r.stream(STREAM, tuple(sorted(r.suite.offsets)))
    return r.suite


def _record(r: Reader, record: str, rec, offsets: dict) -> None:
    index = F.text(rec, ("index", "id"), required=False) or record.strip("[]")
    question = F.text(rec, ("question",))
    answer = F.text(rec, ("answer",))
    qtype = F.text(rec, ("question_type",), required=False) or "QA"
    clues = F.first(rec, ("clue_interval", "clue_intervals"), required=False) or []
    if not isinstance(clues, list):
        raise F.FieldError("clue_interval", f"must be a list of {{video_id, intervals}}, got {clues!r}")
    local = []  # (video id, interval) in the record's order
    for c in clues:
        vid = F.text(c, ("video_id",))
        local += [(vid, iv) for iv in F.intervals(F.first(c, ("intervals",)), "clue_interval.intervals")]
    total = F.intervals(F.first(rec, ("total_intervals",), required=False), "total_intervals")
    if not total:
        r.note(record, "total_intervals", "no total_intervals: the question is asked, Ref@300 is not scored")
    elif len(total) != len(local):
        r.note(record, "total_intervals", f"{len(total)} total intervals for {len(local)} clue intervals: where the "
                                          "clue videos start on the axis cannot be checked")
    else:
        for (vid, a), b in zip(local, total):
            off = b.t_start - a.t_start
            if vid in offsets and abs(offsets[vid][0] - off) > OFFSET_TOLERANCE_S:
                r.note(record, "total_intervals", f"places video {vid!r} at {off:g} s on the axis, "
                                                  f"{offsets[vid][1]} at {offsets[vid][0]:g} s")
            offsets.setdefault(vid, (off, record))
    r.add(EvalQuestion(index, STREAM, 0.0, question, answer, category=qtype, group="MM-Lifelong", evidence=total,
                       benchmark="mmlifelong", prompt=question, rule="judge_lifelong", at_end=True, record=record))
