"""The perception stage's worker: off the caller's thread, batches across cameras, bounded queue,
errors to the caller, order checks, text read beside the detector with the same results; the
config makes it, and nothing without it."""
import threading

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from support import detector_models as dm  # noqa: E402
from vam_engine.config import EngineConfig, PerceptionConfig  # noqa: E402
from vam_engine.perception import (PerceptionError, PerceptionFrame, PerceptionStage,  # noqa: E402
                                   make_perception_stage)
from vam_engine.perception.detect_onnx import OnnxDetector  # noqa: E402
from vam_engine.perception.records import OcrLine  # noqa: E402


class Recording:
    """A detector body wrapped to record each call's frames and thread, and to hold its first
    call until released."""

    def __init__(self, inner, hold=False):
        self.inner, self.name, self.labels, self.min_score = inner, inner.name, inner.labels, inner.min_score
        self.calls, self.threads = [], []
        self.entered, self.release = threading.Event(), threading.Event()
        self.fail_next = False
        if not hold:
            self.release.set()

    def detect(self, frames):
        self.calls.append(len(frames))
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        self.release.wait(10)
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("the model broke")
        return self.inner.detect(frames)


@pytest.fixture
def tiny(tmp_path):
    return OnnxDetector(dm.yolo_model(tmp_path / "m.onnx"), labels=dm.LABELS, min_score=0.5)


def frame(rgb, h=64, w=64):
    return np.broadcast_to(np.asarray(rgb, np.uint8), (h, w, 3)).copy()


def test_worker_batches_waiting_cameras_into_one_detector_call(tiny):
    rec = Recording(tiny, hold=True)
    stage = PerceptionStage(detector=rec, max_batch=16)
    first = stage.submit([PerceptionFrame("a", 0.0, frame((250, 0, 0)), key="a0")])
    assert rec.entered.wait(10)  # the worker holds the first round
    later = [stage.submit([PerceptionFrame(cam, 1.0, frame(c), key=f"{cam}1")])
             for cam, c in (("a", (250, 0, 0)), ("b", (0, 250, 0)), ("c", (0, 0, 250)))]
    rec.release.set()
    assert [fp.key for fp in first.result(10).frames] == ["a0"]
    got = [f.result(10) for f in later]
    assert rec.calls == [1, 3]  # the three waiting cameras in one call
    assert set(rec.threads) == {"perception"} and threading.current_thread().name not in rec.threads
    assert [[d.label for d in b.frames[0].detections] for b in got] == [["red"], ["green"], ["blue"]]
    assert [b.frames[0].key for b in got] == ["a1", "b1", "c1"]
    # each answer carries its own frames' tracks and entities
    assert [[t.camera_id for t in b.tracks] for b in got] == [["a"], ["b"], ["c"]]
    assert got[0].tracks[0].track_id == first.result().tracks[0].track_id  # camera a's red thing, tracked
    assert got[0].tracks[0].count == 2 and [s.t for s in got[0].tracks[0].sightings] == [1.0]  # only the new
    assert {e.label for b in got for e in b.entities} == {"red", "green", "blue"}
    stage.close()


def test_bounded_queue_drops_when_asked_not_to_wait(tiny):
    rec = Recording(tiny, hold=True)
    stage = PerceptionStage(detector=rec, queue_batches=1)
    busy = stage.submit([PerceptionFrame("a", 0.0, frame((250, 0, 0)))])
    assert rec.entered.wait(10)
    queued = stage.submit([PerceptionFrame("a", 1.0, frame((250, 0, 0)))])
    assert stage.submit([PerceptionFrame("a", 2.0, frame((250, 0, 0)))], block=False) is None
    assert stage.submit([PerceptionFrame("b", 2.0, frame((250, 0, 0)))], timeout=0.05) is None
    assert stage.stats["dropped_submissions"] == 2
    rec.release.set()
    assert busy.result(10) and queued.result(10)
    # a dropped submission's time is not taken: camera a may still send t=2
    assert stage.submit([PerceptionFrame("a", 2.0, frame((250, 0, 0)))]).result(10)
    stage.close()
    with pytest.raises(RuntimeError, match="after close"):
        stage.submit([PerceptionFrame("a", 3.0, frame((250, 0, 0)))])


