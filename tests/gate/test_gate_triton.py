"""The Triton body of the gate statistics (kernels/gate_stats.py) against reference.py.

Without a CUDA device the kernels run on CPU tensors under the Triton interpreter, which is
switched on here before triton and the kernels module are imported: triton reads
TRITON_INTERPRET when it defines a kernel, its own library functions included, so modules
imported earlier without it are imported again (see _load_module). With CUDA the same tests
run natively, plus one full-size batch marked ``gpu``.
"""
from __future__ import annotations

import importlib
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")

from support.paths import REPO  # noqa: E402
from support.tolerances import GATE_DEVICE_TOL, GATE_STATS, assert_gate_close  # noqa: E402
from vam_engine.gate import reference as R  # noqa: E402
from vam_engine.synthetic import gate_batch, gray_frame, near_copy  # noqa: E402

DEVICE = "cuda" if HAS_CUDA else "cpu"


def _interpreter_ready() -> bool:
    """Under the interpreter, triton itself must have been imported with TRITON_INTERPRET=1:
    its library functions (tl.sum and co.) are made interpreted functions at import."""
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.standard.sum, InterpretedFunction)


def _load_module():
    if not HAS_CUDA and not _interpreter_ready():
        # triton was imported before this module set TRITON_INTERPRET (torch._dynamo imports
        # it, for one): import triton's Python modules afresh, which read the variable; its
        # compiled extension (triton._C) stays loaded, as it cannot be initialised twice.
        for name in [m for m in sys.modules if m == "triton" or m.startswith("triton.")]:
            if not name.startswith("triton._C"):
                del sys.modules[name]
        assert _interpreter_ready()
    try:
        mod = importlib.import_module("vam_engine.kernels.gate_stats")
    except ModuleNotFoundError:  # before the package install maps kernels/ to vam_engine.kernels
        root = str(REPO)
        if root not in sys.path:
            sys.path.insert(0, root)
        mod = importlib.import_module("kernels.gate_stats")
    if not HAS_CUDA:
        from triton.runtime.interpreter import InterpretedFunction

        stale = mod.triton is not sys.modules["triton"]  # made with the triton replaced above
        if stale or not isinstance(mod._gate_pass_kernel, InterpretedFunction):
            mod = importlib.reload(mod)  # imported before TRITON_INTERPRET was set
        assert isinstance(mod._gate_pass_kernel, InterpretedFunction)
    return mod


gs = _load_module()


def _scene(rng, h, w) -> np.ndarray:
    """A camera-like scene with noise: not pure noise, so SSIM and the histogram vary."""
    return gray_frame(rng, h, w, noise=12.0)


def _batch(rng, n, h, w, ref):
    frames = [_scene(rng, h, w) for _ in range(n)]
    if ref is not None:  # a near copy of the reference: SSIM close to 1
        frames[0] = near_copy(rng, ref)
    return np.stack(frames)


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a)).to(DEVICE)


def _np(t):
    return t.detach().cpu().numpy()


def _check(frames, ref, out, seed, tile=R.TILE):
    lap, mad, ssim, corr, thumb, hist, tiles = (_np(o) for o in out)
    n = len(frames)
    assert tiles.dtype == np.int64 and tiles.shape == (n, *R.tile_grid_shape(*frames.shape[1:], tile))
    assert lap.shape == mad.shape == ssim.shape == corr.shape == (n,)
    assert lap.dtype == mad.dtype == ssim.dtype == corr.dtype == np.float64
    assert thumb.shape == (n, 64, 64) and thumb.dtype == np.float32
    assert hist.shape == (n, 64) and hist.dtype == np.float32
    got = {"lap_var": lap, "mad": mad, "ssim": ssim, "hist_corr": corr, "thumb": thumb, "hist": hist,
           "tile_sums": tiles}
    for k in range(n):
        exp = R.frame_stats(frames[k], ref, tile)
        msg = f"frame {k} of {frames.shape}, ref={'yes' if ref is not None else 'no'}, tile={tile}, seed={seed}"
        np.testing.assert_array_equal(tiles[k], exp["tile_sums"], err_msg=msg)  # exact integers
        if ref is None:
            assert np.isnan(mad[k]) and np.isnan(ssim[k]) and np.isnan(corr[k]), msg
            assert_gate_close({q: v[k] for q, v in got.items()}, exp, msg, stats=("lap_var", "thumb", "hist"))
        else:
            assert_gate_close({q: v[k] for q, v in got.items()}, exp, msg)


