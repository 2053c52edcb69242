"""OVO-Bench's official release (``ovo_bench_new.json``): a flat list of records over relative
video paths. Multiple choice records are asked once at ``realtime``; a forward-active record
(REC, SSR, CRR) holds probes (``test_info``) asked each at its own ``realtime`` in the
benchmark's own question form: REC how many times the activity has been done, SSR whether the
person is performing the probe's step now, CRR whether the video so far suffices to answer the
record's question (not the question itself)."""
from __future__ import annotations

from .. import fields as F
from .. import forms
from ..records import EvalQuestion
from ..tasks import OVO_FORWARD, OVO_GROUPS
from .common import Reader, entries, json_list


def load_ovo(path):
    r = Reader(path, "ovo", "ovo")
    r.each(entries(json_list(path)), lambda record, rec: _record(r, record, rec))
    return r.suite


def _record(r: Reader, record: str, rec) -> None:
    task = F.text(rec, ("task",)).upper()
    if task not in OVO_GROUPS:
        raise F.FieldError("task", f"unknown OVO-Bench task {task!r} (one of {', '.join(OVO_GROUPS)})")
    video = F.text(rec, ("video",))
    rid = F.text(rec, ("id",))
    if task in OVO_FORWARD:
        _probes(r, record, rec, task, video, rid)
        return
    question = F.text(rec, ("question",))
    opts = F.bare_options(rec)
    if opts is None:
        raise F.FieldError("options", "missing")
    letter = F.gt_letter(F.first(rec, ("gt",)), opts, "gt")
    r.stream(video, (video,))
    r.add(EvalQuestion(rid, video, F.number(rec, ("realtime",)), question, F.option_text(opts[F.LETTERS.index(letter)]),
                       category=task, group=OVO_GROUPS[task], options=opts, gt_option=letter, benchmark="ovo",
                       prompt=forms.multiple_choice(question, opts, forms.OVO_MC_REPLY), rule="ovo_mc",
                       record=record))


def _probes(r: Reader, record: str, rec, task: str, video: str, rid: str) -> None:
    subject = F.text(rec, ("activity",)) if task == "REC" else F.text(rec, ("question",)) if task == "CRR" else ""
    r.stream(video, (video,))

    def probe(where, j, p):
        t = F.number(p, ("realtime",))
        if task == "REC":
            count = F.first(p, ("count",))
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise F.FieldError("count", f"must be a non-negative whole number, got {count!r}")
            subj, answer, prompt, rule = subject, str(count), forms.ovo_count(subject), "ovo_count"
        else:
            kind = F.first(p, ("type",))
            if kind not in (0, 1) or isinstance(kind, bool):
                raise F.FieldError("type", f"must be 0 (No) or 1 (Yes), got {kind!r}")
            answer = "Yes" if kind == 1 else "No"
            subj = F.text(p, ("step",)) if task == "SSR" else subject
            prompt = forms.ovo_step(subj) if task == "SSR" else forms.ovo_sufficiency(subj)
            rule = "ovo_yesno"
        r.add(EvalQuestion(f"{rid}.{j}", video, t, subj, answer, category=task, group="Fwd", benchmark="ovo",
                           prompt=prompt, rule=rule, record=where))

    probes = F.first(rec, ("test_info",))
    if not probes:
        raise F.FieldError("test_info", "must be a non-empty list of probes")
    r.each_nested(record, probes, probe, "test_info")
