"""Strict schemas of every JSON reply a model gives: the router's and the planner's (the VAM
seed's B.4/B.6 bounds), the anchor verifier's verdict, and two-phase's coarse and fine replies;
and ``extract_json``, which finds the one JSON object of a reply.

Every reply is untrusted: it is parsed into these models or rejected with a ValueError that names
the first problem (so a repair request can say what to fix). Extra keys are errors, types are
strict (no "5" for 5), numbers are finite and bounded, and every string has a length cap, so a
runaway reply is rejected instead of being stored or sent on.
"""
from __future__ import annotations

import json
import re
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

MAX_REPLY_CHARS = 50_000  # longer replies are rejected before JSON parsing (no field may be this long)
MAX_QUERIES = 8           # search queries per action: each one is a search (and maybe inspections)
DAY_S = 86_400.0          # granularity_seconds is in (0, DAY_S]
WEEK_S = 604_800.0        # anchor windows: at most seven days on each side
SOURCES = ("frame", "event", "summary", "ocr", "object")


def _text(max_chars: int):
    """A non-empty (after trimming) string of at most ``max_chars``."""
    return Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=max_chars)]


Question = _text(2000)
QueryText = _text(1000)
Prompt = _text(2000)
Description = _text(1000)
Label = _text(64)         # summary_structure (B.7.1: at most 64 characters)
Response = _text(8000)
Thought = Annotated[str, StringConstraints(max_length=2000)]  # may be empty: it is only logged
Seconds = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Granularity = Annotated[float, Field(gt=0.0, le=DAY_S, allow_inf_nan=False)]
Window = Annotated[float, Field(ge=0.0, le=WEEK_S, allow_inf_nan=False)]
TimeMode = Literal["relative", "absolute"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# -- router ------------------------------------------------------------------------------------
class RouteFinal(Strict):
    type: Literal["final"]
    text: Response


class RetrieveArgs(Strict):
    question: Question


class RouteRetrieve(Strict):
    type: Literal["tool"]
    name: Literal["retrieve"]
    args: RetrieveArgs


class SummarizeArgs(Strict):
    min_time: Seconds
    max_time: Optional[Seconds] = None  # None: up to the question's present
    time_mode: TimeMode = "relative"
    granularity_seconds: Granularity
    prompt: Prompt
    summary_structure: Optional[Label] = None

    @model_validator(mode="after")
    def _ordered(self):
        if self.max_time is not None and self.max_time < self.min_time:
            raise ValueError(f"max_time {self.max_time} is before min_time {self.min_time}")
        return self


class RouteSummarize(Strict):
    type: Literal["tool"]
    name: Literal["summarize"]
    args: SummarizeArgs


Route = Union[RouteFinal, RouteRetrieve, RouteSummarize]


# -- time ranges -------------------------------------------------------------------------------
class Anchor(Strict):
    """An event whose time defines a range: the occurrence_index-th distinct occurrence in time order."""
    description: Description
    occurrence_index: int = Field(1, ge=1, le=100)
    verification_prompt: Optional[Annotated[str, StringConstraints(strip_whitespace=True, max_length=400)]] = None
    top_k: int = Field(10, ge=1, le=50)     # candidates retrieved for the anchor
    inspect_k: int = Field(4, ge=0, le=20)  # candidates a verifier checks; clipped to top_k

    @model_validator(mode="after")
    def _clip(self):
        self.inspect_k = min(self.inspect_k, self.top_k)
        return self


class TimeRange(Strict):
    """Exactly one form: a direct interval (start[, end]), a single anchor (with before_s /
    after_s windows), or a pair of anchors (start_anchor, end_anchor)."""
    mode: TimeMode = "relative"
    start: Optional[Seconds] = None
    end: Optional[Seconds] = None  # None with a direct start: up to the present
    anchor: Optional[Anchor] = None
    before_s: Optional[Window] = None
    after_s: Optional[Window] = None
    start_anchor: Optional[Anchor] = None
    end_anchor: Optional[Anchor] = None

    @model_validator(mode="after")
    def _one_form(self):
        direct = self.start is not None or self.end is not None
        single = self.anchor is not None
        between = self.start_anchor is not None or self.end_anchor is not None
        if direct + single + between != 1:
            raise ValueError("time_range must be exactly one of: a direct interval (start, end), a single anchor "
                             "(anchor, before_s, after_s), or two anchors (start_anchor, end_anchor)")
        if direct:
            if self.start is None:
                raise ValueError("a direct time_range needs start")
            if self.end is not None and self.end < self.start:
                raise ValueError(f"time_range end {self.end} is before start {self.start}")
        if between and (self.start_anchor is None or self.end_anchor is None):
            raise ValueError("an anchored time_range between two events needs both start_anchor and end_anchor")
        if not single and (self.before_s is not None or self.after_s is not None):
            raise ValueError("before_s / after_s apply to a single anchor only")
        return self


# -- planner actions ---------------------------------------------------------------------------
class Ref(Strict):
    turn_idx: int = Field(ge=1, le=1000)   # 1-based, as numbered in the context
    result_idx: int = Field(ge=0, le=10_000)  # 0-based within that turn


class SearchQuery(Strict):
    q: QueryText
    top_k: int = Field(10, ge=1, le=200)
    inspect_k: int = Field(0, ge=0, le=50)  # clipped to top_k, not rejected (B.4)
    # on Evidence.relevance, calibrated per space (memory/search.py): 0.65 keeps hits about 0.39
    # standard deviations above the query's typical score in the space that found them (the
    # seed's default, once a raw cosine in one Gemini space)
    threshold: float = Field(0.65, ge=0.0, allow_inf_nan=False,
                             description="drop results whose calibrated relevance (0..1) is below this")

    @model_validator(mode="after")
    def _clip(self):
        self.inspect_k = min(self.inspect_k, self.top_k)
        return self


class SummaryFilter(Strict):
    summary_structure: Optional[Label] = None
    granularity_seconds: Optional[Granularity] = None


class AnswerAction(Strict):
    action: Literal["answer"]
    response: Response
    best_ref: Optional[Ref] = None
    thought: Thought = ""


class VisualRef(Strict):
    """An appearance query (VAM 3.4 visual_ref): a frame of a result already in the context
    (its middle frame) is searched for among the frames and events, with each query's text."""
    ref: Ref


class SearchAction(Strict):
    action: Literal["search"]
    queries: list[SearchQuery] = Field(min_length=1, max_length=MAX_QUERIES)
    time_range: Optional[TimeRange] = None
    # left out: every source the memory holds (the view's default_sources: speech too when there is any)
    sources: list[Literal["frame", "event", "summary", "ocr", "object", "speech"]] = Field(
        default_factory=lambda: list(SOURCES), min_length=1, max_length=len(SOURCES) + 1)
    summary_filter: Optional[SummaryFilter] = None
    visual_ref: Optional[VisualRef] = None
    joint_inspection: bool = False           # the inspect_k picks are looked at together, in one request
    inspection_prompt: Optional[Prompt] = None  # what the inspector is asked (default: the question)
    thought: Thought = ""

    @model_validator(mode="after")
    def _distinct_sources(self):
        if len(set(self.sources)) != len(self.sources):
            raise ValueError(f"sources must not repeat, got {self.sources}")
        return self


class InspectAction(Strict):
    action: Literal["inspect"]
    prompt: Prompt
    time_range: Optional[TimeRange] = None
    ref: Optional[Ref] = None
    max_frames: int = Field(8, ge=1, le=16)
    thought: Thought = ""

    @model_validator(mode="after")
    def _target(self):
        if (self.time_range is None) == (self.ref is None):
            raise ValueError("inspect needs exactly one of time_range or ref")
        return self


class SummarizeAction(Strict):
    action: Literal["summarize"]
    time_range: TimeRange
    granularity_seconds: Granularity
    prompt: Prompt
    summary_structure: Optional[Label] = None
    thought: Thought = ""


# -- outside tools (only when configured: parse_action(text, tools=...)) -------------------------
MAX_TOOL_REFS = 8
ToolQuery = _text(400)


class AnswerWithToolsAction(AnswerAction):
    """The answer when tools are configured: ``tool_refs`` cite the tool results it rests on."""
    tool_refs: list[Ref] = Field(default_factory=list, max_length=MAX_TOOL_REFS)


class WebSearchAction(Strict):
    action: Literal["web_search"]
    query: ToolQuery
    max_results: int = Field(5, ge=1, le=10)
    thought: Thought = ""


class ImageSearchAction(Strict):
    """A crop of one frame of memory evidence, searched for outside: the middle frame of a
    memory result in the context (``ref``; never a frame named by id or time: tool text could
    have named it); ``box`` [x0, y0, x1, y1] in 0..1 of the frame's width and height (None:
    whole)."""
    action: Literal["image_search"]
    ref: Ref
    box: Optional[list[Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]]] = Field(
        None, min_length=4, max_length=4)
    query: Optional[ToolQuery] = None
    max_results: int = Field(5, ge=1, le=10)
    thought: Thought = ""

    @model_validator(mode="after")
    def _box(self):
        if self.box is not None and not (self.box[0] < self.box[2] and self.box[1] < self.box[3]):
            raise ValueError(f"box must be [x0, y0, x1, y1] with x0 < x1 and y0 < y1, got {self.box}")
        return self


