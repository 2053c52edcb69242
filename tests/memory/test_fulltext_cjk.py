"""Chinese and Japanese text in the full-text index: signs read by OCR and sentences transcribed
(tests/support/cjk.py, written through the stage, the ingest transaction and the transcripts)
are found by any phrase inside them, from one character on, beside Latin words in the same
phrase; English phrases stay exact; a store of schema 11 (whose index held a CJK line as one
token) is re-indexed when it opens, once, and an open that fails half-way leaves it as it was."""
import sqlite3

import pytest

from support import cjk
from support.paths import unpack_store
from vam_engine.audio import TranscriptSegment
from vam_engine.memory import words
from vam_engine.memory.db import SCHEMA_VERSION
from vam_engine.memory.search import search
from vam_engine.memory.store import Store


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store")
    cjk.commit_signs(s, "hall")
    s.transcripts.append(cjk.segments("hall"))
    yield s
    s.close()


def texts(hits, store) -> list[str]:
    return [store.fulltext.text(h.kind, h.ref_id) for h in hits]


def test_cjk_characters_are_words_of_their_own_and_query_words_are_pairs():
    assert words.tokens("出口在左边") == ["出", "口", "在", "左", "边"]
    assert words.tokens("EXIT出口Ｂ２") == ["exit", "出", "口", "b2"]  # scripts split; full-width folded
    assert words.tokens("東京駅はどこですか") == list("東京駅はどこですか")
    assert words.tokens("출구는 왼쪽") == ["출", "구", "는", "왼", "쪽"]
    assert words.terms("出口在左边") == ["出口", "口在", "在左", "左边"]
    assert words.terms("Exit 出口 B2 门") == ["exit", "出口", "b2", "门"]
    assert words.terms("Loading dock, bay 12") == words.tokens("Loading dock, bay 12") == ["loading", "dock", "bay",
                                                                                          "12"]
    assert words.index_text("The loading dock") == "The loading dock"  # Latin text indexed as written


def test_ocr_and_speech_phrases_are_found_from_one_character(store):
    ft = store.fulltext
    assert texts(ft.search('"出口在左边"', kinds=("ocr",)), store) == ["出口在左边"]
    assert sorted(texts(ft.search("出口", mode="phrase"), store)) == ["Exit 出口 Ｂ２", "出口在左边"]  # two characters
    assert texts(ft.search("吸烟", mode="phrase"), store) == ["禁止吸烟"]  # inside a line
    assert set(texts(ft.search("駅"), store)) == {"東京駅 ３番線", "東京駅はどこですか"}  # one character
    assert texts(ft.search('"東京駅"', kinds=("speech",)), store) == ["東京駅はどこですか"]
    assert texts(ft.search('"どこですか"'), store) == ["東京駅はどこですか"]
    assert texts(ft.search("洗手间", mode="all"), store) == ["请问洗手间在哪里？"]
    assert texts(ft.search('"3番線"'), store) == ["東京駅 ３番線"]  # full-width digits read as digits
    # the quotes a Chinese or Japanese keyboard types make phrases too
    assert texts(ft.search("“吸烟”"), store) == ["禁止吸烟"] and texts(ft.search("「どこ」"), store) == \
        ["東京駅はどこですか"]
    assert texts(ft.search("『電梯』 “出口”"), store) == []  # every quoted part must occur (電梯: traditional)
    # order and adjacency hold in a phrase of characters
    assert ft.search("左边出口", mode="phrase") == [] and ft.search('"出左"') == []
    assert ft.search("禁烟", mode="phrase") == [] and ft.search("禁烟", mode="all") == []
    # unquoted: any pair of characters, the document holding the most pairs first
    hits = ft.search("出口在哪边")  # "which side is the exit": 出口 and 口在 in one sign, one pair in others
    assert texts(hits, store)[0] == "出口在左边" and hits[0].score > hits[1].score
    assert set(texts(hits, store)) == {"出口在左边", "Exit 出口 Ｂ２", "请问洗手间在哪里？"}
    assert texts(ft.search("在哪里", kinds=("speech",)), store) == ["请问洗手间在哪里？"]


