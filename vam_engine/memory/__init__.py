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
from .records import (Alert, BoxRef, CameraExtent, CameraSignal, ClipFrame, Deletion, DocumentJob, EntityRecord,
                      EntityTimeline, Event, EventMemory, Evidence, ForestNode, GateRecord, GateReference, GateSample,
                      LastSeen, Moment, Monitor, PendingMoment, Pose, ProvisionalNode, QARecord, SourceState, Summary,
                      SummaryKind, Transcript, WriterBacklog, camera_time, is_absolute_time, last_pose)
from .retention import RetentionPass, RetentionReport, RetentionWorker
from .fusion import FusedHit, RankedList, fuse
from .search import (BACKGROUND_SAMPLE, SOURCES, SPEECH, VECTOR_SOURCES, SearchResult, check_search, fetch_size,
                     keep_size, keyed_evidence, load_query_image, search, search_lists)
from .sessions import (NewTurn, Session, SessionError, SessionLimit, SessionRepository, SessionTurn, SessionWatch,
                       WatchNotAllowed, check_session_id)
from .sightings import PerceptionCommit
from .store import Store, check_delete_range
from .summaries import SummaryRepository
from .transcripts import TranscriptRepository, TranscriptWriter
from .vector_memory import VectorMemory
from .view import MemoryView, summary_kinds
from .words import CJK, split_words
from .writer_lock import WriterLock

__all__ = [
    # the store, its parts and what composes them
    "Store", "check_delete_range", "CommitBatch", "DocumentQueue", "EventRepository", "MomentRepository",
    "SummaryRepository", "TranscriptRepository", "TranscriptWriter", "GapRepository", "SessionRepository",
    "EventForest", "ForestNodeRepository", "VectorMemory", "WriterLock", "MemoryView", "summary_kinds",
    "RetentionPass", "RetentionReport", "RetentionWorker",
    # records
    "Alert", "BoxRef", "CameraExtent", "CameraSignal", "ClipFrame", "Deletion", "DocumentJob", "EntityRecord",
    "EntityTimeline", "LastSeen", "Event", "EventMemory", "Evidence", "ForestNode", "Gap", "GateRecord",
    "GateReference", "GateSample", "Moment", "Monitor", "PendingMoment",
    "PerceptionCommit", "Pose", "ProvisionalNode", "QARecord", "SourceState", "Summary", "SummaryKind", "Transcript",
    "WriterBacklog", "camera_time", "is_absolute_time", "last_pose",
    # monitors, places, sessions
    "MonitorLimit", "MonitorSpec", "ObservedFrame", "check_spec", "make_place", "MAX_CORNERS", "NewTurn", "Session",
    "SessionError", "SessionLimit",
    "SessionTurn", "SessionWatch", "WatchNotAllowed", "check_session_id",
    # search, in the three steps a cluster's router runs over its shards (memory/fusion.py)
    "search", "search_lists", "fuse", "keyed_evidence", "fetch_size", "keep_size", "FusedHit", "RankedList",
    "check_search", "load_query_image", "SearchResult", "BACKGROUND_SAMPLE", "SOURCES", "SPEECH", "VECTOR_SOURCES",
    # text as the full-text index splits it into words (every script; CJK: the characters set apart)
    "split_words", "CJK",
]
