"""A body that talks to an OpenAI-compatible ``/chat/completions`` endpoint (vLLM, SGLang,
OpenRouter, DashScope, ...).

Messages go out exactly in the order given, with nothing added: servers with prefix caching
(vLLM, SGLang) reuse a prefix only when the bytes match, so a timestamp or request id in the
prompt would defeat them.

Failures:
- 429, 5xx, timeouts and dropped connections are retried with exponential backoff and jitter
  (``Retry-After`` seconds honoured, capped at ``backoff_max_s``); when retries run out the
  error is ``retryable`` (the server may recover later).
- A server that cannot be reached at all (connection refused, unknown host) gets one quick
  retry, then fails with ``unreachable`` (and ``retryable``: it may be started later): backing
  off for a minute in front of a stopped server only delays the error.
- 401/403 and other 4xx fail at once, not retryable: sending the same request again cannot help.
- A 200 whose body is not JSON or has no ``choices[0].message.content`` is retried once (a
  proxy can truncate a body); a second malformed body fails, not retryable: the server speaks
  something other than this API.
- With ``server_priority`` set, a 400 that mentions priority fails at once with what to change
  (vLLM refuses a non-zero priority unless started with ``--scheduling-policy priority``).
- A 400 that mentions video when a request carried a clip as video: the request is sent again
  with the clip's frames as images, each after a ``t=12.5s`` text part, and later requests
  send clips that way from the start.
"""
from __future__ import annotations

import base64
import json
import random
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Sequence

import httpx

from .base import BACKEND, FRONTEND, Clip, Image, LLMError, LLMRequest, LLMResponse
from .images import clip_to_mp4_data_uri, to_jpeg_data_uri

_EXCERPT = 300  # characters of an error body quoted in an LLMError
_CONNECT_RETRY_S = 0.25  # the one retry of a refused connection: a server restarting right now


# The ``priority`` body field per server, by request class (``LLMRequest.priority_class``).
# vLLM (``--scheduling-policy priority``): the lower value is served first (its protocol:
# "lower means earlier handling"; default 0, so other clients' requests rank with our frontend).
# SGLang (``--enable-priority-scheduling``): the higher value is served first by default; it
# preempts a running request only for a difference above --priority-scheduling-preemption-threshold
# (10 by default), hence the wide gap. An SGLang started with --schedule-low-priority-values-first
# follows vLLM's direction: use "vllm" for it.
SERVER_PRIORITY = {
    "vllm": {FRONTEND: 0, BACKEND: 1},
    "sglang": {FRONTEND: 100, BACKEND: 0},
}


class _VideoRejected(Exception):
    """The server refused a video part: send the clip as frames instead."""


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "..."


def _retry_after(resp: httpx.Response) -> float | None:
    """``Retry-After`` in seconds, or None when absent or an HTTP date (backoff applies)."""
    value = resp.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


