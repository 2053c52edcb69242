"""Perception through ``Engine.index_file`` with the real weights (SSD-MobileNet-v2 COCO, PP-OCR):
words on screen and detected things found by a plain text search, a counter's change as an event
boundary, a crossing thing as one entity seen on two cameras, ``as_of``, deletion, retention's
thinning, a bad detector refused at start, and a model failing mid-stream leaving the moments.
The two cameras of the session store are support/perception_store.py's."""
import sqlite3

import pytest

from support import perception_store as ps
from vam_engine.engine import Engine
from vam_engine.perception import PerceptionError

SAMPLE_S = 2.0  # the default 0.5 fps: a thing is first and last seen within a sample of its true times


def rows(store, sql, *args):
    with sqlite3.connect(store / "store.sqlite") as c:
        return c.execute(sql, args).fetchall()


def test_a_signs_text_finds_its_interval_with_boxes(perception_store):
    with Engine(perception_store["store"]) as eng:
        hits = [e for e in eng.search(ps.SIGN, top_k=5).evidence if e.source == "ocr"]
    assert hits and hits[0].text == ps.SIGN and hits[0].camera_id == "gate"
    assert hits[0].t_start == 0.0 and hits[0].t_end >= ps.GATE_S - SAMPLE_S  # shown the whole time
    assert all(h.camera_id == "gate" for h in hits)  # the yard shows no text
    boxes = hits[0].boxes
    assert boxes and {b.moment_id for b in boxes} <= set(hits[0].moment_ids)
    for b in boxes:  # the sign's plate is drawn at (30, 24), about 160 x 50 px
        assert b.kind == "text" and b.label == ps.SIGN and b.frame_size == (ps.W, ps.H)
        assert 20 <= b.box[0] <= 60 and 15 <= b.box[1] <= 60 and b.box[2] <= 220


def test_cat_finds_the_cat_scenes_and_labels_filter(perception_store):
    with Engine(perception_store["store"]) as eng:
        res = eng.search("cat", top_k=10)
        by_label = eng.search(ps.SIGN, top_k=10, labels=["cat"])
        no_person = eng.search(ps.SIGN, top_k=10, labels=["person"], sources=("ocr",))
    objs = {e.camera_id: e for e in res.evidence if e.source == "object"}
    assert set(objs) == {"gate", "yard"}
    for cam, span in (("gate", ps.CAT_ON_GATE), ("yard", ps.CAT_ON_YARD)):
        ev = objs[cam]
        assert ev.text.split()[0] == "cat"
        assert span[0] - SAMPLE_S <= ev.t_start and ev.t_end <= span[1] + SAMPLE_S and ev.t_end - ev.t_start >= 8
        assert ev.boxes and all(b.label == "cat" and b.score > 0.4 for b in ev.boxes)
    assert res.evidence[0].source == "object"  # the words name a thing: the things come first
    # labels: the sign's span overlaps the cat's crossing on the gate camera, never a person
    assert any(e.source == "ocr" for e in by_label.evidence)
    assert no_person.evidence == []


def test_a_counter_change_is_an_event_boundary(perception_store, tmp_path):
    with Engine(perception_store["store"]) as eng:
        starts = sorted(e.t_start for e in eng.store.events.list("gate"))
        spans = {t: (a, b) for t, a, b in eng.store.db.conn().execute(
            "SELECT text, t_start, t_end FROM text_spans WHERE camera_id='gate'")}
    assert set(ps.COUNTER_STEPS) <= set(starts)
    assert spans["0041"][0] == 0.0 and spans["0042"][0] == 8.0 and spans["0043"][0] == 16.0
    # the same clip without perception: the picture hardly changed there, no event starts
    with Engine(tmp_path / "plain", device="cpu") as eng:
        eng.index_file(perception_store["clips"]["gate"], "gate")
        plain = sorted(e.t_start for e in eng.store.events.list("gate"))
    assert not set(ps.COUNTER_STEPS) & set(plain)


