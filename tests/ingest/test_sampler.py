import numpy as np
import pytest

from vam_engine.ingest.sampler import NearestKeyframeSampler, TickSampler


def brute_ticks(times, fps, end):
    """For each tick k/fps <= end: the first time at or after it; duplicates collapse."""
    out = []
    k = 0
    while k / fps <= end:
        cand = [t for t in times if t >= k / fps - 1e-12]
        if cand and (not out or cand[0] != out[-1]):
            out.append(cand[0])
        k += 1
    return out


@pytest.mark.parametrize("fps", [0.5, 1.0, 2.0, 7.0])
def test_tick_sampler_takes_first_frame_at_or_after_each_tick(fps):
    rng = np.random.default_rng(int(fps * 10))
    times = np.cumsum(rng.exponential(0.2, 300)).tolist()  # variable frame rate, gaps
    s = TickSampler(fps)
    got = [t for t in times if s.accept(t)]
    assert got == brute_ticks(times, fps, times[-1])


def test_tick_sampler_resume_picks_the_same_frames():
    times = [i * 0.04 for i in range(1000)]
    s = TickSampler(0.5)
    full = [t for t in times if s.accept(t)]
    s2 = TickSampler(0.5)
    s2.resume_after(full[3])
    assert [t for t in times if t > full[3] and s2.accept(t)] == full[4:]


def test_nearest_keyframe_sampler():
    kf = [0.0, 1.2, 3.04, 5.48, 7.48, 9.68]
    s = NearestKeyframeSampler(0.5)
    got = [t for k in kf for t in s.offer(k)] + s.finish(10.0)
    want = []
    for tick in np.arange(0, 10.0 + 1e-9, 2.0):
        best = min(kf, key=lambda k: (abs(k - tick), k))
        if best not in want:
            want.append(best)
    assert got == want == [0.0, 1.2, 3.04, 5.48, 7.48, 9.68]
    s = NearestKeyframeSampler(0.25)  # sparser ticks than keyframes: each keyframe at most once
    got = [t for k in kf for t in s.offer(k)] + s.finish(10.0)
    assert got == [0.0, 3.04, 7.48]


def test_bad_fps():
    with pytest.raises(ValueError, match="fps"):
        TickSampler(0)
