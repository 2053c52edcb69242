"""The gates' view rule (gate/cascade.py): within a view (the span between two scene changes) a
blurred sample is dropped when the view has a sharp one; a view whose samples are all blurred
keeps its sharpest once, marked; a hold lasts at most GateConfig.blur_view_max_s. Checked on
constructed sequences, against the plain frame-by-frame rules (tests/support/cascade_rules.py)
on random ones, and through the engine (the flag reaches the moment and the sample log)."""
from __future__ import annotations

import numpy as np
import pytest

from support.cascade_rules import bodies, sequential
from vam_engine.config import GateConfig
from vam_engine.gate import GateCascade, ReferenceBody
from vam_engine.synthetic import gate_sequences as S

H, W = 180, 320
STEP = 2.0  # seconds between samples (0.5 fps)


def _coarse(rng) -> np.ndarray:
    """A view with structure at the thumbnail's scale (it survives a defocus there) and fine texture."""
    yy, xx = np.mgrid[0:H, 0:W]
    img = (rng.uniform(60, 200) + 50 * np.sin(xx * rng.uniform(0.05, 0.2) + yy * rng.uniform(0.05, 0.2))
           + rng.normal(0, 20, (H, W)))
    return np.clip(img, 0, 255).astype(np.uint8)


def _gate(body, frames, batch: int = 64, cfg: GateConfig | None = None):
    """(records, released) of the frames gated in batches of ``batch``, at STEP seconds apart."""
    c = GateCascade(body, cfg or GateConfig())
    recs, rel = [], []
    for i in range(0, len(frames), batch):
        part = frames[i:i + batch]
        run = c.gate("cam", part, [STEP * (i + k) for k in range(len(part))], list(range(i, i + len(part))))
        recs += run.records
        rel += [(r.key, i + r.before, r.record) for r in run.released]
    rel += [(r.key, len(frames), r.record) for r in c.end("cam")]
    return recs, rel


@pytest.mark.parametrize("body", bodies())
@pytest.mark.parametrize("batch", [1, 4, 64])
def test_sharp_view_keeps_none_of_its_blurred_samples(body, batch):
    rng = np.random.default_rng(1)
    a, b = S.textured(rng, H, W), _coarse(rng)
    # A; a cut to B out of focus, which comes into focus; B defocused again (the same view)
    frames = [a, S.noisy(rng, a, 1), S.blurred(b, 3), S.blurred(b, 4), b, S.noisy(rng, b, 1), S.blurred(b, 3),
              S.blurred(b, 2)]
    recs, rel = _gate(body, frames, batch)
    assert [r.dropped_by for r in recs] == [None, "low_change", "blur", "blur", None, "low_change", "blur", "blur"]
    assert rel == []  # B had a sharp sample: none of its blurred ones is kept
    assert not any(r.blurred for r in recs)


@pytest.mark.parametrize("body", bodies())
@pytest.mark.parametrize("batch", [1, 3, 64])
def test_all_blurred_view_keeps_its_sharpest_once_marked(body, batch):
    rng = np.random.default_rng(2)
    a, b, c = S.textured(rng, H, W), _coarse(rng), _coarse(rng)
    # A; a cut to B, never in focus (radius 3, 4, 2, 3: the sharpest is the third); a cut to C, sharp
    frames = [a, S.blurred(b, 3), S.blurred(b, 4), S.blurred(b, 2), S.blurred(b, 3), c]
    recs, rel = _gate(body, frames, batch)
    assert [r.dropped_by for r in recs] == [None, "blur", "blur", "blur", "blur", None]
    assert [(key, before) for key, before, _ in rel] == [(3, 5)]  # kept before the cut's decision
    kept = rel[0][2]
    assert kept.dropped_by is None and kept.blurred and kept.lap_var == max(r.lap_var for r in recs[1:5])
    assert recs[5].ssim == pytest.approx(_gate(body, [frames[3], c])[0][1].ssim)  # C compared with the kept one


