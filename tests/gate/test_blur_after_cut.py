"""A cut straight into a heavily defocused view is dropped at 360p, 720p and 1080p, and a cut to a
sharp low-texture view is still kept, with the frames coming through H.264 as the engine reads
them (the decoded luma plane).

The codec's noise lifts a defocused frame's Laplacian variance a few units over the rounding
floor; the detail ratio multiplies that by the pixels per thumbnail cell (56 at 360p, 506 at
1080p), which lets a defocused new view through as a sharp low-texture one. The thumbnail's own
sharpness (cascade.coarse_sharpness) averages the noise away in its cells and is the same
picture at every frame size."""
from __future__ import annotations

from fractions import Fraction

import cv2
import numpy as np
import pytest

from vam_engine import synthetic as syn
from vam_engine.config import GateConfig
from vam_engine.gate import reference as R
from vam_engine.gate.bodies import CpuBody, ReferenceBody
from vam_engine.gate.cascade import GateCascade, coarse_sharpness, detail_ratio, FrameStats

SIZES = [pytest.param(360, 640, id="360p"), pytest.param(720, 1280, id="720p"), pytest.param(1080, 1920, id="1080p")]
HOLD = 4  # frames each view is held at 30 fps; the gate sees the last, a P-frame 3 frames after the cut
NOISE = 1.5  # the camera's sensor noise (std, gray levels), fresh in every frame, before the codec
OLD_RULE = GateConfig(blur_coarse_sharpness=0.0)  # the detail ratio alone: the rule before issue 19


def _body():
    try:
        return CpuBody()
    except ImportError:
        return ReferenceBody()


def _gray(rgb) -> np.ndarray:
    return cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)


WALLS = ([["chelsea", "coins", "grass", "clock"], ["brick", "text", "gravel", "hubble_deep_field"]],
         [["astronaut", "camera", "cat", "page"], ["retina", "coffee", "rocket", "moon"]])


