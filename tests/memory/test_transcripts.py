"""Transcripts in the store: the schema 6 -> 7 migration, idempotent appends, reads by camera,
time and as_of, the full-text index (phrases, ranked words, scopes), one transaction with the
full-text rows and vectors, deletion everywhere, retention leaving them alone, and speech in
``search`` with the MiniLM text embedder (a paraphrase finds what was said)."""
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from support.paths import unpack_store
from vam_engine.audio import TranscriptSegment
from vam_engine.config import VectorConfig
from vam_engine.errors import VamError
from vam_engine.memory import fulltext
from vam_engine.memory.db import SCHEMA_VERSION
from vam_engine.memory.retention import RetentionPass, Tier
from vam_engine.memory.search import search
from vam_engine.memory.store import Store
from vam_engine.memory.vector_memory import VectorMemory


SAID = [("door", 1.4, 4.9, "Please remember to water the plants in the kitchen tomorrow morning."),
        ("door", 8.4, 11.4, "The delivery truck arrived at the loading dock at noon."),
        ("yard", 2.0, 4.0, "I left my keys on the table by the window."),
        ("yard", 20.0, 23.0, "Someone opened the back door and walked into the warehouse.")]


def _segments(rows=SAID, shift=0.0):
    return [TranscriptSegment(c, a + shift, b + shift, text, "en", 0.9) for c, a, b, text in rows]


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("sentence_transformers")
    from vam_engine.embed.text import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder("minilm")


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store")
    yield s
    s.close()


@pytest.fixture
def v6_store(tmp_path):
    root = unpack_store(6, tmp_path)  # 8 s clip at 1 fps, written by the release before transcripts
    with sqlite3.connect(root / "store.sqlite") as conn:
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name='transcripts'").fetchone()
    return root


def test_a_schema_6_store_migrates_and_takes_transcripts(v6_store, minilm):
    s = Store(v6_store, create=False)
    try:
        version = s.db.conn().execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),) and SCHEMA_VERSION >= 8  # 8: transcripts and full text
        info = s.info()
        assert info["moments"] == 8 and info["events"] == 5 and info["transcripts"] == 0
        assert info["vectors"] == {"frame": 8, "event": 5}
        assert all(Path(m.frame_path).is_file() for m in s.moments.list())
        segs = [TranscriptSegment("cam", 1.0, 3.0, "the kettle is boiling", "en", 0.8)]
        (stored,) = s.transcripts.append(segs, minilm.embed_texts([x.text for x in segs]))
        assert s.fulltext.search('"kettle is boiling"')[0].ref_id == stored.segment_id
        vm = VectorMemory(s.vector_table, s.root / "vectors", VectorConfig())
        hits = search(s, vm, None, minilm, text="water is getting hot", sources=("speech",)).evidence
        assert hits[0].source == "speech" and hits[0].text == "the kettle is boiling"
        assert hits[0].moment_ids == tuple(m.moment_id for m in s.moments.on_axis("cam", 1.0, 3.0 + 1e-6))
        vm.close()
    finally:
        s.close()
    again = Store(v6_store, create=False)  # reopening a migrated store changes nothing
    assert again.info()["transcripts"] == 1 and again.info()["moments"] == 8
    again.close()


def test_appending_again_never_duplicates(store):
    first = store.transcripts.append(_segments())
    assert [t.segment_id for t in first] == [1, 2, 3, 4]
    assert store.transcripts.append(_segments()) == []  # the same segments: same keys
    # a resumed run cut its chunks elsewhere: starts moved by 0.3 s, mostly the same spans
    assert store.transcripts.append(_segments(shift=0.3)) == []
    new = store.transcripts.append([TranscriptSegment("door", 30.0, 32.0, "a new sentence", "en", None),
                                    TranscriptSegment("door", 33.0, 34.0, "   ", "en", 0.5)])  # empty: skipped
    assert [(t.camera_id, t.t_start, t.confidence) for t in new] == [("door", 30.0, None)]
    assert store.transcripts.count() == 5 and store.fulltext.count("speech") == 5
    assert store.transcripts.progress("door") == 32.0 and store.transcripts.progress("nobody") is None


