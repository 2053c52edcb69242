"""The one scripted model of the tests: replies chosen by the request's tag, for
``vam_engine.llm.ScriptedLLM``; and the small readers of a request that scripts use.

A request's tag is the role asked (``event_writer``, ``node_merger``, ``summary_writer``,
``monitor``, ``two_phase_coarse``, ``two_phase_fine``, ``qa_summarizer``, ``router``, ``planner``,
``inspector``, ``anchor_adjudicator``, ``eval_judge``, ``eval_baseline``), ``<role>_repair`` for
the repair of an invalid reply.
"""
from __future__ import annotations

import json
import threading
from collections import Counter

from vam_engine.llm import ScriptedLLM
from vam_engine.llm.base import Image


class TagScript:
    """Replies by tag. ``replies`` maps a tag to its reply: a str; a dict (sent as its JSON); a
    callable(request) returning one of those; or a list of those, used in order (an
    AssertionError naming the tag once it runs out: a test never gets a reply it did not script).

    A key ending in ``*`` matches every tag it begins (``"planner*"``: the planner's requests and
    their repairs); an exact key wins over a prefix, a longer prefix over a shorter. A tag that
    nothing matches gets ``default`` (a str, dict or callable), or an AssertionError naming it when
    there is no default.

    ``asked`` counts the requests answered, per tag. The model may be called from several threads."""

    def __init__(self, replies: dict | None = None, *, default=None):
        self.replies = {tag: list(r) if isinstance(r, (list, tuple)) else r for tag, r in (replies or {}).items()}
        self.default = default
        self.asked: Counter = Counter()
        self._lock = threading.Lock()

    def _entry(self, tag: str):
        if tag in self.replies:
            return self.replies[tag]
        prefixes = [k for k in self.replies if k.endswith("*") and tag.startswith(k[:-1])]
        if prefixes:
            return self.replies[max(prefixes, key=len)]
        if self.default is None:
            raise AssertionError(f"unexpected request {tag!r}: the script has no reply for it")
        return self.default

    def __call__(self, req) -> str:
        reply = self._entry(req.tag)
        if isinstance(reply, list):
            with self._lock:
                if not reply:
                    raise AssertionError(f"no scripted reply left for {req.tag!r}")
                reply = reply.pop(0)
        if callable(reply):
            reply = reply(req)
        with self._lock:
            self.asked[req.tag] += 1
        return json.dumps(reply) if isinstance(reply, dict) else reply

    def asked_like(self, prefix: str) -> int:
        """Requests answered whose tag begins with ``prefix`` (a role and its repairs)."""
        with self._lock:
            return sum(n for tag, n in self.asked.items() if tag.startswith(prefix))


def scripted_llm(replies: dict | None = None, *, default=None, **llm_kw) -> ScriptedLLM:
    """``ScriptedLLM(TagScript(replies, default=default), **llm_kw)``."""
    return ScriptedLLM(TagScript(replies, default=default), **llm_kw)


# -- reading a request ------------------------------------------------------------------------
def texts(req) -> list[str]:
    """Every text part of every message, in order."""
    return [p for m in req.messages for p in m.content if isinstance(p, str)]


def images(req) -> list[Image]:
    """Every image part of every message, in order."""
    return [p for m in req.messages for p in m.content if isinstance(p, Image)]


def payload(req) -> dict:
    """The JSON task of a memory writer's request (its user message's first part)."""
    return json.loads(req.messages[1].content[0])


def event_of(req) -> tuple[str, float, float]:
    """(camera, start_s, end_s) of an event writer's request."""
    p = payload(req)
    return p["camera"], p["time_range"]["start_s"], p["time_range"]["end_s"]


def joined_parts(req, width: int) -> str:
    """A node merger's reply: the first ``width`` characters of each part's summary, joined."""
    return " | ".join(part["summary"][:width] for part in payload(req)["parts"])


def verdict(match: bool, confidence: float = 0.9, observed: str = "", reason: str = "scripted") -> str:
    """A monitor's or anchor verifier's verdict, as the model writes it."""
    return json.dumps({"match": match, "confidence": confidence, "observed_event": observed, "reason": reason})
