"""StreamingBench's official release (``questions_*.json``): a list of entries ``{time (a
window), questions: [...], video_path}``, one video in several entries; ``questions_sqa.json``
is a list of such lists, one per video; the ``_stream`` variants carry the window (and a spoken
copy of the question, ``audio_path``) in each question. A question's time is always its
``time_stamp``, read as the official scripts read it.

Multiple choice is scored on the reply's first character; Sequential QA questions are asked
after the earlier questions of their video with their options and ground-truth answers;
Proactive Output questions are polled (forms.sb_poll) until the engine says it is time."""
from __future__ import annotations

from .. import fields as F
from .. import forms
from ..records import EvalQuestion
from ..tasks import SB_TASKS, sb_task
from .common import Reader, json_list

AUDIO_NOTE = ("the _stream files' audio_path (a spoken copy of each question) is not used: questions are asked "
              "as text")


def load_streamingbench(path):
    r = Reader(path, "streamingbench", "streamingbench")
    data = json_list(path)
    earlier: dict = {}  # video -> SQA turns so far: (time stamp, question, options, letter)
    items = []
    for i, rec in enumerate(data):
        if isinstance(rec, list):  # questions_sqa.json: one list of entries per video
            items += [(f"[{i}][{j}]", e, f"{i}.{j}") for j, e in enumerate(rec)]
        else:
            items.append((f"[{i}]", rec, f"{i}"))
    ids = {record: key for record, _, key in items}
    r.each([(record, e) for record, e, _ in items], lambda record, e: _entry(r, record, e, ids[record], earlier))
    if any("audio_path" in q for _, e, _ in items if isinstance(e, dict) for q in e.get("questions") or []
           if isinstance(q, dict)):
        r.suite.notes.append(AUDIO_NOTE)
    return r.suite


def _entry(r: Reader, record: str, entry, key: str, earlier: dict) -> None:
    video = F.text(entry, ("video_path",))
    window = entry.get("time") if isinstance(entry, dict) else None
    r.stream(video, (video,))
    r.each_nested(record, F.first(entry, ("questions",)),
                  lambda where, k, q: _question(r, where, q, f"{key}.{k}", video, window, earlier), "questions")


def _question(r: Reader, where: str, q, qid: str, video: str, window, earlier: dict) -> None:
    raw = F.text(q, ("task_type",))
    task = sb_task(raw)
    if task is None:
        raise F.FieldError("task_type", f"unknown StreamingBench task {raw!r}")
    question = F.text(q, ("question",))
    t, note = F.official_clock(F.first(q, ("time_stamp",)), "time_stamp")
    window = q.get("time", window)
    if note:
        r.note(where, "time_stamp", note + (f" (the entry's window is {window})" if window else ""))
    axis = SB_TASKS[task][0]
    if task == "PO":
        output = F.text(q, ("ground_truth_output",))
        t_gt, gt_note = F.official_clock(F.first(q, ("ground_truth_time_stamp",)), "ground_truth_time_stamp")
        if gt_note:
            r.note(where, "ground_truth_time_stamp", gt_note)
        r.add(EvalQuestion(qid, video, t, question, output, kind="proactive", category=task, group=axis, t_gt=t_gt,
                           benchmark="streamingbench", prompt=forms.sb_poll(question, output), rule="sb_proactive",
                           record=where))
        return
    opts, notes = F.marked_options(F.first(q, ("options",)))
    for n in notes:
        r.note(where, "options", n)
    letter = F.gt_letter(F.text(q, ("answer",)), opts, "answer")
    if len(opts) > 4:
        r.note(where, "options", f"{len(opts)} options: all are shown (the official prompt shows the first four)")
    if sum(F.option_letter(o) == letter for o in opts) > 1:
        r.note(where, "answer", f"the answer {letter} marks more than one option")
    context = ""
    if task == "SQA":
        turns = earlier.setdefault(video, [])
        context = forms.sb_context(turns)
        turns.append((F.text(q, ("time_stamp",)), question, opts, letter))
    ref = F.option_text(next(o for o in opts if F.option_letter(o) == letter))
    r.add(EvalQuestion(qid, video, t, question, ref, category=task, group=axis, options=opts, gt_option=letter,
                       benchmark="streamingbench", context=context,
                       prompt=forms.multiple_choice(question, opts, forms.SB_MC_REPLY, context), rule="sb_mc",
                       record=where))
