"""Gate decisions of the batched cascade equal a frame-by-frame run of the reference."""
import numpy as np
import pytest

from support.cascade_rules import bodies, sequential, structured_sequence
from vam_engine.config import GateConfig
from vam_engine.gate import reference as R
from vam_engine.gate import CpuBody, GateCascade, ReferenceBody
from vam_engine.synthetic import gate_sequences as S


@pytest.mark.parametrize("body", bodies())
@pytest.mark.parametrize("batch", [1, 3, 7, 64])
@pytest.mark.parametrize("hist_gate", [0.0, 0.9])
def test_batched_cascade_matches_frame_by_frame(body, batch, hist_gate):
    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    cfg = GateConfig(hist_max_corr=hist_gate)
    for _ in range(10):  # a random sequence that holds every case (almost always the first)
        frames = structured_sequence(rng)
        want = sequential(frames, cfg)
        kinds = {d for d, _ in want}
        local = [i for i, (d, s) in enumerate(want) if d is None and s["mad"] < cfg.diff_min_mad]
        if {None, "blur", "low_change", "ssim"} <= kinds and local:
            break
    assert {None, "blur", "low_change", "ssim"} <= kinds, f"sequence lacks a case, seed {seed}"
    assert local, f"sequence lacks a local change, seed {seed}"
    cascade = GateCascade(body, cfg)
    got = []
    for i in range(0, len(frames), batch):
        got += cascade.run("cam", frames[i:i + batch])
    assert [g.dropped_by for g in got] == [d for d, _ in want], f"seed {seed}"
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


# --- decisions on synthetic sequences with a known answer (vam_engine.synthetic.gate_sequences) --------------
H, W = 180, 320


def _cpu_or_reference():
    try:
        return CpuBody()
    except ImportError:
        return ReferenceBody()


def _decisions(frames, cfg=None, cam="cam"):
    return [r.dropped_by for r in GateCascade(_cpu_or_reference(), cfg or GateConfig()).run(cam, frames)]


@pytest.mark.parametrize("codec", [None, "jpeg", "h264"])
@pytest.mark.parametrize("size", [12, 16])
def test_a_small_sprite_crossing_a_still_scene_is_kept(codec, size, rng, rng_seed):
    frames = S.sprite(rng, 10, H, W, size=size, sigma=3.0, codec=codec)
    d = _decisions(frames)
    assert d == [None] * len(frames), f"seed {rng_seed}: {d}"
    # the seed's whole-frame rule drops them all: the mean moves by under 4 levels
    seed_rule = GateConfig(tile_min_mad=float("inf"))
    assert _decisions(frames, seed_rule)[1:] == ["low_change"] * (len(frames) - 1)


@pytest.mark.parametrize("sigma", [0.0, 2.0, 4.0])
@pytest.mark.parametrize("codec,quality", [(None, 0), ("jpeg", 20), ("jpeg", 50), ("jpeg", 90), ("h264", 0)])
def test_a_still_noisy_scene_is_dropped(sigma, codec, quality, rng, rng_seed):
    """Sensor noise of sigma up to 4 and JPEG/H.264 artefacts are no local change (noise of
    sigma 6-8 brings tile means to 7-10: such cameras need a higher tile_min_mad)."""
    frames = S.static_scene(rng, 10, H, W, sigma, codec, quality)
    recs = GateCascade(_cpu_or_reference(), GateConfig()).run("cam", frames)
    assert [r.dropped_by for r in recs] == [None] + ["low_change"] * 9, f"seed {rng_seed}: {recs}"
    assert max(r.tile_mad for r in recs[1:]) < GateConfig().tile_min_mad * 0.85, f"seed {rng_seed}"


@pytest.mark.parametrize("codec,hgt", [(None, 32), ("jpeg", 32), ("h264", 40)])
def test_a_digit_change_on_a_still_page_is_kept(codec, hgt, rng, rng_seed):
    """A counter counting up on a still page: every new value is kept (8 -> 9 changes one
    segment). Under H.264 at crf 30 a single segment of 32 px digits is smeared to about 8:
    the test holds 40 px digits there (see GateConfig.tile_min_mad)."""
    frames = S.digits(rng, 12, H, W, sigma=2.0, codec=codec, hgt=hgt)
    d = _decisions(frames)
    assert d == [None] * len(frames), f"seed {rng_seed}: {d}"


