"""The cosine-dedup kernel (kernels/cosine_dedup.py) against its numpy reference, and the
batched committer (OnlineCommitter.push_batch, through each body of index/dedup_bodies.py)
against the frame-by-frame committer, the truth: the same decisions on fresh random embeddings.

Without a CUDA device the kernel runs on CPU tensors under the Triton interpreter
(support/triton_kernels.py); with one, natively.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from support.triton_kernels import has_cuda, load_kernels  # noqa: E402

cd = load_kernels("cosine_dedup", "_cosine_sim_kernel")
import triton  # noqa: E402  (after load_kernels: under the interpreter, the interpreted triton)
import triton.language as tl  # noqa: E402

from vam_engine.config import CommitConfig  # noqa: E402
from vam_engine.index import CommitInputError, OnlineCommitter  # noqa: E402
from vam_engine.index.dedup_bodies import CpuBody, CudaBody, ReferenceBody  # noqa: E402

DEVICE = "cuda" if has_cuda() else "cpu"


def _reference_sims(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    u = x / np.linalg.norm(x, axis=1)[:, None]
    return u @ u.T


@pytest.mark.parametrize("m,d,dtype", [(1, 3, torch.float32), (17, 40, torch.float32), (33, 70, torch.float64),
                                       (20, 16, torch.float32)])
def test_kernel_matches_reference(m, d, dtype):
    rng = np.random.default_rng()  # fresh inputs every run
    x = rng.normal(size=(m, d)) * rng.uniform(0.1, 10.0, size=(m, 1))
    sims, norms = cd.cosine_sims(torch.tensor(x, dtype=dtype, device=DEVICE))
    xr = torch.tensor(x, dtype=dtype).double().numpy()  # what the kernel read
    np.testing.assert_allclose(norms.cpu().numpy(), np.linalg.norm(xr, axis=1), rtol=1e-13)
    np.testing.assert_allclose(sims.cpu().numpy(), _reference_sims(xr), rtol=0, atol=1e-13)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [512, 768])
def test_kernel_matches_reference_at_real_sizes(d):
    """A camera's batch of 256 frames with its reference and held frame, CLIP ViT-B / ViT-L dims."""
    rng = np.random.default_rng()
    x = rng.normal(size=(258, d)).astype(np.float32)
    sims, norms = cd.cosine_sims(torch.from_numpy(x).to(DEVICE))
    np.testing.assert_allclose(norms.cpu().numpy(), np.linalg.norm(x.astype(np.float64), axis=1), rtol=1e-13)
    np.testing.assert_allclose(sims.cpu().numpy(), _reference_sims(x), rtol=0, atol=1e-13)


def test_kernel_bad_input_is_named():
    with pytest.raises(ValueError, match="float32 or float64"):
        cd.cosine_sims(torch.zeros((3, 4), dtype=torch.int32, device=DEVICE))
    with pytest.raises(ValueError, match="M x D"):
        cd.cosine_sims(torch.zeros((3,), dtype=torch.float32, device=DEVICE))
    with pytest.raises(ValueError, match="must be a torch.Tensor"):
        cd.cosine_sims(np.zeros((3, 4), np.float32))


def _bodies():
    """The CPU's, the reference and the CUDA body twice: its similarities under the host scan, and
    its scan on the device."""
    return [ReferenceBody(), CpuBody(), CudaBody(DEVICE, scans=False), CudaBody(DEVICE)]


def _name(x):
    if hasattr(x, "sims"):
        return x.name + ("-scan" if getattr(x, "scans", False) else "")
    return str(x)


@pytest.mark.parametrize("body", _bodies(), ids=_name)
def test_bodies_agree_with_reference(body):
    rng = np.random.default_rng()
    x = rng.normal(size=(9, 24))
    np.testing.assert_allclose(body.sims(x), _reference_sims(x), rtol=0, atol=1e-13)


def _scenes(rng, n: int, d: int) -> np.ndarray:
    """Camera-like embeddings: scenes (random centres) held for a while, each frame its scene plus
    noise of a random size, so distances to the reference fall on both sides of the thresholds."""
    out = np.empty((n, d), np.float32)
    centre = rng.normal(size=d)
    for i in range(n):
        if rng.random() < 0.06:
            centre = rng.normal(size=d)
        elif rng.random() < 0.2:
            centre = centre + 0.3 * rng.normal(size=d)  # a slow drift
        v = centre / np.linalg.norm(centre) + rng.uniform(0.05, 0.7) * rng.normal(size=d) / np.sqrt(d)
        out[i] = v / np.linalg.norm(v)
    return out


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x.t, x.key, x.kept, x.reason, x.event_start) == (y.t, y.key, y.kept, y.reason, y.event_start)
        assert (x.distance is None) == (y.distance is None)
        if x.distance is not None:
            assert abs(x.distance - y.distance) < 1e-12


@pytest.mark.parametrize("body,n,d", [(b, 300, 32) for b in _bodies()]
                         + [pytest.param(CudaBody(DEVICE), 3000, 512, marks=pytest.mark.gpu, id="cuda-real-size")],
                         ids=_name)
