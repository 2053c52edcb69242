"""The tools one engine offers its planner: at most one text web search and one image search,
each behind an LRU cache keyed by the query (an image by its bytes' hash) and by who asked
(``scope``: the asker and the cameras its question saw), so asking the same thing twice costs
one call, and a ``cached`` reply never tells one asker what another searched for. Only
successful replies are cached: a provider that failed is asked again next time.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import replace

from ..errors import VamError
from .providers import HttpImageSearch, ImageSearch, JsonSearch, Limits, SearxngSearch, TextSearch, ToolReply


class ResultCache:
    """A thread-safe LRU of ``size`` replies (0: nothing kept)."""

    def __init__(self, size: int):
        self.size = int(size)
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key) -> ToolReply | None:
        with self._lock:
            reply = self._items.get(key)
            if reply is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return replace(reply, cached=True, notes=list(reply.notes))

    def put(self, key, reply: ToolReply) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._items[key] = reply
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


class Toolbox:
    """``web``: a TextSearch or None; ``image``: an ImageSearch or None; ``max_calls``: tool
    calls one answer may make (the planner's loop counts them)."""

    def __init__(self, web: TextSearch | None = None, image: ImageSearch | None = None, *, cache_size: int = 256,
                 max_calls: int = 4):
        if web is None and image is None:
            raise VamError("a toolbox needs a web search or an image search provider")
        if not (isinstance(max_calls, int) and 1 <= max_calls <= 16):
            raise VamError(f"tools: max_calls must be an integer in 1..16, got {max_calls!r}")
        self.web = web
        self.image = image
        self.max_calls = max_calls
        self.cache = ResultCache(cache_size)

    @property
    def actions(self) -> tuple[str, ...]:
        """The planner actions these tools add."""
        return (("web_search",) if self.web else ()) + (("image_search",) if self.image else ())

    def web_search(self, query: str, max_results: int, scope: tuple = ()) -> ToolReply:
        """``scope``: who asks (the cache keeps each scope's replies apart)."""
        key = ("web", tuple(scope), self.web.name, query, max_results)
        reply = self.cache.get(key)
        if reply is None:
            reply = self.web.search(query, max_results)
            self.cache.put(key, reply)
        return reply

    def image_search(self, jpeg: bytes, query: str | None, max_results: int, scope: tuple = ()) -> ToolReply:
        key = ("image", tuple(scope), self.image.name, hashlib.sha256(jpeg).hexdigest(), query or "", max_results)
        reply = self.cache.get(key)
        if reply is None:
            reply = self.image.search(jpeg, query, max_results)
            self.cache.put(key, reply)
        return reply

    @property
    def image_max_side(self) -> int:
        return getattr(self.image, "max_side", 768)


def make_toolbox(cfg) -> Toolbox | None:
    """The toolbox of a ``ToolsConfig`` (None when no tool is configured)."""
    if not cfg.enabled:
        return None
    web = image = None
    w = cfg.web_search
    if w.url:
        limits = Limits(w.timeout_s, w.max_results, w.max_chars, cfg.max_response_bytes)
        web = SearxngSearch(w.url, limits) if w.kind == "searxng" else JsonSearch(w.url, limits)
    i = cfg.image_search
    if i.url:
        image = HttpImageSearch(i.url, Limits(i.timeout_s, i.max_results, i.max_chars, cfg.max_response_bytes),
                                max_side=i.max_side)
    return Toolbox(web, image, cache_size=cfg.cache_size, max_calls=cfg.max_calls)
