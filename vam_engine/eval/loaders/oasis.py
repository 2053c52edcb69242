"""OASIS's preprocessed files: a list of entries ``{info: {video_path, dataset}, breakpoint:
[...]}``, one stream per entry (OASIS's evaluation resets its model for each entry, so an
entry that repeats a video is its own stream). ``info.dataset`` names the benchmark:

- ``ovobench``: one clip per multiple-choice question, ``time: 99999`` = asked once the whole
  clip has been streamed;
- ``streamingbench``: the real-time and contextual tasks, times in seconds (Sequential QA is
  asked without earlier answers: OASIS's evaluation gives none);
- ``streambench``: StreamChat's open-ended questions in six classes, judged.

Multiple choice is scored as OASIS scores it: the text inside <answer>...</answer> (else the
whole reply) must equal the letter."""
from __future__ import annotations

from .. import fields as F
from .. import forms
from ..records import EvalQuestion
from ..tasks import OVO_GROUPS, SB_TASKS, STREAMBENCH_CLASSES, sb_task
from .common import Reader, entries, json_list

DATASETS = {"ovobench": "ovo", "streamingbench": "streamingbench", "streambench": "streambench"}
AT_END_TIME = 99999  # OASIS's "after the clip ends"
SQA_NOTE = ("OASIS's copy of Sequential QA is asked without the earlier questions' answers, as OASIS's own "
            "evaluation asks it (the official StreamingBench files give them)")


def dataset_of(data) -> str | None:
    """The benchmark an OASIS file holds (the first entry's ``info.dataset``)."""
    for rec in data:
        if isinstance(rec, dict) and isinstance(rec.get("info"), dict):
            return DATASETS.get(str(rec["info"].get("dataset", "")).lower())
    return None


def load_oasis(path):
    data = json_list(path)
    bench = dataset_of(data)
    if bench is None:
        raise ValueError(f"{path}: an OASIS file names its benchmark in info.dataset (one of "
                         f"{', '.join(DATASETS)}); none found")
    r = Reader(path, bench, "oasis")
    seen: dict = {}  # video path -> (first record, its entry, streams so far)
    r.each(entries(data), lambda record, rec: _entry(r, record, rec, bench, seen))
    if bench == "streamingbench" and any(q.category == "SQA" for q in r.suite.questions):
        r.suite.notes.append(SQA_NOTE)
    return r.suite


def _entry(r: Reader, record: str, rec, bench: str, seen: dict) -> None:
    info = F.first(rec, ("info",))
    video = F.text(info, ("video_path",))
    ds = DATASETS.get(F.text(info, ("dataset",)).lower())
    if ds != bench:
        raise F.FieldError("info.dataset", f"{info.get('dataset')!r} in a file of {bench} entries")
    stream = video
    if video in seen:
        first_record, first_rec, n = seen[video]
        stream = f"{video}#{n + 1}"
        same = "the same video and questions" if rec == first_rec else "the same video, other questions"
        r.note(record, "info.video_path", f"repeats {first_record}'s video ({same}): replayed as its own stream "
                                          f"{stream!r}, as OASIS's evaluation runs each entry")
        seen[video] = (first_record, first_rec, n + 1)
    else:
        seen[video] = (record, rec, 1)
    r.stream(stream, (video,))
    key = record.strip("[]")
    r.each_nested(record, F.first(rec, ("breakpoint",)),
                  lambda where, k, bp: _breakpoint(r, where, bp, f"{key}.{k}", stream, bench), "breakpoint")


def _breakpoint(r: Reader, where: str, bp, key: str, stream: str, bench: str) -> None:
    question = F.text(bp, ("question",))
    t = F.number(bp, ("time",))
    at_end = t >= AT_END_TIME
    kind = F.text(bp, ("type",), required=False) or "open_ended"
    if bench == "streambench":
        cls = F.text(bp, ("class",)).upper()
        if cls not in STREAMBENCH_CLASSES:
            raise F.FieldError("class", f"unknown StreamBench class {cls!r} (one of {', '.join(STREAMBENCH_CLASSES)})")
        r.add(EvalQuestion(key, stream, t, question, F.text(bp, ("answer",)), category=cls, group=cls,
                           benchmark="streambench", prompt=forms.oasis_open(question), rule="judge_streambench",
                           at_end=at_end, record=where))
        return
    if kind != "multiple_choice":
        raise F.FieldError("type", f"{bench} questions are multiple_choice here, got {kind!r}")
    if bench == "ovo":
        task = F.text(bp, ("task",)).upper()
        if task not in OVO_GROUPS:
            raise F.FieldError("task", f"unknown OVO-Bench task {task!r}")
        qid, group = F.text(bp, ("id",)), OVO_GROUPS[task]
    else:
        raw = F.text(bp, ("task",))
        task = sb_task(raw)
        if task is None:
            raise F.FieldError("task", f"unknown StreamingBench task {raw!r}")
        qid, group = F.text(bp, ("question_id",)), SB_TASKS[task][0]
    opts, notes = F.marked_options(F.first(bp, ("options",)))
    for n in notes:
        r.note(where, "options", n)
    letter = F.gt_letter(F.first(bp, ("gt",)), opts, "gt")
    ref = F.option_text(next(o for o in opts if F.option_letter(o) == letter))
    r.add(EvalQuestion(qid, stream, t, question, ref, category=task, group=group, options=opts, gt_option=letter,
                       benchmark=bench, prompt=forms.multiple_choice(question, opts, forms.OASIS_MC_REPLY),
                       rule="oasis_mc", at_end=at_end, record=where))