def test_push_batch_decides_as_frame_by_frame(body, n, d):
    rng = np.random.default_rng()
    embs = _scenes(rng, n, d)
    ts = np.cumsum(rng.uniform(0.02, 2.0, size=n))
    keeps = rng.random(n) < 0.03  # the image gates' local-change keeps
    cfg = CommitConfig(window=48, min_history=8, max_event_s=60.0)  # the adaptive thresholds after 8 frames
    truth = OnlineCommitter(cfg)
    want = []
    for i in range(n):
        want += truth.push(ts[i], embs[i], i, keep=bool(keeps[i]))
    want += truth.finish()

    batched = OnlineCommitter(cfg, body=body)
    got, i = [], 0
    while i < n:  # batches of every size, a frame held across the boundaries
        j = min(n, i + int(rng.integers(1, 40 if n < 1000 else 300)))
        got += batched.push_batch(ts[i:j], embs[i:j], keys=range(i, j), keeps=keeps[i:j])
        i = j
    got += batched.finish()
    _same(got, want)
    kept = sum(x.kept for x in want)
    dropped = sum(x.reason == "dedup" for x in want)
    assert kept > 20 and dropped > 20, (kept, dropped)  # both rules were exercised
    assert any(x.event_start for x in want[1:])
    _same_state(truth.state().to_json(), batched.state().to_json())


def _same_state(a, b):
    """Equal states, their distances to the last bits of rounding (a matrix product sums in
    another order than a dot product)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same_state(a[k], b[k])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same_state(x, y)
    elif isinstance(a, float):
        assert abs(a - b) < 1e-12, (a, b)
    else:
        assert a == b


@pytest.mark.parametrize("window,min_history", [(48, 8), (256, 32), (20, 4)])
def test_device_scan_is_the_host_scan_bit_for_bit(window, min_history):
    """The scan kernel against the committer's host scan over the same similarities (the kernel's):
    every decision, every distance and the final state equal, not merely close."""
    rng = np.random.default_rng()
    n = 300
    embs = _scenes(rng, n, 24)
    ts = np.cumsum(rng.uniform(0.02, 2.0, size=n))
    keeps = rng.random(n) < 0.03
    cfg = CommitConfig(window=window, min_history=min_history, max_event_s=40.0)
    host, device = OnlineCommitter(cfg, body=CudaBody(DEVICE, scans=False)), OnlineCommitter(cfg, body=CudaBody(DEVICE))
    i = 0
    while i < n:
        j = min(n, i + int(rng.integers(1, 60)))
        a = host.push_batch(ts[i:j], embs[i:j], range(i, j), keeps[i:j])
        b = device.push_batch(ts[i:j], embs[i:j], range(i, j), keeps[i:j])
        assert a == b, i  # Decision dataclasses: t, key, kept, reason, event_start, distance, all exact
        i = j
    assert host.finish() == device.finish()
    assert host.state().to_json() == device.state().to_json()


@triton.jit
def _otsu_probe(ring_ptr, out_ptr, count, WIN: tl.constexpr):
    found, tau = cd._otsu(tl.load(ring_ptr + tl.arange(0, WIN)), count, WIN)
    tl.store(out_ptr, tl.where(found, tau, float("nan")))


def test_device_otsu_is_the_host_otsu_bit_for_bit():
    """kernels/cosine_dedup._otsu against index/otsu.py on fresh windows: spread, two clusters,
    values on a coarse grid (empty bins: tied splits), a window not full, all values equal."""
    from vam_engine.index import otsu_threshold

    rng = np.random.default_rng()
    cases = [rng.uniform(0, 1, 256), np.concatenate([rng.uniform(0, .1, 100), rng.uniform(.3, .5, 156)]),
             np.round(rng.uniform(0, .4, 256), 2), rng.uniform(0, .3, 37), np.full(50, 0.2), rng.uniform(0, 1, 2)]
    for v in cases:
        ring = np.zeros(256)
        ring[: len(v)] = v
        out = torch.empty(1, dtype=torch.float64, device=DEVICE)
        _otsu_probe[(1,)](torch.tensor(ring, device=DEVICE), out, len(v), WIN=256, enable_fp_fusion=False)
        want = otsu_threshold(v)
        got = float(out.cpu()[0])
        assert (np.isnan(got) and want is None) or got == want, (len(v), got, want)


def test_push_batch_is_atomic_on_bad_input():
    rng = np.random.default_rng()
    c = OnlineCommitter(CommitConfig(), body=CpuBody())
    c.push_batch([0.0, 1.0], _scenes(rng, 2, 8))
    before = c.state().to_json()
    bad = _scenes(rng, 3, 8)
    bad[1, 2] = np.nan
    with pytest.raises(CommitInputError, match="t=3.0: embedding has NaN"):
        c.push_batch([2.0, 3.0, 4.0], bad)
    with pytest.raises(CommitInputError, match="t=0.5: timestamps must increase"):
        c.push_batch([0.5], _scenes(rng, 1, 8))
    with pytest.raises(CommitInputError, match="2 times, 3 embeddings"):
        c.push_batch([5.0, 6.0], _scenes(rng, 3, 8))
    with pytest.raises(CommitInputError, match="dimension changed from 8 to 9"):
        c.push_batch([5.0], _scenes(rng, 1, 9))
    assert c.state().to_json() == before