# sides under 64 (nearest sampling, overlapping cells), exactly 64, odd and not block multiples;
# without a reference only where it adds something (the other tests cover that path too)
CASES = [((2, 37, 71), True), ((2, 64, 64), True), ((3, 70, 97), True), ((2, 23, 50), True),
         ((2, 37, 71), False), ((3, 70, 97), False)]


@pytest.mark.parametrize("shape,with_ref", CASES,
                         ids=["x".join(map(str, s)) + ("-ref" if r else "-noref") for s, r in CASES])
def test_gate_stats_matches_reference(shape, with_ref, rng, rng_seed):
    seed = rng_seed
    n, h, w = shape
    ref = _scene(rng, h, w) if with_ref else None
    frames = _batch(rng, n, h, w, ref)
    tile = int(rng.choice([5, 16, 32, 33]))  # under, at and over a tile's 32 x 64 block, not dividing the sides
    out = gs.gate_stats(_t(frames), None if ref is None else _t(ref), tile=tile)
    _check(frames, ref, out, seed, tile)
    if ref is not None:
        assert _np(out[2])[0] > 0.95, f"near copy of the reference should be similar, seed={seed}"


@pytest.mark.parametrize("shape,max_block_w,with_ref", [
    ((1, 33, 193), 64, True),  # four column blocks (the last one column), straddling cells
    ((1, 2, 2), 256, False),  # the smallest frame: reflect-101 with two pixels a side
    ((1, 131, 65), 256, False),  # bands of two and three rows, cells one and two columns wide
], ids=["blocks", "2x2", "131x65"])
def test_column_blocks_and_small_sides(monkeypatch, shape, max_block_w, with_ref, rng, rng_seed):
    monkeypatch.setattr(gs, "_MAX_BLOCK_W", max_block_w)
    seed = rng_seed
    n, h, w = shape
    ref = _scene(rng, h, w) if with_ref else None
    frames = _batch(rng, n, h, w, ref)
    out = gs.gate_stats(_t(frames), None if ref is None else _t(ref))
    _check(frames, ref, out, seed)


def test_gate_compare_matches_reference(rng, rng_seed):
    """The reference is frame 0 and its thumbnail/histogram are views of the batch's arrays, as
    when CudaBody gets numpy views (on a CPU, tensors then share memory)."""
    seed = rng_seed
    n, h, w = 3, 41, 83
    frames = _batch(rng, n, h, w, None)
    frames[1] = np.clip(frames[0].astype(np.int16) + rng.integers(-2, 3, (h, w)), 0, 255).astype(np.uint8)
    ref = frames[0]
    thumbs = np.stack([R.thumbnail(f) for f in frames]).astype(np.float32)
    hists = np.stack([R.histogram(f) for f in frames]).astype(np.float32)
    mad, ssim, corr, tiles = (_np(o) for o in gs.gate_compare(
        _t(frames), _t(thumbs), _t(hists), _t(ref), _t(thumbs[0]), _t(hists[0]), tile=7))
    for k in range(n):
        exp = R.frame_stats(frames[k], ref, 7)
        np.testing.assert_array_equal(tiles[k], exp["tile_sums"], err_msg=f"frame {k}, seed={seed}")
        assert_gate_close({"mad": mad[k], "ssim": ssim[k], "hist_corr": corr[k]}, exp, f"frame {k}, seed={seed}",
                          stats=COMPARE_STATS[:3])
    assert mad[0] == 0.0 and abs(ssim[0] - 1.0) < 1e-12 and corr[0] == 1.0
    assert ssim[1] > 0.95


def test_constant_frames_and_degenerate_hist_corr(rng, rng_seed):
    """Constant frames have zero Laplacian variance; flat histograms (every bin the same count)
    are the degenerate cases of the correlation: 1.0 when both are flat, 0.0 when one is."""
    seed = rng_seed
    h, w = 16, 64  # the counted rows (every R.HIST_ROW_STEP-th) hold the same count per bin

    def flat():
        img = rng.integers(0, 256, (h, w)).astype(np.uint8)
        n = img[::R.HIST_ROW_STEP].size
        img[::R.HIST_ROW_STEP] = (rng.permutation(n) % 64 * 4 + rng.integers(0, 4, n)).reshape(-1, w)
        return img

    ref = flat()
    frames = np.stack([flat(), np.full((h, w), 200, np.uint8)])
    out = gs.gate_stats(_t(frames), _t(ref))
    _check(frames, ref, out, seed)
    np.testing.assert_array_equal(_np(out[3]), [1.0, 0.0])
    assert _np(out[0])[1] == 0.0


def _poisoned_empty(shape, dtype, device):
    t = torch.empty(shape, dtype=dtype, device=device)
    if dtype.is_floating_point:
        t.fill_(float("nan"))
    else:
        t.fill_(-0x5A5A5A5A if dtype.itemsize >= 4 else 0x5A)
    return t


