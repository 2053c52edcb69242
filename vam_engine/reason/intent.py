"""Sorting a user turn (StreamMind's frontend routing): a question answered now; a request to be
told later ("tell me when ...": a standing request, a monitor bound to the session); a cancel
of a standing request; or a change (one ended, another started).

``classify_by_model`` asks the model (role ``turn_classifier``: frontend priority, a strict JSON
schema, no repair: a turn must not wait for a second call) and falls back to ``classify_by_rules``
when the reply is unusable or the model fails. Both are untrusted-input safe: the condition a
reply writes is bounded and checked (llm/schemas.py), and the rules take the request's own words.

Which standing request a cancel or change means is best effort: the one whose id the model
names, "all", or (rules) the one sharing the most words with the text; otherwise the most
recent.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from ..errors import VamError
from ..llm import INTENT_KINDS, MAX_CONDITION_CHARS, LLMError, parse_turn_kind, prompts

# a request to be told later: the trigger at the start of a clause ("tell me when", "please let me
# know if", "hey, alert me as soon as"); "can you tell me when the car left?" stays a question
_LEAD = r"(?:^|[.!;,:]\s*|\b(?:please|hey|ok(?:ay)?|and|also|then|now)\s+)"
_TRIGGER = re.compile(
    _LEAD + r"(?:please\s+)?(?:tell|let|notify|alert|warn|ping|inform|message)\s+(?:me|us)\s+(?:know\s+)?"
    r"(?:when(?:ever)?|if|as\s+soon\s+as|once|the\s+moment|every\s+time|each\s+time)\b\s*", re.I)
_CANCEL = re.compile(
    r"^\s*(?:(?:ok(?:ay)?|please|actually|hey)[\s,.!]*)*(?:stop\s+(?:watching|looking|monitoring|checking|"
    r"alerting|notifying|telling)|cancel|never\s*mind|forget(?:\s+about)?|don'?t\s+(?:tell|notify|alert|watch)|"
    r"no\s+(?:more|need)|you\s+can\s+stop|quit\s+watching|unwatch)\b(?:\s+(?:me|us|that|it|this|about|for|the|"
    r"watching|looking|out)\b)*\s*", re.I)
_CHANGE = re.compile(r"\b(?:instead|rather|change\s+(?:it|that|this)\s+to|actually)\b", re.I)
_REPEAT = re.compile(r"\b(?:every\s+time|each\s+time|whenever|every\s+occurrence|each\s+occurrence)\b", re.I)
_ALL = re.compile(r"^\s*(?:all|everything|every\s+\w+|all\s+of\s+(?:them|it)|them\s+all)\b", re.I)
_WORD = re.compile(r"[a-z0-9]{3,}")
_STOP = frozenset("the and for that this when with from into appears appear shows show comes come there".split())


@dataclass(frozen=True)
class TurnIntent:
    """How a turn is taken: ``kind`` (question, watch, cancel, change); ``condition`` for watch
    and change (what the monitor looks for); ``target`` for cancel and change: an index into the
    standing requests shown (0-based), "all", a text naming one, or None (the most recent);
    ``repeat``: every occurrence, not only the first; ``by``: model, rules or given; ``note``:
    why the model's reply was not used."""

    kind: str
    condition: str | None = None
    target: int | str | None = None
    repeat: bool = False
    by: str = "rules"
    note: str | None = None
    timings: dict = field(default_factory=dict, compare=False)


def _clean(text: str) -> str:
    text = " ".join(text.split()).strip(" \t.!?,;:")
    return text[:MAX_CONDITION_CHARS]


def classify_by_rules(text: str) -> TurnIntent:
    """The rule-based reading of a turn: a cancel phrase at its start ("stop watching for that",
    "never mind the courier", "forget the red car", "cancel all"), a request-to-be-told trigger
    ("tell me when", "let me know if", "notify me when", "alert me when"; with "instead" or
    "actually": a change), else a question. The condition is the request minus its trigger."""
    m = _CANCEL.match(text)
    if m is not None and not _TRIGGER.search(text):
        rest = _clean(text[m.end():])
        target = "all" if _ALL.match(rest) else (rest or None)
        return TurnIntent("cancel", target=target)
    m = _TRIGGER.search(text)
    if m is not None:
        condition = _clean(_CHANGE.sub(" ", text[m.end():]))
        if condition:
            kind = "change" if _CHANGE.search(text) else "watch"
            return TurnIntent(kind, condition, repeat=bool(_REPEAT.search(text)))
    return TurnIntent("question")


def classify_by_model(llm, text: str, standing) -> TurnIntent:
    """The model's reading of a turn (``standing``: the session's standing requests, each with
    ``request`` and ``condition``, oldest first), or the rules' when its reply is unusable: the
    note says why. The model is asked once, at frontend priority; no repair."""
    t0 = time.perf_counter()
    shown = [(i, w.request, w.condition) for i, w in enumerate(standing)]
    try:
        reply = llm.generate([prompts.classify_turn(text, shown)])[0].text
        parsed = parse_turn_kind(reply if isinstance(reply, str) else "")
    except LLMError as e:
        return _fallback(text, f"the model failed: {e}", t0)
    except ValueError as e:
        return _fallback(text, str(e), t0)
    target = parsed.target
    if isinstance(target, int) and target >= len(standing):  # an id it was never shown: the most recent
        target = None
    return TurnIntent(parsed.kind, parsed.condition or None, target, parsed.repeat, "model",
                      timings={"classify_s": time.perf_counter() - t0})


def _fallback(text: str, note: str, t0: float) -> TurnIntent:
    r = classify_by_rules(text)
    return TurnIntent(r.kind, r.condition, r.target, r.repeat, "rules", note[:300],
                      {"classify_s": time.perf_counter() - t0})


def given(kind: str, text: str, condition: str | None = None, target=None) -> TurnIntent:
    """A turn whose kind the caller states (an evaluation's proactive question is a watch): the
    condition is ``condition`` (checked like a model's) or the rules' reading of the text."""
    if kind not in INTENT_KINDS:
        raise VamError(f"intent must be one of {', '.join(INTENT_KINDS)}, got {kind!r:.40}")
    if kind in ("watch", "change"):
        if condition is None:
            rules = classify_by_rules(text)
            condition = rules.condition if rules.condition else _clean(text)
        condition = " ".join(condition.split()) if isinstance(condition, str) else ""
        if not condition or len(condition) > MAX_CONDITION_CHARS or not condition.isprintable():
            raise VamError(f"a {kind} needs a printable condition of 1..{MAX_CONDITION_CHARS} characters, got "
                           f"{condition!r:.60}")
    return TurnIntent(kind, condition if kind in ("watch", "change") else None, target,
                      bool(_REPEAT.search(text)), "given")


def pick_targets(intent: TurnIntent, standing) -> list:
    """The standing requests a cancel or change means (best effort): all of them for "all"; the
    one at an index; the one whose monitor id is the target; the one sharing the most words with
    a text target; else the most recent. Empty when there are none."""
    standing = list(standing)
    if not standing:
        return []
    target = intent.target
    if target == "all":
        return standing
    if isinstance(target, int):
        return [standing[target]] if 0 <= target < len(standing) else [standing[-1]]
    if isinstance(target, str):
        named = [w for w in standing if w.monitor_id == target]
        if named:
            return named
        words = set(_WORD.findall(target.lower())) - _STOP
        scores = [len(words & (set(_WORD.findall(f"{w.request} {w.condition}".lower())) - _STOP)) for w in standing]
        best = max(scores)
        if best > 0:
            return [standing[max(i for i, s in enumerate(scores) if s == best)]]
    return [standing[-1]]
