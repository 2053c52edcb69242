"""Multimodal LLM bodies behind one contract (see ``base``): the local Qwen-VL body, OpenAI-compatible
servers, a scripted body for tests; ``spec`` reads the CLI's model specs, ``factory`` builds the
configured body behind the two-tier ``scheduler``; ``roles`` sends roles to their own models.

What the reasoning layer asks models with is here too: ``prompts`` (exported as a module: each
role's prompt builder, read qualified, ``prompts.route(...)``, as its short names need) and, from
``schemas``, the replies' records and their parsers."""
from __future__ import annotations

from . import prompts
from .base import LLM, Clip, Image, LLMError, LLMRequest, LLMResponse, Message, Part, Sampling
from .openai_http import OpenAIChat
from .factory import make_llm
from .roles import RoleRouter
from .scheduler import PriorityScheduler, SchedulerPolicy, schedule_http, schedule_local
from .schemas import (INTENT_KINDS, MAX_CONDITION_CHARS, TOOL_ACTIONS, AnswerAction, FindEntityAction,
                      ImageSearchAction, InspectAction, LastSeenAction, RouteFinal, RouteRetrieve, SearchAction,
                      TimeRange, WebSearchAction, parse_action, parse_anchor, parse_coarse, parse_fine, parse_intent,
                      parse_monitor_verdict, parse_route, parse_turn_kind)
from .scripted import ScriptedLLM
from .spec import describe_llm, parse_llm_spec

__all__ = ["LLM", "Clip", "Image", "LLMError", "LLMRequest", "LLMResponse", "Message", "Part",
           "Sampling", "OpenAIChat", "PriorityScheduler", "RoleRouter", "SchedulerPolicy", "ScriptedLLM",
           "describe_llm", "make_llm", "parse_llm_spec", "prompts",
           "INTENT_KINDS", "MAX_CONDITION_CHARS", "TOOL_ACTIONS", "AnswerAction", "FindEntityAction",
           "ImageSearchAction", "InspectAction", "LastSeenAction", "RouteFinal", "RouteRetrieve", "SearchAction",
           "TimeRange", "WebSearchAction", "parse_action", "parse_anchor", "parse_coarse", "parse_fine",
           "parse_intent", "parse_monitor_verdict", "parse_route", "parse_turn_kind"]
