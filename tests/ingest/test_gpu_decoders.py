"""GPU decoder bodies: DALI (its CPU pipeline runs anywhere: VP9/MJPEG) and PyNvVideoCodec.

Clips are made with PyAV at known, non-uniform PTS (time base 1/1000), so every expectation is
derived from the true PTS list read back with PyAV: sampled times are ``TickSampler`` (or
``NearestKeyframeSampler``) applied to it, never frame index / fps.
"""
from __future__ import annotations

import contextlib
import sys
import types

import av
import numpy as np
import pytest

from support.clips import write_clip
from vam_engine.errors import SourceError
from vam_engine.ingest import nvdec_decoder
from vam_engine.ingest.nvdec_decoder import NvdecDecoder, plane_layout, yuv_to_rgb
from vam_engine.ingest.sampler import NearestKeyframeSampler, TickSampler

W, H = 96, 64
PTS_MS = [0, 40, 80, 200, 240, 700, 740, 780, 1500, 1540, 1580, 1620, 2100, 2140, 2600, 3300, 3340, 3380,
          3420, 4000]  # variable frame rate: gaps of 40 ms to 700 ms


def _image(i: int) -> np.ndarray:
    img = np.zeros((H, W, 3), np.uint8)
    img[..., 0] = (np.arange(W)[None, :] * 2 + i * 10) % 256
    img[..., 1] = (np.arange(H)[:, None] * 3 + i * 5) % 256
    img[..., 2] = (i * 37) % 256
    img[(i * 3) % H:(i * 3) % H + 10, 10:30] = 255
    return img


def _encode(path, codec: str, pts_ms, *, pix_fmt="yuv420p", gop: int = 12, options=None) -> str:
    """A W x H clip of ``_image`` frames at ``pts_ms`` (GOP 12: FFmpeg's default where none is asked)."""
    write_clip(path, pts_ms, frames=_image, w=W, h=H, codec=codec, pix_fmt=pix_fmt, gop=gop, options=options, rate=25)
    return str(path)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpu_clips")
    return {
        "vp9": _encode(d / "vfr.webm", "libvpx-vp9", PTS_MS),
        "vp9_offset": _encode(d / "offset.webm", "libvpx-vp9", [p + 1234 for p in PTS_MS]),
        "vp9_gop": _encode(d / "gop.webm", "libvpx-vp9", [p + 500 for p in PTS_MS], gop=4),
        "mjpeg": _encode(d / "vfr_mjpeg.mkv", "mjpeg", PTS_MS, pix_fmt="yuvj420p"),
    }