def test_a_defocused_frame_is_dropped_and_sharp_frames_after_it_are_kept(rng, rng_seed):
    a, b, c = S.textured(rng, H, W), S.textured(rng, H, W), S.textured(rng, H, W)
    # ... and a cut to a defocused new view (c): coarse structure, no fine detail
    frames = [a, S.blurred(a, 4), S.blurred(a, 8), b, S.blurred(b, 2), a, S.blurred(c, 3)]
    d = _decisions(frames)
    assert d == [None, "blur", "blur", None, "blur", None, "blur"], f"seed {rng_seed}: {d}"


def test_the_first_frames_of_a_camera_are_never_blurred(rng):
    """Nothing to judge them against: a camera that starts defocused keeps its first frame; the
    sharp frame after it is kept although it changed little (back in focus), and makes the next
    defocus measurable."""
    a = S.textured(rng, H, W)
    d = _decisions([S.blurred(a, 6), a, S.blurred(a, 6), a])
    assert d == [None, None, "blur", "low_change"]


def test_a_cut_to_a_sharp_low_texture_view_is_kept(rng, rng_seed):
    """After sharp textured frames, a cut to a low-texture view (Laplacian variance under 20):
    a new view, not a blurred one. Its own changes are judged against it afterwards."""
    from vam_engine.gate import reference as R

    scenes = [S.textured(rng, H, W) for _ in range(4)]
    fog = S.low_texture(rng, H, W, level=120.0, view=1)
    fog_moved = fog.copy()  # something faint walks in: a local change of the low-texture view
    fog_moved[60:100, 150:180] = np.clip(fog_moved[60:100, 150:180].astype(int) - 25, 0, 255)
    fog_again = S.low_texture(rng, H, W, level=120.0, view=1)  # fresh sensor noise
    frames = scenes + [fog, fog_again, fog_moved]
    assert R.laplacian_var(fog) < 20 and R.laplacian_var(fog_moved) < 20
    recs = GateCascade(_cpu_or_reference(), GateConfig()).run("cam", frames)
    d = [r.dropped_by for r in recs]
    assert d == [None] * 4 + [None, "low_change", None], f"seed {rng_seed}: {d}"


def test_a_camera_that_only_sees_low_texture_keeps_its_scene_changes(rng, rng_seed):
    """Every view is under the absolute blur threshold: the seed's rule drops the whole stream;
    relative to the camera's own sharpness, each new view is kept and its repeats dropped."""
    frames, want = [], []
    for k, lv in enumerate((40.0, 90.0, 150.0, 200.0)):  # cuts between views; each seen twice
        frames += [S.low_texture(rng, H, W, level=lv, view=k), S.low_texture(rng, H, W, level=lv, view=k)]
        want += [None, "low_change"]
    d = _decisions(frames)
    assert d == want, f"seed {rng_seed}: {d}"
    from vam_engine.gate import reference as R

    assert all(R.laplacian_var(f) < GateConfig().blur_min_lap_var for f in frames)  # the seed drops them all


def test_a_global_small_change_is_the_seeds_low_change(rng, rng_seed):
    """An exposure step of 9 levels changes every tile a little: more than tile_max_frac of the
    tiles, so the frame threshold decides (redundant, as in the seed)."""
    a = S.textured(rng, H, W)
    brighter = np.clip(a.astype(int) + 9, 0, 255).astype(np.uint8)
    recs = GateCascade(_cpu_or_reference(), GateConfig()).run("cam", [a, brighter])
    assert recs[1].dropped_by == "low_change" and recs[1].tiles_changed > 0.25 * 50, f"seed {rng_seed}: {recs[1]}"


def test_a_resumed_cascade_decides_as_an_uninterrupted_one(rng, rng_seed):
    """The blur test reads the camera's sharpness history: restored with the reference (as the
    pipeline restores both from the store), a second cascade continues exactly."""
    a, b = S.textured(rng, H, W), S.textured(rng, H, W)
    frames = [a, b, S.blurred(b, 4), S.low_texture(rng, H, W), a, S.blurred(a, 4), S.sprite(rng, 1, H, W)[0]]
    cfg = GateConfig()
    whole = [r.dropped_by for r in GateCascade(_cpu_or_reference(), cfg).run("cam", frames)]
    for k in range(1, len(frames)):
        first = GateCascade(_cpu_or_reference(), cfg)
        got = [r.dropped_by for r in first.run("cam", frames[:k])]
        second = GateCascade(_cpu_or_reference(), cfg)
        second.set_reference("cam", first.reference("cam"), first.sharpness("cam"))
        got += [r.dropped_by for r in second.run("cam", frames[k:])]
        assert got == whole, f"split at {k}, seed {rng_seed}"
    assert "blur" in whole