class OpenAIChat:
    def __init__(self, url: str, model: str, *, api_key: str | None = None, timeout_s: float = 120,
                 max_retries: int = 4, concurrency: int = 8, max_image_side: int = 1280,
                 max_image_bytes: int = 5 << 20, backoff_base_s: float = 0.5, backoff_max_s: float = 30,
                 video: bool = True, api_key_env: str | None = None, server_priority: str | None = None):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"OpenAI-compatible server URL must start with http:// or https://, got {url!r}")
        if not model:
            raise ValueError(f"model name is required for {url} (the server routes by it), got {model!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if server_priority is not None and server_priority not in SERVER_PRIORITY:
            raise ValueError(f"server_priority must be one of {sorted(SERVER_PRIORITY)} or None, "
                             f"got {server_priority!r}")
        self.name = f"openai:{url}#{model}"
        self.url = url
        self.model = model
        base = url.rstrip("/")
        # Accept the full endpoint too: people paste what their server's docs show.
        self.endpoint = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.concurrency = concurrency
        self.max_image_side = max_image_side
        self.max_image_bytes = max_image_bytes
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.api_key_env = api_key_env
        self.server_priority = server_priority
        self._video = video  # cleared for good when the server rejects a video part
        self._lock = threading.Lock()
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency))
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="vam-openai")
        self._closed = False

    # -- request body ---------------------------------------------------------------------

    def _image_part(self, img: Image) -> dict:
        uri = to_jpeg_data_uri(img, self.max_image_side, self.max_image_bytes)
        return {"type": "image_url", "image_url": {"url": uri}}

    def _content(self, parts: list, video: bool) -> str | list:
        # A lone text part goes as a plain string: some chat templates accept only that for
        # system messages, and it is the same prompt either way.
        if len(parts) == 1 and isinstance(parts[0], str):
            return parts[0]
        out = []
        for p in parts:
            if isinstance(p, str):
                out.append({"type": "text", "text": p})
            elif isinstance(p, Image):
                out.append(self._image_part(p))
            elif isinstance(p, Clip) and video:
                uri = ("data:video/mp4;base64," + base64.b64encode(p.mp4).decode("ascii") if p.mp4 is not None
                       else clip_to_mp4_data_uri(p, max_side=self.max_image_side))
                out.append({"type": "video_url", "video_url": {"url": uri}})
            elif isinstance(p, Clip):
                for frame, t in zip(p.frames, p.times):
                    out.append({"type": "text", "text": f"t={float(t):.1f}s"})
                    out.append(self._image_part(frame))
            else:  # Message validates its parts; this guards requests built around it
                raise TypeError(f"a message part must be str, Image or Clip, got {type(p).__name__}")
        return out

    def _body(self, request: LLMRequest, video: bool) -> bytes:
        s = request.sampling
        body = {
            "model": self.model,
            "messages": [{"role": m.role, "content": self._content(m.content, video)}
                         for m in request.messages],
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
        }
        if s.seed is not None:
            body["seed"] = s.seed
        if s.json_object:
            body["response_format"] = {"type": "json_object"}
        if self.server_priority is not None:
            body["priority"] = SERVER_PRIORITY[self.server_priority][request.priority_class]
        return json.dumps(body).encode()

    # -- one request ----------------------------------------------------------------------

    def _error(self, problem: str, retryable: bool, request: LLMRequest) -> LLMError:
        where = f" (request {request.tag!r})" if request.tag else ""
        return LLMError(self.name, problem + where, retryable=retryable)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_max_s)
        # Half fixed, half random: spreads out workers that failed together.
        cap = min(self.backoff_max_s, self.backoff_base_s * (2 ** attempt))
        return cap / 2 + random.uniform(0, cap / 2)

    def _parse(self, resp: httpx.Response) -> LLMResponse:
        """The response of a 200, or ValueError saying what is malformed."""
        try:
            data = resp.json()
        except ValueError:
            raise ValueError(f"body is not JSON: {_excerpt(resp.text)!r}") from None
        try:
            choice = data["choices"][0]
            text = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ValueError(f"no choices[0].message.content in {_excerpt(resp.text)!r}") from None
        if not isinstance(text, str):
            raise ValueError(f"choices[0].message.content is {type(text).__name__}, not a string")
        usage = data.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return LLMResponse(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=int(details.get("cached_tokens") or 0),
            finish_reason=choice.get("finish_reason") or "stop")

    def _post(self, request: LLMRequest, body: bytes, sent_video: bool) -> LLMResponse:
        """Send one body, retrying what may pass later; raises LLMError or _VideoRejected."""
        attempt = 0
        malformed_once = False
        while True:
            retry_after = None
            try:
                resp = self._client.post(self.endpoint, content=body)
            except httpx.TimeoutException:
                problem = f"no reply within {self.timeout_s:g} s"
            except httpx.ConnectError as e:  # refused, unknown host: nothing listens there
                if attempt >= min(1, self.max_retries):
                    raise LLMError(self.name, f"cannot reach {self.endpoint}: {e} (is the server running at "
                                              f"{self.url}?)" + (f" (request {request.tag!r})" if request.tag else ""),
                                   retryable=True, unreachable=True) from None
                time.sleep(_CONNECT_RETRY_S)
                attempt += 1
                continue
            except httpx.TransportError as e:
                problem = f"cannot reach {self.endpoint}: {type(e).__name__}: {e}"
            else:
                status = resp.status_code
                if status == 200:
                    try:
                        return self._parse(resp)
                    except ValueError as e:
                        if malformed_once or attempt >= self.max_retries:
                            raise self._error(f"malformed response: {e}", False, request) from None
                        malformed_once = True
                        problem = f"malformed response: {e}"
                elif status in (401, 403):
                    key = f"${self.api_key_env}" if self.api_key_env else "the api_key given"
                    raise self._error(f"authentication failed (HTTP {status}): check the API key in {key}",
                                      False, request)
                elif status == 400 and self.server_priority is not None and "priority" in resp.text.lower():
                    raise self._error(f"the server refused the request's priority (llm.server_priority "
                                      f"{self.server_priority!r}): start vLLM with --scheduling-policy priority "
                                      f"(SGLang: --enable-priority-scheduling), or set llm.server_priority to "
                                      f"null; HTTP 400: {_excerpt(resp.text)}", False, request)
                elif status == 400 and sent_video and "video" in resp.text.lower():
                    raise _VideoRejected()
                elif status == 429 or status >= 500:
                    problem = f"HTTP {status}: {_excerpt(resp.text)}"
                    retry_after = _retry_after(resp)
                else:
                    raise self._error(f"HTTP {status} from {self.endpoint}: {_excerpt(resp.text)}",
                                      False, request)
            if attempt >= self.max_retries:
                raise self._error(f"gave up after {attempt + 1} attempts; last: {problem}", True, request)
            time.sleep(self._backoff(attempt, retry_after))
            attempt += 1

    def _one(self, request: LLMRequest) -> LLMResponse:
        start = time.perf_counter()
        has_clip = any(isinstance(p, Clip) for m in request.messages for p in m.content)
        video = has_clip and self._video
        try:
            body = self._body(request, video)
        except (ValueError, TypeError) as e:  # an unreadable or unencodable image or clip
            raise self._error(f"cannot build the request: {e}", False, request) from None
        try:
            out = self._post(request, body, video)
        except _VideoRejected:
            with self._lock:
                self._video = False
            try:
                body = self._body(request, False)
            except (ValueError, TypeError) as e:
                raise self._error(f"cannot build the request: {e}", False, request) from None
            out = self._post(request, body, False)
        out.total_s = time.perf_counter() - start  # encoding, queueing for a connection, retries
        return out

    # -- the LLM protocol -----------------------------------------------------------------

    def generate(self, requests: Sequence[LLMRequest]) -> list[LLMResponse]:
        """One response per request, in order; requests run concurrently (``concurrency`` at
        most). If any fails, requests not yet started are dropped and its error is raised
        (a non-retryable error over a retryable one)."""
        if self._closed:
            raise LLMError(self.name, "generate() called after close()")
        futures = [self._pool.submit(self._one, r) for r in requests]
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        if pending:  # something failed: do not send the rest of a batch that will be retried
            for f in pending:
                f.cancel()
            wait(pending)
        errors = [f.exception() for f in futures if not f.cancelled() and f.exception() is not None]
        if errors:
            fatal = [e for e in errors if not (isinstance(e, LLMError) and e.retryable)]
            raise (fatal or errors)[0]
        return [f.result() for f in futures]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._client.close()
