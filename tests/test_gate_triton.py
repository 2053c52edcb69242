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
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")

from vam_engine.gate import reference as R  # noqa: E402

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
        root = str(Path(__file__).resolve().parents[1])
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


def _seed() -> int:
    seed = int(np.random.SeedSequence().entropy % (2 ** 32))
    print(f"seed={seed}")  # shown with a failure; np.random.default_rng(seed) replays it
    return seed


def _scene(rng, h, w) -> np.ndarray:
    """A gradient with texture and noise: not pure noise, so SSIM and the histogram vary."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    a, b = rng.uniform(-2.0, 2.0, 2)
    fx, fy = rng.uniform(2, 9, 2)
    img = 128 + a * (x - w / 2) + b * (y - h / 2) + 30 * np.sin(x / fx) * np.cos(y / fy)
    img += rng.normal(0, 12, (h, w))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def _batch(rng, n, h, w, ref):
    frames = [_scene(rng, h, w) for _ in range(n)]
    if ref is not None:  # a near copy of the reference: SSIM close to 1
        frames[0] = np.clip(ref.astype(np.int16) + rng.integers(-2, 3, ref.shape), 0, 255).astype(np.uint8)
    return np.stack(frames)


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a)).to(DEVICE)


def _np(t):
    return t.detach().cpu().numpy()


def _check(frames, ref, out, seed):
    lap, mad, ssim, corr, thumb, hist = (_np(o) for o in out)
    n = len(frames)
    assert lap.shape == mad.shape == ssim.shape == corr.shape == (n,)
    assert lap.dtype == mad.dtype == ssim.dtype == corr.dtype == np.float64
    assert thumb.shape == (n, 64, 64) and thumb.dtype == np.float32
    assert hist.shape == (n, 64) and hist.dtype == np.float32
    for k in range(n):
        exp = R.frame_stats(frames[k], ref)
        msg = f"frame {k} of {frames.shape}, ref={'yes' if ref is not None else 'no'}, seed={seed}"
        np.testing.assert_allclose(lap[k], exp["lap_var"], rtol=1e-6, err_msg=msg)
        np.testing.assert_allclose(thumb[k], exp["thumb"], rtol=0, atol=1e-3, err_msg=msg)
        np.testing.assert_array_equal(hist[k], exp["hist"], err_msg=msg)
        if ref is None:
            assert np.isnan(mad[k]) and np.isnan(ssim[k]) and np.isnan(corr[k]), msg
        else:
            np.testing.assert_allclose(mad[k], exp["mad"], rtol=1e-6, err_msg=msg)
            np.testing.assert_allclose(ssim[k], exp["ssim"], rtol=0, atol=1e-5, err_msg=msg)
            np.testing.assert_allclose(corr[k], exp["hist_corr"], rtol=0, atol=1e-9, err_msg=msg)


# sides under 64 (nearest sampling, overlapping cells), exactly 64, odd and not block multiples;
# without a reference only where it adds something (the other tests cover that path too)
CASES = [((2, 37, 71), True), ((2, 64, 64), True), ((3, 70, 97), True), ((2, 23, 50), True),
         ((2, 37, 71), False), ((3, 70, 97), False)]


@pytest.mark.parametrize("shape,with_ref", CASES,
                         ids=["x".join(map(str, s)) + ("-ref" if r else "-noref") for s, r in CASES])
def test_gate_stats_matches_reference(shape, with_ref):
    seed = _seed()
    rng = np.random.default_rng(seed)
    n, h, w = shape
    ref = _scene(rng, h, w) if with_ref else None
    frames = _batch(rng, n, h, w, ref)
    out = gs.gate_stats(_t(frames), None if ref is None else _t(ref))
    _check(frames, ref, out, seed)
    if ref is not None:
        assert _np(out[2])[0] > 0.95, f"near copy of the reference should be similar, seed={seed}"


@pytest.mark.parametrize("shape,max_block_w,with_ref", [
    ((1, 33, 193), 64, True),  # four column blocks (the last one column), straddling cells
    ((1, 2, 2), 256, False),  # the smallest frame: reflect-101 with two pixels a side
    ((1, 131, 65), 256, False),  # bands of two and three rows, cells one and two columns wide
], ids=["blocks", "2x2", "131x65"])
def test_column_blocks_and_small_sides(monkeypatch, shape, max_block_w, with_ref):
    monkeypatch.setattr(gs, "_MAX_BLOCK_W", max_block_w)
    seed = _seed()
    rng = np.random.default_rng(seed)
    n, h, w = shape
    ref = _scene(rng, h, w) if with_ref else None
    frames = _batch(rng, n, h, w, ref)
    out = gs.gate_stats(_t(frames), None if ref is None else _t(ref))
    _check(frames, ref, out, seed)


def test_gate_compare_matches_reference():
    """The reference is frame 0 and its thumbnail/histogram are views of the batch's arrays, as
    when CudaBody gets numpy views (on a CPU, tensors then share memory)."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    n, h, w = 3, 41, 83
    frames = _batch(rng, n, h, w, None)
    frames[1] = np.clip(frames[0].astype(np.int16) + rng.integers(-2, 3, (h, w)), 0, 255).astype(np.uint8)
    ref = frames[0]
    thumbs = np.stack([R.thumbnail(f) for f in frames]).astype(np.float32)
    hists = np.stack([R.histogram(f) for f in frames]).astype(np.float32)
    mad, ssim, corr = (_np(o) for o in gs.gate_compare(
        _t(frames), _t(thumbs), _t(hists), _t(ref), _t(thumbs[0]), _t(hists[0])))
    for k in range(n):
        exp = R.frame_stats(frames[k], ref)
        msg = f"frame {k}, seed={seed}"
        np.testing.assert_allclose(mad[k], exp["mad"], rtol=1e-6, err_msg=msg)
        np.testing.assert_allclose(ssim[k], exp["ssim"], rtol=0, atol=1e-5, err_msg=msg)
        np.testing.assert_allclose(corr[k], exp["hist_corr"], rtol=0, atol=1e-9, err_msg=msg)
    assert mad[0] == 0.0 and abs(ssim[0] - 1.0) < 1e-12 and corr[0] == 1.0
    assert ssim[1] > 0.95


