"""The C++ gate body's speed paths against the reference and against its own one-thread results:
the work pool (csrc/gate_pool.cpp: frames cut into row parts, claimed by the caller and helper
threads), the vectorized thumbnail cell sums (column bounds on multiples of 2 or 4), the C++ tile
reduction (_C.reduce_tiles) and the rows-only entry point of the benchmark's breakdown."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from support.gate_isas import ISAS, restore_isa_and_threads  # noqa: F401 (an autouse fixture)
from vam_engine import _C
from vam_engine.gate import reference as R
from vam_engine.gate.bodies import CpuBody, Tiles, reduce_tiles
from vam_engine.synthetic import gray_frame, near_copy

TEAM = max(2, _C.max_threads())


def _frames(rng, n, h, w):
    ref = gray_frame(rng, h, w, noise=float(rng.uniform(1, 10)))
    frames = np.stack([near_copy(rng, ref)] + [gray_frame(rng, h, w, noise=3.0) for _ in range(n - 1)])
    return frames, ref


@pytest.mark.parametrize("w", [192, 256, 640, 1280])
def test_cell_sum_paths_match_reference(w, rng, rng_seed):
    """Widths whose column bounds fall on multiples of 4 (256, 1280), of 2 (640) or neither (192):
    thumbnails bit-identical to the reference's on every instruction set."""
    frames, ref = _frames(rng, 2, 72, w)
    want = np.array([R.thumbnail(f) for f in frames], np.float32)
    for isa in ISAS:
        _C._set_isa(isa)
        out = _C.gate_stats(frames, ref)
        np.testing.assert_array_equal(out[4], want, err_msg=f"{isa} w={w} seed={rng_seed}")


def test_tall_groups_take_the_scalar_cell_sums(rng, rng_seed):
    """Row groups of 129 rows (H = 64 * 129): 16-bit column sums over 2^15, so the vpmaddwd block
    sums must not be used; still the reference's thumbnail."""
    h, w = 64 * 129, 256
    f = np.full((1, h, w), 255, np.uint8)
    f[0, ::7] = rng.integers(0, 256, (len(range(0, h, 7)), w), dtype=np.uint8)
    for isa in ISAS:
        _C._set_isa(isa)
        np.testing.assert_array_equal(_C.gate_stats(f)[4][0], R.thumbnail(f[0]).astype(np.float32),
                                      err_msg=f"{isa} seed={rng_seed}")


@pytest.mark.parametrize("n", [1, 2, 3])
def test_parts_and_team_equal_one_thread(n, rng, rng_seed):
    """720p batches of 1-3 frames are cut into row parts (several per frame) and claimed by the
    team: gate_stats and gate_compare bitwise equal to one thread, repeated calls included (a
    helper that starts late must not take items of a later call)."""
    frames, ref = _frames(rng, n, 720, 1280)
    own = _C.gate_stats(ref[None])
    for isa in ISAS:
        _C._set_isa(isa)
        _C._set_threads(1)
        one = _C.gate_stats(frames, ref, own[4][0], own[5][0])
        one_cmp = _C.gate_compare(frames, one[4], one[5], ref, own[4][0], own[5][0])
        _C._set_threads(TEAM)
        for k in range(8):
            team = _C.gate_stats(frames, ref, own[4][0], own[5][0])
            team_cmp = _C.gate_compare(frames, one[4], one[5], ref, own[4][0], own[5][0])
            for a, b in zip(one + one_cmp, team + team_cmp):
                np.testing.assert_array_equal(a, b, err_msg=f"{isa} n={n} call {k} seed={rng_seed}")


def test_adaptive_thread_choice_keeps_results(rng, rng_seed):
    """With the adaptive choice on, calls switch between the team and one thread as their timings
    say (and probe the other mode every 8th or 32nd call): 70 calls, every result the one-thread result."""
    frames, ref = _frames(rng, 1, 720, 1280)
    _C._set_threads(1)
    want = _C.gate_stats(frames, ref)
    _C._set_threads(TEAM)
    _C.set_adaptive_threads(True)
    for k in range(70):
        for a, b in zip(want, _C.gate_stats(frames, ref)):
            np.testing.assert_array_equal(a, b, err_msg=f"call {k} seed={rng_seed}")


