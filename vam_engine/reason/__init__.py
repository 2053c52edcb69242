"""Reasoning over the memory: the memory writer, the present (working memory), monitors, and
answering a question (ask.py: the one ``ask`` body, choosing between two-phase coarse/fine and
the agentic loop). Everything here reads the memory through a ``MemoryView`` (memory/view.py),
never a store."""
from .agent import AgenticAnswerer
from .answer import Answer
from .turn import ModelCall, TraceEntry
from .two_phase import TwoPhaseAnswerer
from .working import WorkingMemory
from .writer import MemoryWriter, WriterStats

__all__ = ["AgenticAnswerer", "Answer", "MemoryWriter", "ModelCall", "TraceEntry", "TwoPhaseAnswerer",
           "WorkingMemory", "WriterStats"]