def _walls(h: int):
    """Two photo walls with rows of half the frame height: crops of them are sharp views at any size."""
    return tuple(_gray(syn.photo_wall(rows, h // 2)) for rows in WALLS)


def _cover(name: str, h: int, w: int, zoom: float = 1.0) -> np.ndarray:
    img = syn.photo(name)
    s = max(h / img.shape[0], w / img.shape[1]) * zoom
    big = syn.resize_rgb(img, max(h, round(img.shape[0] * s)), max(w, round(img.shape[1] * s)))
    y, x = (big.shape[0] - h) // 2, (big.shape[1] - w) // 2
    return np.ascontiguousarray(big[y:y + h, x:x + w])


def _through_h264(views, rng, tmp_path) -> list[np.ndarray]:
    """Each view held HOLD frames with sensor noise in an H.264 clip (libx264 crf 23, one
    keyframe: every cut is a P-frame), decoded to the luma plane as the engine's PyAV decoder
    reads it; the last frame of each view."""
    import av

    from vam_engine.ingest.pyav_decoder import luma_plane

    frames = [v for v in views for _ in range(HOLD)]

    def rgb():
        for f in frames:
            g = f.astype(np.float32) + rng.standard_normal(f.shape, dtype=np.float32) * np.float32(NOISE)
            yield np.repeat(np.clip(np.rint(g), 0, 255).astype(np.uint8)[..., None], 3, axis=2)
    clip = syn.write_rgb_clip(tmp_path / "cut.mp4", rgb(), list(range(len(frames))), Fraction(1, 30), gop=250)
    with av.open(clip.path) as c:
        decoded = [np.array(luma_plane(f)) for f in c.decode(video=0)]
    assert len(decoded) == len(frames)
    return decoded[HOLD - 1::HOLD]


def _decisions(frames, cfg):
    return [r.dropped_by for r in GateCascade(_body(), cfg).run("cam", frames)]


@pytest.mark.parametrize("h,w", SIZES)
def test_a_cut_into_a_defocused_view_is_dropped_at_every_size(h, w, tmp_path, rng, rng_seed):
    """Sharp view A; a cut to view B out of focus (sigma 6 px at 360p, scaled with the height: the
    fidelity clips' heavy defocus), B in focus; a cut to C out of focus, C in focus."""
    w1, w2 = _walls(h)
    a, b, c = w1[:, :w], w2[:, :w], w2[:, -w:]
    sigma = 6.0 * h / 360
    frames = _through_h264([a, a, syn.defocus(b, sigma), syn.defocus(b, sigma), b, syn.defocus(c, sigma), c],
                           rng, tmp_path)
    cfg = GateConfig()
    got = _decisions(frames, cfg)
    assert got == [None, "low_change", "blur", "blur", None, "blur", None], f"seed {rng_seed}: {got}"
    defocused = [frames[i] for i in (2, 3, 5)]
    assert all(R.laplacian_var(f) < cfg.blur_min_lap_var for f in defocused)  # the relative rule decides
    assert all(coarse_sharpness(R.thumbnail(f), h, w) < cfg.blur_coarse_sharpness for f in defocused)
    assert all(coarse_sharpness(R.thumbnail(f), h, w) > 0.4 for f in (frames[0], frames[4], frames[6]))
    # the rule before: the codec's noise lifts a detail ratio over blur_detail_ratio, and a
    # defocused new view is kept as a sharp low-texture one
    old = _decisions(frames, OLD_RULE)
    assert None in [old[i] for i in (2, 3, 5)], f"seed {rng_seed}: {old}"


@pytest.mark.parametrize("h,w", SIZES)
def test_a_cut_to_a_sharp_low_texture_view_is_still_kept(h, w, tmp_path, rng, rng_seed):
    """The moon, a foggy and a night view and a retina, each after the sharp textured view: under
    the blur thresholds, with coarse structure, through the same codec: new views, kept."""
    w1, _ = _walls(h)
    a = w1[:, :w]
    fog = syn.haze(_cover("coffee", h, w), 0.13, 205.0)  # the fidelity clips' fog and night at 360p
    night = syn.haze(_cover("rocket", h, w), 0.11, 8.0)
    retina = _cover("retina", h, w, 1080 / h)  # about its own resolution, as in the fidelity clip
    lows = [_gray(_cover("moon", h, w, 1.3)), _gray(fog), _gray(night), _gray(retina)]
    views = [a]
    for v in lows:
        views += [v, a]
    frames = _through_h264(views, rng, tmp_path)
    cfg = GateConfig()
    got = _decisions(frames, cfg)
    assert got == [None] * len(frames), f"seed {rng_seed}: {got}"
    consulted = 0
    for f in frames[1::2]:
        th = R.thumbnail(f)
        assert R.laplacian_var(f) < cfg.blur_min_lap_var, "a low-texture view over the absolute threshold"
        assert R.ssim(th, R.thumbnail(frames[0])) < cfg.blur_view_ssim  # a new view
        if R.laplacian_var(th) >= cfg.blur_coarse_lap_var:  # coarse structure: the thumbnail's sharpness decides
            consulted += 1
            assert coarse_sharpness(th, h, w) > 0.4
    assert consulted == 3  # the moon, the fog and the retina (the night view has no coarse structure)


def test_coarse_sharpness_is_the_same_picture_at_every_size():
    """The statistic reads the 64x64 thumbnail only: a picture and its defocus (sigma scaled with
    the height) measure the same from 180p to 1080p, and a flat view has nothing to measure."""
    vals = {}
    for h, w in [(180, 320), (360, 640), (720, 1280), (1080, 1920)]:
        img = _gray(_cover("astronaut", h, w))
        vals[h] = (coarse_sharpness(R.thumbnail(img), h, w),
                   coarse_sharpness(R.thumbnail(_gray(syn.defocus(_cover("astronaut", h, w), 6.0 * h / 360))), h, w))
    sharp, blurred = zip(*vals.values())
    assert max(sharp) - min(sharp) < 0.05 and min(sharp) > 0.4, vals
    assert max(blurred) - min(blurred) < 0.05 and max(blurred) < 0.2, vals
    assert coarse_sharpness(np.full((64, 64), 90.0), 360, 640) == float("inf")
    # portrait frames: the shorter side is the width, and the statistic follows it
    tall = _gray(_cover("astronaut", 640, 360))
    assert coarse_sharpness(R.thumbnail(syn.defocus(tall, 6.0)), 640, 360) < 0.2
    assert coarse_sharpness(R.thumbnail(tall), 640, 360) > 0.4
    # NaN (not computed) never blurs: the field's default keeps the rule before
    assert not FrameStats(1.0, 50.0, 0.1, 0.1, 50.0, 10, 10).coarse_sharpness < 0.3
    assert detail_ratio(FrameStats(1.0, 50.0, 0.1, 0.1, 50.0, 10, 10, 0.0)) == float("inf")
