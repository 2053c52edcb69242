"""The text change gate: OCR is skipped where nothing text-like changed since the camera's last
read, and a changed counter is read and flagged as a text change."""
import numpy as np
import pytest

from vam_engine.perception import OcrLine, PerceptionFrame, PerceptionStage, TextChangeGate, text_change
from vam_engine.synthetic.perception import backdrop, coloured_shape, draw_sign, text_clip, through_h264


def noisy(rng, frame, sigma=3.0):
    return np.clip(frame + rng.normal(0, sigma, frame.shape), 0, 255).astype(np.uint8)


def run_gate(gate, frames, camera="c"):
    reads = []
    for f in frames:
        sig = gate.signature(f)
        r = gate.should_read(camera, sig)
        if r:
            gate.mark_read(camera, sig)
        reads.append(r)
    return reads


@pytest.mark.parametrize("codec", [False, True])
def test_counter_steps_are_read_and_still_frames_skipped(rng, codec):
    clip = text_clip(rng, 24, counter_every=4, counter_size=16, mover=None, noise=3.0)
    frames = through_h264(clip.frames, crf=32) if codec else clip.frames
    reads = run_gate(TextChangeGate(), frames)
    want = [i == 0 or c for i, c in enumerate(clip.counter_changed)]
    assert reads == want


def test_low_texture_motion_is_skipped_but_text_coming_and_going_is_read(rng):
    h, w = 360, 640
    base = backdrop(rng, h, w, noise=0.0)
    signed, _ = draw_sign(base, "EXIT 12", 60, 40, 28)
    gate = TextChangeGate()
    frames = [noisy(rng, signed)]
    ball, _ = coloured_shape(rng, (220, 40, 40), h=120, w=160, background=(105, 105, 100), shape="ellipse")
    for x in (300, 360, 420):  # a red ball (no text) rolling across the road
        f = signed.copy()
        f[220:340, x:x + 160] = ball
        frames.append(noisy(rng, f))
    frames.append(noisy(rng, base))                    # the sign is taken away
    frames.append(noisy(rng, base))
    frames.append(noisy(rng, draw_sign(base, "EXIT 13", 60, 40, 28)[0]))  # a new one goes up
    assert run_gate(gate, frames) == [True, False, False, False, True, False, True]
    assert (gate.reads, gate.skips) == (3, 4)
    # cameras are apart: a second camera's first frame is read whatever the first saw
    assert run_gate(gate, [frames[-1]], camera="other") == [True]
    # a new frame size is read
    assert run_gate(gate, [noisy(rng, np.zeros((240, 320, 3), np.uint8))]) == [True]


def test_text_change_compares_strings_as_multisets():
    def lines(*texts):
        return [OcrLine((0, 0, 1, 1), t, 0.99) for t in texts]

    assert text_change(lines("GATE 4721", "0041"), lines("0041", "GATE  4721 ")) is None
    ch = text_change(lines("GATE 4721", "0041"), lines("GATE 4721", "0042"))
    assert (ch.appeared, ch.disappeared) == (("0042",), ("0041",))
    assert text_change(None, lines()) is None
    assert text_change(None, lines("A1")).appeared == ("A1",)
    assert text_change(lines("A1", "A1"), lines("A1")).disappeared == ("A1",)


def test_stage_skips_unchanged_text_and_flags_a_counter_change(ocr_reader, rng):
    clip = text_clip(rng, 6, counter_start=41, counter_every=3, counter_size=32, mover=None)
    stage = PerceptionStage(ocr=ocr_reader)
    out = stage.process([PerceptionFrame("cam", 2.0 * i, f, key=i) for i, f in enumerate(clip.frames)]).frames
    assert [fp.ocr_read for fp in out] == [True, False, False, True, False, False]
    assert [fp.text_changed for fp in out] == [True, False, False, True, False, False]
    assert sorted(ln.text for ln in out[0].ocr) == ["0041", "GATE 4721"]
    assert out[1].ocr == out[0].ocr  # carried from the last read
    assert (out[3].text_change.appeared, out[3].text_change.disappeared) == (("0042",), ("0041",))
    assert sorted(ln.text for ln in out[5].ocr) == ["0042", "GATE 4721"]
    assert stage.stats["ocr_reads"] == 2 and stage.stats["ocr_skips"] == 4
    # present frames are never read
    present = stage.process([PerceptionFrame("cam", 20.0, clip.frames[0], kind="present")]).frames[0]
    assert not present.ocr_read and present.ocr == ()


def test_two_changed_places_are_two_parts_and_ignored_motion_none():
    """Two signs changing far apart are read as two small parts, not the box around both; a
    change inside a box given as ``ignore`` (a tracked thing that moved) does not count."""
    gate = TextChangeGate()
    H, W = 720, 1280
    base = np.full((H, W, 3), 120, np.uint8)
    before, a = draw_sign(base, "0041", 60, 40, 28)
    before, b = draw_sign(before, "7730", 1000, 600, 28)
    after, _ = draw_sign(base, "0042", 60, 40, 28)
    after, _ = draw_sign(after, "7731", 1000, 600, 28)
    gate.mark_read("c", gate.signature(before))
    sig = gate.signature(after)
    parts = gate.regions("c", sig)
    assert parts is not None and len(parts) == 2
    for want in (a, b):  # each part meets its sign (the changed digit; read_box takes in the line)
        assert sum(p[0] < want[2] and want[0] < p[2] and p[1] < want[3] and want[1] < p[3] for p in parts) == 1
    assert sum((p[2] - p[0]) * (p[3] - p[1]) for p in parts) < 0.1 * (b[2] - a[0]) * (b[3] - a[1])
    grown = (b[0] - 40, b[1] - 40, b[2] + 40, b[3] + 40)
    assert len(gate.regions("c", sig, ignore=[grown])) == 1
    assert gate.should_read("c", sig, ignore=[grown])
    assert not gate.should_read("c", sig, ignore=[grown, (0, 0, a[2] + 40, a[3] + 40)])
