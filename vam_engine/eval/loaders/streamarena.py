"""StreamArena (the paper's appendix field list; the release is not public yet): a list of
``{video_id, domain, l2_subdomain, capability: RTP | HR | Tool | Pro, question, query_time,
answer, evidence: [{t_start, t_end, description}], reasoning_pattern (HR), monitoring_horizon
(Pro)}``. HR questions are stratified by the gap from the nearest evidence to the query, Pro
questions by the monitoring horizon; a Pro question's event time is its first evidence's
start (else query time + horizon)."""
from __future__ import annotations

from .. import fields as F
from ..records import EvalQuestion
from ..tasks import SA_CAPS, hr_stratum, pro_stratum
from .common import Reader, entries, json_list


def load_streamarena(path):
    r = Reader(path, "streamarena", "streamarena")
    r.each(entries(json_list(path)), lambda record, rec: _record(r, record, rec))
    return r.suite


def _record(r: Reader, record: str, rec) -> None:
    raw = F.text(rec, ("capability",))
    cap = {c.lower(): c for c in SA_CAPS}.get(raw.lower().replace("proactive", "pro"))
    if cap is None:
        raise F.FieldError("capability", f"must be one of {', '.join(SA_CAPS)}, got {raw!r}")
    t = F.seconds(rec, ("query_time",))
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
    vid = F.text(rec, ("video_id",))
    qid = F.text(rec, ("question_id", "id"), required=False) or record.strip("[]")
    r.stream(vid, (vid,))
    category = F.text(rec, ("reasoning_pattern",), required=False) if cap == "HR" else ""
    r.add(EvalQuestion(qid, vid, t, F.text(rec, ("question",)), F.text(rec, ("answer",)),
                       kind="proactive" if cap == "Pro" else "reactive", category=category or cap, group=cap,
                       evidence=ev, t_gt=t_gt, stratum=stratum, benchmark="streamarena", rule="judge_binary",
                       record=record))