@pytest.fixture(scope="module")
def h264_clip(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpu_h264")
    return _encode(d / "vfr.mp4", "libx264", PTS_MS, gop=6, options={"bf": "2", "preset": "medium"})


def truth(path):
    """[(t_rel, pts, key, luma)] in presentation order, read with PyAV (t_rel from start_time)."""
    with av.open(path) as c:
        s = c.streams.video[0]
        t0, tb = s.start_time, s.time_base
        out = []
        for f in c.decode(s):
            y = np.frombuffer(f.planes[0], np.uint8).reshape(f.height, f.planes[0].line_size)[:, :f.width]
            out.append((float((f.pts - t0) * tb), f.pts, f.key_frame, y.copy()))
    return out


def key_truth(path):
    """Keyframe times, from the demuxer's packet flags (what the decoder bodies rely on)."""
    with av.open(path) as c:
        s = c.streams.video[0]
        t0, tb = s.start_time, s.time_base
        return sorted(float((p.pts - t0) * tb) for p in c.demux(s) if p.size and p.is_keyframe)


def expected_ticks(times, fps, resume_after=None):
    sampler = TickSampler(fps)
    if resume_after is not None:
        sampler.resume_after(resume_after)
        times = [t for t in times if t > resume_after + 1e-9]
    return [t for t in times if sampler.accept(t)]


def expected_keyframes(key_times, fps, end, resume_after=None):
    sampler = NearestKeyframeSampler(fps)
    if resume_after is not None:
        sampler.resume_after(resume_after)
        key_times = [t for t in key_times if t > resume_after + 1e-9]
    out = []
    for t in key_times:
        out += sampler.offer(t)
    return out + sampler.finish(end)


def clip_end(path):
    with av.open(path) as c:
        s = c.streams.video[0]
        return float(s.duration * s.time_base) if s.duration else c.duration / av.time_base


# ----------------------------------------------------------------------------------------------
# DALI (CPU pipeline here; the GPU pipeline under @pytest.mark.gpu)
# ----------------------------------------------------------------------------------------------
def _dali():
    pytest.importorskip("nvidia.dali", reason="NVIDIA DALI is not installed (pip install nvidia-dali-cuda130)")
    from vam_engine.ingest.dali_decoder import DaliDecoder

    return DaliDecoder


@pytest.mark.parametrize("clip", ["vp9", "mjpeg", "vp9_offset", "vp9_gop"])
@pytest.mark.parametrize("fps,seq", [(2.0, 8), (0.7, 3), (30.0, 16)])
def test_dali_cpu_samples_follow_true_pts(clips, clip, fps, seq):
    DaliDecoder = _dali()
    path = clips[clip]
    tr = truth(path)
    with DaliDecoder(path, "cam", fps=fps, dali_device="cpu", sequence_length=seq) as dec:
        frames = list(dec)
        stats = dec.stats
    assert stats.decoded == len(PTS_MS)  # the tail that does not fill a sequence is kept, padding dropped
    assert stats.sampled == len(frames)
    assert [f.t_rel for f in frames] == expected_ticks([t for t, *_ in tr], fps)
    by_t = {t: (pts, y) for t, pts, _, y in tr}
    for f in frames:
        pts, y = by_t[f.t_rel]
        assert f.pts == pts and f.t_abs is None and f.camera_id == "cam"
        assert f.gray.dtype == np.uint8 and f.gray.shape == (H, W) and f.shape == (H, W)
        assert np.abs(f.gray.astype(int) - y).mean() < 1.5  # BT.601 luma of DALI's RGB ~= the Y plane
        rgb = f.rgb()
        assert rgb.shape == (H, W, 3) and rgb.dtype == np.uint8


def test_dali_cpu_first_pts_not_zero(clips):
    DaliDecoder = _dali()
    with DaliDecoder(clips["vp9_offset"], "cam", fps=30, dali_device="cpu") as dec:
        frames = list(dec)
    assert [f.pts for f in frames] == [p + 1234 for p in PTS_MS]
    assert [f.t_rel for f in frames] == [p / 1000 for p in PTS_MS]
    assert dec.info.codec == "vp9" and (dec.info.width, dec.info.height) == (W, H)


def test_dali_cpu_rgb_close_to_pyav(clips):
    DaliDecoder = _dali()
    path = clips["vp9"]
    with av.open(path) as c:
        ref = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    with DaliDecoder(path, "cam", fps=30, dali_device="cpu") as dec:
        frames = list(dec)
    assert len(frames) == len(ref)
    for f, r in zip(frames, ref):
        assert np.abs(f.rgb().astype(int) - r).mean() < 4  # chroma upsampling differs slightly


@pytest.mark.parametrize("clip", ["vp9", "vp9_gop"])
@pytest.mark.parametrize("resume", [0.0, 0.7, 1.0, 2.5, 3.99])
def test_dali_cpu_resume_after(clips, clip, resume):
    DaliDecoder = _dali()
    path = clips[clip]
    times = [t for t, *_ in truth(path)]
    with DaliDecoder(path, "cam", fps=2, dali_device="cpu", resume_after=resume, sequence_length=4) as dec:
        got = [f.t_rel for f in dec]
    assert got == expected_ticks(times, 2, resume_after=resume)
    assert all(t > resume for t in got)
    if clip == "vp9_gop" and resume >= 2.5:  # decoding starts near the resume point, not at 0
        assert dec.stats.decoded < len(PTS_MS)


def test_dali_cpu_resume_past_end(clips):
    DaliDecoder = _dali()
    with DaliDecoder(clips["vp9"], "cam", fps=2, dali_device="cpu", resume_after=10.0) as dec:
        assert list(dec) == []


@pytest.mark.parametrize("clip", ["vp9_gop", "mjpeg"])
@pytest.mark.parametrize("resume", [None, 0.5])
def test_dali_cpu_keyframes_only(clips, clip, resume):
    DaliDecoder = _dali()
    path = clips[clip]
    keys = key_truth(path)
    with DaliDecoder(path, "cam", fps=2, keyframes_only=True, resume_after=resume, dali_device="cpu") as dec:
        frames = list(dec)
    assert [f.t_rel for f in frames] == expected_keyframes(keys, 2, dec.info.duration_s, resume)
    assert dec.stats.decoded == len([k for k in keys if resume is None or k > resume])  # keyframes alone
    by_t = {t: y for t, _, _, y in truth(path)}
    for f in frames:
        assert np.abs(f.gray.astype(int) - by_t[f.t_rel]).mean() < 1.5


def test_dali_start_time_abs(clips):
    DaliDecoder = _dali()
    with DaliDecoder(clips["vp9"], "cam", fps=2, dali_device="cpu", start_time_abs=1.7e9) as dec:
        frames = list(dec)
    assert frames and all(f.t_abs == pytest.approx(1.7e9 + f.t_rel) for f in frames)


def test_dali_errors_name_the_file(clips, tmp_path):
    DaliDecoder = _dali()
    missing = str(tmp_path / "nope.webm")
    with pytest.raises(SourceError) as e:
        DaliDecoder(missing, "cam", dali_device="cpu")
    assert missing in str(e.value) and "not found" in str(e.value)

    junk = tmp_path / "junk.webm"
    junk.write_bytes(b"this is not a video" * 100)
    with pytest.raises(SourceError) as e:
        DaliDecoder(str(junk), "cam", dali_device="cpu")
    assert str(junk) in str(e.value)

    mpeg4 = _encode(tmp_path / "m4.mkv", "mpeg4", PTS_MS[:5])
    with pytest.raises(SourceError) as e:  # DALI decodes MPEG-4 only with NVDEC
        DaliDecoder(mpeg4, "cam", dali_device="cpu")
    assert mpeg4 in str(e.value) and "mpeg4" in str(e.value) and "gpu" in str(e.value)

    with pytest.raises(SourceError) as e:
        DaliDecoder("rtsp://camera.invalid/stream", "cam", dali_device="cpu")
    assert "rtsp://camera.invalid/stream" in str(e.value)


@pytest.mark.needs("no_gpu")
def test_dali_gpu_pipeline_without_gpu(clips):
    _dali()
    from vam_engine.ingest.dali_decoder import DaliDecoder

    with pytest.raises(SourceError) as e:
        DaliDecoder(clips["vp9"], "cam", dali_device="gpu")
    assert clips["vp9"] in str(e.value) and ("GPU" in str(e.value) or "CUDA" in str(e.value))


# ----------------------------------------------------------------------------------------------
# PyNvVideoCodec: construction errors here; decode logic against a stand-in library; real NVDEC
# under @pytest.mark.gpu
# ----------------------------------------------------------------------------------------------
def test_nvdec_missing_file(tmp_path):
    missing = str(tmp_path / "nope.mp4")
    with pytest.raises(SourceError) as e:
        NvdecDecoder(missing, "cam")
    assert missing in str(e.value) and "not found" in str(e.value)


@pytest.mark.needs("no_nvdec")
def test_nvdec_without_gpu_or_library(clips):
    with pytest.raises(SourceError) as e:
        NvdecDecoder(clips["vp9"], "cam")
    msg = str(e.value)
    assert e.value.source == clips["vp9"] and clips["vp9"] in msg
    assert "GPU" in msg or "CUDA" in msg or "PyNvVideoCodec" in msg


def test_nvdec_library_missing(clips, monkeypatch):
    import torch

    monkeypatch.setattr(NvdecDecoder, "_check_gpu", lambda self: torch)
    monkeypatch.setattr(nvdec_decoder, "_nvc_import_error", None)
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)  # import raises ImportError
    with pytest.raises(SourceError) as e:
        NvdecDecoder(clips["vp9"], "cam")
    assert clips["vp9"] in str(e.value) and "PyNvVideoCodec" in str(e.value)


