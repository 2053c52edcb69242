"""Prompts and decoding settings per model role (the roles of the VAM seed's Table 7, in our
own words), and the strict reply schemas.

Every request is prefix-stable: the role's fixed system prompt comes first, then a JSON payload
whose keys are always in the same order, then the images in time order. Nothing variable (wall
clock, random ids) precedes material that repeats, so server-side and local prefix caches hit.
"""
from __future__ import annotations

import json
import re
from dataclasses import replace

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .base import Image, LLMRequest, Message, Sampling

# decoding per role: VAM Table 7 (temperature, max tokens)
SAMPLING = {
    "event_writer": Sampling(temperature=0.1, max_tokens=700),
    "summary_writer": Sampling(temperature=0.1, max_tokens=700),
    "node_merger": Sampling(temperature=0.1, max_tokens=500),
    "inspector": Sampling(temperature=0.1, max_tokens=500),
    "anchor_adjudicator": Sampling(temperature=0.0, max_tokens=220, json_object=True),
}

EVENT_WRITER = """You write retrieval documents for a visual memory of video streams.
You receive one finished event of one camera: its time range and up to eight frames spread over it, each with its time.
Write a factual document that a text search can find later:
- state the time range;
- describe the people, objects, actions, scene changes and any readable text you see;
- use a few short lines, one observation per line, rather than one dense paragraph;
- describe only what the frames show; no guesses, no numbered template."""

SUMMARY_WRITER = """You write reusable timeline notes for a visual memory of video streams.
You receive a time window, the event documents that overlap it, and frames from it, each with its time.
Write a factual note for that window that later questions can be answered from:
- state the window;
- combine what the documents say with what the frames show, preferring concrete observations;
- keep distinct moments on separate short lines;
- follow the focus you are given; plain natural text, no template."""

NODE_MERGER = """You maintain a hierarchy of summaries over a video stream's events.
You receive the summaries of two consecutive parts of one camera's history, each with its time range.
Write one summary of the combined range: keep the facts that matter for later questions (who, what, where, when,
readable text), merge repetition, keep the order of events, state the combined time range. A few short lines."""

INSPECTOR = """You inspect frames of a video stream to answer a direct visual question.
Answer only from what the frames show, cite the frame times you rely on, and say plainly when the frames do not show
the answer."""

ANCHOR_ADJUDICATOR = """You decide whether a sequence of frames shows a target event.
Reply with ONLY one JSON object with exactly these keys:
{"match": true or false, "confidence": number from 0 to 1, "observed_event": "what the frames show", "reason": "why"}"""

MAX_DOC_CHARS = 6000  # a runaway reply is cut here before it is stored and embedded


def _payload(**fields) -> str:
    return json.dumps(fields, ensure_ascii=False, separators=(", ", ": "))


def _frames(frames) -> list:
    """(image, t) pairs -> parts: each image preceded by its time."""
    parts: list = []
    for img, t in frames:
        parts += [f"t={t:.2f}s", img if isinstance(img, Image) else Image(img)]
    return parts


def _request(role: str, system: str, user: list) -> LLMRequest:
    return LLMRequest([Message("system", [system]), Message("user", user)], replace(SAMPLING[role]), tag=role)


def event_document(camera_id: str, t_start: float, t_end: float, frames, *, absolute: bool = False) -> LLMRequest:
    """``frames``: up to 8 (Image or path, t) pairs spread over the event."""
    payload = _payload(task="event_document", camera=camera_id,
                       time_range={"start_s": round(t_start, 3), "end_s": round(t_end, 3),
                                   "clock": "unix" if absolute else "stream"})
    return _request("event_writer", EVENT_WRITER, [payload, *_frames(frames)])


def summary_window(camera_id: str | None, t0: float, t1: float, granularity_s: float, focus: str,
                   documents, frames, *, structure: str | None = None) -> LLMRequest:
    """``documents``: (t_start, t_end, text) of the event documents overlapping the window."""
    payload = _payload(task="window_summary", camera=camera_id or "all",
                       window={"start_s": round(t0, 3), "end_s": round(t1, 3)}, granularity_s=granularity_s,
                       focus=focus, structure=structure,
                       event_documents=[{"start_s": round(a, 3), "end_s": round(b, 3), "text": txt}
                                        for a, b, txt in documents])
    return _request("summary_writer", SUMMARY_WRITER, [payload, *_frames(frames)])


def merge_summaries(camera_id: str, parts) -> LLMRequest:
    """``parts``: (t_start, t_end, summary) of the consecutive nodes being merged, in time order."""
    payload = _payload(task="merge_summaries", camera=camera_id,
                       parts=[{"start_s": round(a, 3), "end_s": round(b, 3), "summary": s} for a, b, s in parts])
    return _request("node_merger", NODE_MERGER, [payload])


def inspect(question: str, frames) -> LLMRequest:
    return _request("inspector", INSPECTOR, [_payload(task="inspect", question=question), *_frames(frames)])


def anchor(target: str, frames) -> LLMRequest:
    return _request("anchor_adjudicator", ANCHOR_ADJUDICATOR,
                    [_payload(task="adjudicate_anchor", target_event=target[:400]), *_frames(frames)])


def clean_document(text: str) -> str:
    """A writer reply as stored: trimmed, bounded. Raises ValueError when there is nothing."""
    text = (text or "").strip()
    if not text:
        raise ValueError("the model returned an empty document")
    return text[:MAX_DOC_CHARS]


# -- strict replies --------------------------------------------------------------------------
class AnchorVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    match: bool
    confidence: float = Field(ge=0.0, le=1.0)
    observed_event: str = Field(max_length=2000)
    reason: str = Field(max_length=2000)


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def extract_json(text: str) -> dict:
    """The single JSON object of a reply (a surrounding code fence is tolerated, nothing else).
    Raises ValueError naming what is wrong."""
    s = (text or "").strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1)
    try:
        obj = json.loads(s)
    except json.JSONDecodeError as e:
        raise ValueError(f"reply is not valid JSON ({e.msg} at char {e.pos}): {s[:120]!r}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"reply must be one JSON object, got {type(obj).__name__}")
    return obj


def parse_anchor(text: str) -> AnchorVerdict:
    try:
        return AnchorVerdict.model_validate(extract_json(text))
    except ValidationError as e:
        raise ValueError(f"anchor verdict does not match its schema: {e.errors()[0]['msg']} "
                         f"at {'.'.join(map(str, e.errors()[0]['loc'])) or 'top level'}") from None