def test_bad_segments_are_refused_before_anything_is_written(store):
    with pytest.raises(VamError, match="'door'.*ends before it starts"):
        store.transcripts.append([TranscriptSegment("door", 5.0, 4.0, "x", "en", 0.5)])
    with pytest.raises(VamError, match="confidence"):
        store.transcripts.append([TranscriptSegment("door", 1.0, 2.0, "x", "en", 7.0)])
    with pytest.raises(VamError, match="one row per segment"):
        store.transcripts.append(_segments(), np.zeros((2, 4), np.float32))
    with pytest.raises(VamError, match="finite"):
        store.transcripts.append([TranscriptSegment("door", float("nan"), 2.0, "x", "en", 0.5)])
    assert store.transcripts.count() == 0


def test_segments_commit_with_their_fulltext_rows_or_not_at_all(store, monkeypatch):
    calls = []

    def failing_put(conn, kind, ref_id, *args):
        calls.append(ref_id)
        if len(calls) == 3:
            raise RuntimeError("disk full")
        real_put(conn, kind, ref_id, *args)

    real_put = fulltext.put
    monkeypatch.setattr(fulltext, "put", failing_put)
    with pytest.raises(RuntimeError, match="disk full"):
        store.transcripts.append(_segments(), np.ones((4, 8), np.float32))
    assert calls == [1, 2, 3]  # two segments were written inside the transaction...
    monkeypatch.setattr(fulltext, "put", real_put)
    # ...and none of them, nor their full-text rows or vectors, survived
    assert store.transcripts.count() == 0 and store.fulltext.count() == 0 and store.vector_table.counts() == {}
    assert len(store.transcripts.append(_segments())) == 4


def test_reads_by_camera_time_range_and_as_of(store):
    store.transcripts.append(_segments())
    assert [t.text[:6] for t in store.transcripts.list()] == ["Please", "I left", "The de", "Someon"]
    assert [t.t_start for t in store.transcripts.list("yard")] == [2.0, 20.0]
    assert [t.t_start for t in store.transcripts.list(["door"], t0=4.0, t1=9.0)] == [1.4, 8.4]  # overlapping
    assert [t.t_start for t in store.transcripts.list(as_of=11.0)] == [1.4, 2.0]  # nothing that ends after it
    assert [t.t_start for t in store.transcripts.list(as_of=11.4)] == [1.4, 2.0, 8.4]
    by_id = store.transcripts.by_id([2, 99])
    assert list(by_id) == [2] and by_id[2].text.startswith("The delivery")


def test_fulltext_phrases_words_and_scopes(store):
    store.transcripts.append(_segments())
    ft = store.fulltext
    assert [h.ref_id for h in ft.search("water the plants", mode="phrase")] == [1]
    assert ft.search("plants the water", mode="phrase") == []  # order matters in a phrase
    assert [h.ref_id for h in ft.search("plants water", mode="all")] == [1]
    assert [h.ref_id for h in ft.search('"LOADING  dock"')] == [2]  # case and spacing folded
    hits = ft.search("back door window")  # any word, ranked: two words beat one
    assert [h.ref_id for h in hits][:1] == [4] and {h.ref_id for h in hits} == {3, 4}
    assert hits[0].score > hits[1].score and hits[0].kind == "speech" and hits[0].camera_id == "yard"
    assert ft.search('"back door" "warehouse"')[0].ref_id == 4  # quoted parts must all occur
    assert ft.search('"back door" "kitchen"') == []
    assert ft.search("window", cameras=["door"]) == []  # camera scope
    assert ft.search("window", t0=5.0) == [] and ft.search("window", t1=2.5)[0].ref_id == 3
    assert ft.search("warehouse", as_of=22.0) == [] and ft.search("warehouse", as_of=23.0)
    assert ft.search("window", kinds=("ocr",)) == []  # another kind's documents only
    # text, never syntax: FTS5 operators and SQL in a query are words like any other
    assert [h.ref_id for h in ft.search('"; DROP TABLE transcripts; --')] == [3]  # "table"
    assert ft.search('keys NEAR(window) OR* -"') != [] and store.transcripts.count() == 4
    assert ft.search("   ...  ") == [] and ft.search("x", limit=0) == []
    assert ft.text("speech", 3) == "I left my keys on the table by the window."


