"""benchmarks/bench_fidelity.py: its metrics on hand-made cases, its generators on tiny clips (the
PTS written are the PTS decoded, a VFR clip starts at 3600 s), and both methods end to end on a
tiny clip. Not timed."""
from __future__ import annotations

import importlib.util
import math
import sys

import numpy as np
import pytest

from support.paths import REPO
from vam_engine import synthetic as syn

_PATH = REPO / "benchmarks" / "bench_fidelity.py"


@pytest.fixture(scope="module")
def bf():
    sys.path.insert(0, str(_PATH.parent))
    spec = importlib.util.spec_from_file_location("bench_fidelity", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_fidelity"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_metrics_on_a_hand_made_case(bf):
    S = bf.Segment
    segs = [S("scene", 0, 5, "a"), S("digits", 5, 8, "0418"), S("object", 8, 10, "cat"), S("blur", 10, 12),
            S("low_texture", 12, 16, "moon"), S("low_texture", 16, 20, "fog")]
    kept = [0.0, 5.0, 10.5, 11.0, 13.0]  # 5.0 lies in digits (segments are [t0, t1)); 8-10 missed
    assert bf.recall(kept, segs, bf.MUST_KEEP) == bf.Recall(2, 3)
    assert bf.recall(kept, segs, bf.SMALL) == bf.Recall(1, 2)
    assert bf.recall(kept, segs, ("low_texture",)).value == 0.5
    assert bf.recall([], segs, ("pan",)).value is None
    assert bf.blurred_kept(kept, segs) == 2
    assert bf.kept_per_minute(5, 20.0) == 15.0
    frames = [i / 30 for i in range(600)]
    assert bf.off_pts([0.0, 5.0, 13.0 + 1e-7], frames) == []
    assert bf.off_pts([10.51, 1 / 30 + 1e-5], frames) == [10.51, 1 / 30 + 1e-5]

    clip = bf.Clip("hand", "none.mp4", 64, 48, 20.0, frames, segs)
    samples = [bf.Sample(8.2, 900.0, 1.5, 0.99, "low_change"), bf.Sample(9.1, 901.0, 1.2, 0.99, "low_change"),
               bf.Sample(16.5, 7.0, 40.0, 0.5, "blur"), bf.Sample(0.0, 800.0, None, None, None)]
    r = bf.score(clip, bf.Run("x", [0.0, 5.0, 13.0, 10.0 + 1 / 60], samples, 0.1))
    assert r["must_keep"] == {"hit": 2, "total": 3} and r["blurred_kept"] == 1 and not r["pts_ok"]
    assert r["off_pts"] == [10.0 + 1 / 60]
    assert [g["kept"] for g in r["segments"]] == [1, 1, 0, 1, 1, 0]
    assert r["segments"][2]["samples"] == 2 and r["segments"][2]["mad_median"] == pytest.approx(1.35)
    missed = {m["note"]: m for m in r["missed"]}
    assert set(missed) == {"cat", "fog"}
    assert missed["cat"]["dropped_by"] == {"low_change": 2} and missed["fog"]["dropped_by"] == {"blur": 1}


def test_pan_and_crossing_segments(bf):
    canvas = np.zeros((40, 400, 3), np.uint8)
    shot = bf.pan(canvas, 40, 64, 10.0, speed=12.8, note="p")  # half a frame (32 px) per 2.5 s
    assert [(s.kind, s.t0, s.t1) for s in shot.segments] == [("pan", 2.5, 5.0), ("pan", 5.0, 7.5),
                                                               ("pan", 7.5, 10.0)]
    assert shot.render(5.0).shape == (40, 64, 3) and shot.render(0.0).base is canvas
    with pytest.raises(ValueError, match="leaves the"):
        bf.pan(canvas, 40, 64, 100.0, speed=12.8)
    bg = np.full((40, 100, 3), 50, np.uint8)
    spr = np.full((10, 10, 3), 250, np.uint8)
    c = bf.crossing(bg, spr, 11.0, 5, park_s=2.0)  # 110 px in 9 s of motion, parked mid-frame 2 s
    (seg,) = c.segments
    for t in np.linspace(0, 11.0, 111, endpoint=False):
        whole = int((c.render(t) == 250).all(-1).sum()) == 100
        if abs(t - seg.t0) > 0.1 and abs(t - seg.t1) > 0.1:
            assert whole == seg.contains(t), t
    t_mid = 55 / (110 / 9)  # reaches x = (100 - 10) // 2 and stays there 2 s
    assert all((c.render(t)[5:15, 45:55] == 250).all() for t in (t_mid + 0.1, t_mid + 1.9))


def test_generators_write_the_pts_they_are_given(tmp_path):
    from fractions import Fraction

    tb = Fraction(1, 90000)
    pts = syn.vfr_pts(np.random.default_rng(1), 3.0, start_s=3600.0, time_base=tb, gap_every_s=1.0, gap_s=0.5)
    d = np.diff(pts) * float(tb)
    assert pts[0] == 3600 * 90000 and d.max() > 0.45 and d.min() > 1 / 40  # a stall and no 40+ fps frame
    img = syn.photo("astronaut")
    assert img.shape == (512, 512, 3) and img.dtype == np.uint8 and syn.photo("moon").shape == (512, 512, 3)
    with pytest.raises(ValueError, match="bundled"):
        syn.photo("lena")
    frame = syn.resize_rgb(img, 48, 64)
    frames = [syn.paste(frame, np.zeros((8, 8, 3), np.uint8), i - 8, 10) for i in range(len(pts))]
    wc = syn.write_rgb_clip(tmp_path / "v.mp4", frames, pts, tb)
    assert syn.frame_times(wc.path) == pytest.approx(wc.times(), abs=1e-9) and len(wc.times()) == len(pts)
    lap = [float(np.var(np.diff(g.astype(float), 2, axis=1))) for g in (img[..., 0], syn.defocus(img, 4)[..., 0],
                                                                       syn.haze(img, 0.1, 200)[..., 0])]
    assert lap[1] < lap[0] / 50 and lap[2] == pytest.approx(lap[0] * 0.01, rel=0.25)  # + rounding to uint8
    shown = syn.draw_digits(np.zeros((40, 120, 3), np.uint8), "0418", 4, 4, 16)
    other = syn.draw_digits(np.zeros((40, 120, 3), np.uint8), "0419", 4, 4, 16)
    changed = (shown != other).any(-1)
    assert 0 < changed.sum() < 0.1 * changed.size  # one glyph changed, the box stayed


def test_both_methods_on_a_tiny_clip(bf, tmp_path):
    p = bf.Params("digits", 128, 72, 10, short=True)
    clip = bf.make_clip(p, tmp_path)
    again = bf.make_clip(p, tmp_path)  # cached: the same file, not rewritten
    assert again.path == clip.path and again.frame_times == clip.frame_times
    assert clip.frame_times[0] == 0.0 and clip.frames == round(clip.duration_s * 10)
    kinds = [s.kind for s in clip.segments]
    assert kinds == ["scene"] + ["digits"] * 4 and clip.segments[-1].t1 == clip.duration_s
    seed = bf.run_seed(clip.path, 0.5)
    assert [s.t for s in seed.samples] == [2.0 * k for k in range(math.ceil(clip.duration_s / 2))]
    r = bf.score(clip, seed)
    # the seed's global mean difference cannot see a digit change: the page is kept once
    assert seed.kept == [0.0] and r["small"] == {"hit": 0, "total": 4} and r["pts_ok"]
    assert {m["kind"] for m in r["missed"]} == {"digits"} and r["dropped_by"]["low_change"] == len(seed.samples) - 1
    eng = bf.score(clip, bf.run_engine(clip.path, None))
    assert eng["pts_ok"] and eng["kept"] >= 1 and eng["sampled"] == len(seed.samples)


def test_the_cut_into_defocus_clips(bf):
    """Three sizes (360p CFR with keyframes off the samples, 720p and 1080p VFR); each defocused
    shot is a cut from the sharp shot before it (a new view: thumbnail SSIM under the gate's
    blur_view_ssim) and under the absolute blur threshold, and comes into focus after 6 s."""
    import cv2

    import _fidelity_clips as fc  # beside bench_fidelity (the bf fixture put its folder on the path)
    from vam_engine.config import GateConfig
    from vam_engine.gate import reference as R

    sizes = {n: (fc.params_for(n, False), n in fc.VFR_CLIPS) for n in
             ("cut_defocus_360p", "cut_defocus_720p_vfr", "cut_defocus_1080p_vfr")}
    assert [(p.width, p.height, vfr) for p, vfr in sizes.values()] == [(640, 360, False), (1280, 720, True),
                                                                        (1920, 1080, True)]
    assert fc.GOP_FRAMES["cut_defocus_360p"] % 60  # no keyframe at every 2 s sample
    shots = fc.shots_cut_defocus(sizes["cut_defocus_360p"][0])
    assert [s.segments[0].kind for s in shots] == ["scene"] + ["blur", "scene"] * 4
    gray = [cv2.cvtColor(s.render(0.0), cv2.COLOR_RGB2GRAY) for s in shots]
    cfg = GateConfig()
    for i in range(1, len(shots), 2):
        assert shots[i].seconds == 6.0
        assert R.laplacian_var(gray[i]) < cfg.blur_min_lap_var <= R.laplacian_var(gray[i - 1])
        assert R.ssim(R.thumbnail(gray[i]), R.thumbnail(gray[i - 1])) < cfg.blur_view_ssim  # a cut
        assert R.ssim(R.thumbnail(gray[i]), R.thumbnail(gray[i + 1])) > cfg.blur_view_ssim  # then in focus


def test_view_metrics_on_a_hand_made_case(bf):
    """Views of 4 s or more without a kept time; frames kept marked blurred inside blur
    segments of an all-blurred view (at most one each) or of a view with a sharp part (none)."""
    S, V = bf.Segment, bf.View
    segs = [S("scene", 0, 5, "a"), S("blur", 5, 8, "b out of focus"), S("scene", 8, 12, "b in focus"),
            S("blur", 12, 20, "c never in focus"), S("scene", 20, 23, "d")]
    views = [V(0, 5, False), V(5, 12, False), V(12, 20, True), V(20, 23, False)]
    assert bf.views_without_moment([0.0, 13.0], views) == [views[1]]  # d is under 4 s
    assert bf.marked_blur([13.0], segs, views) == {"in_blur": 1, "in_sharp_views": 0, "per_blurred_view": 1}
    assert bf.marked_blur([6.0, 13.0, 15.0], segs, views) == {"in_blur": 3, "in_sharp_views": 1,
                                                              "per_blurred_view": 2}
    clip = bf.Clip("hand", "none.mp4", 64, 48, 23.0, [0.0, 6.0, 13.0], segs, views=views)
    r = bf.score(clip, bf.Run("engine", [0.0, 6.0, 13.0], [], 0.1, marked=[13.0]))
    assert r["blurred_kept"] == 1 and r["marked_blur"]["in_blur"] == 1 and r["views_without_moment"] == []
    rows = {t: (v, ok) for t, v, ok in bf.targets(clip, r, r)}
    assert rows["blurred kept = 0, but one marked per all-blurred view"][1] is False  # 6.0 is unmarked
    assert rows["no view >= 4 s without a moment"] == ("0 of 4", True)


def test_the_low_texture_motion_clips(bf):
    """Three sizes; each low-texture scene is a new view that pans and zooms (its frames move
    and grow), under the absolute blur threshold, after a normal view over it; the cells are
    smooth at the thumbnail's scale (what the blur rule alone reads as defocus)."""
    import cv2

    import _fidelity_clips as fc
    from vam_engine.config import GateConfig
    from vam_engine.gate import reference as R
    from vam_engine.gate.cascade import coarse_sharpness

    cfg = GateConfig()
    for n, size in (("low_texture_motion_360p", (640, 360)), ("low_texture_motion_720p", (1280, 720)),
                    ("low_texture_motion_1080p", (1920, 1080))):
        p = fc.params_for(n, False)
        assert (p.width, p.height, p.fps) == (*size, 10)
        shots = fc.shots_low_texture_motion(p)
        low = [s for s in shots if s.segments[0].kind == "low_texture"]
        assert [s.segments[0].note.split(" #")[0] for s in low] == ["cells", "clouds", "fog", "dark room"]
        assert all(s.view for s in shots) and low[0].seconds == 45.0
        for s in low:
            a, b = (cv2.cvtColor(s.render(t), cv2.COLOR_RGB2GRAY) for t in (0.0, s.seconds - 0.1))
            assert not np.array_equal(a, b)
            # under the threshold but for the light noise (20 sigma^2, which the codec mostly removes)
            assert R.laplacian_var(a) < cfg.blur_min_lap_var + 20 * fc.LIGHT_NOISE ** 2
        cells = cv2.cvtColor(low[0].render(20.0), cv2.COLOR_RGB2GRAY)
        assert coarse_sharpness(R.thumbnail(cells), *cells.shape) < cfg.blur_coarse_sharpness
