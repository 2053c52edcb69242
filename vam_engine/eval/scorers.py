"""Scorers: multiple-choice option extraction, the LLM judge (cached on disk), TimeOK for
proactive alerts, Ref@300 for evidence intervals, and a plain text match for runs without a
judge."""
from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from pathlib import Path

from .fields import LETTERS, option_text

# StreamArena's timing rule: an alert may come at most 0.5 s early and 2.0 s late
TIME_OK_EARLY_S = 0.5
TIME_OK_LATE_S = 2.0
_EPS = 1e-9  # float noise at the boundaries (10.5 - 11.0 is exactly -0.5, 12.1 - 10.1 is not quite 2.0)


def time_ok(t_pred: float | None, t_gt: float) -> bool:
    """-0.5 s <= t_pred - t_gt <= +2.0 s (inclusive); no alert is never on time."""
    if t_pred is None:
        return False
    d = t_pred - t_gt
    return -TIME_OK_EARLY_S - _EPS <= d <= TIME_OK_LATE_S + _EPS


# -- multiple choice -----------------------------------------------------------------------------
def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z]+", " ", s.lower()).split())


def extract_option(response: str | None, options) -> str | None:
    """The letter a response picks among ``options`` ("A. ..." strings), or None when it picks
    none or several. Accepts "B", "(B)", "B.", "B) text", "B: text", "Answer: B", "the answer
    is (B)", and the option's own text; a leading "A" that is the article ("A dog runs") is not
    taken for option A unless the option's text follows it."""
    if not response or not options:
        return None
    n = len(options)
    valid = LETTERS[:n]
    s = response.strip()
    texts = [_norm(option_text(o)) for o in options]
    hedge = re.search(r"(?<![A-Za-z])\(?([A-Z])\)?\s+or\s+\(?([A-Z])(?![A-Za-z])", s)
    if hedge and hedge.group(1) in valid and hedge.group(2) in valid and hedge.group(1) != hedge.group(2):
        return None  # "B or C" picks neither
    # 1. the response opens with a letter standing alone: "B", "(B)", "B.", "B)", "B:", "**B**"
    m = re.match(r"^[\s*_`\"']*(\()?([A-Z])(\))?([.:,]?)(?=$|[\s*_`\"'])(.*)$", s, re.DOTALL)
    if m and m.group(2) in valid:
        letter, rest = m.group(2), m.group(5)
        marked = m.group(1) or m.group(3) or m.group(4) or not rest.strip() or rest.lstrip().startswith(("*", "_", "`"))
        own = texts[valid.index(letter)]
        if marked or (own and _norm(rest).startswith(own)):
            return letter
    # 2. "answer is B", "Answer: (C)", "option D", "choice B"
    m = re.findall(r"(?:answer|option|choice)\s*(?:is|:)?\s*[:\-]?\s*\(?([A-Z])\)?(?![A-Za-z])", s, re.IGNORECASE)
    picks = {x.upper() for x in m if x.upper() in valid}
    if len(picks) == 1:
        return picks.pop()
    # 3. exactly one option's text appears in the response (the longest wins when one contains another)
    ns = _norm(s)
    hits = [i for i, t in enumerate(texts) if t and re.search(rf"(?:^| ){re.escape(t)}(?: |$)", ns)]
    hits = [i for i in hits if not any(j != i and texts[i] in texts[j] for j in hits)]
    if len(hits) == 1:
        return valid[hits[0]]
    return None


def match_answer(response: str | None, reference: str) -> bool:
    """The scorer of a run without a judge: the normalized reference occurs in the normalized
    response as whole words ("red" in "a red car", not in "bored")."""
    if not response:
        return False
    ref, resp = _norm(reference), _norm(response)
    return bool(ref) and re.search(rf"(?:^| ){re.escape(ref)}(?: |$)", resp) is not None


