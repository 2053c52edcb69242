"""Scoring one result: its question's official rule (scorers.py), the robust extraction
beside it, the judge on the benchmark's scale for open answers (a whole-word match of the
reference without a judge, labelled "match"), and TimeOK in the benchmark's window for
proactive answers."""
from __future__ import annotations

from .judges import SCALE_OF_RULE
from .records import EvalQuestion, EvalResult
from .scorers import TIME_WINDOWS, answer_tag, contains_output, match_answer, score_closed, time_ok


def rule_of(q: EvalQuestion) -> str:
    if q.rule:
        return q.rule
    return "option" if q.options else "judge_binary"


class Grader:
    def __init__(self, judge=None):
        self.judge = judge

    def __call__(self, q: EvalQuestion, r: EvalResult) -> None:
        rule = rule_of(q)
        r.scorer = rule
        if r.response is None and r.error and r.error.startswith("unsupported"):
            return  # not scored: the method does not answer this kind of question
        if q.kind == "proactive":
            r.time_ok = time_ok(r.t_pred, q.t_gt, TIME_WINDOWS.get(q.benchmark, TIME_WINDOWS["streamarena"]))
            if rule == "sb_proactive":
                content = contains_output(r.response, q.answer)
                robust = float(r.response is not None and q.answer.lower() in r.response.lower())
            else:
                content = robust = self._open(q, r, rule)
            r.score, r.score_robust = content * r.time_ok, robust * r.time_ok
            return
        if rule in SCALE_OF_RULE:
            r.score = r.score_robust = self._open(q, r, rule)
            return
        s = score_closed(q, r.response, rule)
        r.score, r.score_robust, r.extracted = s.score, s.robust, s.extracted

    def _open(self, q: EvalQuestion, r: EvalResult, rule: str) -> float:
        """An open answer's credit: the judge on the rule's scale, or the text match."""
        if r.response is None:
            return 0.0
        reply = (answer_tag(r.response) or r.response) if q.benchmark == "streambench" else r.response
        r.extracted = reply if reply != r.response else None
        if self.judge is None:
            r.scorer = "match"
            return float(match_answer(reply, q.answer))
        v = self.judge.grade(SCALE_OF_RULE[rule], q.question, q.answer, reply)
        r.scorer = f"judge:{self.judge.name}"
        r.judge_score = v.grade
        return v.score