def test_the_sharpness_history_is_committed_with_the_reference(tmp_path, rng):
    """What the pipeline commits (CommitBatch.refs) and restores on resume (sources.camera_ref)."""
    from vam_engine.memory.commit import CommitBatch
    from vam_engine.memory.records import GateReference
    from vam_engine.memory.store import Store

    store = Store(tmp_path / "s")
    try:
        store.sources.open("cam", "x.mp4", "fp", "fps=0.5")
        assert store.sources.camera_ref("cam") is None
        cascade = GateCascade(_cpu_or_reference(), GateConfig())
        a = S.textured(rng, H, W)
        cascade.run("cam", [S.blurred(a, 4), a])
        batch = CommitBatch(refs={"cam": GateReference(3.0, cascade.reference("cam"), cascade.sharpness("cam"))})
        store.commit(batch)
        saved = store.sources.camera_ref("cam")
        assert saved.t == 3.0 and np.array_equal(saved.gray, a)
        assert saved.sharpness == cascade.sharpness("cam") and len(saved.sharpness) == 2
    finally:
        store.close()


def test_is_local_change_names_frames_kept_by_their_tiles():
    from vam_engine.config import GateConfig
    from vam_engine.gate.cascade import is_local_change
    from vam_engine.gate.records import GateRecord

    cfg = GateConfig()
    assert is_local_change(cfg, GateRecord(300.0, 1.2, 0.99, None, None, 25.0, 2))      # a sprite
    assert not is_local_change(cfg, GateRecord(300.0, 35.0, 0.4, None, None, 80.0, 90))  # a scene change
    assert not is_local_change(cfg, GateRecord(300.0, 1.2, 0.99, None, "low_change", 3.0, 0))
    assert not is_local_change(cfg, GateRecord(300.0, None, None, None, None))           # first frame


