"""Reasoning over the memory: the memory writer, the present (working memory), monitors, and
answering (ask.py: ``Answering``, the one body of ``ask`` and ``turn``, choosing between
two-phase coarse/fine and the agentic loop; sessions.py: the session and dialogue policy it
holds). Everything here reads the memory through a ``MemoryView`` (memory/view.py), never a
store."""
from .agent import AgenticAnswerer
from .answer import Answer
from .ask import Answering
from .sessions import TurnResult
from .turn import ModelCall, TraceEntry
from .two_phase import TwoPhaseAnswerer
from .working import WorkingMemory
from .writer import MemoryWriter, WriterStats

__all__ = ["AgenticAnswerer", "Answer", "Answering", "MemoryWriter", "ModelCall", "TraceEntry", "TurnResult",
           "TwoPhaseAnswerer", "WorkingMemory", "WriterStats"]
