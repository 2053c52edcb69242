"""The LLM judge on each benchmark's scale, its verdicts cached on disk.

- ``binary`` (StreamArena, our JSONL): is the reference's factual core stated? 1 or 0.
- ``streambench`` (StreamChat's protocol): yes/no plus a 0-5 score; accuracy is the share of
  yes, the report also gives the mean score.
- ``lifelong`` (MM-Lifelong): a 0-5 score; >= 4 counts 1, 3 counts 0.5, anything lower 0.

Any body of the MLLM contract can judge (``openai:URL#MODEL`` for a server), at temperature 0.
The cache (one JSON object a line) is keyed by the judge's name, the scale and its rubric's
version, question, reference and response, so a re-run asks the judge nothing it has answered."""
from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path

_TASK = ("You grade answers to questions about a video. You get the question, the reference answer written by an "
         "annotator, and a system's response. Judge only against the reference, not against your own knowledge. ")
RUBRICS = {  # scale -> (version, text)
    "binary": ("1", _TASK + "Decide whether the response states the essential fact of the reference: the specific "
               "thing the question asks for (the object, number, colour, action, person, place or time). Extra detail, "
               "other wording or a longer explanation is fine. The response is wrong if it contradicts the reference, "
               "gives a different value, hedges between several answers, says it cannot tell, or leaves the essential "
               'fact out. Reply with one JSON object: {"correct": true} or {"correct": false}.'),
    "streambench": ("1", _TASK + "Decide whether the response matches the meaning of the reference (yes or no), and "
                    "grade how well it matches on an integer scale from 0 (unrelated or wrong) to 5 (the same "
                    'meaning). Reply with one JSON object: {"pred": "yes" or "no", "score": 0 to 5}.'),
    "lifelong": ("1", _TASK + "Grade the response against the reference on an integer scale from 0 to 5: 5 the same "
                 "answer, 4 correct with minor omissions, 3 partly correct, 2 mostly wrong, 1 wrong but related, 0 "
                 'wrong or no answer. Reply with one JSON object: {"score": 0 to 5}.'),
}
SCALE_OF_RULE = {"judge_binary": "binary", "judge_streambench": "streambench", "judge_lifelong": "lifelong"}


@dataclass(frozen=True)
class Verdict:
    score: float               # the credit the benchmark counts: 1, 0 (0.5 on MM-Lifelong's middle grade)
    grade: float | None = None  # the judge's 0-5 score, where the scale has one


def lifelong_credit(grade: float) -> float:
    """MM-Lifelong's mapping of a 0-5 grade: >= 4 -> 1, 3 -> 0.5, else 0."""
    return 1.0 if grade >= 4 else 0.5 if grade >= 3 else 0.0


def parse_verdict(reply: str) -> bool | None:
    """Binary: {"correct": true|false}, or a reply that opens with yes/no/correct/incorrect/true/false."""
    s = reply.strip()
    obj = _json_object(s)
    if isinstance(obj.get("correct"), bool):
        return obj["correct"]
    w = re.match(r"^\W*(yes|no|correct|incorrect|true|false|wrong)\b", s, re.IGNORECASE)
    if w:
        return w.group(1).lower() in ("yes", "correct", "true")
    return None


def _json_object(s: str) -> dict:
    m = re.search(r"\{.*\}", s, re.DOTALL)
    if m:
        try:
            obj = json.loads(m.group(0))
            return obj if isinstance(obj, dict) else {}
        except ValueError:
            pass
    return {}


def _grade(v) -> float | None:
    if isinstance(v, str) and re.fullmatch(r"\s*\d+(\.\d+)?\s*", v):
        v = float(v)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 5:
        return float(v)
    return None


def parse_graded(reply: str, scale: str) -> Verdict | None:
    """A reply on the ``streambench`` or ``lifelong`` scale; None when it cannot be read."""
    obj = _json_object(reply)
    grade = _grade(obj.get("score"))
    if scale == "lifelong":
        return None if grade is None else Verdict(lifelong_credit(grade), grade)
    pred = str(obj.get("pred", "")).strip().lower()
    if pred not in ("yes", "no") or grade is None:
        return None
    return Verdict(1.0 if pred == "yes" else 0.0, grade)


class Judge:
    def __init__(self, llm, cache_path: str | Path | None = None):
        self.llm = llm
        self.name = getattr(llm, "name", "judge")
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self._cache: dict[str, Verdict] = {}
        self._lock = threading.Lock()
        self.calls = 0  # judge requests actually sent
        if self.cache_path is not None and self.cache_path.is_file():
            for line in self.cache_path.read_text(encoding="utf-8").splitlines():
                try:
                    d = json.loads(line)
                    self._cache[d["key"]] = Verdict(float(d["score"]), d.get("grade"))
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line from an interrupted run: that verdict is asked again

    def _key(self, scale: str, question: str, reference: str, response: str) -> str:
        h = hashlib.sha256(json.dumps([self.name, scale, RUBRICS[scale][0], question, reference, response]).encode())
        return h.hexdigest()[:32]

    def grade(self, scale: str, question: str, reference: str, response: str | None) -> Verdict:
        if scale not in RUBRICS:
            raise ValueError(f"unknown judge scale {scale!r} (one of {', '.join(RUBRICS)})")
        if not response or not response.strip():
            return Verdict(0.0, None if scale == "binary" else 0.0)
        key = self._key(scale, question, reference, response)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        from ..llm import LLMRequest, Message, Sampling

        req = LLMRequest([Message("system", [RUBRICS[scale][1]]),
                          Message("user", [json.dumps({"question": question, "reference": reference,
                                                       "response": response}, ensure_ascii=False)])],
                         Sampling(temperature=0.0, max_tokens=64, json_object=True), tag="eval_judge")
        reply = self.llm.generate([req])[0].text
        if scale == "binary":
            ok = parse_verdict(reply)
            verdict = None if ok is None else Verdict(float(ok))
        else:
            verdict = parse_graded(reply, scale)
        if verdict is None:
            raise ValueError(f"judge {self.name}: cannot read a {scale} verdict from its reply {reply[:200]!r}")
        with self._lock:
            self.calls += 1
            self._cache[key] = verdict
            if self.cache_path is not None:
                self.cache_path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.cache_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"key": key, "score": verdict.score, "grade": verdict.grade}) + "\n")
        return verdict

    def __call__(self, question: str, reference: str, response: str | None) -> bool:
        """The binary verdict (StreamArena's scale)."""
        return self.grade("binary", question, reference, response).score == 1.0