@pytest.mark.parametrize("body", bodies())
def test_a_defocused_pan_is_one_view(body):
    """A pan keeps the histogram, so a pan over a defocused scene is one view however far its
    thumbnail moves from sample to sample: one frame kept, when a sharp view follows."""
    rng = np.random.default_rng(5)
    a, c = S.textured(rng, H, W), _coarse(rng)
    canvas = S.blurred(np.concatenate([_coarse(rng) for _ in range(3)], axis=1), 3)
    frames = [a] + [np.ascontiguousarray(canvas[:, 90 * k:90 * k + W]) for k in range(4)] + [c]
    recs, rel = _gate(body, frames)
    assert [r.dropped_by for r in recs] == [None, "blur", "blur", "blur", "blur", None]
    assert len(rel) == 1 and rel[0][1] == 5 and rel[0][2].lap_var == max(r.lap_var for r in recs[1:5])


@pytest.mark.parametrize("body", bodies())
def test_view_that_ends_with_the_stream_keeps_its_sharpest(body):
    rng = np.random.default_rng(3)
    a, b = S.textured(rng, H, W), _coarse(rng)
    recs, rel = _gate(body, [a, S.blurred(b, 4), S.blurred(b, 2)])
    assert [(key, before, r.blurred) for key, before, r in rel] == [(2, 3, True)]


@pytest.mark.parametrize("body", bodies())
def test_long_all_blurred_view_has_no_gap_over_the_bound(body):
    """A view that stays blurred for a minute: its first hold ends at the bound, its sharpest
    of those seconds is kept, and the rest of the view is judged against it (the sharpness
    history restarts), so no stretch of max_s plus a sample goes without a kept frame."""
    rng = np.random.default_rng(4)
    cfg = GateConfig(blur_view_max_s=8.0)
    a = S.textured(rng, H, W)
    canvas = S.blurred(np.concatenate([_coarse(rng) for _ in range(4)], axis=1), 3)
    frames = [a] + [S.noisy(rng, np.ascontiguousarray(canvas[:, 12 * k:12 * k + W]), 0.6) for k in range(30)]
    recs, rel = _gate(body, frames, 64, cfg)
    kept = sorted([i for i, r in enumerate(recs) if r.dropped_by is None] + [key for key, _, _ in rel])
    times = [STEP * i for i in kept] + [STEP * len(frames)]
    assert kept[0] == 0 and max(b - a for a, b in zip(times, times[1:])) <= cfg.blur_view_max_s + STEP, kept
    assert rel and all(before - key <= cfg.blur_view_max_s / STEP for key, before, _ in rel)  # the delay bound


@pytest.mark.parametrize("body", bodies())
@pytest.mark.parametrize("batch", [1, 5, 64])
def test_batched_view_rule_matches_the_plain_rules(body, batch):
    """Random sequences of cuts, cuts into defocus (some refocused), static stretches and
    defocus of the kept view, at random times: records and kept held samples as one frame at a
    time, with the deadline in play."""
    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    cfg = GateConfig(blur_view_max_s=float(rng.uniform(5, 12)))
    for _ in range(20):  # a random sequence that keeps a held sample (most do; seed 705671478 did not)
        frames, scene = [], _coarse(rng)
        for _ in range(40):
            kind = rng.choice(["cut", "cut_blurred", "static", "blur", "blur"])
            if kind in ("cut", "cut_blurred"):
                scene = _coarse(rng)
            frames.append(S.blurred(scene, int(rng.integers(2, 5))) if kind in ("cut_blurred", "blur")
                          else S.noisy(rng, scene, 1))
        times = np.cumsum(rng.uniform(0.5, 3.0, len(frames))).tolist()
        want_rel: list = []
        want = sequential(frames, cfg, times, want_rel)
        if want_rel:
            break
    c = GateCascade(body, cfg)
    got, got_rel = [], []
    for i in range(0, len(frames), batch):
        run = c.gate("cam", frames[i:i + batch], times[i:i + batch], list(range(i, min(len(frames), i + batch))))
        got += run.records
        got_rel += [(r.key, i + r.before) for r in run.released]
    assert [g.dropped_by for g in got] == [d for d, _ in want], f"seed {seed}"
    assert want_rel, f"no held sample was kept, seed {seed}"
    assert got_rel == want_rel, f"seed {seed}"
    for key, before in got_rel:
        assert got[key].dropped_by == "blur" and before > key


def test_gate_rejects_times_or_keys_of_another_length():
    c = GateCascade(ReferenceBody(), GateConfig())
    f = [np.zeros((8, 8), np.uint8)] * 2
    with pytest.raises(ValueError, match="1 times for 2 frames"):
        c.gate("cam", f, [0.0])
    with pytest.raises(ValueError, match="3 keys for 2 frames"):
        c.gate("cam", f, None, [1, 2, 3])
