"""Tracks per camera: a thing crossing a scene over sparse samples is one track; two crossing
things stay apart; the motion gate widens with the sampling gap; appearance and label gate too."""
import numpy as np
import pytest

from vam_engine.perception import CameraTracker, Detection, PerceptionFrame, PerceptionStage, TrackerParams
from vam_engine.synthetic.perception import backdrop, crossing, perception_photo, place, scaled


def test_a_cat_crossing_at_half_a_frame_per_second_is_one_track(ssd, rng):
    times = [100.0 + 2.0 * i for i in range(8)]  # 0.5 fps, 14 s across
    cat = scaled(perception_photo("chelsea"), 200)
    clip = crossing(rng, cat, h=720, w=1280, times=times, x_from=20, x_to=1280 - cat.shape[1] - 20, y=400)
    stage = PerceptionStage(detector=ssd)
    out = stage.process([PerceptionFrame("gate-cam", t, f, key=f"m{i}") for i, (t, f) in
                         enumerate(zip(clip.times, clip.frames))])
    assert all([d.label for d in fp.detections] == ["cat"] for fp in out.frames), \
        [[(d.label, d.score) for d in fp.detections] for fp in out.frames]
    ids = {fp.track_ids for fp in out.frames}
    assert len(ids) == 1
    (track,) = out.tracks
    assert (track.label, track.camera_id, track.first_t, track.last_t, track.count) == ("cat", "gate-cam", 100.0,
                                                                                          114.0, 8)
    assert [s.key for s in track.sightings] == [f"m{i}" for i in range(8)]
    for s, box in zip(track.sightings, clip.boxes):
        assert abs((s.box[0] + s.box[2]) / 2 - (box[0] + box[2]) / 2) < 40
    (entity,) = out.entities
    assert entity.seen == {"gate-cam": (100.0, 114.0)} and entity.track_ids == [track.track_id]
    assert entity.label == "cat" and "orange" in entity.colours and entity.crop is not None
    assert entity.crop_from[0] == "gate-cam" and entity.crop_from[3] in {s.key for s in track.sightings}


def test_two_alike_cats_crossing_each_other_keep_their_tracks(ssd, rng):
    cat = scaled(perception_photo("chelsea"), 180)
    bg = backdrop(rng, 720, 1280, noise=0.0)
    frames, times = [], [2.0 * i for i in range(7)]
    right = 1280 - cat.shape[1] - 10
    for i in range(7):
        xa = round(10 + (right - 10) * i / 6)
        xb = right - (xa - 10)
        f, _ = place(bg, cat, xa, 440)
        f, _ = place(f, cat, xb, 120)
        frames.append(np.clip(f + rng.normal(0, 2, f.shape), 0, 255).astype(np.uint8))
    stage = PerceptionStage(detector=ssd)
    out = stage.process([PerceptionFrame("c", t, f) for t, f in zip(times, frames)])
    rows = {}
    for fp in out.frames:
        for d, tid in zip(fp.detections, fp.track_ids):
            rows.setdefault(tid, set()).add("low" if d.box[1] > 300 else "high")
    assert len(rows) == 2 and all(len(v) == 1 for v in rows.values()), rows
    # two cats in one frame are two entities, however alike
    assert len({t.entity_id for t in out.tracks}) == 2


def det(cx, cy, label="car", side=100.0, score=0.9):
    return Detection((cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2), label, score, 0)


def unit(v):
    v = np.asarray(v, np.float32)
    return v / np.linalg.norm(v)


def make_tracker(**kw):
    ids = iter(range(1, 100))
    return CameraTracker("c", lambda: next(ids), TrackerParams(**kw))


def test_motion_gate_widens_with_the_sampling_gap():
    look = unit([1, 0, 0])[None]
    diag = np.hypot(100, 100)
    # three box diagonals away: too far after 0.5 s (gate 0.5 + 1.0 x 0.5 = 1 diagonal) ...
    tr = make_tracker()
    a = tr.update(0.0, [det(100, 300)], look)[0][0]
    b, new = tr.update(0.5, [det(100 + 3 * diag, 300)], look)[0]
    assert new and b.track_id != a.track_id
    # ... within reach after 3 s (gate 3.5 diagonals)
    tr = make_tracker()
    a = tr.update(0.0, [det(100, 300)], look)[0][0]
    b, new = tr.update(3.0, [det(100 + 3 * diag, 300)], look)[0]
    assert not new and b.track_id == a.track_id and a.count == 2 and a.last_t == 3.0


def test_velocity_prediction_and_greedy_matching():
    look = unit([1, 0, 0])[None].repeat(2, axis=0)
    tr = make_tracker()
    first = tr.update(0.0, [det(100, 100), det(500, 100)], look)
    a, b = first[0][0], first[1][0]
    tr.update(1.0, [det(200, 100), det(400, 100)], look)  # moving towards each other
    got = tr.update(2.0, [det(300, 100), det(300, 120)], look)  # they meet
    assert {t.track_id for t, _ in got} == {a.track_id, b.track_id}
    got = tr.update(3.0, [det(400, 110), det(200, 110)], look)  # and pass
    assert got[0][0].track_id == a.track_id and got[1][0].track_id == b.track_id


def test_appearance_label_size_and_gap_gates():
    tr = make_tracker(max_gap_s=5.0)
    red, blue = unit([1, 0, 0]), unit([0, 1, 0])
    a = tr.update(0.0, [det(100, 100)], red[None])[0][0]
    assert tr.update(1.0, [det(105, 100)], blue[None])[0][1]  # looks different: a new track
    assert tr.update(2.0, [det(110, 100, label="truck")], red[None])[0][1]  # another label: new
    assert tr.update(3.0, [det(110, 100, side=400.0)], red[None])[0][1]  # 16 x the area: new
    b, new = tr.update(4.0, [det(112, 100)], red[None])[0]
    assert not new and b.track_id == a.track_id
    assert tr.update(10.0, [det(112, 100)], red[None])[0][1]  # unseen for 6 s > max_gap_s: closed
    assert a.track_id not in {t.track_id for t in tr.active}
    with pytest.raises(ValueError, match="time order"):
        tr.update(9.0, [], np.zeros((0, 3), np.float32))
    with pytest.raises(ValueError, match="max_gap_s"):
        TrackerParams(max_gap_s=0)


def test_a_long_track_keeps_a_bounded_window_and_batches_carry_only_new_sightings(tiny_onnx):
    from vam_engine.perception.records import KEEP_SIGHTINGS

    stage = PerceptionStage(detector=tiny_onnx, detect_present=True)
    red = np.broadcast_to(np.array([250, 0, 0], np.uint8), (64, 64, 3)).copy()
    for k in range(5):  # 5 batches of 10 frames of one still red thing
        out = stage.process([PerceptionFrame("c", 10.0 * k + i, red, kind="present") for i in range(10)])
        (track,) = out.tracks
        assert [s.t for s in track.sightings] == [10.0 * k + i for i in range(10)]
        assert track.count == 10 * (k + 1) and track.first_t == 0.0
    (live,) = stage.tracks("c")
    assert live.count == 50 and len(live.sightings) == KEEP_SIGHTINGS and live.last_t == 49.0
