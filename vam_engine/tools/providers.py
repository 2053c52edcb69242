"""Tool providers: each one small contract, ``search(...) -> ToolReply``.

Text web search (``TextSearch``): ``search(query, max_results)``.
- ``SearxngSearch``: a SearXNG instance's JSON API, ``GET {url}/search?q=...&format=json``
  (the instance must allow the json format: ``search.formats`` in its settings.yml).
- ``JsonSearch``: any endpoint that answers ``GET {url}?q=...&max_results=N`` with the
  documented shape (tools/results.py).

Image search (``ImageSearch``): ``search(jpeg, query, max_results)``.
- ``HttpImageSearch``: ``POST {url}`` as multipart/form-data with the fields ``image`` (the
  crop, image/jpeg, filename crop.jpg), ``q`` (an optional text hint, may be empty) and
  ``max_results``; the reply in the documented shape.

Every provider has a timeout (the whole exchange), a result count and a size limit per
result, and a reply size limit; what it returns is cleaned and cut (tools/results.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlencode

from .http import fetch, multipart
from .results import ToolResult, parse_results


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 5.0
    max_results: int = 5
    max_chars: int = 500
    max_response_bytes: int = 1 << 20


@dataclass
class ToolReply:
    results: list[ToolResult]
    notes: list[str] = field(default_factory=list)  # items skipped, the cache's answer
    cached: bool = False


class TextSearch(Protocol):
    name: str
    limits: Limits

    def search(self, query: str, max_results: int) -> ToolReply: ...


class ImageSearch(Protocol):
    name: str
    limits: Limits

    def search(self, jpeg: bytes, query: str | None, max_results: int) -> ToolReply: ...


def _reply(data: bytes, limits: Limits, max_results: int, what: str) -> ToolReply:
    results, notes = parse_results(data, max_results=min(max_results, limits.max_results),
                                   max_chars=limits.max_chars, what=what)
    return ToolReply(results, notes)


class SearxngSearch:
    name = "searxng"

    def __init__(self, url: str, limits: Limits = Limits()):
        self.url = url.rstrip("/")
        self.limits = limits

    def search(self, query: str, max_results: int) -> ToolReply:
        url = f"{self.url}/search?" + urlencode({"q": query, "format": "json"})
        data = fetch("GET", url, timeout_s=self.limits.timeout_s, max_bytes=self.limits.max_response_bytes,
                     what=f"web search ({self.name})")
        return _reply(data, self.limits, max_results, f"web search ({self.name})")


class JsonSearch:
    name = "json"

    def __init__(self, url: str, limits: Limits = Limits()):
        self.url = url
        self.limits = limits

    def search(self, query: str, max_results: int) -> ToolReply:
        n = min(max_results, self.limits.max_results)
        sep = "&" if "?" in self.url else "?"
        url = self.url + sep + urlencode({"q": query, "max_results": n})
        data = fetch("GET", url, timeout_s=self.limits.timeout_s, max_bytes=self.limits.max_response_bytes,
                     what=f"web search ({self.name})")
        return _reply(data, self.limits, n, f"web search ({self.name})")


class HttpImageSearch:
    """``max_side``: the crop is downscaled to fit this square before upload (the caller
    makes the crop: reason/tool_actions.py)."""

    name = "http"

    def __init__(self, url: str, limits: Limits = Limits(timeout_s=10.0), *, max_side: int = 768):
        self.url = url
        self.limits = limits
        self.max_side = int(max_side)

    def search(self, jpeg: bytes, query: str | None, max_results: int) -> ToolReply:
        n = min(max_results, self.limits.max_results)
        body, ctype = multipart({"q": query or "", "max_results": str(n)},
                                {"image": ("crop.jpg", "image/jpeg", jpeg)})
        data = fetch("POST", self.url, timeout_s=self.limits.timeout_s, max_bytes=self.limits.max_response_bytes,
                     body=body, content_type=ctype, what="image search")
        return _reply(data, self.limits, n, "image search")
