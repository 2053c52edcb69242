"""The detection gate (perception/detgate.py): boxes found on a crop come back to frame pixels
exactly, a changed-region detection on a real photograph finds what a full-frame one finds, and
the skip rules (an unchanged frame costs no detector call; a changed one does; a tracked thing
that moved is carried; the refresh bound)."""
import numpy as np
import pytest

pytest.importorskip("cv2")

from vam_engine.config import PerceptionConfig  # noqa: E402
from vam_engine.perception import (Detection, DetectionGate, PerceptionError, PerceptionFrame,  # noqa: E402
                                   PerceptionStage, make_perception_stage, to_frame)
from vam_engine.synthetic.perception import backdrop, perception_photo, place, scaled  # noqa: E402

H, W = 720, 1280


class Solids:
    """A detector of solid colours: a box per colour of ``COLOURS`` present (its pixels' bounds),
    in the pixels of the image it is given; it counts its calls and frames."""

    COLOURS = [(250, 20, 20), (20, 250, 20), (20, 20, 250), (250, 250, 20), (250, 20, 250)]
    name, min_score = "solids", 0.5
    labels = ("red", "green", "blue", "yellow", "magenta")

    def __init__(self):
        self.calls, self.frames = 0, []

    def detect(self, frames):
        self.calls += 1
        out = []
        for f in frames:
            self.frames.append(f.shape)
            dets = []
            for k, c in enumerate(self.COLOURS):
                ys, xs = np.nonzero((f == np.asarray(c, np.uint8)).all(axis=2))
                if len(ys):
                    dets.append(Detection((float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)),
                                          self.labels[k], 0.9, k))
            out.append(dets)
        return out


class Counting:
    """A real detector wrapped to count its calls and the frame sizes it saw."""

    def __init__(self, inner):
        self.inner, self.name, self.labels, self.min_score = inner, inner.name, inner.labels, inner.min_score
        self.calls, self.shapes = 0, []

    def detect(self, frames):
        self.calls += 1
        self.shapes += [f.shape for f in frames]
        return self.inner.detect(frames)


def _grey(rng, noise=2.0):
    return backdrop(rng, H, W, noise=noise)


def _rects(rng, n):
    """``n`` random non-overlapping solid rectangles (one per colour) on a backdrop."""
    f = _grey(rng)
    boxes = []
    while len(boxes) < n:
        w, h = int(rng.integers(8, 120)), int(rng.integers(8, 120))
        x, y = int(rng.integers(0, W - w)), int(rng.integers(0, H - h))
        b = (x, y, x + w, y + h)
        if any(b[0] < o[2] + 2 and o[0] < b[2] + 2 and b[1] < o[3] + 2 and o[1] < b[3] + 2 for o in boxes):
            continue
        f[y:y + h, x:x + w] = Solids.COLOURS[len(boxes)]
        boxes.append(b)
    return f, boxes