def test_mixed_script_phrases_and_english_phrases_stay_exact(store):
    ft = store.fulltext
    assert texts(ft.search('"Exit 出口 B2"'), store) == ["Exit 出口 Ｂ２"]
    assert texts(ft.search('"exit出口"'), store) == ["Exit 出口 Ｂ２"]  # OCR often drops the space
    assert ft.search('"exit b2"') == [] and ft.search('"出口 exit"') == []  # not adjacent / not in order
    assert texts(ft.search('"exit is on the left"'), store) == ["The exit is on the left, next to the lift."]
    assert ft.search('"exit on the left"') == [] and ft.search("left the on", mode="phrase") == []
    assert texts(ft.search("lift exit", mode="all"), store) == ["The exit is on the left, next to the lift."]
    assert {h.kind for h in ft.search("exit")} == {"ocr", "speech"}


def test_search_fuses_cjk_text_and_speech_hits(store):
    """The store's search (what the service and the agent call): a sign and a sentence by their words."""
    got = search(store, None, None, None, text='"禁止吸烟"', sources=("ocr",)).evidence
    assert [(e.source, e.text, e.t_start, e.t_end) for e in got] == [("ocr", "禁止吸烟", 31.0, 32.0)]
    assert got[0].frame_paths and got[0].boxes and {(b.kind, b.label) for b in got[0].boxes} == {("text", "禁止吸烟")}
    said = search(store, None, None, None, text="大厅的电梯", sources=("speech",)).evidence
    assert said[0].text == "电梯在大厅的右边。" and said[0].source == "speech"
    signs = search(store, None, None, None, text="“出口”", sources=("ocr",)).evidence  # a phrase: exact
    assert sorted(e.text for e in signs) == ["Exit 出口 Ｂ２", "出口在左边"]


@pytest.fixture
def v11_store(tmp_path):
    root = unpack_store(11, tmp_path, "store_v11_cjk.tar.gz")  # support/cjk.py's store, by the schema 11 release
    with sqlite3.connect(root / "store.sqlite") as conn:  # that index held each CJK run as one token
        count = lambda phrase: conn.execute("SELECT COUNT(*) FROM fulltext WHERE fulltext MATCH ?",  # noqa: E731
                                            (f'"{phrase}"',)).fetchone()[0]
        assert count("吸烟") == 0 and count("出口在左边") == 1 and count("exit") == 2
    return root


def test_a_schema_11_store_is_reindexed_on_open_once(v11_store):
    s = Store(v11_store, create=False)
    try:
        version = s.db.conn().execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),) and SCHEMA_VERSION >= 12
        assert s.fulltext.count() == 8 and s.fulltext.count("ocr") == 4
        assert texts(s.fulltext.search("吸烟", mode="phrase"), s) == ["禁止吸烟"]
        assert set(texts(s.fulltext.search('"東京駅"'), s)) == {"東京駅 ３番線", "東京駅はどこですか"}
        assert texts(s.fulltext.search('"exit is on the left"'), s) == ["The exit is on the left, next to the lift."]
        hit = s.fulltext.search('"出口在左边"')[0]
        assert (hit.kind, hit.t_start, hit.t_end) == ("ocr", 30.0, 31.0)  # same document, same interval
        s.transcripts.append([TranscriptSegment("hall", 60.0, 61.0, "出口在哪里", "zh", 0.9)])
        assert len(s.fulltext.search("出口", mode="phrase")) == 3  # new documents indexed the new way
    finally:
        s.close()
    again = Store(v11_store, create=False)  # reopening re-indexes nothing twice
    try:
        assert again.fulltext.count() == 9 and len(again.fulltext.search("出口", mode="phrase")) == 3
    finally:
        again.close()


def test_an_open_that_fails_while_reindexing_leaves_the_schema_11_store_as_it_was(v11_store, monkeypatch):
    from vam_engine.memory import db

    def failing(text):
        if "吸烟" in text:
            raise RuntimeError("disk gone")
        return words.index_text(text)

    monkeypatch.setattr(db, "index_text", failing)
    with pytest.raises(Exception):
        Store(v11_store, create=False)
    with sqlite3.connect(v11_store / "store.sqlite") as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("11",)
        assert conn.execute("SELECT COUNT(*) FROM fulltext WHERE fulltext MATCH '\"出口在左边\"'").fetchone() == (1,)
        assert conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'fulltext_v12%'").fetchall() == []
    monkeypatch.undo()
    s = Store(v11_store, create=False)
    try:
        assert texts(s.fulltext.search("吸烟", mode="phrase"), s) == ["禁止吸烟"] and s.fulltext.count() == 8
    finally:
        s.close()
