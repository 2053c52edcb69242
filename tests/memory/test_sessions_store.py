"""Sessions in the store: a schema 8 store (the release before sessions) migrates in place, its QA
history's conversations becoming sessions whose first turns are their question/answer pairs,
everything else kept; the repository keeps a session's newest turns, never reuses a turn id,
lists by prefix and binds standing requests to their session."""
import sqlite3
from pathlib import Path

import pytest

from support.paths import unpack_store
from vam_engine.memory.db import SCHEMA_VERSION
from vam_engine.memory.monitors import MonitorSpec
from vam_engine.memory.records import BoxRef, Evidence, Pose
from vam_engine.memory.sessions import NewTurn
from vam_engine.memory.store import Store


@pytest.fixture
def v8_store(tmp_path):
    root = unpack_store(8, tmp_path)  # 3 moments, a fired and an ended monitor, QA of "tok1/alice" and of none
    with sqlite3.connect(root / "store.sqlite") as conn:
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name='sessions'").fetchone()
    return root


def test_a_schema_8_store_migrates_its_conversations_into_sessions(v8_store):
    s = Store(v8_store, create=False)
    try:
        version = s.db.conn().execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),) and SCHEMA_VERSION >= 9  # 9: sessions
        info = s.info()
        assert info["moments"] == 3 and info["alerts"] == 1 and info["monitors"] == 0
        assert all(Path(m.frame_path).is_file() for m in s.moments.list())
        assert [m.condition for m in s.monitors.list(include_ended=True)] == ["a bright square", "something never seen"]
        (sess,) = s.sessions.list()
        assert sess.session_id == "tok1/alice" and sess.cameras is None and sess.open
        turns = s.sessions.get("tok1/alice").turns
        assert [(t.role, t.kind, t.text) for t in turns] == [("user", "question", "what is on screen?"),
                                                             ("engine", "answer", "a dark noisy scene")]
        assert turns[0].t == s.qa.records()[0].t == 7.5 and turns[0].evidence == ()  # the question's time
        assert s.qa.summary(session="tok1/alice") == "asked what is on screen"  # the QA history is untouched
        assert len(s.qa.records()) == 2
        # the migrated store takes new sessions and turns
        s.sessions.ensure("tok1/bob", ["cam"])
        (t,) = s.sessions.add_turns("tok1/bob", [NewTurn("user", "question", "hi", 1.0)], keep=10)
        assert t.turn_id == 3
    finally:
        s.close()
    again = Store(v8_store, create=False)  # reopening a migrated store changes nothing
    assert [x.session_id for x in again.sessions.list()] == ["tok1/alice", "tok1/bob"]
    assert len(again.sessions.turns("tok1/alice")) == 2
    again.close()


def test_turns_are_kept_newest_first_and_ids_never_reused(tmp_path):
    s = Store(tmp_path / "s")
    try:
        ev = Evidence("cam", 1.0, 2.0, (4, 5), ("/a.jpg", "/b.jpg"), 0.5, "frame", "seen", 0.7, None,
                      Pose(1.5, -2.0, 0.0, 0.25, "lab"), (BoxRef(4, (1.0, 2.0, 30.0, 40.0), "cat", 0.9, "object",
                                                               (640, 480)),))  # nested records come back whole
        s.sessions.ensure("a")
        s.sessions.ensure("ab", ("cam", "door"))
        first = s.sessions.add_turns("a", [NewTurn("user", "question", "q1", 1.0),
                                           NewTurn("engine", "answer", "x" * 9000, 1.0, (ev,))], keep=3)
        assert [t.turn_id for t in first] == [1, 2] and len(first[1].text) == 8000 and first[1].evidence == (ev,)
        s.sessions.add_turns("a", [NewTurn("user", "question", "q2", 2.0), NewTurn("engine", "answer", "a2", 2.0)],
                             keep=3)
        assert [t.turn_id for t in s.sessions.turns("a")] == [2, 3, 4]  # the newest three
        s.sessions.add_turns("ab", [NewTurn("user", "question", "other", None)], keep=3)
        assert [t.turn_id for t in s.sessions.turns("ab")] == [5]
        s.sessions.add_turns("a", [NewTurn("user", "question", "q3", 3.0)], keep=3)
        assert [t.turn_id for t in s.sessions.turns("a")] == [3, 4, 6]
        assert [x.session_id for x in s.sessions.list(prefix="a")] == ["a", "ab"]
        assert [x.session_id for x in s.sessions.list(prefix="ab")] == ["ab"]
        assert s.sessions.get("ab").cameras == ("cam", "door") and s.sessions.get("zz") is None
        assert s.sessions.end("ab") and not s.sessions.end("ab")
        assert [x.session_id for x in s.sessions.list()] == ["a"]
        with pytest.raises(ValueError, match="kind"):
            NewTurn("user", "shout", "x", None)
    finally:
        s.close()


def test_standing_requests_are_bound_to_their_session(tmp_path):
    s = Store(tmp_path / "s")
    try:
        s.sessions.ensure("a")
        m1 = s.monitors.add(MonitorSpec("a red square", ("cam",)))
        m2 = s.monitors.add(MonitorSpec("a dog", None))
        other = s.monitors.add(MonitorSpec("a cat", None))  # no session's
        s.sessions.bind(m1.monitor_id, "a", "tell me when a red square appears")
        s.sessions.bind(m2.monitor_id, "a", "let me know if a dog comes")
        assert [(w.condition, w.request) for w in s.sessions.watches("a")] == [
            ("a red square", "tell me when a red square appears"), ("a dog", "let me know if a dog comes")]
        assert s.sessions.watch_of(other.monitor_id) is None
        s.monitors.end(m1.monitor_id)
        assert [w.monitor_id for w in s.sessions.watches("a")] == [m2.monitor_id]
        assert [w.active for w in s.sessions.watches("a", include_ended=True)] == [False, True]
        assert s.sessions.watch_of(m1.monitor_id).session_id == "a"
    finally:
        s.close()
