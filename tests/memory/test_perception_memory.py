"""Perception in the memory: the schema 8 -> 9 migration (its event and summary documents found
by their words afterwards), and what an ingest transaction writes from a perception stage
(tiny constructed ONNX detector: a red frame holds a "red" thing; an OCR reader that reads what
the test put on each frame): detections and lines with their moments, spans of text opened,
extended and closed, tracks and entities with their full-text rows and "entity" vectors, the
stage's state, and nothing at all for moments a resumed run already had."""
import sqlite3

import numpy as np
import pytest

from support import detector_models as dm
from support.paths import unpack_store
from vam_engine.gate.records import GateRecord
from vam_engine.memory.commit import CommitBatch
from vam_engine.memory.db import SCHEMA_VERSION
from vam_engine.memory.records import PendingMoment
from vam_engine.memory.sightings import PerceptionCommit
from vam_engine.memory.store import Store
from vam_engine.perception import OcrLine, PerceptionFrame, PerceptionStage, TextChangeGate


def test_a_schema_8_store_migrates_and_finds_its_documents_by_their_words(tmp_path):
    root = unpack_store(8, tmp_path, "store_v8_perception.tar.gz")  # a 12 s clip, one event document, one summary, one transcript
    with sqlite3.connect(root / "store.sqlite") as conn:
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name='entities'").fetchone()
    s = Store(root, create=False)
    try:
        assert s.db.conn().execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
            str(SCHEMA_VERSION),) and SCHEMA_VERSION >= 9
        kinds = {h.kind: h for h in s.fulltext.search("truck gate forklift please", limit=10)}
        assert set(kinds) == {"event", "summary", "speech"}  # the documents, indexed by the migration
        assert s.fulltext.text("event", kinds["event"].ref_id).startswith("a red truck parks")
        for table in ("detections", "ocr_lines", "text_spans", "tracks", "entities", "entity_seen",
                      "perception_state"):
            assert s.db.conn().execute(f"SELECT COUNT(*) FROM {table}").fetchone() == (0,)
        assert s.entities.list() == [] and s.entities.last_seen("truck") is None
        assert len(s.moments.list()) == 12
    finally:
        s.close()
    again = Store(root, create=False)  # reopening migrates nothing twice
    try:
        assert again.fulltext.count("event") == 1 and again.fulltext.count("summary") == 1
    finally:
        again.close()


class ScriptedOcr:
    """Reads, on each frame, the strings the test wrote into its top-left pixel's table."""

    name = "scripted-ocr"

    def __init__(self, texts):
        self.texts = texts  # frame key (its first pixel's blue value) -> strings

    def read(self, frames):
        return [[OcrLine((10.0 + 40 * i, 4.0, 40.0 + 40 * i, 14.0), s, 0.99)
                 for i, s in enumerate(self.texts.get(int(f[0, 0, 2]), ()))] for f in frames]


class EveryFrame(TextChangeGate):
    """A text gate that reads every frame whole (the scripted reader knows frames, not parts)."""

    def should_read(self, camera_id, sig, ignore=()):
        return True

    def region(self, camera_id, sig, ignore=()):
        return None

    def regions(self, camera_id, sig, ignore=()):
        return None


def whole_reads() -> TextChangeGate:
    return EveryFrame()


def frame(colour, key: int) -> np.ndarray:
    f = np.broadcast_to(np.asarray(colour, np.uint8), (64, 64, 3)).copy()
    f[0, 0, 2] = key
    return f


def commit_frames(store: Store, stage: PerceptionStage, frames, *, source_id: int):
    """Commit frames as moments of camera "cam" with what the stage found on them."""
    got = stage.process([PerceptionFrame("cam", t, f, key=(source_id, t)) for t, f in frames], snapshot=True)
    batch = CommitBatch()
    for t, f in frames:
        ref = store.frames.ref("cam", source_id, t)
        store.frames.write(ref, f, 80)
        batch.moments.append(PendingMoment("cam", source_id, t, None, None, ref, 64, 64,
                                           GateRecord(100.0, None, None, None, None)))
    batch.perception = PerceptionCommit(list(got.frames), got.state, ocr=True)
    store.commit(batch)
    return got