def test_a_failing_round_reaches_its_callers_and_the_worker_goes_on(tiny):
    rec = Recording(tiny)
    stage = PerceptionStage(detector=rec)
    rec.fail_next = True
    bad = stage.submit([PerceptionFrame("a", 0.0, frame((250, 0, 0)))])
    with pytest.raises(RuntimeError, match="the model broke"):
        bad.result(10)
    assert [d.label for d in stage.submit([PerceptionFrame("a", 1.0, frame((0, 250, 0)))])
            .result(10).frames[0].detections] == ["green"]
    stage.close()


def test_frames_are_checked_on_the_callers_thread(tiny):
    with PerceptionStage(detector=tiny) as stage:
        stage.submit([PerceptionFrame("a", 5.0, frame((250, 0, 0)))]).result(10)
        with pytest.raises(ValueError, match=r"camera 'a' frame at t=4\.0 comes after one at t=5\.0"):
            stage.submit([PerceptionFrame("a", 4.0, frame((250, 0, 0)))])
        with pytest.raises(ValueError, match=r"frames\[0\]\.frame must be an H x W x 3 uint8"):
            stage.submit([PerceptionFrame("a", 6.0, np.zeros((8, 8), np.uint8))])
        with pytest.raises(ValueError, match=r"frames\[0\]\.t must be a finite"):
            stage.process([PerceptionFrame("a", float("nan"), frame((250, 0, 0)))])
        with pytest.raises(ValueError, match="list of PerceptionFrame"):
            stage.process(PerceptionFrame("a", 7.0, frame((250, 0, 0))))
        with pytest.raises(ValueError, match="kind"):
            stage.process([PerceptionFrame("a", 7.0, frame((250, 0, 0)), kind="live")])
        # within one call frames may come in any order; each camera is handled in time order
        out = stage.process([PerceptionFrame("b", 9.0, frame((0, 0, 250))),
                             PerceptionFrame("b", 8.0, frame((0, 0, 250)))])
        assert [fp.t for fp in out.frames] == [9.0, 8.0] and out.frames[0].track_ids == out.frames[1].track_ids
        stage.forget_camera("a")  # a camera forgotten may start again at any time
        assert stage.process([PerceptionFrame("a", 0.0, frame((250, 0, 0)))]).frames[0].detections


def test_present_frames_are_detected_only_when_asked(tiny):
    off = PerceptionStage(detector=tiny)
    assert off.process([PerceptionFrame("a", 0.0, frame((250, 0, 0)), kind="present")]).frames[0].detections == ()
    on = PerceptionStage(detector=tiny, detect_present=True)
    assert on.process([PerceptionFrame("a", 0.0, frame((250, 0, 0)), kind="present")]).frames[0].detections


def test_config_makes_the_stage_and_nothing_by_default(tmp_path):
    assert make_perception_stage(EngineConfig().perception) is None
    assert make_perception_stage(None) is None
    assert not PerceptionConfig().enabled and PerceptionConfig(ocr=True).enabled
    path = dm.yolo_model(tmp_path / "m.onnx")
    labels = dm.labels_file(tmp_path / "labels.txt")
    cfg = EngineConfig.load(env={"VAM_PERCEPTION__DETECTOR": str(path), "VAM_PERCEPTION__LABELS": str(labels),
                                 "VAM_PERCEPTION__MIN_SCORE": "0.5"}).perception
    stage = make_perception_stage(cfg, "cpu")
    assert stage.detector.labels == dm.LABELS and stage.ocr is None
    assert [d.label for d in stage.process([PerceptionFrame("a", 0.0, frame((0, 250, 0)))]).frames[0].detections] \
        == ["green"]
    with pytest.raises(PerceptionError, match="does not exist"):
        make_perception_stage(PerceptionConfig(detector=str(tmp_path / "gone.onnx")), "cpu")
    with pytest.raises(ValueError, match="detector, an OCR reader, or both"):
        PerceptionStage()


class HeldOcr:
    """An OCR body that reads one fixed line per frame and records the thread it ran on, and
    whether the detector was inside a call at that moment."""

    name = "held-ocr"

    def __init__(self, detecting: threading.Event):
        self.detecting, self.threads, self.during_detection = detecting, [], []
        self.started = threading.Event()

    def read(self, frames):
        self.threads.append(threading.current_thread().name)
        self.during_detection.append(self.detecting.is_set())
        self.started.set()
        h, w = frames[0].shape[:2]
        return [[OcrLine((0.0, 0.0, float(w), 10.0), "EXIT 4", 0.99)] for _ in frames]


