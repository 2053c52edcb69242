"""The fast paths of ingest and push keep their semantics: the present's lock-free ``wants``
decides as ``observe`` does, the push buffer pool's spare is what the next push gets, the
pushed frame's quick check refuses what the full check refuses, and a registering source's
camera has its saved gate reference loaded before its first frame arrives."""
import math

import numpy as np
import pytest

from support.clips import code_frame
from vam_engine.engine import Engine
from vam_engine.errors import FrameError
from vam_engine.ingest.buffers import BufferPool
from vam_engine.ingest.pushed import pushed_view
from vam_engine.index.pipeline import SourceReport
from vam_engine.reason.working import WorkingMemory


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wants_says_what_observe_then_keeps(seed):
    """On a jittered feed with repeats, late frames and gaps, ``wants(t)`` before each offer
    is exactly whether ``observe`` kept that frame (and never needs the frame to decide)."""
    rng = np.random.default_rng(seed)
    wm = WorkingMemory(short_s=2.0, short_fps=2.0, medium_s=4.0, medium_fps=1.0, max_side=8)
    frame = np.zeros((6, 10, 3), np.uint8)
    t = 0.0
    for _ in range(400):
        step = rng.choice([0.0, 1 / 30, 0.1, 0.5, 1.0, -0.3, 2.5])
        t = max(0.0, t + float(step) + float(rng.normal(0, 0.003)))
        before = wm.latest("cam")
        said = wm.wants("cam", t)
        wm.observe("cam", t, frame)
        kept = wm.latest("cam") != before or (before is None and wm.latest("cam") is not None)
        assert said == kept, f"t={t}: wants said {said}, observe kept {kept}"
    assert wm.wants("other", 0.0), "a camera never seen wants its first frame"


def test_observe_still_refuses_bad_frames_and_times():
    wm = WorkingMemory()
    for bad in (np.zeros((4, 4, 3), np.float32), np.zeros((4, 4), np.uint8), np.zeros((4, 4, 4), np.uint8),
                [[1, 2, 3]]):
        with pytest.raises(ValueError, match="H x W x 3 uint8"):
            wm.observe("cam", 0.0, bad)
    with pytest.raises(ValueError, match="finite"):
        wm.observe("cam", math.nan, np.zeros((4, 4, 3), np.uint8))


def test_a_reserved_buffer_is_what_the_next_copy_gets():
    pool = BufferPool(per_shape=3)
    shape = (5, 7, 3)
    pool.reserve(shape, np.uint8)
    (spare,) = pool._buffers[(shape, "|u1")]
    addr = spare.__array_interface__["data"][0]
    del spare
    pool.reserve(shape, np.uint8)  # one is free already: nothing added
    assert len(pool._buffers[(shape, "|u1")]) == 1
    src = np.arange(105, dtype=np.uint8).reshape(shape)
    a = pool.copy(src)
    assert a.__array_interface__["data"][0] == addr and np.array_equal(a, src)
    pool.reserve(shape, np.uint8)  # the first is taken: a second one is made ready
    b = pool.copy(src[::-1])
    assert not np.shares_memory(a, b) and np.array_equal(a, src) and np.array_equal(b, src[::-1])
    c = pool.copy(src)  # nothing free: a third buffer, and the pool is full
    pool.reserve(shape, np.uint8)
    assert len(pool._buffers[(shape, "|u1")]) == 3
    assert not np.shares_memory(c, a) and not np.shares_memory(c, b)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_present_refills_dropped_frames_but_never_one_a_reader_holds(seed):
    """The present fills frames its buffers dropped for age again (a camera loop's thread then
    faults in no new pages), never one still in a buffer or in a reader's hands: every frame a
    window hands out keeps its pixels however long it is held and however many frames follow;
    once no reader holds any, every new frame is a dropped one filled again."""
    rng = np.random.default_rng(seed)
    wm = WorkingMemory(short_s=2.0, short_fps=2.0, medium_s=4.0, medium_fps=1.0, max_side=8)
    want, held, refilled = {}, [], 0
    for i in range(120):
        t = i * 0.5
        frame = rng.integers(0, 256, (12, 20, 3), dtype=np.uint8)
        spares = list(wm._spares.get("cam", []))
        wm.observe("cam", t, frame)
        want[t] = frame[::3, ::3].copy()  # k = ceil(20 / 8)
        short, medium = wm.window("cam", t)
        newest = short[-1][0]
        refilled += i >= 90 and any(newest is s for s in spares)
        for a, ft in short + medium:
            assert np.array_equal(a, want[ft]), f"frame of t={ft} changed while in a buffer"
        if i < 60 and rng.random() < 0.3:  # a reader keeps a window's frames for up to 10 s
            held.append((t + float(rng.integers(1, 10)), [(a, ft) for a, ft in medium]))
        for until, frames in held:
            for a, ft in frames:
                assert np.array_equal(a, want[ft]), f"frame of t={ft} changed in a reader's hands"
        held = [(until, frames) for until, frames in held if until > t]
        del spares, short, medium, newest
    assert refilled == 30, f"{refilled} of the last 30 frames were dropped frames filled again, not all"