def test_a_crossing_cat_is_one_entity_seen_on_both_cameras(perception_store):
    with Engine(perception_store["store"]) as eng:
        cats = eng.entities(label="cat")
        assert len(cats) == 1, [(e.entity_id, e.seen) for e in cats]
        cat = cats[0]
        line = eng.entity(cat.entity_id)
        assert set(cat.seen) == {"gate", "yard"}  # one thing, linked across the cameras by its crops
        for cam, (a, b) in (("gate", ps.CAT_ON_GATE), ("yard", ps.CAT_ON_YARD)):
            first, last = cat.seen[cam]
            assert a <= first <= a + SAMPLE_S and b - SAMPLE_S <= last <= b
            tracks = [t for t in line.tracks if t.camera_id == cam]
            assert len(tracks) == 1 and (tracks[0].first_t, tracks[0].last_t) == (first, last)
            xs = [(s.box[0] + s.box[2]) / 2 for s in line.sightings if s.camera_id == cam]
            assert len(xs) >= 6 and xs == sorted(xs)  # left to right, every kept frame
        assert "orange" in cat.colours and cat.crop_path is not None
        # a view of one camera sees the colours of a crop cut there only
        for cam in ("gate", "yard"):
            (mine,) = eng.entities(label="cat", camera=cam)
            assert set(mine.seen) == {cam}
            assert (mine.colours == cat.colours) == (cat.crop_camera == cam) and \
                (mine.crop_path is not None) == (cat.crop_camera == cam)
        people = eng.entities(label="person")
    assert len(people) == 1 and set(people[0].seen) == {"yard"}
    a, b = ps.PERSON_ON_YARD
    assert a <= people[0].seen["yard"][0] <= a + SAMPLE_S and people[0].seen["yard"][1] <= b


def test_as_of_hides_what_came_later(perception_store):
    with Engine(perception_store["store"]) as eng:
        early = eng.entities(as_of=20.0)
        hits = eng.search("cat", top_k=10, as_of=20.0).evidence
        seen_then = eng.last_seen("cat", as_of=10.0)
        seen_now = eng.last_seen("cat")
        cat_id = eng.entities(label="cat")[0].entity_id
        line = eng.entity(cat_id, as_of=12.0)
        assert eng.entity(cat_id, camera="gate", as_of=20.0) is None  # not on that camera yet
    assert [e.label for e in early] == ["cat"] and set(early[0].seen) == {"yard"}
    assert early[0].last_t <= 20.0
    assert hits and all(h.t_end <= 20.0 for h in hits) and {h.camera_id for h in hits} == {"yard"}
    assert seen_then.camera_id == "yard" and seen_then.t <= 10.0 and seen_then.box is not None
    assert seen_now.camera_id == "gate" and seen_now.t == pytest.approx(ps.CAT_ON_GATE[1], abs=SAMPLE_S)
    assert line.sightings and max(s.t for s in line.sightings) <= 12.0


def test_deletion_leaves_no_ocr_entity_or_fulltext_row(perception_store, copy_store):
    store = copy_store(perception_store["store"])
    with Engine(store) as eng:
        out = eng.delete(cameras=["gate"], time_range=(20.0, 40.0))
        assert out.detections >= 6 and out.ocr_lines > 0 and out.entities == 0  # the cat lives on, on the yard
        cat = eng.entities(label="cat")[0]
        assert set(cat.seen) == {"yard"}
        assert not [e for e in eng.search("cat", top_k=10).evidence if e.camera_id == "gate"]
    for table in ("detections", "ocr_lines"):
        assert rows(store, f"SELECT COUNT(*) FROM {table} WHERE camera_id='gate' AND t >= 20")[0][0] == 0
    assert rows(store, "SELECT COUNT(*) FROM text_spans WHERE camera_id='gate' AND t_end >= 20")[0][0] == 0
    assert rows(store, "SELECT COUNT(*) FROM fulltext_docs WHERE camera_id='gate' AND t_end >= 20")[0][0] == 0
    assert rows(store, "SELECT COUNT(*) FROM tracks WHERE camera_id='gate'")[0][0] == 0
    assert rows(store, "SELECT text FROM text_spans WHERE camera_id='gate' AND text=?", ps.SIGN)  # before 20: kept
    with Engine(store) as eng:
        eng.delete(cameras=["gate", "yard"])
    for table in ("detections", "ocr_lines", "text_spans", "tracks", "entities", "entity_seen"):
        assert rows(store, f"SELECT COUNT(*) FROM {table}") == [(0,)], table
    assert rows(store, "SELECT COUNT(*) FROM fulltext_docs WHERE kind IN ('ocr', 'object')") == [(0,)]
    assert rows(store, "SELECT COUNT(*) FROM vectors WHERE space='entity'") == [(0,)]
    assert not list((store / "entities").glob("*.jpg"))