class WaitingDetector(Recording):
    """Detects only once the OCR body has started reading (or after ``patience`` seconds)."""

    def __init__(self, inner, patience):
        super().__init__(inner)
        self.patience, self.detecting, self.saw_reading = patience, threading.Event(), []
        self.ocr = None

    def detect(self, frames):
        self.detecting.set()
        self.saw_reading.append(self.ocr.started.wait(self.patience))
        try:
            return super().detect(frames)
        finally:
            self.detecting.clear()


@pytest.mark.parametrize("beside", [True, False])
def test_text_is_read_while_the_detector_works_only_when_asked(tiny, beside):
    det = WaitingDetector(tiny, patience=10 if beside else 0.3)
    det.ocr = ocr = HeldOcr(det.detecting)
    with PerceptionStage(detector=det, ocr=ocr, read_beside_detect=beside) as stage:
        got = stage.submit([PerceptionFrame("a", 0.0, frame((250, 0, 0)), key="a0")]).result(20)
    assert [ln.text for ln in got.frames[0].ocr] == ["EXIT 4"] and got.frames[0].ocr_read
    assert [d.label for d in got.frames[0].detections] == ["red"]
    if beside:  # the read ran on the round's reader while the detector's call waited for it
        assert det.saw_reading == [True] and ocr.during_detection == [True]
        assert [t.split("_")[0] for t in ocr.threads] == ["perception-ocr"]
    else:  # read after detecting, on the worker
        assert det.saw_reading == [False] and ocr.during_detection == [False] and ocr.threads == ["perception"]


def test_a_failing_read_or_detection_beside_the_other_fails_the_round_and_the_worker_goes_on(tiny):
    class FailingOcr(HeldOcr):
        fail = True

        def read(self, frames):
            if self.fail:
                self.fail = False
                raise RuntimeError("the OCR model broke")
            return super().read(frames)

    det = Recording(tiny)
    ocr = FailingOcr(threading.Event())
    with PerceptionStage(detector=det, ocr=ocr) as stage:
        with pytest.raises(RuntimeError, match="the OCR model broke"):
            stage.submit([PerceptionFrame("a", 0.0, frame((250, 0, 0)))]).result(20)
        det.fail_next = True
        with pytest.raises(RuntimeError, match="the model broke"):
            stage.submit([PerceptionFrame("a", 1.0, frame((250, 0, 0)))]).result(20)
        ok = stage.submit([PerceptionFrame("a", 2.0, frame((0, 250, 0)))]).result(20)
        assert [d.label for d in ok.frames[0].detections] == ["green"] and ok.frames[0].ocr
    assert not [t for t in threading.enumerate() if t.name.startswith("perception-ocr")]  # closed with the stage


def test_reading_beside_the_detector_gives_what_reading_after_it_gives(ssd, ocr_reader):
    """Real SSD and PP-OCR through the detection and text gates, two cameras with a sign, a
    stepping counter and a photograph wandering about, in rounds of several frames: the same
    detections, tracks, lines, reads and text changes either way."""
    from vam_engine.perception.detgate import DetectionGate
    from vam_engine.synthetic.perception import text_clip

    clips = {cam: text_clip(np.random.default_rng(seed), 8, h=360, w=640, counter_every=3, counter_size=24,
                            mover_height=150) for cam, seed in (("a", 11), ("b", 12))}
    results = {}
    for beside in (True, False):
        stage = PerceptionStage(detector=ssd, ocr=ocr_reader, detect_gate=DetectionGate(), read_beside_detect=beside)
        out = []
        for r in range(4):  # rounds of 2 frames per camera
            frames = [PerceptionFrame(cam, float(i), clips[cam].frames[i], key=f"{cam}{i}")
                      for i in (2 * r, 2 * r + 1) for cam in clips]
            b = stage.process(frames)
            out += [(fp.key, [(d.label, tuple(np.round(d.box, 3))) for d in fp.detections], fp.track_ids,
                     [(ln.text, tuple(np.round(ln.box, 3))) for ln in fp.ocr], fp.ocr_read, fp.text_changed)
                    for fp in b.frames]
        results[beside] = (out, dict(stage.stats))
    (beside_out, beside_stats), (after_out, after_stats) = results[True], results[False]
    assert beside_out == after_out
    for k in ("ocr_reads", "ocr_skips", "ocr_region_reads", "text_changes", "detect_full", "detect_regions",
              "detect_carried", "detections"):
        assert beside_stats[k] == after_stats[k], k
    assert beside_stats["ocr_reads"] >= 3 and beside_stats["detections"] > 0  # reads and detections to compare
    assert any("4721" in t for _, _, _, lines, _, _ in beside_out for t, _ in lines)
