"""Outside tools of the agentic planner (``tools``, ``tools.web_search``, ``tools.image_search``)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import Section


def _tool_url(v: str | None, name: str) -> str | None:
    """An http(s) URL with a host, or None."""
    if v is None:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{name} must be an http:// or https:// URL with a host, got {v[:100]!r}")
    return v


class _ToolProvider(Section):
    """What every outside tool's provider has: its url (None: off), a timeout and limits."""

    url: str | None = Field(None, description="the provider's URL (see the tool); None = the tool is off")
    timeout_s: float = Field(5.0, gt=0, le=120, description="one search, connect to last byte")
    max_results: int = Field(5, ge=1, le=20, description="results shown to the planner per search")
    max_chars: int = Field(500, ge=20, le=5000, description="characters kept of each result's text")

    @model_validator(mode="after")
    def _url(self):
        _tool_url(self.url, f"tools.{self._name}.url")
        return self


class WebSearchConfig(_ToolProvider):
    """Text web search for the agentic planner (tools/providers.py). ``url``: a SearXNG
    instance's base URL (queries go to {url}/search?q=...&format=json), or with kind "json" the
    endpoint itself ({url}?q=...&max_results=N)."""

    _name = "web_search"
    kind: Literal["searxng", "json"] = Field("searxng", description="the endpoint's kind; both reply with "
                                             '{"results": [{"title", "url", "content"}]}')


class ImageSearchConfig(_ToolProvider):
    """Image search for the agentic planner: a crop of a frame in view is POSTed (multipart
    field ``image``, JPEG) to ``url`` (tools/providers.py)."""

    _name = "image_search"
    timeout_s: float = Field(10.0, gt=0, le=120, description="one search, connect to last byte")
    max_side: int = Field(768, ge=32, le=4096, description="the crop is downscaled to fit this square before upload")


class ToolsConfig(Section):
    """Outside tools the agentic planner may call (off unless a url is set): their results are
    untrusted data, shown quoted and cited apart from the memory's evidence."""

    web_search: WebSearchConfig = WebSearchConfig()
    image_search: ImageSearchConfig = ImageSearchConfig()
    cache_size: int = Field(256, ge=0, le=100_000, description="results of this many distinct queries are kept "
                                                              "in memory (LRU); 0 = no cache")
    max_calls: int = Field(4, ge=1, le=16, description="tool calls per answer at most")
    max_response_bytes: int = Field(1 << 20, ge=1024, le=64 << 20, description="a provider's reply larger than "
                                                                               "this is refused")

    @property
    def enabled(self) -> bool:
        return bool(self.web_search.url or self.image_search.url)
