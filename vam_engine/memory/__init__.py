"""The memory: one SQLite file (db.py) read and written through one repository per concern,
the frame files, the vector indexes (over vam_engine/vectors), the event forest (forest/),
retention, search, deletion (one protocol every repository implements: deletion.py), and the
causal view that the reasoning layer reads through.

This face is the way in: a module outside memory/ imports these names from ``vam_engine.memory``
only (tests/test_architecture.py holds it)."""
from .commit import CommitBatch
from .doc_queue import DocumentQueue
from .events import EventRepository
from .forest import EventForest, ForestNodeRepository
from .gaps import Gap, GapRepository
from .moments import MomentRepository
from .monitors import MonitorLimit, MonitorSpec, ObservedFrame, check_spec
from .places import MAX_CORNERS, make_place
from .records import (Alert, BoxRef, CameraExtent, Deletion, DocumentJob, EntityRecord, Event, EventMemory, Evidence,
                      ForestNode, GateRecord, GateReference, GateSample, Moment, Monitor, PendingMoment, Pose,
                      ProvisionalNode, QARecord, SourceState, Summary, SummaryKind, Transcript, WriterBacklog,
                      camera_time, is_absolute_time, last_pose)
from .retention import RetentionPass, RetentionReport, RetentionWorker
from .search import (BACKGROUND_SAMPLE, MIN_BACKGROUND, RRF_K, SOURCES, SPEECH, SPREAD_FLOOR, VECTOR_SOURCES,
                     SearchResult, check_search, load_query_image, relevance, search, space_of, space_queries,
                     whole_space_sample)
from .sessions import (NewTurn, Session, SessionError, SessionLimit, SessionRepository, SessionTurn, SessionWatch,
                       WatchNotAllowed, check_session_id)
from .sightings import PerceptionCommit
from .store import Store, check_delete_range
from .summaries import SummaryRepository
from .transcripts import TranscriptRepository, TranscriptWriter
from .vector_memory import VectorMemory
from .view import MemoryView, summary_kinds
from .writer_lock import WriterLock

__all__ = [
    # the store, its parts and what composes them
    "Store", "check_delete_range", "CommitBatch", "DocumentQueue", "EventRepository", "MomentRepository",
    "SummaryRepository", "TranscriptRepository", "TranscriptWriter", "GapRepository", "SessionRepository",
    "EventForest", "ForestNodeRepository", "VectorMemory", "WriterLock", "MemoryView", "summary_kinds",
    "RetentionPass", "RetentionReport", "RetentionWorker",
    # records
    "Alert", "BoxRef", "CameraExtent", "Deletion", "DocumentJob", "EntityRecord", "Event", "EventMemory", "Evidence",
    "ForestNode", "Gap", "GateRecord", "GateReference", "GateSample", "Moment", "Monitor", "PendingMoment",
    "PerceptionCommit", "Pose", "ProvisionalNode", "QARecord", "SourceState", "Summary", "SummaryKind", "Transcript",
    "WriterBacklog", "camera_time", "is_absolute_time", "last_pose",
    # monitors, places, sessions
    "MonitorLimit", "MonitorSpec", "ObservedFrame", "check_spec", "make_place", "MAX_CORNERS", "NewTurn", "Session",
    "SessionError", "SessionLimit",
    "SessionTurn", "SessionWatch", "WatchNotAllowed", "check_session_id",
    # search (the cluster's router fuses shards' results by the same rules)
    "search", "check_search", "load_query_image", "relevance", "space_of", "space_queries", "whole_space_sample",
    "SearchResult", "BACKGROUND_SAMPLE", "MIN_BACKGROUND", "RRF_K", "SOURCES", "SPEECH", "SPREAD_FLOOR",
    "VECTOR_SOURCES",
]
