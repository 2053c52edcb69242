"""The store's SQLite file: connections, every table the engine keeps, one schema version and
its migrations. Nothing else in the engine creates a table; the repositories beside this
module (moments, events, sources, documents, forest nodes, the writer's queue, QA history) are
the only code that writes SQL, each against the tables of its concern.

Connections: one per thread (SQLite connections are not shared), WAL so readers query while a
writer commits. Writes are serialized by ``write_lock`` (held across a transaction and the
notification of its vector changes, so an index snapshot never sees a commit half-applied).
"""
from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path

from ..errors import StoreError
from .words import index_text

SCHEMA_VERSION = 12

FULLTEXT_SCHEMA = """
CREATE TABLE IF NOT EXISTS fulltext_docs (
    doc_id INTEGER PRIMARY KEY,  -- its rowid in fulltext
    kind TEXT NOT NULL,
    ref_id INTEGER NOT NULL,
    camera_id TEXT NOT NULL,     -- '*': every camera (as in the vectors table)
    t_start REAL NOT NULL,       -- camera axis
    t_end REAL NOT NULL,
    UNIQUE (kind, ref_id)
);
CREATE INDEX IF NOT EXISTS fulltext_docs_filter ON fulltext_docs (kind, camera_id, t_end, t_start);
CREATE VIRTUAL TABLE IF NOT EXISTS fulltext USING fts5(
    text UNINDEXED,              -- as written (what a hit shows)
    words,                       -- what it is found by: memory/words.py (CJK characters set apart, schema 12)
    tokenize = 'unicode61 remove_diacritics 2');
"""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

