"""Reasoning over the memory: the memory writer, the present (working memory, QA history), and
the two ways of answering a question (two-phase coarse/fine, the agentic loop)."""
from .agent import AgenticAnswerer
from .turn import ModelCall, TraceEntry
from .two_phase import TwoPhaseAnswerer
from .view import Answer, MemoryView
from .working import QAHistory, WorkingMemory
from .writer import MemoryWriter, WriterStats

__all__ = ["AgenticAnswerer", "Answer", "MemoryView", "MemoryWriter", "ModelCall", "QAHistory", "TraceEntry",
           "TwoPhaseAnswerer", "WorkingMemory", "WriterStats"]
