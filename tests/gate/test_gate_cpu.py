"""The C++ body of the gate statistics (vam_engine._C, csrc/) against reference.py.

Every instruction-set path the CPU runs (the portable baseline and, where present, AVX2) is
checked. Frames are fresh random data each run; the seed is in every failure message.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from support.gate_isas import ISAS, restore_isa_and_threads  # noqa: F401 (an autouse fixture)
from vam_engine import _C
from vam_engine.gate import reference as R
from vam_engine.gate.bodies import CpuBody, ReferenceBody, Tiles
from vam_engine.synthetic import gray_frame, near_copy


def _scene(rng, h, w) -> np.ndarray:
    """A camera-like scene with noise of a random level: SSIM and the histograms are far from trivial."""
    return gray_frame(rng, h, w, noise=float(rng.uniform(1, 15)))


def _batch(rng, n, h, w, ref):
    """A mix: scenes, pure noise, a flat frame, a near copy of the reference."""
    kinds = ["scene", "noise", "flat", "near", "scene"]
    out = []
    for i in range(n):
        k = kinds[(i + int(rng.integers(5))) % 5]
        if k == "scene":
            out.append(_scene(rng, h, w))
        elif k == "noise":
            out.append(rng.integers(0, 256, (h, w), dtype=np.uint8))
        elif k == "flat":
            out.append(np.full((h, w), rng.integers(256), np.uint8))
        else:
            out.append(near_copy(rng, ref))
    return np.stack(out)


def _reference(frames, ref, tile=R.TILE):
    return [R.frame_stats(f, ref, tile) for f in frames]


def _check(out, rows, ref, seed, tag):
    lap_var, mad, ssim, hist_corr, thumb, hist, tiles = out
    n = len(rows)
    assert tiles.dtype == np.uint32 and tiles.shape == (n, *rows[0]["tile_sums"].shape) if n else True
    assert lap_var.shape == mad.shape == ssim.shape == hist_corr.shape == (n,)
    assert lap_var.dtype == mad.dtype == ssim.dtype == hist_corr.dtype == np.float64
    assert thumb.shape == (n, 64, 64) and thumb.dtype == np.float32
    assert hist.shape == (n, 64) and hist.dtype == np.float32
    msg = f"{tag} seed={seed}"
    np.testing.assert_allclose(lap_var, [r["lap_var"] for r in rows], rtol=1e-12, atol=0, err_msg=msg)
    # Means of integer sums, each rounded once to float32: exactly the reference's values.
    np.testing.assert_array_equal(thumb, np.array([r["thumb"] for r in rows], np.float32), err_msg=msg)
    np.testing.assert_array_equal(hist, np.array([r["hist"] for r in rows], np.float32), err_msg=msg)
    if ref is None:
        assert np.isnan(mad).all() and np.isnan(ssim).all() and np.isnan(hist_corr).all(), msg
        assert not tiles.any(), msg
        return
    np.testing.assert_allclose(mad, [r["mad"] for r in rows], rtol=1e-12, atol=0, err_msg=msg)
    # integer sums of |F - R| per tile: exactly the reference's
    np.testing.assert_array_equal(tiles, np.array([r["tile_sums"] for r in rows]), err_msg=msg)
    np.testing.assert_allclose(hist_corr, [r["hist_corr"] for r in rows], rtol=1e-12, atol=1e-14, err_msg=msg)
    # SSIM is computed from the float32 thumbnails: equal to the reference on those, and within
    # the float32 rounding of the reference on its float64 thumbnails.
    ref_thumb32 = R.thumbnail(ref).astype(np.float32)
    np.testing.assert_allclose(ssim, [R.ssim(t, ref_thumb32) for t in thumb], rtol=1e-9, atol=1e-12, err_msg=msg)
    np.testing.assert_allclose(ssim, [r["ssim"] for r in rows], rtol=0, atol=1e-6, err_msg=msg)


SHAPES = [(2, 2), (2, 3), (3, 2), (17, 23), (37, 91), (64, 64), (65, 130), (121, 67), (33, 34), (40, 35),
          (5, 200), (3, 4200), (90, 160)]


@pytest.mark.parametrize("h,w", SHAPES)
def test_stats_match_reference(h, w, rng, rng_seed):
    seed = rng_seed
    n = int(rng.integers(1, 6))
    ref = _scene(rng, h, w)
    frames = _batch(rng, n, h, w, ref)
    rows = _reference(frames, ref)
    for isa in ISAS:
        _C._set_isa(isa)
        _check(_C.gate_stats(frames, ref), rows, ref, seed, f"{isa} {h}x{w} n={n} ref")
        tile = int(rng.choice([1, 5, 8, 16, 33, 64]))
        _check(_C.gate_stats(frames, ref, tile=tile), _reference(frames, ref, tile), ref, seed,
               f"{isa} {h}x{w} n={n} tile={tile}")
        _check(_C.gate_stats(frames, None), rows, None, seed, f"{isa} {h}x{w} n={n} no ref")
        _check(_C.gate_stats(frames), rows, None, seed, f"{isa} {h}x{w} n={n} default ref")


def test_tall_frame_wide_column_sums(rng, rng_seed):
    """Row groups over 257 rows (H > 16448) take the 32-bit column-sum path."""
    seed = rng_seed
    frames = np.stack([_scene(rng, 16500, 5), rng.integers(0, 256, (16500, 5), dtype=np.uint8)])
    ref = _scene(rng, 16500, 5)
    rows = _reference(frames, ref)
    for isa in ISAS:
        _C._set_isa(isa)
        _check(_C.gate_stats(frames, ref), rows, ref, seed, f"{isa} 16500x5")


def test_hd_frames_one_thread_and_flush(rng, rng_seed):
    """1280 x 720 on one thread: one work item per frame, so the 16-bit pair-count tables of a
    flat frame (every pair in one entry) must be flushed before they overflow."""
    seed = rng_seed
    ref = _scene(rng, 720, 1280)
    frames = np.stack([np.full((720, 1280), 77, np.uint8), near_copy(rng, ref), _scene(rng, 720, 1280)])
    rows = _reference(frames, ref)
    for isa in ISAS:
        _C._set_isa(isa)
        for threads in (1, max(2, _C.max_threads())):
            _C._set_threads(threads)
            _check(_C.gate_stats(frames, ref), rows, ref, seed, f"{isa} threads={threads} 720x1280")


def test_identical_and_near_copies(rng, rng_seed):
    seed = rng_seed
    ref = _scene(rng, 120, 160)
    frames = np.stack([ref, near_copy(rng, ref)])
    for isa in ISAS:
        _C._set_isa(isa)
        lap_var, mad, ssim, hist_corr, _, _, tiles = _C.gate_stats(frames, ref)
        assert mad[0] == 0.0 and hist_corr[0] == 1.0 and not tiles[0].any(), (isa, seed)
        assert abs(ssim[0] - 1.0) < 1e-12, (isa, seed, ssim[0])
        assert 0 < mad[1] < 2 and ssim[1] > 0.99 and hist_corr[1] > 0.99, (isa, seed, mad[1], ssim[1], hist_corr[1])


def test_hist_corr_constant_histograms(rng, rng_seed):
    """Flat histograms: 1.0 when both are flat and equal, 0.0 when one is flat and they differ."""
    seed = rng_seed
    step = R.HIST_ROW_STEP  # the histogram counts rows 0, step, 2 * step, ...

    def flat():
        # 4 counted rows of 16 hold every bin once; the rows between them are not counted
        img = rng.integers(0, 256, (4 * step, 16)).astype(np.uint8)
        img[::step] = (rng.permutation(64) * 4 + rng.integers(0, 4, 64)).astype(np.uint8).reshape(4, 16)
        assert (R.histogram(img) == 1).all()
        return img

    flat_a, flat_b = flat(), flat()
    other = _scene(rng, 4 * step, 16)
    for isa in ISAS:
        _C._set_isa(isa)
        assert _C.gate_stats(flat_a[None], flat_b)[3][0] == 1.0, (isa, seed)
        assert _C.gate_stats(other[None], flat_b)[3][0] == 0.0, (isa, seed)
        assert _C.gate_stats(flat_a[None], other)[3][0] == 0.0, (isa, seed)
        assert R.hist_corr(R.histogram(flat_a), R.histogram(other)) == 0.0


def test_compare_equals_stats(rng, rng_seed):
    seed = rng_seed
    for h, w in [(37, 91), (90, 160), (2, 5)]:
        ref = _scene(rng, h, w)
        frames = _batch(rng, 5, h, w, ref)
        for isa in ISAS:
            _C._set_isa(isa)
            lap_var, mad, ssim, hist_corr, thumb, hist, tiles = _C.gate_stats(frames, ref)
            rth, rhi = _C.gate_stats(ref[None], None)[4:6]
            cmad, cssim, chc, ctiles = _C.gate_compare(frames, thumb, hist, ref, rth[0], rhi[0])
            msg = f"{isa} {h}x{w} seed={seed}"
            np.testing.assert_array_equal(ctiles, tiles, err_msg=msg)
            np.testing.assert_array_equal(cmad, mad, err_msg=msg)
            np.testing.assert_array_equal(cssim, ssim, err_msg=msg)
            np.testing.assert_array_equal(chc, hist_corr, err_msg=msg)


def test_batch_split_and_threads_do_not_change_results(rng, rng_seed):
    """Work is cut by frame and by row group depending on batch size and threads: the numbers
    must not depend on the cut."""
    seed = rng_seed
    ref = _scene(rng, 150, 210)
    frames = _batch(rng, 5, 150, 210, ref)
    for isa in ISAS:
        _C._set_isa(isa)
        full = _C.gate_stats(frames, ref)
        for i in range(len(frames)):
            one = _C.gate_stats(frames[i:i + 1], ref)
            for a, b in zip(full, one):
                np.testing.assert_array_equal(a[i:i + 1], b, err_msg=f"{isa} frame {i} seed={seed}")
        _C._set_threads(1)
        for a, b in zip(full, _C.gate_stats(frames, ref)):
            np.testing.assert_array_equal(a, b, err_msg=f"{isa} one thread seed={seed}")


def test_parallel_parts_equal_one_thread(rng, rng_seed):
    """Batches big enough for the thread team, few enough frames that each is cut into
    row parts: every frame is finished by the thread that completes its last part, with and
    without the reference's cached thumbnail and histogram (the reference pass keeps a barrier).
    Bitwise equal to one thread."""
    seed = rng_seed
    ref = _scene(rng, 720, 1280)
    frames = np.stack([near_copy(rng, ref)] + [_scene(rng, 720, 1280) for _ in range(4)])
    own = _C.gate_stats(ref[None])
    for isa in ISAS:
        _C._set_isa(isa)
        outs = []
        for threads in (1, max(2, _C.max_threads())):
            _C._set_threads(threads)
            outs.append((_C.gate_stats(frames, ref), _C.gate_stats(frames, ref, own[4][0], own[5][0])))
        (a_pass, a_cached), (b_pass, b_cached) = outs  # one thread, the team
        for a, a_c, b, b_c in zip(a_pass, a_cached, b_pass, b_cached):
            np.testing.assert_array_equal(a, a_c, err_msg=f"{isa} one thread, cached reference seed={seed}")
            np.testing.assert_array_equal(a, b, err_msg=f"{isa} team, reference pass seed={seed}")
            np.testing.assert_array_equal(a, b_c, err_msg=f"{isa} team, cached reference seed={seed}")


@pytest.mark.needs("two_isas")
def test_isas_agree_bitwise(rng, rng_seed):
    seed = rng_seed
    ref = _scene(rng, 97, 301)
    frames = _batch(rng, 4, 97, 301, ref)
    outs = []
    for isa in ISAS:
        _C._set_isa(isa)
        outs.append(_C.gate_stats(frames, ref))
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b, err_msg=f"seed={seed}")


def test_non_contiguous_and_empty_inputs(rng, rng_seed):
    seed = rng_seed
    big = rng.integers(0, 256, (3, 80, 120), dtype=np.uint8)
    frames, ref = big[:, ::2, 1::2], big[0, 1::2, ::2]
    assert not frames.flags.c_contiguous
    for a, b in zip(_C.gate_stats(frames, ref), _C.gate_stats(frames.copy(), ref.copy())):
        np.testing.assert_array_equal(a, b, err_msg=f"seed={seed}")
    empty = _C.gate_stats(np.zeros((0, 10, 12), np.uint8), np.zeros((10, 12), np.uint8))
    assert [a.shape for a in empty] == [(0,), (0,), (0,), (0,), (0, 64, 64), (0, 64), (0, 1, 1)]


def test_gil_released_threads_agree(rng, rng_seed):
    seed = rng_seed
    ref = _scene(rng, 180, 320)
    frames = _batch(rng, 4, 180, 320, ref)
    expected = _C.gate_stats(frames, ref)
    results = [None] * 4

    def work(i):
        results[i] = _C.gate_stats(frames, ref)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for res in results:
        for a, b in zip(expected, res):
            np.testing.assert_array_equal(a, b, err_msg=f"seed={seed}")


def test_cpu_body_matches_reference_body(rng, rng_seed):
    seed = rng_seed
    ref = _scene(rng, 48, 70)
    frames = _batch(rng, 3, 48, 70, ref)
    cpu, refb = CpuBody(), ReferenceBody()
    a, b = cpu.stats(frames, ref), refb.stats(frames, ref)
    for name in ("lap_var", "mad", "hist_corr"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-12, err_msg=f"{name} seed={seed}")
    np.testing.assert_allclose(a.ssim, b.ssim, atol=1e-6, err_msg=f"seed={seed}")
    np.testing.assert_array_equal(a.thumb, b.thumb)
    np.testing.assert_array_equal(a.hist, b.hist)
    assert np.isnan(cpu.stats(frames, None).mad).all() and np.isnan(cpu.stats(frames, None).tile_mad).all()
    # the tile reduction is one float64 rule over exact sums: equal in every body, at any threshold
    for tiles in (Tiles(), Tiles(14, float(np.median(a.tile_mad))), Tiles(16, float(a.tile_mad[1]))):
        ta, tb = cpu.stats(frames, ref, tiles=tiles), refb.stats(frames, ref, tiles=tiles)
        np.testing.assert_array_equal(ta.tile_mad, tb.tile_mad, err_msg=f"{tiles} seed={seed}")
        np.testing.assert_array_equal(ta.tiles_changed, tb.tiles_changed, err_msg=f"{tiles} seed={seed}")
        cells = -(-48 // tiles.cell), -(-70 // tiles.cell)
        assert ta.n_tiles == tb.n_tiles == (cells[0] - 1) * (cells[1] - 1)  # overlapping by half
        assert ta.tiles_changed.sum() >= 1 or tiles.threshold == float("inf")  # a threshold some tile meets
    c = cpu.compare(frames, a.thumb, a.hist, ref, R.thumbnail(ref), R.histogram(ref))
    np.testing.assert_array_equal(c.mad, a.mad)
    np.testing.assert_array_equal(c.ssim, a.ssim)
    np.testing.assert_array_equal(c.hist_corr, a.hist_corr)
    np.testing.assert_array_equal(c.tile_mad, a.tile_mad)


# --- rgb_to_gray ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 2, 3), (5, 7, 3), (2, 37, 53, 3), (2, 1, 3, 4, 3), (720, 1280, 3)])
def test_rgb_to_gray_matches_reference(shape, rng, rng_seed):
    seed = rng_seed
    rgb = rng.integers(0, 256, shape, dtype=np.uint8)
    got = _C.rgb_to_gray(rgb)
    assert got.dtype == np.uint8 and got.shape == shape[:-1]
    np.testing.assert_array_equal(got, R.rgb_to_gray(rgb), err_msg=f"seed={seed}")
    for isa in ISAS:
        _C._set_isa(isa)
        np.testing.assert_array_equal(_C.rgb_to_gray(rgb), got, err_msg=f"{isa} seed={seed}")


def test_rgb_to_gray_extremes_and_strides():
    v = np.arange(256, dtype=np.uint8)
    rgb = np.stack([*np.meshgrid(v, v, indexing="ij"), np.full((256, 256), 255, np.uint8)], -1)
    np.testing.assert_array_equal(_C.rgb_to_gray(rgb), R.rgb_to_gray(rgb))
    assert _C.rgb_to_gray(np.full((2, 2, 3), 255, np.uint8)).max() == 255
    assert _C.rgb_to_gray(np.zeros((2, 2, 3), np.uint8)).max() == 0
    strided = rgb[::3, ::2]
    np.testing.assert_array_equal(_C.rgb_to_gray(strided), R.rgb_to_gray(strided))
    bgr_view = rgb[..., ::-1]  # negative stride on the channel axis
    np.testing.assert_array_equal(_C.rgb_to_gray(bgr_view), R.rgb_to_gray(bgr_view))


def test_rgb_to_gray_close_to_opencv(rng, rng_seed):
    """Older OpenCV releases use exactly this 14-bit rule; newer ones (4.14 and 5) a 15-bit one
    that differs by at most 1 in a few pixels: either way, off by one at most, and rarely."""
    cv2 = pytest.importorskip("cv2")
    seed = rng_seed
    rgb = rng.integers(0, 256, (97, 131, 3), dtype=np.uint8)
    diff = _C.rgb_to_gray(rgb).astype(int) - cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY).astype(int)
    assert np.abs(diff).max() <= 1, f"seed={seed}"
    assert np.count_nonzero(diff) <= 0.02 * diff.size, f"seed={seed} (cv2 {cv2.__version__})"


# --- bad inputs -------------------------------------------------------------------------------

def _ok(h=6, w=7, n=2):
    frames = np.zeros((n, h, w), np.uint8)
    return frames, np.zeros((h, w), np.uint8), np.zeros((n, 64, 64), np.float32), np.zeros((n, 64), np.float32)


@pytest.mark.parametrize("frames,ref,match", [
    (np.zeros((2, 6, 7), np.float32), None, "frames must be uint8, got float32"),
    (np.zeros((2, 6, 7), np.int8), None, "frames must be uint8, got int8"),
    (np.zeros((2, 6, 7), bool), None, "frames must be uint8"),
    (np.zeros((6, 7), np.uint8), None, r"N x H x W.*ndim 2"),
    (np.zeros((1, 2, 6, 7), np.uint8), None, r"N x H x W.*ndim 4"),
    (np.zeros((2, 1, 7), np.uint8), None, r"at least 2 x 2.*1 x 7"),
    (np.zeros((2, 6, 1), np.uint8), None, r"at least 2 x 2.*6 x 1"),
    (np.zeros((2, 0, 0), np.uint8), None, "at least 2 x 2"),
    ([[[1, 2], [3, 4]]], None, "frames must be a numpy array"),
    (np.zeros((2, 6, 7), np.uint8), np.zeros((6, 8), np.uint8), r"ref must have shape \(6, 7\), got \(6, 8\)"),
    (np.zeros((2, 6, 7), np.uint8), np.zeros((1, 6, 7), np.uint8), r"ref must have shape \(6, 7\)"),
    (np.zeros((2, 6, 7), np.uint8), np.zeros((6, 7), np.uint16), "ref must be uint8, got uint16"),
    (np.zeros((2, 6, 7), np.uint8), "not an array", "ref must be a numpy array"),
])
def test_gate_stats_bad_inputs(frames, ref, match):
    with pytest.raises(ValueError, match=match):
        _C.gate_stats(frames, ref)


def test_gate_compare_bad_inputs():
    frames, ref, thumbs, hists = _ok()
    rt, rh = np.zeros((64, 64), np.float32), np.zeros(64, np.float32)
    _C.gate_compare(frames, thumbs, hists, ref, rt, rh)  # the good call works
    cases = [
        ((frames[0], thumbs, hists, ref, rt, rh), "N x H x W"),
        ((frames, thumbs.astype(np.float64), hists, ref, rt, rh), "thumbs must be float32, got float64"),
        ((frames, thumbs[:1], hists, ref, rt, rh), r"thumbs must have shape \(2, 64, 64\), got \(1, 64, 64\)"),
        ((frames, thumbs, hists[:, :32], ref, rt, rh), r"hists must have shape \(2, 64\)"),
        ((frames, thumbs, hists, ref[:, :3], rt, rh), r"ref must have shape \(6, 7\)"),
        ((frames, thumbs, hists, None, rt, rh), "ref must be a numpy array"),
        ((frames, thumbs, hists, ref, rt[:8], rh), r"ref_thumb must have shape \(64, 64\)"),
        ((frames, thumbs, hists, ref, rt, rh[:10]), r"ref_hist must have shape \(64,\), got \(10,\)"),
        ((frames, thumbs, hists, ref, rt, rh.astype(np.int32)), "ref_hist must be float32, got int32"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            _C.gate_compare(*args)


@pytest.mark.parametrize("rgb,match", [
    (np.zeros((4, 5, 4), np.uint8), r"\[\.\.\., H, W, 3\].*\(4, 5, 4\)"),
    (np.zeros((5, 3), np.uint8), r"\[\.\.\., H, W, 3\]"),
    (np.zeros((4, 5, 3), np.float32), "rgb must be uint8, got float32"),
])
def test_rgb_to_gray_bad_inputs(rgb, match):
    with pytest.raises(ValueError, match=match):
        _C.rgb_to_gray(rgb)


def test_bad_tile_sizes():
    frames, ref, thumbs, hists = _ok()
    for tile in (0, -3, 1025):
        with pytest.raises(ValueError, match=f"tile must be 1..1024 pixels, got {tile}"):
            _C.gate_stats(frames, ref, tile=tile)
        with pytest.raises(ValueError, match="tile must be"):
            _C.gate_compare(frames, thumbs, hists, ref, thumbs[0], hists[0], tile=tile)
    for size in (0, 7, 2050):
        with pytest.raises(ValueError, match="tile size must be even, 2..2048"):
            Tiles(size)


def test_tiles_find_a_small_change_the_mean_hides(rng, rng_seed):
    """A 12 x 12 patch changed by 100 in a 720p frame: the frame's mean barely moves, the tile
    that holds it stands out; a change in the bottom-right corner is seen by the last tile."""
    seed = rng_seed
    ref = _scene(rng, 720, 1280)
    frames = np.stack([ref.copy(), ref.copy()])
    patch = ref[100:112, 200:212].astype(int)  # every pixel moved by 100, up or down (no clipping)
    frames[0, 100:112, 200:212] = np.where(patch < 128, patch + 100, patch - 100)
    frames[1, 712:720, 1272:1280] = 255 - ref[712:720, 1272:1280]
    for isa in ISAS:
        _C._set_isa(isa)
        st = CpuBody().stats(frames, ref, tiles=Tiles(32, 10.0))
        assert (st.mad < 0.2).all(), (isa, seed, st.mad)
        assert st.tiles_changed[0] >= 1 and st.tile_mad[0] > 10, (isa, seed, st.tile_mad)
        d = np.abs(frames[1].astype(float) - ref)[688:720, 1248:1280]  # the last tile: 2 x 2 cells of 16
        assert st.tile_mad[1] == pytest.approx(d.mean(), rel=1e-12), (isa, seed)


def test_bad_isa_and_threads():
    with pytest.raises(ValueError, match="not available"):
        _C._set_isa("sse9")
    with pytest.raises(ValueError, match=">= 1"):
        _C._set_threads(0)
    assert _C.gate_isa() in ("base", "avx2")


# --- the reference against the libraries it names ---------------------------------------------

def test_reference_matches_opencv_and_skimage(rng, rng_seed):
    cv2 = pytest.importorskip("cv2")
    metrics = pytest.importorskip("skimage.metrics")
    seed = rng_seed
    for h, w in [(37, 91), (120, 160), (2, 3)]:
        g = _scene(rng, h, w)
        assert R.laplacian_var(g) == pytest.approx(cv2.Laplacian(g, cv2.CV_64F).var(), rel=1e-12), seed
    for _ in range(3):
        a = R.thumbnail(_scene(rng, 90, 160))
        b = R.thumbnail(_scene(rng, 90, 160))
        for x, y in [(a, b), (a, a), (a, np.clip(a + rng.normal(0, 3, a.shape), 0, 255))]:
            want = metrics.structural_similarity(x, y, data_range=255)
            assert R.ssim(x, y) == pytest.approx(want, rel=1e-9, abs=1e-12), seed
    h1, h2 = R.histogram(_scene(rng, 50, 60)), R.histogram(_scene(rng, 50, 60))
    want = cv2.compareHist(h1.astype(np.float32), h2.astype(np.float32), cv2.HISTCMP_CORREL)
    assert R.hist_corr(h1, h2) == pytest.approx(want, rel=1e-6), seed


def test_cached_reference_statistics_give_the_same_result(rng, rng_seed):
    """The cascade passes the reference's cached thumbnail and histogram to skip its pass."""
    seed = rng_seed
    frames = rng.integers(0, 256, (3, 45, 77), dtype=np.uint8)
    ref = rng.integers(0, 256, (45, 77), dtype=np.uint8)
    own = _C.gate_stats(ref[None])[:6]
    full = _C.gate_stats(frames, ref)
    cached = _C.gate_stats(frames, ref, own[4][0], own[5][0])
    for a, b in zip(full, cached):
        np.testing.assert_array_equal(a, b, err_msg=f"seed {seed}")
    with pytest.raises(ValueError, match="go together"):
        _C.gate_stats(frames, ref, own[4][0], None)