def test_every_output_element_is_written(monkeypatch, rng, rng_seed):
    """Every buffer (outputs and per-band partials) allocated poisoned: results still exact."""
    monkeypatch.setattr(gs, "_empty", _poisoned_empty)
    seed = rng_seed
    n, h, w = 2, 30, 67
    ref = _scene(rng, h, w)
    frames = _batch(rng, n, h, w, ref)
    f, r = _t(frames), _t(ref)
    with_ref, no_ref = gs.gate_stats(f, r), gs.gate_stats(f[1:], None)
    _check(frames, ref, with_ref, seed)
    _check(frames[1:], None, no_ref, seed)
    ref_thumb = torch.from_numpy(R.thumbnail(ref).astype(np.float32)).to(DEVICE)
    ref_hist = torch.from_numpy(R.histogram(ref).astype(np.float32)).to(DEVICE)
    again = gs.gate_compare(f, with_ref[4].clone(), with_ref[5].clone(), r, ref_thumb, ref_hist)
    np.testing.assert_array_equal(_np(again[3]), _np(with_ref[6]), err_msg=f"seed={seed}")
    for x, y in zip(again[:3], with_ref[1:4]):
        np.testing.assert_allclose(_np(x), _np(y), rtol=1e-12, atol=1e-12, err_msg=f"seed={seed}")


def test_empty_batch():
    empty = torch.empty((0, 8, 9), dtype=torch.uint8, device=DEVICE)
    lap, mad, ssim, corr, thumb, hist, tiles = gs.gate_stats(empty, None)
    assert lap.shape == (0,) and thumb.shape == (0, 64, 64) and hist.shape == (0, 64) and tiles.shape == (0, 1, 1)


def test_input_validation():
    f = torch.zeros((2, 10, 12), dtype=torch.uint8, device=DEVICE)
    r = torch.zeros((10, 12), dtype=torch.uint8, device=DEVICE)
    th = torch.zeros((2, 64, 64), dtype=torch.float32, device=DEVICE)
    hi = torch.zeros((2, 64), dtype=torch.float32, device=DEVICE)
    rth = torch.zeros((64, 64), dtype=torch.float32, device=DEVICE)
    rhi = torch.zeros((64,), dtype=torch.float32, device=DEVICE)
    with pytest.raises(ValueError, match="uint8"):
        gs.gate_stats(f.float(), None)
    with pytest.raises(ValueError, match="3 dimensions"):
        gs.gate_stats(f[0], None)
    with pytest.raises(ValueError, match="at least"):
        gs.gate_stats(f[:, :1, :], None)
    with pytest.raises(ValueError, match="at least"):
        gs.gate_stats(torch.zeros((1, 5, 1), dtype=torch.uint8, device=DEVICE), None)
    with pytest.raises(ValueError, match="shape"):
        gs.gate_stats(f, r[:, :11])
    with pytest.raises(ValueError, match="uint8"):
        gs.gate_stats(f, r.int())
    with pytest.raises(ValueError, match="torch.Tensor"):
        gs.gate_stats(f.cpu().numpy(), None)
    with pytest.raises(ValueError, match="frames are on"):
        gs.gate_stats(f, torch.zeros((10, 12), dtype=torch.uint8, device="meta"))
    with pytest.raises(ValueError, match="thumbs"):
        gs.gate_compare(f, th[:1], hi, r, rth, rhi)
    with pytest.raises(ValueError, match="hists"):
        gs.gate_compare(f, th, hi.double(), r, rth, rhi)
    with pytest.raises(ValueError, match="ref_thumb"):
        gs.gate_compare(f, th, hi, r, rth[:8], rhi)
    with pytest.raises(ValueError, match="ref_hist"):
        gs.gate_compare(f, th, hi, r, rth, rhi[:8])
    with pytest.raises(ValueError, match="ref"):
        gs.gate_compare(f, th, hi, r.T, rth, rhi)
    with pytest.raises(ValueError, match="frames are on"):
        gs.gate_compare(f, th, hi, r, rth, torch.zeros((64,), dtype=torch.float32, device="meta"))
    for tile in (0, 1025, 2.5):
        with pytest.raises(ValueError, match="tile must be an int of 1..1024"):
            gs.gate_stats(f, r, tile=tile)
        with pytest.raises(ValueError, match="tile must be"):
            gs.gate_compare(f, th, hi, r, rth, rhi, tile=tile)


COMPARE_STATS = ("mad", "ssim", "hist_corr", "tile_sums")  # gate_compare's output order


