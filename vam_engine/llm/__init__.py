"""Multimodal LLM bodies behind one contract (see ``base``): the local Qwen-VL body, OpenAI-compatible
servers, a scripted body for tests; ``spec`` reads the CLI's model specs, ``factory`` builds the
configured body behind the two-tier ``scheduler``; ``roles`` sends roles to their own models."""
from __future__ import annotations

from .base import LLM, Clip, Image, LLMError, LLMRequest, LLMResponse, Message, Part, Sampling
from .openai_http import OpenAIChat
from .factory import make_llm
from .roles import RoleRouter
from .scheduler import PriorityScheduler, SchedulerPolicy, schedule_http, schedule_local
from .scripted import ScriptedLLM
from .spec import describe_llm, parse_llm_spec

__all__ = ["LLM", "Clip", "Image", "LLMError", "LLMRequest", "LLMResponse", "Message", "Part",
           "Sampling", "OpenAIChat", "PriorityScheduler", "RoleRouter", "SchedulerPolicy", "ScriptedLLM",
           "describe_llm", "make_llm", "parse_llm_spec"]