def test_the_index_is_generic_over_kinds(store):
    with store.db.transaction() as conn:
        fulltext.put(conn, "ocr", 7, "door", 3.0, 3.0, "EXIT 12 loading bay")
        fulltext.put(conn, "ocr", 7, "door", 3.0, 3.0, "EXIT 14 loading bay")  # re-indexing replaces
    store.transcripts.append(_segments())
    assert [(h.kind, h.ref_id) for h in store.fulltext.search("loading", kinds=("ocr",))] == [("ocr", 7)]
    assert {h.kind for h in store.fulltext.search("loading")} == {"ocr", "speech"}
    assert store.fulltext.search("12") == [] and store.fulltext.count("ocr") == 1
    with store.db.transaction() as conn:
        assert fulltext.drop(conn, "ocr", [7, 8]) == 1
    assert store.fulltext.count("ocr") == 0 and store.fulltext.count("speech") == 4


def test_deletion_leaves_no_transcript_fulltext_row_or_vector(store, minilm):
    segs = _segments()
    store.transcripts.append(segs, minilm.embed_texts([s.text for s in segs]))
    vm = VectorMemory(store.vector_table, store.root / "vectors", VectorConfig())
    gone = store.delete(["door"], 8.0, 9.0)  # overlaps the truck sentence only
    assert gone.transcripts == 1 and gone.vectors == 1
    assert [t.t_start for t in store.transcripts.list("door")] == [1.4]
    assert store.fulltext.search("delivery truck") == [] and store.fulltext.count() == 3
    assert store.vector_table.counts() == {"speech": 3} and vm.size("speech") == 3
    hits = search(store, vm, None, minilm, text="the truck came to the dock", sources=("speech",)).evidence
    assert all("truck" not in h.text for h in hits)
    assert store.delete(["yard"]).transcripts == 2  # a whole camera
    assert store.transcripts.delete() == 1 and store.transcripts.count() == 0
    assert store.fulltext.count() == 0 and vm.size("speech") == 0
    vm.close()  # a snapshot of the emptied space...
    again = VectorMemory(store.vector_table, store.root / "vectors", VectorConfig())
    assert again.size("speech") == 0 and again.warnings == []  # ...reads back
    again.close()


def test_retention_thins_frames_and_keeps_every_transcript(v6_store):
    s = Store(v6_store, create=False)
    try:
        s.transcripts.append([TranscriptSegment("cam", t, t + 0.5, f"word {t}", "en", 0.9) for t in range(8)])
        with s.db.transaction() as conn:  # the clip's events made every frame a keyframe: free them
            conn.execute("UPDATE moments SET protected=0")
        tiers = (Tier("recent", 1.0, 0.0), Tier("old", None, 4.0))
        RetentionPass(s.moments, tiers).run()
        assert len(s.moments.list()) < 8  # frames were thinned...
        assert s.transcripts.count() == 8 and s.fulltext.count() == 8  # ...and nothing that was said
    finally:
        s.close()


