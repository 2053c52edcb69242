"""What every tool provider returns, and how a reply becomes it.

The documented JSON shape (a SearXNG instance's ``format=json`` reply has it; any HTTP endpoint
that returns it can be a provider)::

    {"results": [{"title": "Ada Lovelace - Wikipedia",
                  "url": "https://en.wikipedia.org/wiki/Ada_Lovelace",
                  "content": "Augusta Ada King, Countess of Lovelace, was an English mathematician ..."},
                 ...]}

``results`` is a list, best first; each item an object with ``title``, ``url`` and ``content``
(strings; any may be missing or empty, but not all three); other keys, of the reply and of
each item, are ignored. A reply is untrusted: it is parsed only as this shape, every string
loses its control and formatting characters (bidi overrides, zero-width marks, escape
sequences) and is cut to the configured length, and items beyond the configured count are
dropped. A reply that is not JSON, or has no ``results`` list, is a ToolError (the planner is
told the search failed, the answer goes on).
"""
from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass

from ..errors import VamError

MAX_URL_CHARS = 500
MAX_TITLE_CHARS = 200


class ToolError(VamError):
    """A tool call failed: unreachable, too slow, too large, or a reply of the wrong shape."""


@dataclass(frozen=True)
class ToolResult:
    """One result of a search, cleaned and cut: plain text without control characters."""

    title: str
    url: str
    content: str


def clean_text(value, max_chars: int) -> str:
    """``value`` as one line of printable text: control and format characters removed (line
    breaks and tabs become spaces), runs of spaces collapsed, cut to ``max_chars`` (an ellipsis
    marks a cut). Anything not a string is the empty string."""
    if not isinstance(value, str):
        return ""
    out = []
    for ch in value[: max_chars * 4]:  # a bound on the work: the cut below keeps far less
        cat = unicodedata.category(ch)
        if ch in "\t\n\r\f\v" or cat == "Zl" or cat == "Zp":
            out.append(" ")
        elif cat[0] != "C":  # Cc control, Cf format (bidi, zero-width), Co, Cs, Cn
            out.append(ch)
    text = " ".join("".join(out).split())
    return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "\u2026"


def parse_results(data: bytes, *, max_results: int, max_chars: int, what: str) -> tuple[list[ToolResult], list[str]]:
    """The results of a reply in the documented shape, and notes on items skipped. ToolError
    naming ``what`` when the reply is not that shape at all."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ToolError(f"{what}: the reply is not JSON ({type(e).__name__}: {str(e)[:80]})") from None
    items = obj.get("results") if isinstance(obj, dict) else None
    if not isinstance(items, list):
        raise ToolError(f"{what}: the reply has no \"results\" list (got {type(obj).__name__}"
                        + (f" with keys {sorted(map(str, obj))[:8]}" if isinstance(obj, dict) else "") + ")")
    out, notes = [], []
    for i, item in enumerate(items):
        if len(out) >= max_results:
            break
        if not isinstance(item, dict):
            notes.append(f"result {i} is a {type(item).__name__}, not an object: skipped")
            continue
        r = ToolResult(clean_text(item.get("title"), MAX_TITLE_CHARS), clean_text(item.get("url"), MAX_URL_CHARS),
                       clean_text(item.get("content"), max_chars))
        if not (r.title or r.url or r.content):
            notes.append(f"result {i} has no title, url or content: skipped")
            continue
        out.append(r)
    return out, notes