def test_constant_frames_and_degenerate_hist_corr():
    """Constant frames have zero Laplacian variance; flat histograms (every bin the same count)
    are the degenerate cases of the correlation: 1.0 when both are flat, 0.0 when one is."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    h, w = 16, 68  # 1088 pixels = 17 per histogram bin

    def flat():
        return (rng.permutation(h * w) % 64 * 4 + rng.integers(0, 4, h * w)).reshape(h, w).astype(np.uint8)

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


def test_every_output_element_is_written(monkeypatch):
    """Every buffer (outputs and per-band partials) allocated poisoned: results still exact."""
    monkeypatch.setattr(gs, "_empty", _poisoned_empty)
    seed = _seed()
    rng = np.random.default_rng(seed)
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
    for x, y in zip(again, with_ref[1:4]):
        np.testing.assert_allclose(_np(x), _np(y), rtol=1e-12, atol=1e-12, err_msg=f"seed={seed}")


def test_empty_batch():
    empty = torch.empty((0, 8, 9), dtype=torch.uint8, device=DEVICE)
    lap, mad, ssim, corr, thumb, hist = gs.gate_stats(empty, None)
    assert lap.shape == (0,) and thumb.shape == (0, 64, 64) and hist.shape == (0, 64)


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


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_full_size_batch_on_gpu():
    seed = _seed()
    rng = np.random.default_rng(seed)
    n, h, w = 8, 720, 1280
    ref = _scene(rng, h, w)
    frames = _batch(rng, n, h, w, ref)
    out = gs.gate_stats(_t(frames), _t(ref))
    _check(frames, ref, out, seed)
    mad, ssim, corr = (_np(o) for o in gs.gate_compare(_t(frames), out[4], out[5], _t(frames[0]),
                                                      out[4][0].clone(), out[5][0].clone()))
    # against frame 0's statistics as the reference now
    for k in range(n):
        exp = R.frame_stats(frames[k], frames[0])
        np.testing.assert_allclose(mad[k], exp["mad"], rtol=1e-6, err_msg=f"seed={seed}")
        np.testing.assert_allclose(ssim[k], exp["ssim"], rtol=0, atol=1e-5, err_msg=f"seed={seed}")
        np.testing.assert_allclose(corr[k], exp["hist_corr"], rtol=0, atol=1e-9, err_msg=f"seed={seed}")


def test_cascade_through_the_cuda_body_matches_frame_by_frame():
    """The dispatch layer (gate.bodies.CudaBody) and the cascade's redo path on this body."""
    from test_cascade import sequential, structured_sequence

    from vam_engine.config import GateConfig
    from vam_engine.gate.bodies import CudaBody
    from vam_engine.gate.cascade import GateCascade

    seed = _seed()
    frames = structured_sequence(np.random.default_rng(seed), h=24, w=40, n=16)
    cfg = GateConfig()
    cascade = GateCascade(CudaBody(DEVICE), cfg)
    got = []
    for i in range(0, len(frames), 6):
        got += cascade.run("cam", frames[i:i + 6])
    want = sequential(frames, cfg)
    assert [g.dropped_by for g in got] == [d for d, _ in want], f"seed {seed}"
    for g, (_, s) in zip(got, want):
        assert g.lap_var == pytest.approx(s["lap_var"], rel=1e-6, abs=1e-9)
        if g.mad is not None:
            assert g.mad == pytest.approx(s["mad"], rel=1e-6) and g.ssim == pytest.approx(s["ssim"], abs=1e-5)