TOOL_ACTIONS = {"web_search": WebSearchAction, "image_search": ImageSearchAction}


class FindEntityAction(Strict):
    """Things the detector found and tracked (entities), by class name and/or words matched
    against their colour names and the text read on them."""
    action: Literal["find_entity"]
    label: Optional[Label] = None
    query: Optional[QueryText] = None
    time_range: Optional[TimeRange] = None
    limit: int = Field(10, ge=1, le=50)
    thought: Thought = ""

    @model_validator(mode="after")
    def _something(self):
        if self.label is None and self.query is None:
            raise ValueError("find_entity needs a label, a query, or both")
        return self


class LastSeenAction(Strict):
    """Where and when something (a label, colours, text read on it or shown on screen) was
    seen last."""
    action: Literal["last_seen"]
    query: QueryText
    thought: Thought = ""


Action = Union[AnswerAction, SearchAction, InspectAction, SummarizeAction, FindEntityAction, LastSeenAction,
               WebSearchAction, ImageSearchAction]
_ACTIONS = {"answer": AnswerAction, "search": SearchAction, "inspect": InspectAction, "summarize": SummarizeAction,
            "find_entity": FindEntityAction, "last_seen": LastSeenAction}


# -- the anchor verifier's verdict and two-phase's replies ------------------------------------------
class AnchorVerdict(Strict):
    match: bool
    confidence: float = Field(ge=0.0, le=1.0)
    observed_event: str = Field(max_length=2000)
    reason: str = Field(max_length=2000)