def test_retention_thinning_takes_detections_and_keeps_first_and_last_seen(perception_store, copy_store):
    store = copy_store(perception_store["store"])
    with Engine(store) as eng:
        before = eng.entities(label="cat")[0].seen
        ids = [m for (m,) in eng.store.db.conn().execute(
            "SELECT moment_id FROM moments WHERE camera_id='gate' AND t > 24 AND t < 38")]
        eng.store.moments.delete_moments(ids)  # what a retention pass calls for thinned moments
        gone = eng.store.db.conn().execute(
            "SELECT COUNT(*) FROM detections d LEFT JOIN moments m ON m.moment_id = d.moment_id "
            "WHERE m.moment_id IS NULL").fetchone()[0]
        after = eng.entities(label="cat")[0].seen
        hits = [e for e in eng.search("cat", top_k=10).evidence if e.camera_id == "gate"]
    assert ids and gone == 0 and after == before
    assert hits and hits[0].t_start <= 26 and hits[0].t_end >= 36  # the track's extent stays


def test_a_missing_or_broken_detector_is_an_error_at_start(tmp_path):
    with pytest.raises(PerceptionError, match="does not exist"):
        Engine(tmp_path / "a", {"perception": {"detector": str(tmp_path / "missing.pb")}})
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    with pytest.raises(PerceptionError, match="broken.onnx"):
        Engine(tmp_path / "b", {"perception": {"detector": str(broken)}})
    with Engine(tmp_path / "b") as eng:  # nothing held: the store opens and takes writes
        eng.start()
        assert eng.writing


def test_a_model_failing_mid_stream_leaves_the_moments(perception_store, tmp_path, monkeypatch):
    from vam_engine.perception.detect_opencv import OpenCvDetector

    cfg = ps.perception_config()
    cfg["perception"]["ocr"] = False
    calls = []
    real = OpenCvDetector.detect

    def flaky(self, frames):  # the loaded detector breaks after its first round
        calls.append(len(frames))
        if len(calls) > 1:
            raise RuntimeError("the accelerator went away")
        return real(self, frames)
    monkeypatch.setattr(OpenCvDetector, "detect", flaky)
    with Engine(tmp_path / "s", cfg, device="cpu") as eng:
        rep = eng.index_file(perception_store["clips"]["yard"], "yard")
        stats = eng.info()["perception"]
        assert rep.kept >= 10 and len(eng.moments("yard")) == rep.kept  # indexing went on
        assert len(calls) >= 2 and stats["feed"]["failed_rounds"] >= 1
        assert "accelerator" in stats["last_error"]


def test_after_deleting_a_camera_its_things_start_afresh(perception_store, tmp_path):
    cfg = ps.perception_config()
    cfg["perception"]["ocr"] = False
    with Engine(tmp_path / "s", cfg, device="cpu") as eng:
        eng.index_file(perception_store["clips"]["yard"], "yard")
        old = {e.entity_id for e in eng.entities()}
        eng.delete(cameras=["yard"])
        assert eng.entities() == []
        eng.index_file(perception_store["clips"]["gate"], "yard")  # new video on the emptied camera
        cats = eng.entities(label="cat")
    assert len(cats) == 1 and not old & {cats[0].entity_id}  # ids are never reused
    assert cats[0].seen == {"yard": ps.CAT_ON_GATE}  # nothing of the deleted sightings comes back