def test_speech_in_search_by_words_and_by_meaning(store, minilm):
    segs = _segments()
    store.transcripts.append(segs, minilm.embed_texts([s.text for s in segs]))
    vm = VectorMemory(store.vector_table, store.root / "vectors", VectorConfig())

    def find(text, **kw):
        return search(store, vm, None, minilm, text=text, sources=("speech",), top_k=4, **kw).evidence

    best = find("when did the lorry get to the dock")[0]  # a paraphrase: no phrase in common
    assert (best.camera_id, best.t_start, best.t_end, best.source) == ("door", 8.4, 11.4, "speech")
    assert best.text == SAID[1][3] and best.similarity > 0.3 and best.relevance > 0.6
    exact = find('"water the plants"')[0]
    assert exact.t_start == 1.4 and exact.similarity is not None and exact.relevance is not None
    assert find("where are my keys")[0].camera_id == "yard"
    assert find("where are my keys", cameras=["door"])[0].camera_id == "door"  # never another camera's speech
    assert all(e.t_end <= 11.0 for e in find("truck at the loading dock", as_of=11.0))
    assert find("truck at the loading dock", as_of=11.4)[0].t_start == 8.4
    assert all(e.t_start <= 5 for e in find("warehouse", time_range=(0.0, 5.0)))
    # without a text embedder the words still find it
    res = search(store, vm, None, None, text='"loading dock"', sources=("speech",))
    assert res.evidence[0].t_start == 8.4 and res.evidence[0].similarity is None
    with pytest.raises(VamError, match="unknown search sources"):
        search(store, vm, None, minilm, text="x", sources=("sound",))
    vm.close()


def test_a_segment_found_by_its_words_alone_gets_its_cosine_from_its_own_vector(store):
    """The vector list ranks the query's fetch of nearest segments; a segment beyond them that
    the words find is scored against its own vector (one relevance rule for every hit)."""
    rng = np.random.default_rng(0)
    near, far = np.eye(16, dtype=np.float32)[0], np.eye(16, dtype=np.float32)[1]
    segs = [TranscriptSegment("door", float(i), i + 0.5, f"delivery number {i} came in", "en", 0.9)
            for i in range(30)] + [TranscriptSegment("door", 40.0, 41.0, "my cat sleeps on the mat", "en", 0.9)]
    vecs = [near + 0.05 * rng.standard_normal(16).astype(np.float32) for _ in range(30)] + [far]
    store.transcripts.append(segs, np.stack([v / np.linalg.norm(v) for v in vecs]))
    vm = VectorMemory(store.vector_table, store.root / "vectors", VectorConfig())

    class Embedder:  # every query lands among the deliveries, far from the cat
        def embed_texts(self, texts):
            return np.stack([near] * len(texts))

    hits = search(store, vm, None, Embedder(), text="cat", sources=("speech",), top_k=3).evidence
    cat = [h for h in hits if h.t_start == 40.0]
    assert cat and abs(cat[0].similarity) < 0.05 and cat[0].relevance is not None and cat[0].relevance < 0.1
    vm.close()


def test_a_listing_with_a_bad_range_is_an_error_naming_it(store):
    store.transcripts.append(_segments())
    with pytest.raises(VamError, match=r"transcripts: the time range starts after it ends \(t0=5 > t1=1\)"):
        store.transcripts.list(t0=5.0, t1=1.0)
    with pytest.raises(VamError, match="as_of must be a finite time"):
        store.transcripts.list(as_of=float("nan"))
    assert [x.t_start for x in store.transcripts.list(t0=1.0, t1=5.0)] == [1.4, 2.0]


def test_speech_vectors_survive_a_reopen(tmp_path, minilm):
    s = Store(tmp_path / "s")
    segs = _segments()
    s.transcripts.append(segs, minilm.embed_texts([x.text for x in segs]))
    vm = VectorMemory(s.vector_table, s.root / "vectors", VectorConfig())
    vm.close()
    s.close()
    s = Store(tmp_path / "s", create=False)
    vm = VectorMemory(s.vector_table, s.root / "vectors", VectorConfig())
    assert vm.size("speech") == 4
    assert search(s, vm, None, minilm, text="keys on a table", sources=("speech",)).evidence[0].camera_id == "yard"
    vm.close()
    s.close()