class _FakeNvc:
    """Stand-in for PyNvVideoCodec's core API (CreateDemuxer / CreateDecoder / Decode /
    PacketData / DecodedFrame), decoding with PyAV into NV12 torch tensors, with the
    decoder's display latency (frames come out a few packets late, all of them at EOS)."""

    VideoPacketFlag = types.SimpleNamespace(ENDOFSTREAM=1)

    def __init__(self, latency=2):
        self.latency = latency
        self.sent = []  # pts of the packets handed to the decoder

    class PacketData:
        def __init__(self, data=b"", pts=None, key=0):
            self.data, self.bsl, self.bsl_data, self.pts, self.key, self.decode_flag = data, len(data), 0, pts, key, 0

    class _Frame:
        def __init__(self, planes, ts):
            self._t, self.timestamp, self.format = planes, ts, types.SimpleNamespace(name="NV12")

        def __dlpack__(self, stream=None, **kw):
            return self._t.__dlpack__()

        def __dlpack_device__(self):
            return self._t.__dlpack_device__()

    def CreateDemuxer(self, filename):
        fake = self

        class Demuxer:
            def __init__(self):
                with av.open(filename) as c:
                    s = c.streams.video[0]
                    self.codec, self.tb = s.codec_context.name, s.time_base

            def GetNvCodecId(self):
                return f"cudaVideoCodec.{self.codec.upper()}"

            def GetTimebaseNum(self):
                return self.tb.numerator

            def GetTimebaseDen(self):
                return self.tb.denominator

            def __iter__(self):
                with av.open(filename) as c:
                    for p in c.demux(video=0):
                        if p.size:
                            yield fake.PacketData(bytes(p), p.pts, int(p.is_keyframe))
                yield fake.PacketData()  # end of stream: bsl == 0

        return Demuxer()

    def CreateDecoder(self, gpuid, codec, cudacontext, cudastream, usedevicememory):
        import torch

        fake = self
        name = codec.rsplit(".", 1)[-1].lower()

        class Decoder:
            def __init__(self):
                self.cc = av.CodecContext.create(name, "r")
                self.held = []

            def Decode(self, pkt):
                if pkt.bsl:
                    fake.sent.append(pkt.pts)
                    avp = av.Packet(pkt.data)
                    avp.pts = pkt.pts
                    frames = self.cc.decode(avp)
                else:
                    frames = self.cc.decode(None)
                for f in frames:
                    nv = f.reformat(format="nv12")
                    p0, p1 = nv.planes[0], nv.planes[1]
                    y = np.frombuffer(p0, np.uint8).reshape(f.height, p0.line_size)[:, :f.width]
                    uv = np.frombuffer(p1, np.uint8).reshape(f.height // 2, p1.line_size)[:, :f.width]
                    self.held.append(fake._Frame(torch.from_numpy(np.concatenate([y, uv])), f.pts))
                keep = 0 if not pkt.bsl else fake.latency
                out, self.held = self.held[:max(0, len(self.held) - keep)], self.held[max(0, len(self.held) - keep):]
                return out

        return Decoder()


@pytest.fixture
def fake_nvc(monkeypatch):
    import torch

    fake = _FakeNvc()
    monkeypatch.setattr(NvdecDecoder, "_check_gpu", lambda self: torch)
    monkeypatch.setattr(NvdecDecoder, "_device_scope", lambda self: contextlib.nullcontext())
    monkeypatch.setattr(nvdec_decoder, "_import_nvc", lambda path: fake)
    return fake


@pytest.mark.parametrize("clip", ["vp9", "vp9_offset", "vp9_gop"])
@pytest.mark.parametrize("fps", [2.0, 30.0])
def test_nvdec_logic_with_stand_in_library(clips, fake_nvc, clip, fps):
    path = clips[clip]
    tr = truth(path)
    with NvdecDecoder(path, "cam", fps=fps, start_time_abs=100.0) as dec:
        frames = list(dec)
    assert dec.stats.decoded == len(PTS_MS) and dec.stats.errors == []
    assert [f.t_rel for f in frames] == expected_ticks([t for t, *_ in tr], fps)
    by_t = {t: (pts, y) for t, pts, _, y in tr}
    for f in frames:
        pts, y = by_t[f.t_rel]
        assert f.pts == pts and f.t_abs == pytest.approx(100.0 + f.t_rel)
        assert np.array_equal(f.gray.numpy(), y)  # gray is the Y plane itself
        assert f.rgb().shape == (H, W, 3)


def test_nvdec_keyframes_and_resume_with_stand_in_library(clips, fake_nvc):
    path = clips["vp9_gop"]
    keys = key_truth(path)
    with NvdecDecoder(path, "cam", fps=2, keyframes_only=True) as dec:
        got = [f.t_rel for f in dec]
    assert got == expected_keyframes(keys, 2, dec.info.duration_s)
    assert len(fake_nvc.sent) == len(keys)  # non-key packets never reach the decoder

    fake_nvc.sent.clear()
    times = [t for t, *_ in truth(path)]
    with NvdecDecoder(path, "cam", fps=2, resume_after=2.5) as dec:
        got = [f.t_rel for f in dec]
    assert got == expected_ticks(times, 2, resume_after=2.5)
    assert len(fake_nvc.sent) < len(PTS_MS)  # decoding started at the keyframe before 2.5 s


def test_nv12_to_rgb_matches_pyav(clips):
    import torch

    for path, full in ((clips["vp9"], False), (clips["mjpeg"], True)):
        with av.open(path) as c:
            f = next(c.decode(video=0))
        nv = f.reformat(format="nv12")
        y = np.frombuffer(nv.planes[0], np.uint8).reshape(H, nv.planes[0].line_size)[:, :W]
        uv = np.frombuffer(nv.planes[1], np.uint8).reshape(H // 2, nv.planes[1].line_size)[:, :W]
        planes = torch.from_numpy(np.concatenate([y, uv]))
        layout, h = plane_layout("NV12", planes.shape[0], 0)
        assert (layout, h) == ("420", H)
        assert plane_layout("YUV444", 3 * H, 0) == ("444", H) and plane_layout("P016", 3 * H // 2, 0) == ("420", H)
        rgb = yuv_to_rgb(planes, h, layout, full_range=full, bt709=False).numpy()
        assert np.abs(rgb.astype(int) - f.to_ndarray(format="rgb24")).max() <= 4


# ----------------------------------------------------------------------------------------------
# Real GPU decoding
# ----------------------------------------------------------------------------------------------
@pytest.fixture
def nvc():
    """PyNvVideoCodec (a package the GPU machine may lack: skipped without it, not without CUDA)."""
    return pytest.importorskip("PyNvVideoCodec", reason="PyNvVideoCodec is not installed")


@pytest.mark.gpu
@pytest.mark.parametrize("clip", ["vp9", "h264"])
def test_dali_gpu_decode(clips, h264_clip, clip):
    DaliDecoder = _dali()
    path = h264_clip if clip == "h264" else clips[clip]
    tr = truth(path)
    with DaliDecoder(path, "cam", fps=2, dali_device="gpu") as dec:
        frames = list(dec)
    assert dec.stats.decoded == len(PTS_MS)
    assert [f.t_rel for f in frames] == expected_ticks([t for t, *_ in tr], 2)
    by_t = {t: (pts, y) for t, pts, _, y in tr}
    for f in frames:
        assert f.gray.is_cuda and f.gray.shape == (H, W)
        pts, y = by_t[f.t_rel]
        assert f.pts == pts
        assert np.abs(f.gray.cpu().numpy().astype(int) - y).mean() < 1.5
        assert f.rgb().shape == (H, W, 3)


@pytest.mark.gpu
@pytest.mark.parametrize("keyframes_only", [False, True])
def test_nvdec_gpu_decode(nvc, h264_clip, keyframes_only):
    tr = truth(h264_clip)
    with NvdecDecoder(h264_clip, "cam", fps=2, keyframes_only=keyframes_only) as dec:
        frames = list(dec)
    if keyframes_only:
        expect = expected_keyframes(key_truth(h264_clip), 2, dec.info.duration_s)
    else:
        expect = expected_ticks([t for t, *_ in tr], 2)
        assert dec.stats.decoded == len(PTS_MS)
    assert [f.t_rel for f in frames] == expect
    by_t = {t: (pts, y) for t, pts, _, y in tr}
    for f in frames:
        pts, y = by_t[f.t_rel]
        assert f.gray.is_cuda and f.pts == pts
        assert np.array_equal(f.gray.cpu().numpy(), y)
        rgb = f.rgb()
        assert rgb.shape == (H, W, 3) and rgb.dtype == np.uint8


@pytest.fixture(scope="module")
def scene_clip(tmp_path_factory):
    """A 640x360 H.264 clip of panning, still and defocused scenes with B-frames (the kind the
    NVDEC benchmark decodes at 1080p)."""
    from vam_engine.synthetic import write_scene_clip

    return write_scene_clip(tmp_path_factory.mktemp("scene") / "scenes.mp4", width=640, height=360, fps=30,
                            seconds=4.0, gop_s=1.0, bframes=2)


@pytest.mark.gpu
def test_nvdec_agrees_with_pyav_on_every_frame(nvc, scene_clip):
    """Every frame (one tick per ms samples them all): the same times, PTS and luma from NVDEC
    and from FFmpeg's software decoder, and two concurrent NVDEC streams each get every frame."""
    import threading

    from vam_engine.ingest.pyav_decoder import PyAVDecoder

    with PyAVDecoder(scene_clip.path, "cam", fps=1000.0) as dec:
        want = [(f.t_rel, f.pts, np.asarray(f.gray).copy()) for f in dec]
    assert len(want) == scene_clip.frames
    with NvdecDecoder(scene_clip.path, "cam", fps=1000.0) as dec:
        got = [(f.t_rel, f.pts, f.gray.cpu().numpy()) for f in dec]
    assert [(t, p) for t, p, _ in got] == [(t, p) for t, p, _ in want]
    for (t, _, g), (_, _, y) in zip(got, want):
        assert g.shape == y.shape == (scene_clip.height, scene_clip.width)
        assert np.array_equal(g, y), f"luma differs at t={t}"
    counts, errors = [0, 0], []

    def run(i):
        try:
            with NvdecDecoder(scene_clip.path, f"cam{i}", fps=1000.0) as d:
                counts[i] = sum(1 for _ in d)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"stream {i}: {e!r}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and counts == [scene_clip.frames] * 2, (errors, counts)
