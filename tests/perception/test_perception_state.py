"""The perception stage's saved state: a stage restored from a snapshot (through its JSON form and
the entities and tracks as a store keeps them) goes on exactly as the uninterrupted stage does;
a snapshot waits for nothing a full queue holds; and the part-of-a-frame OCR read: which part,
the lines carried around it."""
import json
import threading

import numpy as np
import pytest

from vam_engine.errors import VamError
from vam_engine.perception import (CameraPerceptionState, LinkedEntity, OcrLine, PerceptionFrame, PerceptionStage,
                                   PerceptionState, TextChangeGate)
from vam_engine.perception.textgate import merge_lines, read_box

pytest.importorskip("onnxruntime")


def frame(rgb, shift=0):
    f = np.zeros((64, 64, 3), np.uint8)
    f[:] = rgb
    f[40:44, shift:shift + 8] = 255 - np.asarray(rgb, np.uint8)  # some texture that moves
    return f


COLOURS = [(250, 0, 0), (0, 250, 0), (0, 0, 250)]


def frames_of(step: int) -> list[PerceptionFrame]:
    """Two cameras; each step one frame per camera, the colours taking turns."""
    return [PerceptionFrame(cam, float(step), frame(COLOURS[(step + k) % 3], step % 5), key=(cam, step))
            for k, cam in enumerate(("a", "b"))]


def result(batch):
    return [(f.camera_id, f.t, tuple(d.label for d in f.detections), f.track_ids) for f in batch.frames], \
        sorted((e.entity_id, e.label, tuple(sorted(e.seen.items()))) for e in batch.entities)


def through_json(state: PerceptionState, held, tracks) -> PerceptionState:
    """What a store hands back: cameras through JSON, every entity to hold, the tracks."""
    cams = {c: CameraPerceptionState.from_json(json.loads(json.dumps(cs.to_json()))) for c, cs in state.cameras.items()}
    return PerceptionState(state.next_track, state.next_entity, cams, tuple(held.values()), dict(tracks))


def test_a_restored_stage_goes_on_as_the_uninterrupted_one(tiny_onnx):
    whole = PerceptionStage(detector=tiny_onnx)
    expected = [result(whole.process(frames_of(s))) for s in range(8)]
    first = PerceptionStage(detector=tiny_onnx)
    held: dict[int, LinkedEntity] = {}
    tracks = {}
    for s in range(4):
        got = first.process(frames_of(s), snapshot=True)
        assert result(got) == expected[s]
        held.update({le.entity.entity_id: le for le in got.state.entities})  # a store upserts what changed
        tracks.update(got.state.tracks)
    state = got.state
    assert state.next_entity == 4 and set(state.cameras) == {"a", "b"}
    assert all(cs.tracks for cs in state.cameras.values())  # each camera's thing is tracked right now
    second = PerceptionStage(detector=tiny_onnx)
    second.restore(through_json(state, held, tracks))
    assert [result(second.process(frames_of(s))) for s in range(4, 8)] == expected[4:]
    with pytest.raises(ValueError, match="time order"):  # the order check goes on from the restored times
        second.process([PerceptionFrame("a", 1.0, frame(COLOURS[0]))])


def test_a_snapshot_waits_for_nothing_a_full_queue_holds(tiny_onnx):
    gate = threading.Event()

    class Slow:
        name, labels, min_score = tiny_onnx.name, tiny_onnx.labels, tiny_onnx.min_score

        def detect(self, frames):
            gate.wait(10)
            return tiny_onnx.detect(frames)

    stage = PerceptionStage(detector=Slow(), queue_batches=1)
    futs = [stage.submit(frames_of(0))]
    done = threading.Event()

    def feed():  # blocks on the full queue while holding the submission order
        futs.append(stage.submit(frames_of(1), snapshot=True))
        futs.append(stage.submit(frames_of(2)))
        done.set()
    threading.Thread(target=feed, daemon=True).start()
    gate.set()
    assert done.wait(20), "the feeder stayed blocked: the worker could not take a snapshot"
    got = [f.result(20) for f in futs]
    assert got[1].state is not None and got[1].state.cameras["a"].submitted_t == 1.0  # its round's frames only
    stage.close()


def test_bad_saved_state_is_named():
    with pytest.raises(VamError, match="invalid perception state"):
        CameraPerceptionState.from_json({"version": 1, "tracks": [{"track_id": 1}], "lines": [], "tracker_t": 0,
                                         "submitted_t": 0, "lines_read": True})
    with pytest.raises(VamError, match="unknown version"):
        CameraPerceptionState.from_json({"version": 99})


def line(x0, y0, x1, y1, text):
    return OcrLine((x0, y0, x1, y1), text, 0.99)


def test_only_the_part_of_a_frame_where_text_changed_is_read():
    from vam_engine.synthetic.perception import draw_sign

    gate = TextChangeGate()
    H, W = 360, 640
    base, sign = draw_sign(np.full((H, W, 3), 120, np.uint8), "GATE 4721", 30, 30, 28)
    before, counter = draw_sign(base, "0041", 460, 30, 28)
    after, _ = draw_sign(base, "0042", 460, 30, 28)
    gate.mark_read("c", gate.signature(before))
    sig = gate.signature(after)
    assert gate.should_read("c", sig)
    region = gate.region("c", sig)
    assert region is not None and region[0] >= sign[2] and region[2] <= W  # the counter's part only
    last = [line(*sign, "GATE 4721"), line(*counter, "0041")]
    box = read_box(region, last, (H, W))
    assert box[0] <= counter[0] and box[2] >= counter[2]  # the counter's whole line is inside what is read
    merged = merge_lines(last, box, [line(counter[0] + 1, counter[1], counter[2], counter[3], "0042")])
    assert [ln.text for ln in merged] == ["GATE 4721", "0042"]
    assert gate.region("other", sig) is None  # a camera's first read: the whole frame