def _discs(rng, h, w, n=10, amp=10.0, level=110.0, sigma=0.6):
    """A sharp low-texture view with coarse structure: faint discs with hard edges on a flat field
    (the moon's maria, a retina's vessels): a thumbnail Laplacian over blur_coarse_lap_var."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.full((h, w), level, np.float32)
    for _ in range(n):
        cy, cx, r = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(min(h, w) / 8, min(h, w) / 3)
        img[(yy - cy) ** 2 + (xx - cx) ** 2 < r * r] += float(rng.choice([-1, 1])) * amp
    return S.noisy(rng, img, sigma)


def test_a_cut_to_a_sharp_low_texture_view_with_coarse_structure_is_kept(rng, rng_seed):
    """The moon after a textured view: under the blur thresholds and with coarse structure in its
    thumbnail, like a defocused scene, but its few edges are steep (a high detail ratio): kept.
    A cut to a defocused textured view after it is still blurred (a low detail ratio)."""
    h, w = 360, 640
    a, b = S.textured(rng, h, w), S.textured(rng, h, w)
    moon = _discs(rng, h, w)
    cfg = GateConfig()
    th_lap = R.laplacian_var(R.thumbnail(moon).astype(np.float32))
    assert R.laplacian_var(moon) < cfg.blur_min_lap_var and th_lap >= cfg.blur_coarse_lap_var, f"seed {rng_seed}"
    frames = [a, moon, a, S.blurred(b, 4)]
    d = _decisions(frames, cfg)
    assert d == [None, None, None, "blur"], f"seed {rng_seed}: {d}"
    # without the detail ratio (coarse structure alone decides) the moon is dropped as blurred
    assert _decisions(frames, GateConfig(blur_detail_ratio=float("inf")))[1] == "blur", f"seed {rng_seed}"
    assert [d for d, _ in sequential(frames, cfg)] == d


def _faint_canvas(rng, h, w, std=8.0, level=120.0, block=16):
    """A wide view seen through fog: blocks of random gray levels of std ``std`` (a pan by a few
    blocks changes most tiles, as a pan over a photograph does, and keeps the histogram)."""
    c = np.kron(rng.standard_normal((h // block + 1, w // block + 1)), np.ones((block, block)))[:h, :w]
    return (c * std + level).astype(np.float32)


def test_a_pan_over_a_low_contrast_view_is_kept_and_its_still_frames_dropped(rng, rng_seed):
    """A pan over fog moves pixels that vary by a few levels: MAD stays far under diff_min_mad
    (the seed drops every frame of it), but it is as large as the view's contrast: kept. The
    same view standing still, through sensor noise of sigma up to 4 or an exposure step, is
    still dropped (no tile changes, or SSIM says it is the same picture)."""
    canvas = _faint_canvas(rng, H, 3 * W)
    view = lambda x, sigma=0.6: S.noisy(rng, canvas[:, x:x + W], sigma)
    pan = [view(x) for x in range(0, 6 * 48, 48)]
    still = [view(5 * 48, sigma) for sigma in (0.6, 2.0, 4.0)]
    brighter = np.clip(still[0].astype(int) + 9, 0, 255).astype(np.uint8)
    frames = pan + still + [brighter]
    cfg = GateConfig()
    recs = GateCascade(_cpu_or_reference(), cfg).run("cam", frames)
    d = [r.dropped_by for r in recs]
    assert all(r.mad < cfg.diff_min_mad for r in recs[1:]), f"seed {rng_seed}: {[r.mad for r in recs]}"
    assert d == [None] * 6 + ["low_change"] * 3 + ["ssim"], f"seed {rng_seed}: {d}"
    # the seed's rule (no contrast term) drops the whole pan
    assert _decisions(frames, GateConfig(diff_min_contrast_frac=float("inf")))[1:6] == ["low_change"] * 5
    assert [x for x, _ in sequential(frames, cfg)] == d


def test_hist_std_is_the_gray_std_to_within_the_bin_width(rng):
    """The contrast the low-change test reads comes from the 64-bin histograms every body returns
    (over every HIST_ROW_STEP-th row): the std of those rows, to within the bin width."""
    from vam_engine.gate.cascade import hist_std

    for g in (S.textured(rng, 37, 53), S.low_texture(rng, 40, 61), np.full((9, 7), 200, np.uint8)):
        assert abs(hist_std(R.histogram(g)) - float(g[::R.HIST_ROW_STEP].std())) < 1.2
    assert hist_std(np.zeros(64)) == 0.0


def test_thumb_ssim_equals_the_reference_ssim():
    """The cascade's view tests use a separable-sum SSIM: the reference's value on thumbnails
    of every kind (noise at several levels, flat, shifted, float32 as the bodies return them)."""
    from vam_engine.gate.cascade import thumb_ssim

    rng = np.random.default_rng(11)
    for k in range(60):
        a = rng.uniform(0, 255, (64, 64))
        b = np.clip(a + rng.normal(0, 1 + k, a.shape), 0, 255)
        pairs = [(a, b), (np.full((64, 64), float(k * 4)), b), (a, np.roll(a, k % 7 + 1, axis=1)),
                 (a.astype(np.float32), b.astype(np.float32))]
        for x, y in pairs:
            assert abs(thumb_ssim(x, y) - R.ssim(x, y)) < 1e-12


def test_a_lone_frame_is_gated_in_place_with_the_same_records():
    """One frame per call is gated from a view of it (no stacked copy): the records are those
    of the same frames gated in one batch, and the frames are left untouched."""
    seq = structured_sequence(np.random.default_rng(3), n=40)
    frames = [np.ascontiguousarray(f) for f in seq]
    before = [f.copy() for f in frames]
    cfg = GateConfig()
    one, batch = GateCascade(CpuBody(), cfg), GateCascade(CpuBody(), cfg)
    times = [float(i) for i in range(len(frames))]
    lone = [one.gate("c", [f], [t], [i]).records[0] for i, (f, t) in enumerate(zip(frames, times))]
    together = batch.gate("c", frames, times, list(range(len(frames)))).records
    assert [r.dropped_by for r in lone] == [r.dropped_by for r in together]
    np.testing.assert_allclose([r.lap_var for r in lone], [r.lap_var for r in together], rtol=1e-9)
    assert all(np.array_equal(f, g) for f, g in zip(frames, before))
