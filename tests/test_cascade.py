"""Gate decisions of the batched cascade equal a frame-by-frame run of the reference."""
import numpy as np
import pytest

from vam_engine.config import GateConfig
from vam_engine.gate import reference as R
from vam_engine.gate.bodies import CpuBody, ReferenceBody
from vam_engine.gate.cascade import GateCascade
from vam_engine.synthetic_gate import blurred


def sequential(grays, cfg):
    """The cascade's rules, written out plainly, one frame at a time."""
    ref, out, sharp = None, [], []  # sharp: Laplacian variances of the kept frames since the last restart
    for g in grays:
        has_ref = ref is not None and ref.shape == g.shape
        s = R.frame_stats(g, ref if has_ref else None, cfg.tile_size, cfg.tile_min_mad)
        med = float(np.median(sharp[-cfg.blur_history:])) if sharp else None
        n_tiles = int(np.prod(R.tile_grid_shape(*g.shape, cfg.tile_size)))
        if (s["lap_var"] < cfg.blur_min_lap_var and med is not None and s["lap_var"] < cfg.blur_rel * med
                and not (has_ref and s["ssim"] < cfg.blur_view_ssim)):
            d = "blur"
        elif not has_ref:
            d = None
        elif s["mad"] < cfg.diff_min_mad:
            local = s["tile_mad"] >= cfg.tile_min_mad and s["tiles_changed"] <= cfg.tile_max_frac * n_tiles
            d = None if local else "low_change"
        elif s["ssim"] > cfg.ssim_max:
            d = "ssim"
        elif cfg.hist_max_corr > 0 and s["hist_corr"] >= cfg.hist_max_corr:
            d = "hist"
        else:
            d = None
        out.append((d, s))
        if d is None:
            ref = g
            if med is not None and s["lap_var"] < cfg.blur_rel * med:
                sharp = []  # a new view, sharp for what it shows
            sharp = (sharp + [s["lap_var"]])[-cfg.blur_history:]
    return out


def structured_sequence(rng, h=72, w=120, n=60):
    """Cuts, static stretches, defocus, brightness shifts (SSIM-redundant), small moving patches
    (local changes) and a size change."""
    frames = []
    scene = rng.integers(0, 256, (h, w), dtype=np.uint8)
    for i in range(n):
        kind = rng.choice(["cut", "static", "static", "blur", "bright", "noise", "patch"])
        if kind == "cut":
            yy, xx = np.mgrid[0:h, 0:w]
            # structure coarse enough to survive a defocus in the thumbnail (SSIM ~0.9), noise for texture
            scene = np.clip(rng.uniform(60, 200) + 50 * np.sin(xx * rng.uniform(0.05, 0.2) + yy * rng.uniform(0.05, 0.2))
                            + rng.normal(0, 20, (h, w)), 0, 255).astype(np.uint8)
            f = scene
        elif kind == "static":
            f = np.clip(scene.astype(int) + rng.integers(-2, 3, (h, w)), 0, 255).astype(np.uint8)
        elif kind == "blur":
            f = blurred(scene, 3) if rng.random() < 0.8 else np.full((h, w), int(scene.mean()), np.uint8)
        elif kind == "patch":  # a 16 x 16 black or white patch somewhere: a local change (mostly)
            f = np.clip(scene.astype(int) + rng.integers(-2, 3, (h, w)), 0, 255).astype(np.uint8)
            y, x = rng.integers(0, h - 16), rng.integers(0, w - 16)
            f[y:y + 16, x:x + 16] = rng.choice([0, 255])
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
    local = [i for i, (d, s) in enumerate(want) if d is None and s["mad"] < cfg.diff_min_mad]
    assert local, f"sequence lacks a local change, seed {seed}"
    for g, (_, s) in zip(got, want):
        assert g.lap_var == pytest.approx(s["lap_var"], rel=1e-6, abs=1e-9)
        if np.isnan(s["mad"]):
            assert g.mad is None and g.ssim is None and g.tile_mad is None and g.tiles_changed is None
        else:
            assert g.tile_mad == pytest.approx(s["tile_mad"], rel=1e-12) and g.tiles_changed == s["tiles_changed"]
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
