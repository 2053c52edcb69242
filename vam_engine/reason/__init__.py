"""Reasoning over the memory: the memory writer, the present (working memory), monitors, and
answering (ask.py: ``Answering``, the one body of ``ask`` and ``turn``, choosing between
two-phase coarse/fine and the agentic loop; sessions.py: the session and dialogue policy it
holds). Everything here reads the memory through a ``MemoryView`` (memory/view.py), never a
store."""
from .agent import AgenticAnswerer
from .answer import Answer, ToolCitation
from .ask import Answering
from .monitor import AlertHub, AlertSubscription, MonitorStats, MonitorWorker
from .sessions import TurnResult
from .turn import ModelCall, TraceEntry
from .two_phase import TwoPhaseAnswerer
from .working import WorkingMemory, present_side
from .writer import MemoryWriter, WriterMemory, WriterStats

__all__ = ["AgenticAnswerer", "Answer", "ToolCitation", "Answering", "AlertHub", "AlertSubscription", "MonitorStats",
           "MonitorWorker", "TurnResult", "ModelCall", "TraceEntry", "TwoPhaseAnswerer", "WorkingMemory",
           "present_side", "MemoryWriter", "WriterMemory", "WriterStats"]
