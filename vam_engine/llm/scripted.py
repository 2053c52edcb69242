"""A body that replays scripted replies: for tests, and for benchmarks that need an LLM's
latency without a model.

Token counts are whitespace-separated words (prompt: the words of every text part, images and
clips count nothing; completion: the words of the reply) - enough to exercise accounting, not
to match any tokenizer.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Sequence, Union

from .base import LLMError, LLMRequest, LLMResponse

Replies = Union[Sequence[str], Callable[[LLMRequest], str]]


def _words(request: LLMRequest) -> int:
    return sum(len(p.split()) for m in request.messages for p in m.content if isinstance(p, str))


class ScriptedLLM:
    """Replies in order from a list (``LLMError`` once it runs out), or from ``replies(request)``.

    ``fail(request)`` may return an exception to raise instead of replying (a failed request
    takes no reply from the list). ``delay_s`` is slept once per ``generate`` call, like a
    batch's latency. Every request is recorded in ``sent``, failed ones too."""

    def __init__(self, replies: Replies, *, name: str = "scripted", delay_s: float = 0.0,
                 fail: Callable[[LLMRequest], BaseException | None] | None = None):
        if isinstance(replies, str) or not (callable(replies) or isinstance(replies, Sequence)):
            raise TypeError(f"replies must be a list of str or a callable(request) -> str, "
                            f"got {type(replies).__name__}")
        if delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {delay_s}")
        self.name = name
        self.delay_s = delay_s
        self.sent: list[LLMRequest] = []
        self._replies = replies if callable(replies) else list(replies)
        self._next = 0
        self._fail = fail
        self._lock = threading.Lock()  # generate may be called from several threads at once

    def _reply(self, request: LLMRequest) -> str:
        if callable(self._replies):
            text = self._replies(request)
        else:
            with self._lock:
                if self._next >= len(self._replies):
                    raise LLMError(self.name, "no scripted reply left")
                text = self._replies[self._next]
                self._next += 1
        if not isinstance(text, str):
            raise TypeError(f"{self.name}: a scripted reply must be a str, got {type(text).__name__}")
        return text

    def generate(self, requests: Sequence[LLMRequest]) -> list[LLMResponse]:
        start = time.perf_counter()
        with self._lock:
            self.sent.extend(requests)
        if self.delay_s:
            time.sleep(self.delay_s)
        out = []
        for request in requests:
            if self._fail is not None:
                err = self._fail(request)
                if err is not None:
                    raise err
            text = self._reply(request)
            out.append(LLMResponse(text=text, prompt_tokens=_words(request),
                                   completion_tokens=len(text.split()), cached_tokens=0,
                                   total_s=time.perf_counter() - start, finish_reason="stop"))
        return out

    def close(self) -> None:
        pass
