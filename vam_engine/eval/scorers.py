"""Scorers: each benchmark's official rule (the default, so a number is comparable with
published ones), the harness's robust extraction beside it (a separate, labelled mode),
TimeOK windows per benchmark, Ref@300, and the text match a run without a judge falls back to.

The official rules, as the benchmarks' own scoring code computes them:

- OVO-Bench multiple choice: correct when the letter occurs anywhere in the reply (a
  case-sensitive substring test: "B or C" counts for C). SSR / CRR: a reply of exactly "Y"
  or "N" is compared with the probe's type, otherwise correct when "Yes" (type 1) or "No"
  (type 0) occurs in it. REC: every digit of the reply joined must equal the count ("3 or 4"
  reads 34).
- StreamingBench multiple choice: the reply's first character equals the letter; an empty
  reply is left out of the count. Proactive Output: answered within +-2 s of the ground-truth
  time and the reply contains the expected output.
- OASIS: the text inside the first <answer>...</answer> (the whole reply without one),
  stripped and upper-cased, equals the letter.

Where a benchmark's script would crash or skip a question on a failed model call, we count
the failure as wrong (a failure of the engine is not a question left out)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .fields import LETTERS, option_letter, option_text

# TimeOK windows: (earliest, latest) of t_pred - t_gt in seconds, inclusive
TIME_WINDOWS = {"streamarena": (-0.5, 2.0), "jsonl": (-0.5, 2.0), "streamingbench": (-2.0, 2.0)}
_EPS = 1e-9  # float noise at the boundaries (10.5 - 11.0 is exactly -0.5, 12.1 - 10.1 is not quite 2.0)


def time_ok(t_pred: float | None, t_gt: float, window: tuple = TIME_WINDOWS["streamarena"]) -> bool:
    """window[0] <= t_pred - t_gt <= window[1]; no alert is never on time."""
    if t_pred is None:
        return False
    d = t_pred - t_gt
    return window[0] - _EPS <= d <= window[1] + _EPS


# -- the official rules -----------------------------------------------------------------------------
def ovo_mc(reply: str | None, letter: str) -> float:
    return float(reply is not None and letter in reply)


def ovo_yesno(reply: str | None, answer: str) -> float:
    if reply is None:
        return 0.0
    if (reply == "Y" and answer == "Yes") or (reply == "N" and answer == "No"):
        return 1.0
    return float(answer in reply)


def ovo_count(reply: str | None, count: str) -> float:
    return float(reply is not None and "".join(re.findall(r"\d+", reply)) == str(count))


def sb_mc(reply: str | None, letter: str) -> float | None:
    """None: an empty reply, left out of the count (a failed call, ``reply`` None, is wrong)."""
    if reply is None:
        return 0.0
    if reply == "":
        return None
    return float(reply[0] == letter)


def answer_tag(reply: str | None) -> str | None:
    """The stripped text inside the first <answer>...</answer>, or None without one."""
    m = re.search(r"<answer>\s*(.*?)\s*</answer>", reply or "", re.DOTALL)
    return m.group(1).strip() if m else None


def oasis_mc(reply: str | None, letter: str) -> float:
    if reply is None:
        return 0.0
    pred = answer_tag(reply) or reply
    return float(pred.strip().upper() == letter.strip().upper())


def contains_output(reply: str | None, output: str) -> float:
    """StreamingBench Proactive Output's content test: the expected output occurs in the reply."""
    return float(reply is not None and output in reply)


# -- the harness's robust extraction ----------------------------------------------------------------
def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z]+", " ", s.lower()).split())


def extract_option(response: str | None, options) -> str | None:
    """The letter a response picks among ``options`` ("A. ..." strings), or None when it picks
    none or several. Accepts "B", "(B)", "B.", "B) text", "B: text", "Answer: B", "the answer
    is (B)", "<answer>B</answer>", and the option's own text; a leading "A" that is the article
    ("A dog runs") is not taken for option A unless the option's text follows it."""
    if not response or not options:
        return None
    tag = answer_tag(response)
    s = (tag if tag is not None else response).strip()
    valid = [option_letter(o) or LETTERS[i] for i, o in enumerate(options)]
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


def extract_yes_no(response: str | None) -> str | None:
    """"Yes" / "No" when the reply (or its <answer> tag) opens with yes/y or no/n and does not
    go on to the other; else None."""
    if not response:
        return None
    tag = answer_tag(response)
    words = _norm(tag if tag is not None else response).split()
    if not words or words[0] not in ("yes", "y", "no", "n"):
        return None
    first = "Yes" if words[0] in ("yes", "y") else "No"
    other = {"no", "not"} if first == "Yes" else {"yes"}
    return None if other & set(words[1:]) else first


_NUMBER_WORDS = {w: i for i, w in enumerate(("zero one two three four five six seven eight nine ten eleven twelve "
                                             "thirteen fourteen fifteen sixteen seventeen eighteen nineteen "
                                             "twenty").split())}


def extract_count(response: str | None) -> int | None:
    """The one number a reply gives (digits or a word up to twenty); None for none or several
    ("3 or 4")."""
    if not response:
        return None
    tag = answer_tag(response)
    s = (tag if tag is not None else response).lower()
    nums = {int(x) for x in re.findall(r"(?<![\d.])\d+(?![\d.]*\d)", s)}
    nums |= {_NUMBER_WORDS[w] for w in re.findall(r"[a-z]+", s) if w in _NUMBER_WORDS}
    return nums.pop() if len(nums) == 1 else None


def match_answer(response: str | None, reference: str) -> bool:
    """The scorer of a run without a judge: the normalized reference occurs in the normalized
    response as whole words ("red" in "a red car", not in "bored")."""
    if not response:
        return False
    ref, resp = _norm(reference), _norm(response)
    return bool(ref) and re.search(rf"(?:^| ){re.escape(ref)}(?: |$)", resp) is not None


# -- one reply under a question's rule ------------------------------------------------------------
@dataclass
class Scored:
    score: float | None            # the official rule's credit (None: left out of the count)
    robust: float | None           # the robust extraction's credit
    extracted: str | None = None   # what the official rule read
    scorer: str = ""


def score_closed(q, reply: str | None, rule: str) -> Scored:
    """A reply to question ``q`` under ``rule``, one that needs no judge (multiple choice,
    yes/no, counts)."""
    if rule in ("ovo_mc", "sb_mc", "oasis_mc", "option"):
        robust = extract_option(reply, q.options)
        r = float(robust is not None and robust == q.gt_option)
        if rule == "ovo_mc":
            return Scored(ovo_mc(reply, q.gt_option), r, q.gt_option if ovo_mc(reply, q.gt_option) else None, rule)
        if rule == "sb_mc":
            return Scored(sb_mc(reply, q.gt_option), r, reply[0] if reply else None, rule)
        if rule == "oasis_mc":
            pred = None if reply is None else (answer_tag(reply) or reply).strip().upper()
            return Scored(oasis_mc(reply, q.gt_option), r, pred, rule)
        return Scored(r, r, robust, rule)
    if rule == "ovo_yesno":
        return Scored(ovo_yesno(reply, q.answer), float(extract_yes_no(reply) == q.answer), None, rule)
    if rule == "ovo_count":
        digits = None if reply is None else "".join(re.findall(r"\d+", reply))
        c = extract_count(reply)
        return Scored(ovo_count(reply, q.answer), float(c is not None and str(c) == q.answer), digits, rule)
    raise ValueError(f"question {q.qid}: rule {rule!r} is not a closed-form rule")


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
