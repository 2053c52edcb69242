"""A question's budget: what one question may show the model, whatever the number of cameras.

Every request a question sends is bounded: the two-phase coarse request carries at most
``max_images`` images and ``max_tokens`` estimated tokens (an image costs ``image_tokens``, text
four characters a token: ``prompts.estimate_tokens``), the fine stage's retrieved memory adds at
most ``fine_max_images`` and ``fine_max_tokens``, and each planner inspection shows at most
``max_images`` frames. OASIS's point is a bounded context per question (about 10k tokens); a
present of every camera grows with the cameras instead (16 live cameras: over 600 images).

The budget is spent on the cameras that matter for the question (``rank_cameras``), in this
order: cameras the question names; cameras whose documents, transcripts, text read and
detected things match its words (the memory's full-text side: memory/cameras.py); cameras
with a recent alert; then the most recently active. At most ``max_images // min_camera_images``
cameras are shown, the first ones getting the larger shares (``ranked_shares``); a camera's
present that does not fit is thinned evenly in time (its newest frame kept). The other cameras
are summarised in one line each (camera, its last event's document, its last activity time) so
that the model can ask for them. ``BudgetAccount`` records what each request carried and what
was left out; ``Answering`` puts it in the answer's trace (stage "budget").

With one or two cameras (``whole_cameras``) nothing changes: each camera's present is shown
whole, as OASIS shows its one stream (from the store 4 images a camera; a live camera's 16
short-window and 24 medium-buffer frames), and the account says when that is over the budget.
The budget binds from the next camera on, whatever their number.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..llm import Image, LLMRequest, prompts
from ..memory import CameraSignal

SUMMARY_LINE_CHARS = 200   # of a camera's last event document in its one-line summary
LISTED_CAMERAS_MAX = 10    # camera ids the trace names per list (the counts are exact)


@dataclass(frozen=True)
class Budget:
    """The limits (``AskConfig``'s keys of the same names)."""
    max_images: int = 16
    max_tokens: int = 12_000
    image_tokens: int = 256
    fine_max_images: int = 32
    fine_max_tokens: int = 12_000
    min_camera_images: int = 4
    match_span_s: float = 3600.0
    whole_cameras: int = 2

    @classmethod
    def from_config(cls, ask) -> "Budget":
        return cls(ask.max_images, ask.max_tokens, ask.image_tokens, ask.fine_max_images, ask.fine_max_tokens,
                   ask.min_camera_images, ask.match_span_s, ask.whole_cameras)

    @property
    def max_cameras(self) -> int:
        """Cameras one coarse request shows at most."""
        return max(1, self.max_images // max(1, self.min_camera_images))

    def cost(self, parts) -> tuple[int, int]:
        """(images, estimated tokens) of a list of parts (str or Image) or of a whole request."""
        if isinstance(parts, LLMRequest):
            parts = [p for m in parts.messages for p in m.content]
        images = sum(isinstance(p, Image) for p in parts)
        chars = sum(len(p) for p in parts if isinstance(p, str))
        return images, images * self.image_tokens + -(-chars // prompts.CHARS_PER_TOKEN)

    def images_for_tokens(self, tokens_left: int) -> int:
        return max(0, tokens_left // self.image_tokens)


@dataclass(frozen=True)
class CameraChoice:
    """A camera in the order the budget spends on: why it ranks where it does ("named",
    "matches", "alert", "active"; none: only listed) and its signal (None: unknown)."""
    camera_id: str
    reasons: tuple[str, ...]
    signal: CameraSignal | None = None

    @property
    def last_activity(self) -> float | None:
        return None if self.signal is None else self.signal.last_moment_t


def named_cameras(question: str, cameras) -> list[str]:
    """The cameras whose id the question names as a word ("what is on dock-3 now?"; an id's
    "_" and "-" may be written as spaces: "front door" names front_door), in the order they
    appear (the longer id first at one place); case-insensitive."""
    found = []
    low = question.lower()
    for cam in cameras:
        spellings = {cam.lower(), re.sub(r"[-_]+", " ", cam.lower())}
        starts = [m.start() for s in spellings
                  for m in [re.search(r"(?<![\w-])" + re.escape(s) + r"(?![\w-])", low)] if m is not None]
        if starts:  # at one place, the longer id first: "front door" is front_door before front
            found.append((min(starts), -len(cam), cam))
    return [c for _, _, c in sorted(found)]


def rank_cameras(question: str, cameras, signals, *, now: float | None, span_s: float) -> list[CameraChoice]:
    """``cameras`` best first for ``question`` (see the module docstring). ``signals``: the view's
    ``camera_signals``; ``now``: the question's present (an alert within ``span_s`` before it
    is recent; 0: any alert)."""
    cameras = list(dict.fromkeys(cameras))
    by_id = {s.camera_id: s for s in signals}
    named = {c: i for i, c in enumerate(named_cameras(question, cameras))}

    def recent_alert(s: CameraSignal | None) -> float | None:
        if s is None or s.last_alert_t is None:
            return None
        if span_s and now is not None and s.last_alert_t < now - span_s:
            return None
        return s.last_alert_t

    out = []
    for cam in cameras:
        s = by_id.get(cam)
        reasons = []
        if cam in named:
            reasons.append("named")
        if s is not None and s.matches:
            reasons.append("matches")
        if recent_alert(s) is not None:
            reasons.append("alert")
        if s is not None and s.last_moment_t is not None:
            reasons.append("active")
        out.append(CameraChoice(cam, tuple(reasons), s))

    def key(c: CameraChoice):
        s = c.signal
        alert = recent_alert(s)
        return (named.get(c.camera_id, len(named)),
                -(s.score if s is not None and s.matches else 0.0),
                alert is None, -(alert or 0.0),
                c.last_activity is None, -(c.last_activity or 0.0), c.camera_id)
    return sorted(out, key=key)


def ranked_shares(wants: list[int], cap: int, floor: int) -> list[int]:
    """Images per camera in rank order: each takes what it wants, leaving every later camera
    ``floor`` (or what it wants, when less); the first cameras get the larger shares."""
    shares, left = [], cap
    for i, want in enumerate(wants):
        reserve = sum(min(w, floor) for w in wants[i + 1:])
        take = max(0, min(want, left - reserve))
        shares.append(take)
        left -= take
    return shares


def fair_shares(wants: list[int], cap: int) -> list[int]:
    """Images per item, at most ``cap`` in all, as even as the wants allow (water filling: an
    item wanting less than an even share leaves the rest to the others)."""
    shares = [0] * len(wants)
    left, open_ = cap, [i for i, w in enumerate(wants) if w > 0]
    while left > 0 and open_:
        each = max(1, left // len(open_))
        for i in list(open_):
            take = min(each, wants[i] - shares[i], left)
            shares[i] += take
            left -= take
            if shares[i] >= wants[i]:
                open_.remove(i)
            if left <= 0:
                break
    return shares


def summary_line(choice: CameraChoice) -> str:
    """One camera not shown: its last event's document and its last activity time."""
    s = choice.signal
    doc = "no event described yet"
    if s is not None and s.last_document:
        doc = f"last event to t={s.last_event_t:.2f}s: {s.last_document[:SUMMARY_LINE_CHARS]}"
    active = "no frames" if choice.last_activity is None else f"last activity t={choice.last_activity:.2f}s"
    return f"- camera {choice.camera_id}: {doc}; {active}"


def _names(ids) -> list:
    ids = list(ids)
    return ids if len(ids) <= LISTED_CAMERAS_MAX else ids[:LISTED_CAMERAS_MAX] + [f"... {len(ids) - LISTED_CAMERAS_MAX} more"]


@dataclass
class BudgetAccount:
    """What one question's requests carried against the budget, and what was left out: the
    trace's "budget" entry (``detail``)."""
    budget: Budget
    requests: dict = field(default_factory=dict)    # stage -> {"images", "tokens"} (the largest of that stage)
    shown: list = field(default_factory=list)       # [camera, reasons, images] of the coarse request, in rank order
    summarised: list = field(default_factory=list)  # cameras given one line
    unlisted: int = 0                               # cameras neither shown nor summarised (the tokens ran out)
    trimmed: dict = field(default_factory=dict)     # camera -> images of its present left out
    notes: list = field(default_factory=list)

    def spent(self, stage: str, images: int, tokens: int) -> None:
        had = self.requests.get(stage)
        if had is None or (images, tokens) > (had["images"], had["tokens"]):
            self.requests[stage] = {"images": images, "tokens": tokens}

    def detail(self) -> dict:
        b = self.budget
        return {"max_images": b.max_images, "whole_cameras": b.whole_cameras, "max_tokens": b.max_tokens, "image_tokens": b.image_tokens,
                "fine_max_images": b.fine_max_images, "fine_max_tokens": b.fine_max_tokens,
                "requests": dict(self.requests), "shown": list(self.shown),
                "summarised": len(self.summarised), "summarised_cameras": _names(self.summarised),
                "unlisted": self.unlisted, "trimmed": dict(self.trimmed), "notes": list(self.notes)}


class QuestionBudget:
    """One question's budget and account, shared by both answerers: the camera ranking is read
    once (``ranking``), the account filled by every stage."""

    def __init__(self, budget: Budget, question: str):
        self.budget = budget
        self.question = question
        self.account = BudgetAccount(budget)
        self._ranking: list[CameraChoice] | None = None

    def ranking(self, view) -> list[CameraChoice]:
        """The view's cameras best first for the question (read from the view once)."""
        if self._ranking is None:
            cams = view.camera_ids()
            if len(cams) <= 1:
                self._ranking = [CameraChoice(c, ()) for c in cams]
            else:
                now = view.now()
                span = self.budget.match_span_s
                since = None if not span or now is None else now - span
                signals = view.camera_signals(self.question, since)
                self._ranking = rank_cameras(self.question, cams, signals, now=now, span_s=span)
        return self._ranking

    def inspection_cameras(self, view, cameras) -> tuple[list[str], list[str]]:
        """(looked at, left out) of ``cameras`` for one inspection over several: the best
        ``max_cameras`` of them by the question's ranking."""
        cams = list(dict.fromkeys(cameras))
        cap = self.budget.max_cameras
        if len(cams) <= cap:
            return cams, []
        order = {c.camera_id: i for i, c in enumerate(self.ranking(view))}
        cams.sort(key=lambda c: order.get(c, len(order)))
        return cams[:cap], cams[cap:]