-- sources and their progress (memory/sources.py)
CREATE TABLE IF NOT EXISTS cameras (
    camera_id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    ref_t REAL,            -- time of the last kept frame: the gates compare against it
    ref_shape TEXT,
    ref_gray BLOB,         -- raw luma of that frame (compressing it costs more than writing it)
    ref_sharpness TEXT     -- JSON list: Laplacian variances of the last kept frames (the blur gate's history)
);
CREATE TABLE IF NOT EXISTS sources (
    source_id INTEGER PRIMARY KEY,
    camera_id TEXT NOT NULL REFERENCES cameras(camera_id),
    uri TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    sampling TEXT NOT NULL,      -- e.g. "fps=0.5" or "fps=0.5,keyframes": resume needs the same
    progress_t REAL,             -- every sample with t_rel <= progress_t is gated and committed
    done INTEGER NOT NULL DEFAULT 0,
    started_at REAL NOT NULL,
    finished_at REAL,
    info TEXT,
    UNIQUE (camera_id, fingerprint, sampling)
);
CREATE TABLE IF NOT EXISTS commit_state (camera_id TEXT PRIMARY KEY, state TEXT NOT NULL);

-- moments and gate samples (memory/moments.py, memory/commit.py)
CREATE TABLE IF NOT EXISTS moments (
    moment_id INTEGER PRIMARY KEY,
    camera_id TEXT NOT NULL,
    source_id INTEGER NOT NULL REFERENCES sources(source_id),
    t_rel REAL NOT NULL,
    t_abs REAL,
    pts INTEGER,
    frame_ref TEXT NOT NULL,     -- path relative to the store root
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    lap_var REAL, mad REAL, ssim REAL, hist_corr REAL,
    tile_mad REAL, tiles_changed INTEGER,   -- local change (NULL before schema 4)
    t REAL NOT NULL,             -- the camera's axis: t_abs when known, else t_rel
    tier TEXT NOT NULL DEFAULT 'recent',
    protected INTEGER NOT NULL DEFAULT 0,   -- first/last of a camera, event keyframes: never thinned
    nbytes INTEGER,
    event_id INTEGER,
    embedding_id INTEGER,        -- id in the "frame" vector space (= moment_id), NULL without one
    pose_x REAL, pose_y REAL, pose_z REAL, pose_yaw REAL,   -- where the camera was (schema 10; NULL: unknown)
    pose_frame TEXT,             -- the map frame of the pose
    UNIQUE (source_id, t_rel)
);
CREATE INDEX IF NOT EXISTS moments_camera_t ON moments (camera_id, t_rel);
CREATE INDEX IF NOT EXISTS moments_place ON moments (pose_x, pose_y) WHERE pose_x IS NOT NULL;
CREATE INDEX IF NOT EXISTS moments_camera_axis ON moments (camera_id, t);
CREATE INDEX IF NOT EXISTS moments_event ON moments (event_id);
CREATE TABLE IF NOT EXISTS samples (
    camera_id TEXT NOT NULL,
    source_id INTEGER NOT NULL,
    t_rel REAL NOT NULL,
    lap_var REAL, mad REAL, ssim REAL, hist_corr REAL,
    dropped_by TEXT,             -- NULL when kept
    tile_mad REAL, tiles_changed INTEGER,   -- local change (NULL before schema 4)
    PRIMARY KEY (source_id, t_rel)
) WITHOUT ROWID;

-- events and the writer's queue (memory/events.py, memory/doc_queue.py)
CREATE TABLE IF NOT EXISTS events (
    event_id INTEGER PRIMARY KEY,
    camera_id TEXT NOT NULL,
    t_start REAL NOT NULL,       -- camera axis
    t_end REAL NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0,
    keyframes TEXT,              -- JSON list of moment ids, spread over the event
    doc TEXT,                    -- the writer's retrieval document, NULL until written
    doc_embedding_id INTEGER,    -- id in the "event_doc" vector space (= event_id)
    forest_node_id INTEGER,
    doc_attempts INTEGER NOT NULL DEFAULT 0,
    doc_next_try REAL,           -- wall time before which a failed write is not retried
    doc_error TEXT,              -- why the last attempt failed
    closed_at REAL               -- wall time of the close: the writer's lag is measured from it
);
CREATE INDEX IF NOT EXISTS events_camera_t ON events (camera_id, t_start);
CREATE INDEX IF NOT EXISTS events_open ON events (camera_id, closed);
CREATE INDEX IF NOT EXISTS events_undocumented ON events (closed, doc) WHERE doc IS NULL;

-- summary documents (memory/summaries.py)
CREATE TABLE IF NOT EXISTS summaries (
    summary_id INTEGER PRIMARY KEY,
    camera_id TEXT,              -- NULL: every camera
    t0 REAL NOT NULL, t1 REAL NOT NULL,   -- the window, camera axis
    granularity_s REAL NOT NULL,
    prompt TEXT NOT NULL,
    structure TEXT,              -- optional label the planner can filter on
    text TEXT NOT NULL,
    moments TEXT NOT NULL,       -- JSON list of the moment ids whose frames the writer saw
    created_at REAL NOT NULL,
    UNIQUE (camera_id, t0, t1, prompt)
);

-- vectors and their change log (memory/vector_table.py)
CREATE TABLE IF NOT EXISTS vectors (
    space TEXT NOT NULL,         -- "frame" | "event" | "event_doc" | "summary"
    id INTEGER NOT NULL,         -- moment_id / event_id / summary id
    camera_id TEXT NOT NULL,
    t0 REAL NOT NULL, t1 REAL NOT NULL,   -- the interval it covers, camera axis
    vec BLOB NOT NULL,           -- float32
    PRIMARY KEY (space, id)
) WITHOUT ROWID;
-- filters (camera, time, as_of) read this index alone, never the vectors
CREATE INDEX IF NOT EXISTS vectors_filter ON vectors (space, camera_id, t1, t0);
CREATE TABLE IF NOT EXISTS vector_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    space TEXT NOT NULL, id INTEGER NOT NULL,
    op INTEGER NOT NULL          -- +1 added, -1 removed
);

-- the event forest (memory/forest/nodes.py)
CREATE TABLE IF NOT EXISTS forest_nodes (
    node_id INTEGER PRIMARY KEY,
    camera_id TEXT NOT NULL,
    t_start REAL NOT NULL,       -- camera axis
    t_end REAL NOT NULL,
    keyframes TEXT NOT NULL,     -- JSON [[moment_id, t], ...], sorted by t
    summary TEXT NOT NULL,       -- the writer's summary, or a placeholder while stale
    embedding BLOB,              -- float32, L2-normalized; NULL while pending
    height INTEGER NOT NULL,     -- 0 for a leaf
    n_leaves INTEGER NOT NULL,
    leaf_lo INTEGER NOT NULL,    -- ordinals (per camera, time order) of the first and last leaf
    leaf_hi INTEGER NOT NULL,
    parent INTEGER,              -- NULL for a root
    left_child INTEGER,          -- NULL for a leaf
    right_child INTEGER,
    event_id INTEGER UNIQUE,     -- leaves only
    summary_version INTEGER NOT NULL,
    written_version INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS forest_nodes_camera ON forest_nodes (camera_id);
CREATE TABLE IF NOT EXISTS forest_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);

