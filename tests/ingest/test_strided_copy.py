"""The native copy ``Engine.push`` makes on the caller's thread (``_C.strided_copy``: the private
copy of a sampled frame and the present's downscale): equal to numpy's ``src[::k, ::k]`` for
any layout, clear errors for bad input, and the interpreter lock kept for the whole call (a
release there lets pipeline threads make the camera loop wait: issue 31, item 5)."""
import sys
import threading

import numpy as np
import pytest

from vam_engine.native import load

C = load()


def layouts(rng, h=37, w=53, c=3):
    base = rng.integers(0, 256, (h, w, c), dtype=np.uint8)
    return {"c": base, "cropped": base[2:, 5:40], "strided": base[1::2, ::3], "flipped": base[::-1, ::-1],
            "bgr": base[..., ::-1], "transposed": base.transpose(1, 0, 2), "fortran": np.asfortranarray(base)}


@pytest.mark.parametrize("k", [1, 2, 3, 7, 60])
def test_strided_copy_matches_numpy_for_every_layout(k, rng, rng_seed):
    for name, arr in layouts(rng).items():
        got = C.strided_copy(arr, k)
        assert got.flags.c_contiguous and got.dtype == np.uint8, name
        np.testing.assert_array_equal(got, arr[::k, ::k], err_msg=f"{name} k={k} seed={rng_seed}")
        assert not np.shares_memory(got, arr)


@pytest.mark.parametrize("c", [1, 4])
def test_strided_copy_other_channel_counts(c, rng):
    for name, arr in layouts(rng, c=c).items():
        np.testing.assert_array_equal(C.strided_copy(arr, 2), arr[::2, ::2], err_msg=name)


def test_strided_copy_into_out_fills_and_returns_it(rng):
    src = rng.integers(0, 256, (720, 1280, 3), dtype=np.uint8)
    out = np.zeros((240, 427, 3), np.uint8)
    assert C.strided_copy(src, 3, out) is out
    np.testing.assert_array_equal(out, src[::3, ::3])
    whole = np.zeros_like(src)
    C.strided_copy(src[:, ::-1], 1, whole)
    np.testing.assert_array_equal(whole, src[:, ::-1])


def test_strided_copy_bad_input_says_what_is_wrong():
    img = np.zeros((8, 9, 3), np.uint8)
    cases = [((img.astype(np.float32), 1), "src must be uint8"), ((img[..., 0], 1), "src must be uint8 (H, W, C)"),
             (([[1]], 1), "src must be a numpy array"), ((img, 0), "k must be >= 1"),
             ((img, 2, np.zeros((4, 4, 3), np.uint8)), "out must have shape (4, 5, 3), got (4, 4, 3)"),
             ((img, 1, np.zeros((9, 8, 3), np.uint8).transpose(1, 0, 2)), "out must be a writeable C-contiguous"),
             ((img, 1, np.zeros((8, 9, 3), np.int16)), "out must be a writeable C-contiguous uint8"),
             ((img, 1, "out"), "out must be a numpy array or None")]
    for args, msg in cases:
        with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            C.strided_copy(*args)
    ro = np.zeros_like(img)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        C.strided_copy(img, 1, ro)


def test_strided_copy_refuses_an_out_that_overlaps_src():
    big = np.arange(8 * 20 * 3, dtype=np.int64).astype(np.uint8).reshape(8, 20, 3)
    want = big[:4].copy()
    C.strided_copy(big[:4], 1, big[4:])  # distinct rows of one array: no overlap
    np.testing.assert_array_equal(big[4:], want)
    with pytest.raises(ValueError, match="overlap"):
        C.strided_copy(big[:, ::2], 1, big[:4].reshape(8, 10, 3))  # every other pixel into the top half


def _counter_moves_during(call) -> bool:
    """Whether a Python thread spinning on a counter ran while ``call`` ran on this thread: it
    can only if ``call`` let go of the interpreter lock. The switch interval is made long (far
    longer than ``call``), so that the interpreter does not hand the lock over between the two
    reads on its own."""
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.5)
    th = threading.Thread(target=spin, daemon=True)
    th.start()
    try:
        while count[0] == 0:  # it runs (this thread waits for the lock in between)
            stop.wait(0.001)
        before = count[0]  # read while holding the lock
        call()
        return count[0] != before  # read before this thread lets go of it again
    finally:
        stop.set()
        th.join()
        sys.setswitchinterval(old)


def test_strided_copy_keeps_the_interpreter_lock():
    src = np.ones((2000, 2000, 3), np.uint8)  # 12 MB: milliseconds of copying
    out = np.zeros_like(src)
    out.fill(1)  # its pages faulted in now: a call slower than the switch interval could be preempted
    assert not _counter_moves_during(lambda: C.strided_copy(src, 1, out))
    assert not _counter_moves_during(lambda: C.strided_copy(src, 3))
    # the check can fail: numpy's own copy of the same array lets the spinning thread run
    assert any(_counter_moves_during(lambda: np.copyto(out, src)) for _ in range(3))