def _stats(out) -> dict:
    return dict(zip(GATE_STATS, (_np(o) for o in out)))


@pytest.mark.gpu
@pytest.mark.parametrize("n,h,w", [(32, 720, 1280), (32, 1080, 1920)], ids=["720p-b32", "1080p-b32"])
def test_full_size_batches_match_reference_and_cpp(n, h, w, rng, rng_seed):
    """Real sizes on the device: three frames against the numpy reference (it is slow at 1080p),
    the whole batch against the C++ body, gate_compare against frame 1 as the new reference,
    and a batch without a reference (NaN comparisons, the rest unchanged)."""
    from vam_engine import _C

    b = gate_batch(rng, n, h, w)
    frames, ref = b.frames, b.ref
    out = gs.gate_stats(_t(frames), _t(ref))
    got = _stats(out)
    msg = f"{n}x{h}x{w}, seed={rng_seed}"
    cpp = dict(zip(GATE_STATS, _C.gate_stats(frames, ref)))
    assert_gate_close(got, cpp, "Triton vs C++ " + msg)
    picks = sorted({0, n // 2, n - 1})
    for k in picks:
        assert_gate_close({q: v[k] for q, v in got.items()}, R.frame_stats(frames[k], ref), f"frame {k} of " + msg)
    cmp = dict(zip(COMPARE_STATS, (_np(o) for o in gs.gate_compare(
        _t(frames), out[4], out[5], _t(frames[1]), out[4][1].clone(), out[5][1].clone()))))
    cpp_cmp = dict(zip(COMPARE_STATS, _C.gate_compare(frames, cpp["thumb"], cpp["hist"], frames[1],
                                                      cpp["thumb"][1], cpp["hist"][1])))
    assert_gate_close(cmp, cpp_cmp, "compare, Triton vs C++ " + msg, stats=COMPARE_STATS)
    for k in picks:
        assert_gate_close({q: v[k] for q, v in cmp.items()}, R.frame_stats(frames[k], frames[1]),
                          f"compare, frame {k} of " + msg, stats=COMPARE_STATS)
    noref = _stats(gs.gate_stats(_t(frames[:4]), None))
    assert np.isnan(noref["mad"]).all() and np.isnan(noref["ssim"]).all() and np.isnan(noref["hist_corr"]).all()
    assert_gate_close(noref, {q: v[:4] for q, v in cpp.items()}, "no reference " + msg,
                      stats=("lap_var", "thumb", "hist"))


@pytest.mark.gpu
def test_batch_size_does_not_change_results(rng, rng_seed):
    """A batch of 256 (the 720p batch tiled 8 times) gives each frame exactly the statistics it
    has in the batch of 32: no cross-frame state in the kernels."""
    b = gate_batch(rng, 32, 720, 1280)
    one = _stats(gs.gate_stats(_t(b.frames), _t(b.ref)))
    big = torch.from_numpy(b.frames).to(DEVICE).repeat(8, 1, 1).contiguous()
    tiled = _stats(gs.gate_stats(big, _t(b.ref)))
    for q in GATE_STATS:
        np.testing.assert_array_equal(tiled[q], np.concatenate([one[q]] * 8), err_msg=f"{q}, seed={rng_seed}")


# ~70 s under the Triton interpreter on a CPU; seconds natively (tests/gate/test_gate_triton.py runs whole on
# the GPU machine)
@pytest.mark.slow
def test_cascade_through_the_cuda_body_matches_frame_by_frame(rng, rng_seed):
    """The dispatch layer (gate.bodies.CudaBody) and the cascade's redo path on this body."""
    from support.cascade_rules import sequential, structured_sequence

    from vam_engine.config import GateConfig
    from vam_engine.gate.bodies import CudaBody
    from vam_engine.gate.cascade import GateCascade

    seed = rng_seed
    frames = structured_sequence(rng, h=24, w=40, n=16)
    cfg = GateConfig()
    cascade = GateCascade(CudaBody(DEVICE), cfg)
    got = []
    for i in range(0, len(frames), 6):
        got += cascade.run("cam", frames[i:i + 6])
    want = sequential(frames, cfg)
    assert [g.dropped_by for g in got] == [d for d, _ in want], f"seed {seed}"
    for g, (_, s) in zip(got, want):
        assert g.lap_var == pytest.approx(s["lap_var"], rel=GATE_DEVICE_TOL["lap_var"][0], abs=1e-9)
        if g.mad is not None:
            assert g.mad == pytest.approx(s["mad"], rel=GATE_DEVICE_TOL["mad"][0])
            assert g.ssim == pytest.approx(s["ssim"], abs=GATE_DEVICE_TOL["ssim"][1])
