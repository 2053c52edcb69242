"""A store written by the previous release (schema 2: forest and QA tables created on first use,
outside the store's schema) opens, migrates in place and reads back everything it held."""
import sqlite3
from pathlib import Path

import pytest

from support.paths import unpack_store
from vam_engine.engine import Engine
from vam_engine.errors import StoreError
from vam_engine.memory.db import SCHEMA_VERSION
from vam_engine.memory.forest import EventForest, ForestNodeRepository
from vam_engine.memory.store import Store


@pytest.fixture
def v2_store(tmp_path):
    return unpack_store(2, tmp_path)  # 40 s demo clip at 1 fps, documented, asked once


def test_a_schema_2_store_that_never_asked_or_summarized_migrates(v2_store):
    """QA and summary tables were made on first use then: a store without them takes every step."""
    with sqlite3.connect(v2_store / "store.sqlite") as conn:
        for table in ("qa_history", "qa_summary", "summaries"):
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    s = Store(v2_store, create=False)
    try:
        assert int(s.db.conn().execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]) \
            == SCHEMA_VERSION
        assert s.info()["moments"] == 12 and s.fulltext.count() == 7  # the event documents, indexed by words
    finally:
        s.close()


def test_schema_2_store_migrates_in_place_and_keeps_everything(v2_store):
    s = Store(v2_store, create=False)
    try:
        version = s.db.conn().execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
        assert int(version) == SCHEMA_VERSION
        info = s.info()
        assert info["moments"] == 12 and info["events"] == 7 and info["documented_events"] == 7
        assert info["summaries"] == 2 and info["vectors"] == {"frame": 12, "event": 7, "event_doc": 7, "summary": 2}
        assert all(Path(m.frame_path).is_file() for m in s.moments.list())
        # statistics that schema 2 did not record read as None; the other statistics are kept
        assert all(m.gate.tile_mad is None and m.gate.tiles_changed is None and m.gate.lap_var > 0
                   for m in s.moments.list())
        log = s.moments.gate_log()
        assert log and all(g.gate.tile_mad is None and g.gate.tiles_changed is None for g in log)
        # nothing was kept by the gates' view rule before schema 13
        assert not any(m.gate.blurred for m in s.moments.list()) and not any(g.gate.blurred for g in log)
        ref = s.sources.camera_ref("cam")
        assert ref is None or ref.sharpness == ()
        events = s.events.list("cam")
        assert all(e.closed and e.keyframes and e.doc.startswith("document of cam") for e in events)
        (qa,) = s.qa.records()
        assert qa.question == "what is on screen?" and qa.answer == "a textured scene"
        assert s.qa.summary() == "rolling summary of the questions"
        forest = EventForest(ForestNodeRepository(s.db))
        forest.check()
        assert {n.event_id for r in forest.roots("cam") for n in forest.leaves(r.node_id)} == \
            {e.event_id for e in events}
    finally:
        s.close()
    s2 = Store(v2_store, create=False)  # opening a migrated store again changes nothing
    assert s2.info()["moments"] == 12
    s2.close()


def test_migrated_store_searches_through_an_engine(v2_store):
    with Engine(v2_store, {"embed": {"text_model": "minilm"}}, device="cpu") as eng:
        hits = eng.search("document of cam", top_k=3, sources=("event",)).evidence
        assert hits and hits[0].source == "event" and hits[0].text.startswith("document of cam")
        assert eng.search(image=eng.moments("cam")[3].frame_path, top_k=1).evidence[0].moment_ids


def test_a_store_from_a_newer_release_is_refused(tmp_path):
    Store(tmp_path / "s").close()
    with sqlite3.connect(tmp_path / "s" / "store.sqlite") as conn:
        conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(StoreError, match="schema version 99.*upgrade"):
        Store(tmp_path / "s", create=False)