@pytest.mark.parametrize("bad, why", [
    (np.zeros((8, 8, 3), np.float32), "H x W x 3 uint8"),
    (np.zeros((8, 8, 4), np.uint8), "H x W x 3 uint8"),
    (np.zeros((8, 8), np.uint8), "H x W x 3 uint8"),
    (np.zeros((1, 8, 3), np.uint8), "absurd dimensions"),
    (np.zeros((8, 16385, 3), np.uint8), "absurd dimensions"),
    ([[[0, 0, 0]]], "numpy array or torch tensor"),
])
def test_the_quick_frame_check_refuses_what_the_full_one_does(bad, why):
    with pytest.raises(FrameError, match=why):
        pushed_view("cam", bad)


def test_the_quick_frame_check_passes_views_and_odd_dtypes_through_unchanged():
    base = np.zeros((10, 12, 3), np.uint8)
    for ok in (base, base[1:, ::2], np.asfortranarray(base), base.astype(np.dtype(np.uint8, metadata={"k": 1}))):
        assert pushed_view("cam", ok) is ok


def test_a_registering_source_loads_its_cameras_saved_reference_before_any_frame(tmp_path):
    cfg = {"ingest": {"fps": 2.0}}
    with Engine(tmp_path / "store", cfg, device="cpu") as eng:
        for i in range(4):
            eng.push("cam", code_frame(i * 7, seed=3), i * 0.5)
        eng.end_push("cam")
        saved = eng.store.sources.camera_ref("cam")
    assert saved is not None
    with Engine(tmp_path / "store", cfg, device="cpu") as eng:
        pipe = eng._life.pipe()
        assert eng._cascade.reference("cam") is None
        report = SourceReport("cam", "push:cam")
        pipe.register(10_000, report, None)
        assert pipe.flush(30)
        ref = eng._cascade.reference("cam")
        assert ref is not None, "the warm-up loaded the saved reference"
        assert np.array_equal(np.asarray(ref), saved.gray)
        assert report.sampled == 0, "the warm-up is not a frame"


@pytest.mark.parametrize("gop_frames", [20, 45])
def test_keyframes_only_with_the_present_drops_gop_tails_and_yields_the_same_frames(tmp_path, gop_frames):
    """30 fps, B-frames, 0.67 s and 1.5 s GOPs, the present at 2 fps: dropping each GOP's tail
    after the present's last tick in it leaves every index sample and present frame as they
    were (same times, same pictures), decodes fewer frames, and no more than the default mode."""
    from support.clips import read_code, write_clip

    from vam_engine.ingest import PyAVDecoder
    from vam_engine.ingest.frame import PresentFrame

    path = tmp_path / "kf.mp4"
    write_clip(path, [round(i * 1000 / 30) for i in range(12 * 30)], gop=gop_frames, bframes=2)

    def run(**kw):
        with PyAVDecoder(str(path), "cam", fps=0.5, **kw) as dec:
            dec.want_present(2.0)
            out = [(isinstance(f, PresentFrame), f.t_rel,
                    read_code(f.rgb(64) if isinstance(f, PresentFrame) else f.rgb())) for f in dec]
            return out, dec.stats.decoded

    planned, n_planned = run(keyframes_only=True)
    plain, n_plain = run(keyframes_only=True, skip_gops=False)
    _, n_default = run()
    with PyAVDecoder(str(path), "cam", fps=0.5, keyframes_only=True) as dec:
        index_alone = [(f.t_rel, read_code(f.rgb())) for f in dec]
    assert planned == plain
    assert [(t, c) for p, t, c in planned if not p] == index_alone
    assert sum(p for p, _, _ in planned) == 12 * 2, "one present frame per 0.5 s cell of the 12 s clip"
    assert n_planned < n_plain and n_planned <= n_default