# -- the LLM judge ---------------------------------------------------------------------------------
RUBRIC_VERSION = "1"
RUBRIC = (
    "You grade answers to questions about a video. You get the question, the reference answer "
    "written by an annotator, and a system's response. Decide whether the response states the "
    "essential fact of the reference: the specific thing the question asks for (the object, "
    "number, colour, action, person, place or time). Extra detail, other wording or a longer "
    "explanation is fine. The response is wrong if it contradicts the reference, gives a different "
    "value, hedges between several answers, says it cannot tell, or leaves the essential fact out. "
    "Judge only against the reference, not against your own knowledge. Reply with one JSON object: "
    '{"correct": true} or {"correct": false}.')


class Judge:
    """An LLM judge through any body of the MLLM contract (``openai:URL#MODEL`` for a server),
    at temperature 0. Verdicts are cached in ``cache_path`` (one JSON object a line, keyed by the
    judge's name, the rubric's version, question, reference and response), so a re-run asks the
    judge nothing it has answered before."""

    def __init__(self, llm, cache_path: str | Path | None = None):
        self.llm = llm
        self.name = getattr(llm, "name", "judge")
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self._cache: dict[str, bool] = {}
        self._lock = threading.Lock()
        self.calls = 0  # judge requests actually sent
        if self.cache_path is not None and self.cache_path.is_file():
            for line in self.cache_path.read_text(encoding="utf-8").splitlines():
                try:
                    d = json.loads(line)
                    self._cache[d["key"]] = bool(d["correct"])
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line from an interrupted run: that verdict is asked again

    def _key(self, question: str, reference: str, response: str) -> str:
        h = hashlib.sha256(json.dumps([self.name, RUBRIC_VERSION, question, reference, response]).encode())
        return h.hexdigest()[:32]

    def __call__(self, question: str, reference: str, response: str | None) -> bool:
        if not response or not response.strip():
            return False
        key = self._key(question, reference, response)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        from ..llm.base import LLMRequest, Message, Sampling

        req = LLMRequest([Message("system", [RUBRIC]),
                          Message("user", [json.dumps({"question": question, "reference": reference,
                                                       "response": response}, ensure_ascii=False)])],
                         Sampling(temperature=0.0, max_tokens=64, json_object=True), tag="eval_judge")
        reply = self.llm.generate([req])[0].text
        verdict = parse_verdict(reply)
        if verdict is None:
            raise ValueError(f"judge {self.name}: cannot read a verdict from its reply {reply[:200]!r}")
        with self._lock:
            self.calls += 1
            self._cache[key] = verdict
            if self.cache_path is not None:
                self.cache_path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.cache_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"key": key, "correct": verdict}) + "\n")
        return verdict


def parse_verdict(reply: str) -> bool | None:
    """{"correct": true|false}, or a reply that opens with yes/no/correct/incorrect/true/false."""
    s = reply.strip()
    m = re.search(r"\{.*\}", s, re.DOTALL)
    if m:
        try:
            v = json.loads(m.group(0)).get("correct")
            if isinstance(v, bool):
                return v
        except (ValueError, AttributeError):
            pass
    w = re.match(r"^\W*(yes|no|correct|incorrect|true|false|wrong)\b", s, re.IGNORECASE)
    if w:
        return w.group(1).lower() in ("yes", "correct", "true")
    return None


# -- Ref@300 -----------------------------------------------------------------------------------------
def bins(intervals, bin_s: float = 300.0) -> set:
    """The bins of ``bin_s`` seconds (aligned at t = 0 of the axis) that the intervals touch
    (an interval [a, b] touches floor(a/bin) .. floor(b/bin); an end exactly on an edge does not
    reach into the next bin unless the interval is a point there)."""
    out: set = set()
    for a, b in intervals:
        lo = math.floor(a / bin_s)
        hi = max(lo, math.ceil(b / bin_s) - 1)
        out.update(range(lo, hi + 1))
    return out


def ref_at(pred, gt, bin_s: float = 300.0) -> float:
    """Interval-level IoU of the predicted and annotated evidence on ``bin_s`` bins (MM-Lifelong
    Ref@300 with the default); 0 when nothing is predicted."""
    p, g = bins(pred, bin_s), bins(gt, bin_s)
    if not p or not g:
        return 0.0
    return len(p & g) / len(p | g)