class CoarseReply(Strict):
    """{"answer": ..., "sufficient": ...} or {"retrieve": ...}: one of them, non-empty, each
    after an optional ``think`` (OASIS's Think step: the model's short reasoning first, kept in
    the trace). ``sufficient`` (with an answer only) is the model's verdict that the present it
    was shown settles the question; left out, the "answer" key itself is that verdict (the
    protocol asks for an answer only when the present suffices). An answer with ``"sufficient":
    false`` may carry ``retrieve`` too: what to search the memory for."""
    think: Optional[str] = Field(None, max_length=2000)
    answer: Optional[str] = Field(None, min_length=1, max_length=4000)
    retrieve: Optional[str] = Field(None, min_length=1, max_length=500)
    sufficient: Optional[bool] = None


class IntentReply(Strict):
    """{"retrieve": ...}: what to search the memory for (OASIS's intent query), asked for when
    the coarse reply did not say it."""
    retrieve: str = Field(min_length=1, max_length=500)


class FineReply(Strict):
    """{"answer": ..., "sufficient": ...}: ``sufficient`` true is the model's explicit verdict
    that the retrieved memory supports the answer; left out, it counts as not sufficient."""
    answer: str = Field(min_length=1, max_length=4000)
    sufficient: Optional[bool] = None


# -- parsing -----------------------------------------------------------------------------------
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


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(map(str, err["loc"])) or "top level"
    # the message only: pydantic's "input" may be a 50k-character string
    return f"{where}: {err['msg']}"


def _show(value) -> str:
    """A short rendering of a reply's value for an error message (a container could be huge or
    deeply nested: only its type is named)."""
    if isinstance(value, (str, int, float, bool, type(None))):
        return repr(value)[:60]
    return type(value).__name__


def _object(text: str, what: str) -> dict:
    if not isinstance(text, str):
        raise ValueError(f"{what} must be text, got {type(text).__name__}")
    if len(text) > MAX_REPLY_CHARS:
        raise ValueError(f"{what} is {len(text)} characters long; at most {MAX_REPLY_CHARS}")
    try:
        return extract_json(text)
    except RecursionError:  # json.loads recurses once per nesting level: "[[[[..." overflows
        raise ValueError(f"{what} nests too deeply to be read") from None


def parse_action(text: str, tools=()) -> Action:
    """The planner's reply as one action. ``tools``: the tool actions configured ("web_search",
    "image_search"); any other tool action is invalid like an unknown one. Raises ValueError
    naming the first problem."""
    obj = _object(text, "planner reply")
    kind = obj.get("action")
    actions = {**_ACTIONS, **{t: TOOL_ACTIONS[t] for t in tools}}
    if tools:
        actions["answer"] = AnswerWithToolsAction
    model = actions.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ValueError(f"action: must be one of {sorted(actions)}, got {_show(kind)}")
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        raise ValueError(f"invalid {kind} action: {_first_error(e)}") from None


