"""Gate decisions of the batched cascade equal a frame-by-frame run of the reference."""
import numpy as np
import pytest

from vam_engine.config import GateConfig
from vam_engine.gate import reference as R
from vam_engine.gate.bodies import CpuBody, ReferenceBody
from vam_engine.gate.cascade import GateCascade


def sequential(grays, cfg):
    """The cascade's rules, written out plainly, one frame at a time."""
    ref, out = None, []
    for g in grays:
        has_ref = ref is not None and ref.shape == g.shape
        s = R.frame_stats(g, ref if has_ref else None)
        if s["lap_var"] < cfg.blur_min_lap_var:
            d = "blur"
        elif not has_ref:
            d = None
        elif s["mad"] < cfg.diff_min_mad:
            d = "low_change"
        elif s["ssim"] > cfg.ssim_max:
            d = "ssim"
        elif cfg.hist_max_corr > 0 and s["hist_corr"] >= cfg.hist_max_corr:
            d = "hist"
        else:
            d = None
        out.append((d, s))
        if d is None:
            ref = g
    return out


def structured_sequence(rng, h=48, w=80, n=60):
    """Cuts, static stretches, blur, brightness shifts (SSIM-redundant) and a size change."""
    frames = []
    scene = rng.integers(0, 256, (h, w), dtype=np.uint8)
    for i in range(n):
        kind = rng.choice(["cut", "static", "static", "blur", "bright", "noise"])
        if kind == "cut":
            yy, xx = np.mgrid[0:h, 0:w]
            scene = np.clip(rng.uniform(60, 200) + 50 * np.sin(xx * rng.uniform(0.1, 0.5) + yy * rng.uniform(0.1, 0.5))
                            + rng.normal(0, 20, (h, w)), 0, 255).astype(np.uint8)
            f = scene
        elif kind == "static":
            f = np.clip(scene.astype(int) + rng.integers(-2, 3, (h, w)), 0, 255).astype(np.uint8)
        elif kind == "blur":
            f = np.full((h, w), int(scene.mean()), np.uint8)
            f[::7] += 1
        elif kind == "bright":
            f = np.clip(scene.astype(int) + 25, 0, 255).astype(np.uint8)
        else:
            f = np.clip(scene.astype(int) + rng.integers(-40, 41, (h, w)), 0, 255).astype(np.uint8)
        frames.append(f)
    frames.insert(n // 2, rng.integers(0, 256, (h + 2, w - 3), dtype=np.uint8))  # the stream resized
    return frames


def bodies():
    out = [pytest.param(ReferenceBody(), id="reference")]
    try:
        out.append(pytest.param(CpuBody(), id="cpu"))
    except ImportError:
        out.append(pytest.param(None, id="cpu", marks=pytest.mark.skip("vam_engine._C not built")))
    return out


@pytest.mark.parametrize("body", bodies())
@pytest.mark.parametrize("batch", [1, 3, 7, 64])
@pytest.mark.parametrize("hist_gate", [0.0, 0.9])
def test_batched_cascade_matches_frame_by_frame(body, batch, hist_gate):
    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    cfg = GateConfig(hist_max_corr=hist_gate)
    frames = structured_sequence(rng)
    want = sequential(frames, cfg)
    cascade = GateCascade(body, cfg)
    got = []
    for i in range(0, len(frames), batch):
        got += cascade.run("cam", frames[i:i + batch])
    assert [g.dropped_by for g in got] == [d for d, _ in want], f"seed {seed}"
    kinds = {d for d, _ in want}
    assert {None, "blur", "low_change", "ssim"} <= kinds, f"sequence lacks a case, seed {seed}"
    for g, (_, s) in zip(got, want):
        assert g.lap_var == pytest.approx(s["lap_var"], rel=1e-6, abs=1e-9)
        if np.isnan(s["mad"]):
            assert g.mad is None and g.ssim is None
        else:
            assert g.mad == pytest.approx(s["mad"], rel=1e-6)
            assert g.ssim == pytest.approx(s["ssim"], abs=1e-5)
            assert g.hist_corr == pytest.approx(s["hist_corr"], abs=1e-6)


def test_cameras_keep_separate_references():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (32, 32), dtype=np.uint8)
    b = rng.integers(0, 256, (32, 32), dtype=np.uint8)
    c = GateCascade(ReferenceBody(), GateConfig())
    assert c.run("x", [a])[0].dropped_by is None
    assert c.run("y", [b])[0].dropped_by is None  # its own first frame, not compared with x
    assert c.run("x", [a])[0].dropped_by == "low_change"
    assert c.run("y", [a])[0].dropped_by is None
