"""Outside tools for the agentic planner (off by default): text web search (a SearXNG
instance, or any endpoint returning the documented JSON shape) and image search (a crop of a
frame POSTed to an endpoint). Each provider has a timeout, result limits and a cache; every
result is untrusted text (tools/results.py). The planner's side (which frame may be searched,
how results are shown and cited) is reason/tool_actions.py.

A layer beside ``llm``: clients of outside services that know nothing of the memory."""
from .providers import HttpImageSearch, ImageSearch, JsonSearch, Limits, SearxngSearch, TextSearch, ToolReply
from .results import ToolError, ToolResult, clean_text
from .toolbox import Toolbox, make_toolbox

__all__ = ["HttpImageSearch", "ImageSearch", "JsonSearch", "Limits", "SearxngSearch", "TextSearch", "ToolError",
           "ToolReply", "ToolResult", "Toolbox", "clean_text", "make_toolbox"]