def test_crop_boxes_map_back_to_frame_pixels_exactly():
    rng = np.random.default_rng()
    det = Solids()
    for _ in range(20):
        f, boxes = _rects(rng, 4)
        full = {d.label: d.box for d in det.detect([f])[0]}
        x0, y0 = int(rng.integers(0, W // 2)), int(rng.integers(0, H // 2))
        crop = (x0, y0, int(rng.integers(x0 + 64, W + 1)), int(rng.integers(y0 + 64, H + 1)))
        got = to_frame(det.detect([f[crop[1]:crop[3], crop[0]:crop[2]]])[0], crop)
        inside = {lab for lab, b in full.items() if crop[0] <= b[0] and crop[1] <= b[1] and b[2] <= crop[2]
                  and b[3] <= crop[3]}
        assert {d.label for d in got} >= inside
        for d in got:
            if d.label in inside:
                assert d.box == full[d.label]  # exact: whole pixels shifted back
        for lab, b in full.items():
            assert b == tuple(float(v) for v in boxes[Solids.labels.index(lab)])


def test_stage_region_detection_lands_where_a_full_frame_one_does():
    """Through the stage: a small change is detected as a crop (the detector sees the crop, not
    the frame) and its boxes are the frame-pixel boxes of the things in it; the others carried."""
    rng = np.random.default_rng()
    det = Solids()
    stage = PerceptionStage(detector=det, detect_gate=DetectionGate())
    f0, boxes = _rects(rng, 3)
    b0 = stage.process([PerceptionFrame("c", 0.0, f0)]).frames[0]
    assert det.calls == 1 and det.frames[-1] == (H, W, 3)
    assert sorted(d.box for d in b0.detections) == sorted(tuple(float(v) for v in b) for b in boxes)
    f1 = f0.copy()  # a fourth thing appears in a free spot
    while True:
        w, h = int(rng.integers(20, 100)), int(rng.integers(20, 100))
        x, y = int(rng.integers(0, W - w)), int(rng.integers(0, H - h))
        nb = (x, y, x + w, y + h)
        if not any(nb[0] < o[2] + 40 and o[0] < nb[2] + 40 and nb[1] < o[3] + 40 and o[1] < nb[3] + 40 for o in boxes):
            break
    f1[y:y + h, x:x + w] = Solids.COLOURS[3]
    b1 = stage.process([PerceptionFrame("c", 2.0, f1)]).frames[0]
    assert det.calls == 2 and stage.stats["detect_regions"] == 1
    assert det.frames[-1][0] * det.frames[-1][1] < 0.35 * H * W  # a crop was detected
    full = sorted(d.box for d in Solids().detect([f1])[0])
    assert sorted(d.box for d in b1.detections) == full


def test_changed_region_detection_finds_the_pasted_photograph(ssd):
    """A real photograph pasted on a real backdrop: the crop detection names it as the full
    frame's does, its box on the photo."""
    rng = np.random.default_rng()
    for name, label in (("chelsea", "cat"), ("astronaut", "person"), ("horse", "horse")):
        for _ in range(20):  # a placement the full frame finds (it misses some: the bench's recall row)
            base = _grey(rng, noise=0.0)
            sprite = scaled(perception_photo(name), int(rng.integers(160, 220)))
            x, y = int(rng.integers(0, W - sprite.shape[1])), int(rng.integers(0, H - sprite.shape[0]))
            f1, box = place(base, sprite, x, y)

            def hit(dets):
                return [d for d in dets if d.label == label and box[0] <= (d.box[0] + d.box[2]) / 2 <= box[2]
                        and box[1] <= (d.box[1] + d.box[3]) / 2 <= box[3]]

            if hit(ssd.detect([f1])[0]):
                break
        else:
            pytest.fail(f"full-frame SSD never found the {name} photo in 20 placements")
        counting = Counting(ssd)
        stage = PerceptionStage(detector=counting, detect_gate=DetectionGate())
        stage.process([PerceptionFrame("c", 0.0, base)])
        got = stage.process([PerceptionFrame("c", 2.0, f1)]).frames[0].detections
        assert stage.stats["detect_regions"] == 1 and counting.shapes[-1][0] * counting.shapes[-1][1] < H * W
        assert hit(got), (name, got)


def test_skip_rules_unchanged_moved_changed_and_refresh(rng):
    det = Solids()
    stage = PerceptionStage(detector=det, detect_gate=DetectionGate(refresh_s=30.0))
    base = _grey(rng)
    # a thing textured in blocks of 10 px (the texture outlives the gate's 4x smaller thumbnail,
    # where pixel noise averages out) in a red frame: the detection's box is the whole thing
    patch = np.kron(rng.integers(0, 256, (9, 14, 3)), np.ones((10, 10, 1))).astype(np.uint8)
    patch[:2], patch[-2:], patch[:, :2], patch[:, -2:] = (Solids.COLOURS[0],) * 4

    def scene(x, noise_seed):
        f = np.clip(base.astype(np.int16) + np.random.default_rng(noise_seed).normal(0, 2, base.shape), 0, 255)
        f = f.astype(np.uint8)
        f[300:390, x:x + 140] = patch
        return f

    stage.process([PerceptionFrame("c", 0.0, scene(200, 1))])
    assert det.calls == 1
    # the same picture with fresh sensor noise: a near-duplicate, no call, the thing carried
    b = stage.process([PerceptionFrame("c", 2.0, scene(200, 2))]).frames[0]
    assert det.calls == 1 and [d.label for d in b.detections] == ["red"]
    # the thing moved: found again where it went, no call, its box moved with it
    b = stage.process([PerceptionFrame("c", 4.0, scene(440, 3))]).frames[0]
    assert det.calls == 1 and stage.stats["detect_carried"] == 2
    (d,) = b.detections
    assert abs(d.box[0] - 440) <= 2 and abs(d.box[1] - 300) <= 2
    # something new appears: a call (in the colour that stands out most from the backdrop there:
    # one of the same grey would change no tile)
    f = scene(440, 4)
    luma = np.array([0.299, 0.587, 0.114])
    there = float((base[50:120, 900:980] @ luma).mean())
    k = max(range(1, len(Solids.COLOURS)), key=lambda k: abs(float(np.dot(Solids.COLOURS[k], luma)) - there))
    f[50:120, 900:980] = Solids.COLOURS[k]
    b = stage.process([PerceptionFrame("c", 6.0, f)]).frames[0]
    assert det.calls == 2 and {d.label for d in b.detections} == {"red", Solids.labels[k]}
    # nothing changed, but refresh_s of camera time passed since the last full-frame call
    g = f.copy()
    stage.process([PerceptionFrame("c", 29.0, g)])
    assert det.calls == 2
    stage.process([PerceptionFrame("c", 30.5, g)])
    assert det.calls == 3 and det.frames[-1] == (H, W, 3)


def test_cameras_step_together_into_one_call():
    """Two cameras' first frames go to the detector in one call (batched across cameras)."""
    rng = np.random.default_rng()
    det = Solids()
    stage = PerceptionStage(detector=det, detect_gate=DetectionGate())
    stage.process([PerceptionFrame("a", 0.0, _rects(rng, 2)[0]), PerceptionFrame("b", 0.0, _rects(rng, 2)[0])])
    assert det.calls == 1 and len(det.frames) == 2


def test_gate_arguments_are_checked():
    for bad in (dict(thumb_long=8), dict(tile=1), dict(crop_max=1.5), dict(refresh_s=0), dict(match_min=2)):
        with pytest.raises(ValueError, match="DetectionGate"):
            DetectionGate(**bad)


def test_config_builds_the_gate_and_checks_the_region_detector(ssd_path):
    st = make_perception_stage(PerceptionConfig(detector=str(ssd_path)), "cpu")
    assert isinstance(st.detect_gate, DetectionGate) and st.region_detector is None
    assert make_perception_stage(PerceptionConfig(detector=str(ssd_path), detect_gate=False), "cpu").detect_gate is None
    st = make_perception_stage(PerceptionConfig(detector=str(ssd_path), region_detector=str(ssd_path)), "cpu")
    assert st.region_detector is not None and st.region_detector is not st.detector
    with pytest.raises(PerceptionError, match="region_detector"):
        make_perception_stage(PerceptionConfig(ocr=True, region_detector=str(ssd_path)), "cpu")
    with pytest.raises(ValueError, match="region_detector"):
        PerceptionStage(detector=Solids(), region_detector=st.detector)
    # the entity linker's bound comes from the config (the entities held in memory for linking)
    assert make_perception_stage(PerceptionConfig(detector=str(ssd_path), max_entities=7), "cpu").max_entities == 7
    assert make_perception_stage(PerceptionConfig(detector=str(ssd_path)), "cpu").max_entities == 4096
    with pytest.raises(ValueError, match="max_entities"):
        PerceptionConfig(max_entities=0)
