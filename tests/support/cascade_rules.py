"""The gate cascade's rules written out plainly, one frame at a time (``sequential``), and a
sequence that exercises every rule (``structured_sequence``): the batched cascade and each body
of the statistics are checked against them."""
import numpy as np
import pytest

from vam_engine.gate import CpuBody, ReferenceBody
from vam_engine.gate import reference as R
from vam_engine.synthetic.gate_sequences import blurred


def _restart(sharp, lap, cfg):
    """The sharpness history after keeping a frame of Laplacian variance ``lap``."""
    med = float(np.median(sharp[-cfg.blur_history:])) if sharp else None
    if med is not None and lap < cfg.blur_rel * med:
        sharp = []  # a new view, sharp for what it shows
    return (sharp + [lap])[-cfg.blur_history:]


def _blurred(g, s, has_ref, sharp, cfg) -> bool:
    """The blur rule on frame g with its statistics s (against the reference, when has_ref)."""
    med = float(np.median(sharp[-cfg.blur_history:])) if sharp else None
    new_view = has_ref and s["ssim"] < cfg.blur_view_ssim
    thumb_lap = R.laplacian_var(s["thumb"].astype(np.float32))
    # fine detail (over the rounding floor) per coarse structure, in frame pixels
    cell = (g.shape[0] / 64) * (g.shape[1] / 64)
    detail = max(0.0, s["lap_var"] - 20 / 12) * cell / thumb_lap if thumb_lap > 0 else np.inf
    # the thumbnail's own sharpness: second differences along the shorter side, full over halved
    th = s["thumb"].astype(np.float64)
    axis = 0 if g.shape[0] <= g.shape[1] else 1
    d2_half = np.diff(th.reshape(32, 2, 32, 2).mean(axis=(1, 3)), 2, axis=axis).var()
    coarse_sharp = np.diff(th, 2, axis=axis).var() / d2_half if d2_half > 0 else np.inf
    defocused = detail < cfg.blur_detail_ratio or coarse_sharp < cfg.blur_coarse_sharpness
    return bool(s["lap_var"] < cfg.blur_min_lap_var and med is not None and s["lap_var"] < cfg.blur_rel * med
                and (not new_view or (thumb_lap >= cfg.blur_coarse_lap_var and defocused)))


def sequential(grays, cfg, times=None, released=None):
    """The cascade's rules, written out plainly, one frame at a time. ``times``: the samples'
    seconds (None: a hold has no deadline); ``released``: a list that receives (i, j) for each
    held sample i kept before the decision on frame j (the view rule)."""
    ref, out, sharp = None, [], []  # sharp: Laplacian variances of the kept frames since the last restart
    held = None  # (index, frame, lap_var, hold start, thumbnail) of the view's sharpest blurred sample
    last = None  # (thumbnail, histogram) of the previous sample
    for i, g in enumerate(grays):
        t = None if times is None else float(times[i])
        thumb, hist = R.thumbnail(g).astype(np.float32), R.histogram(g)

        def release(restart):
            nonlocal ref, sharp, held
            ref = held[1]
            if restart:  # the view goes on: the rest of it is judged against this frame
                sharp = _restart(sharp, held[2], cfg)
            if released is not None:
                released.append((held[0], i))
            held = None
        if held is not None:  # did the held sample's view end?
            if t is not None and held[3] is not None and t - held[3] >= cfg.blur_view_max_s:
                release(True)
            elif (last[0].shape != thumb.shape or (R.ssim(thumb, last[0]) < cfg.blur_view_ssim
                                                   and R.hist_corr(hist, last[1]) < cfg.blur_view_hist_corr)):
                release(False)  # a cut: both the structure and the histogram changed
        last = (thumb, hist)
        has_ref = ref is not None and ref.shape == g.shape
        s = R.frame_stats(g, ref if has_ref else None, cfg.tile_size // 2, cfg.tile_min_mad)
        if held is not None and not _blurred(g, s, has_ref, sharp, cfg) and R.ssim(thumb, held[4]) < cfg.blur_view_ssim:
            release(False)  # a sharp sample of another view
            has_ref = ref.shape == g.shape
            s = R.frame_stats(g, ref if has_ref else None, cfg.tile_size // 2, cfg.tile_min_mad)
        med = float(np.median(sharp[-cfg.blur_history:])) if sharp else None
        n_tiles = R.tile_count(*g.shape, cfg.tile_size // 2)
        if _blurred(g, s, has_ref, sharp, cfg):
            d = "blur"
        elif not has_ref:
            d = None
        elif (sharp and sharp[-1] < cfg.blur_min_lap_var and s["lap_var"] >= cfg.blur_min_lap_var
              and sharp[-1] < cfg.blur_rel * s["lap_var"]):
            d = None  # the reference is blurred next to it: back in focus
        elif s["mad"] < cfg.diff_min_mad:
            changed = s["tile_mad"] >= cfg.tile_min_mad
            local = changed and s["tiles_changed"] <= cfg.tile_max_frac * n_tiles
            cut = (changed and not local and s["ssim"] < cfg.cut_max_ssim  # a new view of similar brightness
                   and s["hist_corr"] < cfg.cut_max_hist_corr)
            contrast = max(_hist_std(R.histogram(g)), _hist_std(R.histogram(ref)))
            faint_pan = changed and not local and s["mad"] >= cfg.diff_min_contrast_frac * contrast
            if local or cut:
                d = None
            elif not faint_pan:
                d = "low_change"
            elif s["ssim"] > cfg.ssim_max:  # a wide change on a low-contrast view: the gates after low change
                d = "ssim"
            elif cfg.hist_max_corr > 0 and s["hist_corr"] >= cfg.hist_max_corr:
                d = "hist"
            else:
                d = None
        elif s["ssim"] > cfg.ssim_max:
            d = "ssim"
        elif cfg.hist_max_corr > 0 and s["hist_corr"] >= cfg.hist_max_corr:
            d = "hist"
        else:
            d = None
        out.append((d, s))
        if d == "blur":  # a blurred sample showing a new view is held: its view may keep it
            if held is not None:
                if s["lap_var"] > held[2]:
                    held = (i, g, s["lap_var"], held[3], thumb)
            elif not has_ref or s["ssim"] < cfg.blur_view_ssim:
                held = (i, g, s["lap_var"], t, thumb)
            continue
        held = None  # a sample of the view passed the blur rule
        if d is None:
            ref = g
            sharp = _restart(sharp, s["lap_var"], cfg)
    return out


def _hist_std(hist):
    """Gray std from a 64-bin histogram, values of bin b taken at 4b + 1.5."""
    c = np.arange(64) * 4.0 + 1.5
    m = (hist * c).sum() / hist.sum()
    return float(np.sqrt((hist * (c - m) ** 2).sum() / hist.sum()))


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
    """The gate bodies a cascade test runs on (parametrize ids): the numpy reference and the
    fused C++ body (skipped when the native module is not built)."""
    out = [pytest.param(ReferenceBody(), id="reference")]
    try:
        out.append(pytest.param(CpuBody(), id="cpu"))
    except ImportError:
        out.append(pytest.param(None, id="cpu", marks=pytest.mark.skip("vam_engine._C not built")))
    return out
