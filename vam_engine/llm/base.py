"""The MLLM contract every body implements.

A request is a list of chat messages whose content is a sequence of parts: text, images and
optionally a short clip. A body takes a batch of requests and returns one response per request,
in order, with token counts and timings. Bodies: ``LocalQwenVL`` (transformers, prefix KV cache),
``OpenAIChat`` (an OpenAI-compatible server), ``ScriptedLLM`` (tests and benchmarks).

Prefix reuse is automatic and content-addressed: a body that caches prefixes reuses the longest
cached prefix of a request's rendered prompt (images included, by content hash), so callers only
keep their prompts prefix-stable (fixed system prompt first, stable ordering, new material last).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Protocol, Sequence, Union

import numpy as np

from ..errors import VamError


class LLMError(VamError):
    """A model call failed in a way the caller can act on (auth, malformed reply, unreachable)."""

    def __init__(self, backend: str, problem: str, *, retryable: bool = False, unreachable: bool = False):
        self.backend = backend
        self.problem = problem
        self.retryable = retryable
        # no server answers at that address (connection refused, unknown host): a later try may
        # pass (retryable), but a caller waiting on an answer should fail now
        self.unreachable = unreachable
        super().__init__(f"{backend}: {problem}")


@dataclass(frozen=True)
class Image:
    """An RGB image: an H x W x 3 uint8 array, or a path to an image file (read when needed)."""
    data: object  # np.ndarray | str | os.PathLike

    def array(self) -> np.ndarray:
        if isinstance(self.data, np.ndarray):
            return self.data
        from PIL import Image as PILImage
        with PILImage.open(self.data) as im:
            return np.asarray(im.convert("RGB"))

    def digest(self) -> str:
        """Content hash (of the pixels, so a path and the same array hash alike)."""
        a = np.ascontiguousarray(self.array())
        return hashlib.blake2b(a.tobytes() + repr(a.shape).encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class Clip:
    """A short clip as frames with their times (seconds). Bodies that cannot take video send
    the frames as images, each preceded by its time. ``mp4``: the clip itself (H.264, with AAC
    where there was sound), sent as the video by a body that takes video; the frames are then
    its fallback (its keyframes) for a server that refuses video."""
    frames: tuple  # of Image
    times: tuple   # of float, one per frame
    mp4: bytes | None = field(default=None, repr=False)

    def __post_init__(self):
        if len(self.frames) != len(self.times) or not self.frames:
            raise ValueError(f"a clip needs one time per frame and at least one frame, got "
                             f"{len(self.frames)} frames and {len(self.times)} times")


Part = Union[str, Image, Clip]


@dataclass
class Message:
    role: str  # "system" | "user" | "assistant"
    content: list  # of Part

    def __post_init__(self):
        if self.role not in ("system", "user", "assistant"):
            raise ValueError(f"message role must be system, user or assistant, got {self.role!r}")
        if isinstance(self.content, (str, Image, Clip)):
            self.content = [self.content]
        for p in self.content:
            if not isinstance(p, (str, Image, Clip)):
                raise TypeError(f"a message part must be str, Image or Clip, got {type(p).__name__}")


@dataclass
class Sampling:
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int | None = None
    json_object: bool = False  # ask the server for a JSON object where it supports that


# The two priority classes (docs/design.md section 2, StreamMind): frontend work is latency-critical
# (answers, monitor checks) and never queues behind backend work (event documents, forest
# merges, summaries, QA-summary rewrites), which builds memory asynchronously and may lag.
FRONTEND = "frontend"
BACKEND = "backend"
PRIORITIES = (FRONTEND, BACKEND)
# Roles whose requests are backend work; every other role (and an untagged request) is frontend,
# so a new caller is never slowed down by default.
BACKEND_ROLES = frozenset({"event_writer", "summary_writer", "node_merger", "qa_summarizer"})


def role_of(tag: str) -> str:
    """The role a request tag names: a repair request ("planner_repair") is its role's."""
    return tag.removesuffix("_repair")


@dataclass
class LLMRequest:
    messages: list  # of Message
    sampling: Sampling = field(default_factory=Sampling)
    tag: str = ""  # what the request is for (role name); recorded in timings and by the scripted body
    priority: str | None = None  # FRONTEND or BACKEND; None = from the role (BACKEND_ROLES)

    def __post_init__(self):
        if self.priority is not None and self.priority not in PRIORITIES:
            raise ValueError(f"request priority must be {FRONTEND!r}, {BACKEND!r} or None, got {self.priority!r}")

    @property
    def priority_class(self) -> str:
        """The class the scheduler serves this request in: the explicit priority, else its role's."""
        if self.priority is not None:
            return self.priority
        return BACKEND if role_of(self.tag) in BACKEND_ROLES else FRONTEND


@dataclass
class LLMResponse:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0      # prompt tokens served from a prefix cache (not prefilled again)
    prefill_s: float = 0.0
    decode_s: float = 0.0
    total_s: float = 0.0
    finish_reason: str = "stop"  # "stop" | "length"


class LLM(Protocol):
    name: str  # e.g. "local:/models/qwen2-vl-2b" or "openai:http://127.0.0.1:8000/v1#model"

    def generate(self, requests: Sequence[LLMRequest]) -> list[LLMResponse]:
        """One response per request, in order. Raises LLMError when the batch cannot be served;
        ``retryable`` says whether trying again later may succeed."""
        ...

    def close(self) -> None: ...