-- questions and answers (memory/qa.py)
CREATE TABLE IF NOT EXISTS qa_history (
    qa_id INTEGER PRIMARY KEY,
    t REAL NOT NULL,             -- stream time the question was asked at (camera axis)
    cameras TEXT NOT NULL,       -- "*" or a JSON list of the cameras in scope
    session TEXT NOT NULL DEFAULT '',  -- the conversation it belongs to ('': none)
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    embedding BLOB,              -- float32 unit vector of question + answer, NULL: never retrieved
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS qa_history_t ON qa_history (t);
CREATE INDEX IF NOT EXISTS qa_history_scope ON qa_history (session, cameras, t);
CREATE TABLE IF NOT EXISTS qa_summary (
    key TEXT NOT NULL,           -- "<session>|<cameras>": each scope its own rolling summary
    text TEXT NOT NULL,
    t REAL NOT NULL,             -- in force from this stream time on
    PRIMARY KEY (key, t)
);

-- monitors and their alerts (memory/monitors.py)
CREATE TABLE IF NOT EXISTS monitors (
    monitor_id TEXT PRIMARY KEY,
    condition TEXT NOT NULL,
    cameras TEXT NOT NULL,       -- "*" or a JSON list of the cameras watched
    mode TEXT NOT NULL,          -- once | repeat
    min_confidence REAL NOT NULL,
    every_s REAL NOT NULL,
    frames INTEGER NOT NULL,
    repeat_gap_s REAL NOT NULL,
    images TEXT NOT NULL,        -- JSON list of the reference images' refs (store-relative)
    active INTEGER NOT NULL,
    created_at REAL NOT NULL,
    ended_at REAL
);
CREATE TABLE IF NOT EXISTS alerts (
    alert_id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: alert streams resume by id
    monitor_id TEXT NOT NULL,
    camera_id TEXT NOT NULL,
    t REAL NOT NULL,             -- camera axis: the last frame the firing check observed
    t_abs REAL,
    confidence REAL NOT NULL,
    observed TEXT NOT NULL,
    moment_ids TEXT NOT NULL,    -- JSON list: committed moments of the observed span (never thinned)
    frame_refs TEXT NOT NULL,    -- JSON list: the observed frames as saved (store-relative)
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS alerts_camera_t ON alerts (camera_id, t);
CREATE INDEX IF NOT EXISTS alerts_monitor ON alerts (monitor_id);

-- live cameras' losses of video (memory/gaps.py; schema 6)
CREATE TABLE IF NOT EXISTS gaps (
    gap_id INTEGER PRIMARY KEY,
    camera_id TEXT NOT NULL,
    source_id INTEGER,           -- the live run it happened in
    t_start REAL NOT NULL,       -- camera axis: the last frame before it (the camera's start if none)
    t_end REAL,                  -- camera axis: the first frame after it; NULL while it lasts
    reason TEXT NOT NULL,        -- why the video stopped (the connection's error)
    ended_by TEXT,               -- 'frame' (video came back), 'removed', 'gave_up', 'closed'
    created_at REAL NOT NULL,
    closed_at REAL
);
CREATE INDEX IF NOT EXISTS gaps_camera_t ON gaps (camera_id, t_start);

-- transcript segments: what was said, when, on which camera (memory/transcripts.py; schema 7)
CREATE TABLE IF NOT EXISTS transcripts (
    segment_id INTEGER PRIMARY KEY,  -- also its id in the "speech" vector space and its fulltext ref_id
    camera_id TEXT NOT NULL,
    t_start REAL NOT NULL,       -- camera axis
    t_end REAL NOT NULL,
    start_ms INTEGER NOT NULL,   -- round(t_start * 1000): with the camera, the key a resumed run's repeat meets
    text TEXT NOT NULL,
    language TEXT,               -- ISO 639-1 when known
    confidence REAL,             -- in [0, 1], NULL when the recogniser gave none
    created_at REAL NOT NULL,
    UNIQUE (camera_id, start_ms)
);
CREATE INDEX IF NOT EXISTS transcripts_camera_t ON transcripts (camera_id, t_start);

-- one full-text index for the whole store (memory/fulltext.py; schema 7): a document is a text
-- of some kind ("speech"; since schema 11 "ocr", "object", "event", "summary") keyed by (kind,
-- ref_id), the id of its row in that kind's table; since schema 12 indexed by its words
-- (memory/words.py), its text kept as written
""" + FULLTEXT_SCHEMA + """

-- perception: what was detected and read on kept frames, tracks and entities (memory/sightings.py
-- writes them, memory/entities.py reads them; schema 11). Boxes are x0, y0, x1, y1 in the frame's
-- pixels as it was indexed.
CREATE TABLE IF NOT EXISTS detections (
    detection_id INTEGER PRIMARY KEY,
    moment_id INTEGER NOT NULL,
    camera_id TEXT NOT NULL,
    t REAL NOT NULL,             -- the moment's time, camera axis
    x0 REAL NOT NULL, y0 REAL NOT NULL, x1 REAL NOT NULL, y1 REAL NOT NULL,
    w INTEGER NOT NULL, h INTEGER NOT NULL,  -- the frame's size the box is in (retention may shrink the file)
    label TEXT NOT NULL,
    score REAL NOT NULL,
    track_id INTEGER,
    entity_id INTEGER
);
CREATE INDEX IF NOT EXISTS detections_moment ON detections (moment_id);
CREATE INDEX IF NOT EXISTS detections_camera_t ON detections (camera_id, t);
CREATE INDEX IF NOT EXISTS detections_entity ON detections (entity_id, t);
CREATE INDEX IF NOT EXISTS detections_track ON detections (track_id, t);
CREATE INDEX IF NOT EXISTS detections_label ON detections (label, camera_id, t);
CREATE TABLE IF NOT EXISTS ocr_lines (
    line_id INTEGER PRIMARY KEY,
    moment_id INTEGER NOT NULL,
    camera_id TEXT NOT NULL,
    t REAL NOT NULL,
    x0 REAL NOT NULL, y0 REAL NOT NULL, x1 REAL NOT NULL, y1 REAL NOT NULL,
    w INTEGER NOT NULL, h INTEGER NOT NULL,
    text TEXT NOT NULL,
    confidence REAL NOT NULL,
    read INTEGER NOT NULL        -- 1: read on this frame; 0: carried from the camera's last read
);
CREATE INDEX IF NOT EXISTS ocr_lines_moment ON ocr_lines (moment_id);
CREATE INDEX IF NOT EXISTS ocr_lines_camera_t ON ocr_lines (camera_id, t);
-- a string shown on a camera from one kept frame to another without a break (full-text kind "ocr")
CREATE TABLE IF NOT EXISTS text_spans (
    span_id INTEGER PRIMARY KEY, -- its fulltext ref_id
    camera_id TEXT NOT NULL,
    text TEXT NOT NULL,          -- as read, whitespace collapsed
    norm TEXT NOT NULL,          -- case-folded: what a later frame continues the span on
    t_start REAL NOT NULL,       -- camera axis
    t_end REAL NOT NULL,
    open INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS text_spans_open ON text_spans (camera_id, open, norm);
CREATE INDEX IF NOT EXISTS text_spans_camera_t ON text_spans (camera_id, t_start);
CREATE TABLE IF NOT EXISTS tracks (
    track_id INTEGER PRIMARY KEY,  -- the perception stage's id; its fulltext ref_id (kind "object")
    camera_id TEXT NOT NULL,
    entity_id INTEGER,
    label TEXT NOT NULL,
    first_t REAL NOT NULL,       -- camera axis
    last_t REAL NOT NULL,
    count INTEGER NOT NULL,      -- sightings, present frames included
    texts TEXT NOT NULL          -- JSON list: OCR strings read inside its boxes
);
CREATE INDEX IF NOT EXISTS tracks_entity ON tracks (entity_id);
CREATE INDEX IF NOT EXISTS tracks_camera_t ON tracks (camera_id, first_t);
CREATE TABLE IF NOT EXISTS entities (
    entity_id INTEGER PRIMARY KEY,  -- also its id in the "entity" vector space
    label TEXT NOT NULL,
    colours TEXT NOT NULL,       -- JSON list of colour names, most dominant first
    texts TEXT NOT NULL,         -- JSON list
    first_t REAL NOT NULL,       -- over every camera (each camera's in entity_seen)
    last_t REAL NOT NULL,
    crop_ref TEXT,               -- store-relative JPEG of its representative crop
    crop_camera TEXT, crop_t REAL, crop_box TEXT,   -- where that crop was cut (box: JSON)
    crop_rank REAL NOT NULL      -- the linker's rank of that crop (score x sqrt(area))
);
CREATE TABLE IF NOT EXISTS entity_seen (
    entity_id INTEGER NOT NULL,
    camera_id TEXT NOT NULL,
    first_t REAL NOT NULL,       -- camera axis: kept by retention
    last_t REAL NOT NULL,
    PRIMARY KEY (entity_id, camera_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entity_seen_camera ON entity_seen (camera_id, last_t);
CREATE TABLE IF NOT EXISTS perception_state (
    camera_id TEXT PRIMARY KEY,  -- '*': the id counters; else that camera's trackers and last read
    state TEXT NOT NULL          -- JSON (perception/state.py)
);
"""


# conversations: sessions, their turns and the standing requests (monitors) they started
# (memory/sessions.py; schema 9). Its own string: the migration to 9 creates these tables first
# to fill them from the QA history.
SESSIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    cameras TEXT NOT NULL,       -- "*" or a JSON list: the cameras its turns may name (bound at creation)
    created_at REAL NOT NULL,
    ended_at REAL                -- NULL while open
);
CREATE TABLE IF NOT EXISTS session_turns (
    turn_id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: session streams resume by id
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,          -- user | engine
    kind TEXT NOT NULL,          -- question | answer | watch | cancel | reply
    text TEXT NOT NULL,
    t REAL,                      -- stream time (camera axis) the turn is about; NULL: nothing in view yet
    evidence TEXT NOT NULL,      -- JSON list of the cited evidence (answers, replies)
    monitor_id TEXT,             -- watch, cancel, reply: the standing request
    alert_id INTEGER,            -- reply: the alert it answers
    created_at REAL NOT NULL     -- wall clock
);
CREATE INDEX IF NOT EXISTS session_turns_session ON session_turns (session_id, turn_id);
CREATE TABLE IF NOT EXISTS session_monitors (
    monitor_id TEXT PRIMARY KEY, -- a monitors row started by a session's watch turn
    session_id TEXT NOT NULL,
    request TEXT NOT NULL,       -- what the user said ("tell me when ...")
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS session_monitors_session ON session_monitors (session_id);
"""


def _migrate_1_to_2(conn) -> None:
    """Version 2 added the writer's bookkeeping to events."""
    for col in ("doc_attempts INTEGER NOT NULL DEFAULT 0", "doc_next_try REAL", "doc_error TEXT", "closed_at REAL"):
        conn.execute(f"ALTER TABLE events ADD COLUMN {col}")


def _migrate_2_to_3(conn) -> None:
    """Version 3 moved the forest's and the QA history's tables under the one schema. A version 2
    store may hold them already (created on first use, with the same columns): SCHEMA's
    ``IF NOT EXISTS`` keeps them; nothing to convert."""


def _migrate_3_to_4(conn) -> None:
    """Version 4 records the local-change statistics with every sample and moment, and the
    blur gate's sharpness history with each camera's reference. Old rows read them as NULL."""
    for table in ("samples", "moments"):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN tile_mad REAL")
        conn.execute(f"ALTER TABLE {table} ADD COLUMN tiles_changed INTEGER")
    conn.execute("ALTER TABLE cameras ADD COLUMN ref_sharpness TEXT")


def _migrate_4_to_5(conn) -> None:
    """Version 5 added the monitors and alerts tables (SCHEMA creates them); nothing to convert."""


def _migrate_5_to_6(conn) -> None:
    """Version 6 records live cameras' gaps: a new table, which SCHEMA creates."""


def _migrate_6_to_7(conn) -> None:
    """Version 7 partitions the QA history by scope (cameras, session): records gain their
    session (none, for the old ones); the one store-wide rolling summary becomes the summary of
    questions about every camera, the only scope that could see all it was written from."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "qa_history" in tables:  # a store that never asked has none yet (SCHEMA makes it)
        conn.execute("ALTER TABLE qa_history ADD COLUMN session TEXT NOT NULL DEFAULT ''")
    if "qa_summary" in tables:
        conn.execute("UPDATE qa_summary SET key='|*' WHERE key='rolling'")


def _migrate_7_to_8(conn) -> None:
    """Version 8 keeps transcripts and the full-text index: new tables, which SCHEMA creates."""


def _migrate_8_to_9(conn) -> None:
    """Version 9 keeps sessions (memory/sessions.py). The conversations the QA history already
    names (its non-empty sessions) become sessions open on every camera (the asker's token still
    limits what a turn may name), their question/answer pairs the sessions' first turns."""
    statement = ""
    for line in SESSIONS_SCHEMA.splitlines(keepends=True):  # one by one: executescript would commit first
        statement += line
        if sqlite3.complete_statement(statement):
            conn.execute(statement)
            statement = ""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='qa_history'").fetchone() is None:
        return
    rows = conn.execute("SELECT session, MIN(created_at) FROM qa_history WHERE session != '' GROUP BY session")
    conn.executemany("INSERT OR IGNORE INTO sessions (session_id, cameras, created_at) VALUES (?, '*', ?)",
                     rows.fetchall())
    for sid, t, question, answer, wall in conn.execute(
            "SELECT session, t, question, answer, created_at FROM qa_history WHERE session != ''"
            " ORDER BY created_at, qa_id").fetchall():
        conn.executemany("INSERT INTO session_turns (session_id, role, kind, text, t, evidence, created_at)"
                         " VALUES (?,?,?,?,?,'[]',?)",
                         [(sid, "user", "question", question, t, wall), (sid, "engine", "answer", answer, t, wall)])


def _migrate_9_to_10(conn) -> None:
    """Version 10 keeps a pose with each moment (where the camera was: x, y, z, yaw and the map
    frame). Old moments have none (NULL); SCHEMA adds the index the place filters use."""
    for col in ("pose_x REAL", "pose_y REAL", "pose_z REAL", "pose_yaw REAL", "pose_frame TEXT"):
        conn.execute(f"ALTER TABLE moments ADD COLUMN {col}")


def _migrate_10_to_11(conn) -> None:
    """Version 11 keeps what perception found (detections, OCR lines and the spans of text they
    show, tracks, entities: new tables, which SCHEMA creates) and indexes event and summary
    documents in the full-text index (kinds "event" and "summary"): those already written are
    indexed here."""
    for statement in FULLTEXT_SCHEMA.split(";"):  # a store older than 8 has no full-text tables yet (SCHEMA runs after)
        if statement.strip():
            conn.execute(statement)
    for kind, table, sql in (
            ("event", "events", "SELECT event_id, camera_id, t_start, t_end, doc FROM events WHERE doc IS NOT NULL"),
            ("summary", "summaries", "SELECT summary_id, COALESCE(camera_id, '*'), t0, t1, text FROM summaries")):
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone() is None:
            continue  # an early store without it: nothing written to index
        for ref, cam, t0, t1, text in conn.execute(sql).fetchall():
            doc = conn.execute("INSERT OR IGNORE INTO fulltext_docs (kind, ref_id, camera_id, t_start, t_end) "
                               "VALUES (?,?,?,?,?)", (kind, ref, cam, t0, t1))
            if doc.rowcount:
                conn.execute("INSERT INTO fulltext (rowid, text) VALUES (?,?)", (doc.lastrowid, text))


def _migrate_11_to_12(conn) -> None:
    """Version 12 finds Chinese, Japanese and Korean text: the full-text table keeps each
    document's text as written (unindexed) beside the words it is indexed by, in which every CJK
    character stands apart (memory/words.py). The old table's documents are indexed anew under
    the same rowids (``fulltext_docs`` is unchanged), in one transaction with the new table's
    creation and the old one's removal: an open that fails half-way leaves the old index, and
    the next open does it all again."""
    if not conn.in_transaction:  # sqlite3 opens one before DML only: the DDL belongs in it too
        conn.execute("BEGIN IMMEDIATE")
    conn.create_function("vam_index_text", 1, index_text, deterministic=True)
    conn.execute("DROP TABLE IF EXISTS fulltext_v12")
    conn.execute(FULLTEXT_SCHEMA[FULLTEXT_SCHEMA.index("CREATE VIRTUAL TABLE"):].replace(
        "IF NOT EXISTS fulltext ", "fulltext_v12 "))
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='fulltext'").fetchone() is not None:
        conn.execute("INSERT INTO fulltext_v12 (rowid, text, words) SELECT rowid, text, vam_index_text(text) "
                     "FROM fulltext")
        conn.execute("DROP TABLE fulltext")
    conn.execute("ALTER TABLE fulltext_v12 RENAME TO fulltext")


MIGRATIONS = {1: _migrate_1_to_2, 2: _migrate_2_to_3, 3: _migrate_3_to_4, 4: _migrate_4_to_5,
              5: _migrate_5_to_6, 6: _migrate_6_to_7, 7: _migrate_7_to_8,
              8: _migrate_8_to_9, 9: _migrate_9_to_10, 10: _migrate_10_to_11,
              11: _migrate_11_to_12}  # from version -> step to the next


_MAX_VARS = 900  # host parameters per statement: SQLite's default bound is 999


def select_in(conn, sql: str, ids, *head) -> list:
    """All rows of ``sql`` for ``ids``, queried in chunks; ``{ids}`` in ``sql`` stands for the
    IN list, ``head`` for the parameters before it."""
    ids = [int(i) for i in ids]
    rows: list = []
    for k in range(0, len(ids), _MAX_VARS):
        part = ids[k:k + _MAX_VARS]
        rows += conn.execute(sql.format(ids=",".join("?" * len(part))), [*head, *part]).fetchall()
    return rows


def placeholders(values) -> str:
    return ",".join("?" * len(values))


class Database:
    """The SQLite file of one store. ``Database(path)`` creates or migrates the schema."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self._local = threading.local()
        self.write_lock = threading.RLock()
        self.on_vectors = None  # callable(list[VectorChange]) after each commit that changed vectors
        conn = self.conn()
        if self._version(conn) == SCHEMA_VERSION:
            return  # current: opening writes nothing (readers open stores a writer is writing)
        with self.write_lock, conn:
            version = self._version(conn)
            if version is not None and version > SCHEMA_VERSION:
                raise StoreError(f"{Path(self.path).parent}: store schema version {version}, this vam_engine "
                                 f"reads up to {SCHEMA_VERSION} (upgrade vam_engine)")
            if version is not None and version not in MIGRATIONS and version != SCHEMA_VERSION:
                raise StoreError(f"{Path(self.path).parent}: store schema version {version} cannot be migrated")
            while version is not None and version < SCHEMA_VERSION:
                MIGRATIONS[version](conn)
                version += 1
            try:
                conn.executescript(SCHEMA + SESSIONS_SCHEMA)
            except sqlite3.OperationalError as e:
                if "fts5" in str(e).lower():
                    raise StoreError(f"{self.path}: the sqlite3 of this Python ({sqlite3.sqlite_version}) has no FTS5 "
                                     f"full-text module, which the store's transcripts need ({e})") from None
                raise
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    @staticmethod
    def _version(conn) -> int | None:
        has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        if has_meta is None:
            return None
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return None if row is None else int(row[0])

    def conn(self) -> sqlite3.Connection:
        """This thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA foreign_keys=ON")
            except sqlite3.DatabaseError as e:
                raise StoreError(f"{self.path}: not a readable SQLite database ({e})") from None
            conn.isolation_level = "DEFERRED"
            self._local.conn = conn
        return conn

    @contextlib.contextmanager
    def transaction(self):
        """A write transaction on this thread's connection, serialized with every other write."""
        conn = self.conn()
        with self.write_lock, conn:
            yield conn

    @contextlib.contextmanager
    def write(self):
        """A write transaction that may change vectors: yields (connection, changes); the vector
        changes collected in ``changes`` reach the in-memory indexes after the commit, still
        under the write lock (a snapshot never sees a commit half-applied)."""
        changes: list = []
        with self.write_lock:
            conn = self.conn()
            with conn:
                yield conn, changes
            if changes and self.on_vectors is not None:
                self.on_vectors(changes)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