def parse_route(text: str) -> Route:
    """The router's reply. Raises ValueError naming the first problem."""
    obj = _object(text, "router reply")
    kind, name = obj.get("type"), obj.get("name")
    if kind == "final":
        model = RouteFinal
    elif kind == "tool" and name == "retrieve":
        model = RouteRetrieve
    elif kind == "tool" and name == "summarize":
        model = RouteSummarize
    elif kind == "tool":
        raise ValueError(f"name: a tool must be 'retrieve' or 'summarize', got {_show(name)}")
    else:
        raise ValueError(f"type: must be 'final' or 'tool', got {_show(kind)}")
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        raise ValueError(f"invalid {kind if kind == 'final' else name} route: {_first_error(e)}") from None


def _validated(model, obj: dict, what: str):
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        raise ValueError(f"invalid {what}: {_first_error(e)}") from None


def parse_anchor(text: str) -> AnchorVerdict:
    """The anchor verifier's verdict. Raises ValueError naming the first problem."""
    return _validated(AnchorVerdict, _object(text, "anchor verdict"), "anchor verdict")


def parse_monitor_verdict(text: str) -> AnchorVerdict:
    """A monitor check's verdict: the anchor verdict's shape (StreamMind's Monitor Worker)."""
    return _validated(AnchorVerdict, _object(text, "monitor verdict"), "monitor verdict")


def parse_coarse(text: str) -> CoarseReply:
    """Two-phase's coarse reply: an answer or a retrieval intent. Raises ValueError naming the
    first problem."""
    r = _validated(CoarseReply, _object(strip_think(text), "coarse reply"), "coarse reply")
    if r.answer is None and r.retrieve is None:
        raise ValueError('coarse reply must have one of "answer" and "retrieve"')
    if r.answer is not None and r.retrieve is not None and r.sufficient is not False:
        raise ValueError('coarse reply: "retrieve" goes with an answer only when "sufficient" is false')
    if not (r.answer or r.retrieve).strip():
        raise ValueError("coarse reply is blank")
    if r.answer is None and r.sufficient is not None:
        raise ValueError('coarse reply: "sufficient" goes with "answer" only')
    if r.think is not None and r.answer is None and r.retrieve is None:
        raise ValueError("coarse reply has only its think step")
    return r


def parse_intent(text: str) -> IntentReply:
    """The retrieval intent's reply. Raises ValueError naming the first problem."""
    r = _validated(IntentReply, _object(strip_think(text), "intent reply"), "intent reply")
    if not r.retrieve.strip():
        raise ValueError("intent reply is blank")
    return r


_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.S)


def strip_think(text):
    """A reply without the leading <think>...</think> block a reasoning model writes before its
    answer (its Think step, kept in the trace with the reply), else unchanged."""
    return _THINK.sub("", text, count=1) if isinstance(text, str) else text


def parse_fine(text: str) -> FineReply:
    """Two-phase's fine reply: the answer. Raises ValueError naming the first problem."""
    r = _validated(FineReply, _object(text, "fine reply"), "fine reply")
    if not r.answer.strip():
        raise ValueError("fine reply has a blank answer")
    return r


# -- the turn classifier's reply (sessions) --------------------------------------------------------
INTENT_KINDS = ("question", "watch", "cancel", "change")
MAX_CONDITION_CHARS = 300  # a condition the classifier writes: a short visual description


class TurnKindReply(Strict):
    """How a user turn is to be taken: answered now, watched for, a standing request cancelled or
    changed. ``condition`` (watch, change) is what the monitor will look for; ``target`` (cancel,
    change) the id of a standing request shown, "all", or None for the most recent."""
    kind: Literal["question", "watch", "cancel", "change"]
    condition: str = Field("", max_length=MAX_CONDITION_CHARS)
    target: Union[Annotated[int, Field(ge=0, le=10_000)], Literal["all"], None] = None
    repeat: bool = False

    @model_validator(mode="after")
    def _consistent(self):
        self.condition = " ".join(self.condition.split())
        if self.kind in ("watch", "change") and not self.condition:
            raise ValueError(f"a {self.kind} needs a non-empty condition")
        if self.kind in ("question", "watch") and self.target is not None:
            raise ValueError(f"a {self.kind} has no target (null)")
        if self.condition and not self.condition.isprintable():
            raise ValueError("condition holds control characters")
        return self


def parse_turn_kind(text: str) -> TurnKindReply:
    """The turn classifier's reply. Raises ValueError naming the first problem."""
    return _validated(TurnKindReply, _object(text, "turn classifier reply"), "turn classifier reply")
