"""The memory: one SQLite file (db.py) read and written through one repository per concern,
the frame files, the vector indexes, the event forest, retention, search, and the causal view
that the reasoning layer reads through."""
from .records import (CameraExtent, DocumentJob, Event, Evidence, ForestNode, GateRecord, Moment, PendingMoment,
                      QARecord, SourceState, Summary, WriterBacklog)
from .store import Store
from .view import MemoryView

__all__ = ["CameraExtent", "DocumentJob", "Event", "Evidence", "ForestNode", "GateRecord", "MemoryView", "Moment",
           "PendingMoment", "QARecord", "SourceState", "Store", "Summary", "WriterBacklog"]