def test_concurrent_callers_share_the_pool(rng, rng_seed):
    """Four Python threads calling at once (the GIL is released): one of them has the pool, the
    others run their items on their own thread; every result equals the one-thread result."""
    frames, ref = _frames(rng, 2, 360, 640)
    _C._set_threads(1)
    want = _C.gate_stats(frames, ref)
    results, errors = [], []

    def work():
        _C._set_threads(TEAM)  # the thread count is per calling thread
        try:
            for _ in range(5):
                results.append(_C.gate_stats(frames, ref))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 20
    for res in results:
        for a, b in zip(want, res):
            np.testing.assert_array_equal(a, b, err_msg=f"seed={rng_seed}")


@pytest.mark.parametrize("h,w,cell", [(720, 1280, 16), (37, 91, 16), (10, 300, 16), (300, 10, 16), (9, 9, 16),
                                      (65, 130, 7), (48, 64, 1)])
def test_reduce_tiles_equals_the_numpy_rule(h, w, cell, rng, rng_seed):
    """_C.reduce_tiles (what CpuBody uses) against bodies.reduce_tiles (numpy, the shared rule) on
    random grids, with the threshold at infinity, at 0 and at a value some tiles reach; grids of
    one cell row or column included."""
    tr, tc = -(-h // cell), -(-w // cell)
    sums = rng.integers(0, 255 * cell * cell + 1, (3, tr, tc)).astype(np.uint32)
    for thr in (float("inf"), 0.0, float(rng.uniform(50, 200))):
        tiles = Tiles(2 * cell, thr)
        want = reduce_tiles(sums, h, w, tiles, True)
        got = _C.reduce_tiles(sums, h, w, cell, thr)
        np.testing.assert_array_equal(got[0], want[0], err_msg=f"tile_mad thr={thr} seed={rng_seed}")
        np.testing.assert_array_equal(got[1], want[1], err_msg=f"changed thr={thr} seed={rng_seed}")


def test_reduce_tiles_bad_inputs():
    with pytest.raises(ValueError, match="uint32"):
        _C.reduce_tiles(np.zeros((1, 2, 2), np.int64), 32, 32, 16, 1.0)
    with pytest.raises(ValueError, match="shape"):
        _C.reduce_tiles(np.zeros((1, 3, 2), np.uint32), 32, 32, 16, 1.0)
    with pytest.raises(ValueError, match="tile"):
        _C.reduce_tiles(np.zeros((1, 2, 2), np.uint32), 32, 32, 0, 1.0)


def test_cpu_body_tiles_equal_numpy_reduction(rng, rng_seed):
    frames, ref = _frames(rng, 3, 90, 160)
    tiles = Tiles(32, 6.0)
    st = CpuBody().stats(frames, ref, tiles=tiles)
    out = _C.gate_stats(frames, ref, tile=tiles.cell)
    tmad, tchg = reduce_tiles(out[6], 90, 160, tiles, True)
    np.testing.assert_array_equal(st.tile_mad, tmad, err_msg=f"seed={rng_seed}")
    np.testing.assert_array_equal(st.tiles_changed, tchg, err_msg=f"seed={rng_seed}")


def test_rows_only_pass_agrees_with_gate_stats(rng, rng_seed):
    """The breakdown's entry point computes what gate_stats' row pass does: the same thumbnails
    with every subset of parts, and sum |F - R| / (H W) equal to mad."""
    frames, ref = _frames(rng, 2, 90, 200)
    st = _C.gate_stats(frames, ref)
    for isa in ISAS:
        _C._set_isa(isa)
        for lap in (False, True):
            for hist in (False, True):
                thumb, sums = _C.gate_rows(frames, None, lap=lap, hist=hist)
                np.testing.assert_array_equal(thumb, st[4], err_msg=f"{isa} lap={lap} hist={hist} seed={rng_seed}")
                assert not sums.any()
        thumb, sums = _C.gate_rows(frames, ref)
        np.testing.assert_array_equal(sums / (90 * 200), st[1], err_msg=f"{isa} seed={rng_seed}")


def _forked_call(frames, ref, q):
    _C._set_threads(TEAM)
    q.put(_C.gate_stats(frames, ref))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork()")
def test_forked_child_runs_without_the_parents_helpers(rng, rng_seed):
    """The pool's helpers are threads of the parent: a forked child must not wait for them (it
    makes its own pool) and gets the parent's results."""
    import multiprocessing as mp

    frames, ref = _frames(rng, 2, 720, 1280)
    _C._set_threads(TEAM)
    want = _C.gate_stats(frames, ref)  # the parent's pool exists now
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_forked_call, args=(frames, ref, q))
    p.start()
    try:
        got = q.get(timeout=60)
    finally:
        p.join(timeout=10)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b, err_msg=f"seed={rng_seed}")