@pytest.fixture
def store_and_stage(tmp_path):
    pytest.importorskip("onnxruntime")
    s = Store(tmp_path / "store")
    sid = s.sources.open("cam", "x", "fp", "fps=1").source_id
    det = __import__("vam_engine.perception.detect_onnx", fromlist=["OnnxDetector"]).OnnxDetector(
        dm.yolo_model(tmp_path / "tiny.onnx"), labels=dm.LABELS, min_score=0.5)
    ocr = ScriptedOcr({1: ("EXIT 7",), 2: ("EXIT 7", "0041"), 3: ("EXIT 7", "0042"), 4: ()})
    yield s, PerceptionStage(detector=det, ocr=ocr, text_gate=whole_reads()), sid
    s.close()


def test_an_ingest_transaction_writes_what_perception_found(store_and_stage):
    s, stage, sid = store_and_stage
    red, blue = (250, 0, 0), (0, 0, 250)
    commit_frames(s, stage, [(0.0, frame(red, 1)), (1.0, frame(red, 2))], source_id=sid)
    commit_frames(s, stage, [(2.0, frame(red, 3)), (3.0, frame(blue, 4))], source_id=sid)
    conn = s.db.conn()
    moments = {m.t: m.moment_id for m in s.moments.list("cam")}
    dets = s.entities.detections(list(moments.values()))
    assert [d.label for t in (0.0, 1.0, 2.0) for d in dets[moments[t]]] == ["red"] * 3
    assert {d.track_id for t in (0.0, 1.0, 2.0) for d in dets[moments[t]]} == {1}  # one track over the frames
    assert [d.label for d in dets[moments[3.0]]] == ["blue"] and dets[moments[0.0]][0].frame_size == (64, 64)
    lines = s.entities.ocr_lines([moments[2.0]])[moments[2.0]]
    assert [ln.text for ln in lines] == ["EXIT 7", "0042"]
    spans = conn.execute("SELECT text, t_start, t_end, open FROM text_spans ORDER BY span_id").fetchall()
    assert spans == [("EXIT 7", 0.0, 2.0, 0), ("0041", 1.0, 1.0, 0), ("0042", 2.0, 2.0, 0)]  # nothing on the last
    hit = s.fulltext.search("exit 7", kinds=("ocr",))[0]
    assert (hit.t_start, hit.t_end) == (0.0, 2.0)
    ents = {e.label: e for e in s.entities.list()}
    assert set(ents) == {"red", "blue"} and ents["red"].seen == {"cam": (0.0, 2.0)}
    assert ents["red"].crop_path and (s.root / "entities" / f"{ents['red'].entity_id}.jpg").is_file()
    assert conn.execute("SELECT COUNT(*) FROM vectors WHERE space='entity'").fetchone() == (2,)
    assert {h.ref_id for h in s.fulltext.search("red", kinds=("object",))} == {1}
    assert conn.execute("SELECT COUNT(*) FROM perception_state").fetchone()[0] == 2  # the camera and '*'
    # a later stage restored from the store goes on with the red thing's track and entity
    again = PerceptionStage(detector=stage.detector, ocr=stage.ocr, text_gate=whole_reads())
    again.restore(s.entities.stage_state())
    more = commit_frames(s, again, [(4.0, frame(red, 1))], source_id=sid)
    assert more.frames[0].track_ids == (1,) and more.entities[0].entity_id == ents["red"].entity_id
    assert s.entities.list(label="red")[0].seen == {"cam": (0.0, 4.0)}


def test_a_moment_committed_before_gets_no_second_rows(store_and_stage):
    s, stage, sid = store_and_stage
    commit_frames(s, stage, [(0.0, frame((250, 0, 0), 1))], source_id=sid)
    n = s.db.conn().execute("SELECT COUNT(*) FROM detections").fetchone()[0]
    commit_frames(s, stage, [(0.0, frame((250, 0, 0), 1))], source_id=sid)  # a resumed run repeats the frame
    assert s.db.conn().execute("SELECT COUNT(*) FROM detections").fetchone()[0] == n == 1
