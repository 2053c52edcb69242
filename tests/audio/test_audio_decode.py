"""Audio decode: the track of a file on the video's PTS axis, resampled to 16 kHz mono; pushed
audio of any rate and shape; sources without audio and with a broken track."""
import threading
import time
import wave

import av
import numpy as np
import pytest

from support.live import TsServer
from support import speech
from vam_engine.audio import (AudioInputError, AudioReader, AudioTrackError, NoAudioTrack, PushResampler, read_audio,
                              to_mono_float)
from vam_engine.ingest import PyAVDecoder

pytestmark = pytest.mark.skipif(not speech.have_espeak(), reason="espeak-ng is not installed")


def _onset(blocks, level=0.02) -> float:
    """Camera-axis time of the first sample above ``level``."""
    x = np.concatenate([b.samples for b in blocks])
    t0 = blocks[0].t
    assert all(abs(b.t - (t0 + n / 16000)) < 1e-6 for b, n in
               zip(blocks, np.cumsum([0] + [len(b.samples) for b in blocks[:-1]])))  # one run: contiguous
    return t0 + int(np.argmax(np.abs(x) > level)) / 16000


def _espeak_lead(text: str) -> float:
    v = speech.speak(text)
    return int(np.argmax(np.abs(v) > 0.02)) / speech.ESPEAK_RATE


@pytest.mark.parametrize("container,suffix,video_start,audio_start", [
    (None, ".mp4", 0.0, 0.7),        # audio starts 0.7 s after the video (MP4 edit list)
    ("mpegts", ".ts", 1.0, 0.3),     # both offset, audio first: its first samples are before the video's t=0
])
def test_audio_lands_on_the_video_axis(container, suffix, video_start, audio_start):
    path = speech.speech_video(((1.0, speech.PLANTS),), 4.0, video_start_s=video_start, audio_start_s=audio_start,
                               container=container, suffix=suffix)
    with PyAVDecoder(str(path), "cam", fps=5.0) as dec:
        frames = list(dec)
    assert frames[0].t_rel == pytest.approx(0.0)  # the video's own axis starts at its first frame
    blocks = list(read_audio(str(path), "cam"))
    expected = audio_start - video_start + 1.0 + _espeak_lead(speech.PLANTS)
    assert _onset(blocks) == pytest.approx(expected, abs=0.005)
    if audio_start < video_start:
        assert blocks[0].t < 0  # audio before the first frame keeps its (negative) place on the axis


def test_start_time_abs_moves_the_whole_axis():
    path = speech.speech_video(((1.0, speech.PLANTS),), 4.0, audio_start_s=0.7)
    rel = _onset(list(read_audio(str(path), "cam")))
    absolute = _onset(list(read_audio(str(path), "cam", start_time_abs=1.7e9)))
    assert absolute - 1.7e9 == pytest.approx(rel, abs=1e-3)


def _write_tone_wav(path, rate: int, channels: int, seconds: float, freq: float) -> None:
    t = np.arange(int(rate * seconds)) / rate
    tone = (0.3 * np.sin(2 * np.pi * freq * t) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.repeat(tone[:, None], channels, axis=1).tobytes())


def _peak_hz(x: np.ndarray) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spec)) * 16000 / len(x)


@pytest.mark.parametrize("rate,channels", [(48000, 2), (8000, 1), (44100, 6)])
def test_any_rate_and_layout_resamples_to_16k_mono(tmp_path, rate, channels):
    path = tmp_path / f"tone_{rate}_{channels}.wav"
    _write_tone_wav(path, rate, channels, 2.0, 440.0)
    blocks = list(read_audio(str(path), "mic"))
    x = np.concatenate([b.samples for b in blocks])
    assert x.dtype == np.float32 and x.ndim == 1
    assert len(x) == pytest.approx(32000, abs=64)  # 2 s at 16 kHz
    assert _peak_hz(x[2000:-2000]) == pytest.approx(440.0, abs=2.0)
    # channels are averaged: identical channels keep their level (never summed past full scale)
    assert float(np.sqrt(np.mean(x[2000:-2000] ** 2))) == pytest.approx(0.3 / np.sqrt(2), rel=0.03)
    assert blocks[0].t == pytest.approx(0.0, abs=1e-6)


def test_pushed_audio_of_any_rate_and_shape_is_timed_by_its_samples(rng):
    rate = 44100
    t = np.arange(rate * 2) / rate
    tone = (0.25 * np.sin(2 * np.pi * 1000 * t) * 32767).astype(np.int16)
    stereo = np.stack([tone, tone], axis=1)  # (n, 2): frames first, as audio drivers hand them
    res = PushResampler("robot")
    out, at = [], 0
    while at < len(stereo):  # irregular blocks, as a driver's callback delivers them
        n = int(rng.integers(200, 3000))
        out += res.push(stereo[at:at + n], rate, 100.0 + at / rate)
        at += n
    out += res.flush()
    x = np.concatenate([y for _, y in out])
    assert len(x) == pytest.approx(32000, abs=64)
    times = [tt for tt, _ in out]
    ends = [tt + len(y) / 16000 for tt, y in out]
    assert times[0] == pytest.approx(100.0) and all(abs(a - b) < 1e-9 for a, b in zip(times[1:], ends[:-1]))
    assert _peak_hz(x[1000:-1000]) == pytest.approx(1000.0, abs=2.0)
    # a jump in the caller's time starts a new run at that time
    more = res.push(stereo[:4410], rate, 200.0) + res.flush()
    assert more[0][0] == pytest.approx(200.0)


def test_pushed_audio_is_checked_with_errors_naming_the_camera():
    with pytest.raises(AudioInputError, match="'arm'.*sample_rate"):
        to_mono_float("arm", np.zeros(100, np.float32), 0)
    with pytest.raises(AudioInputError, match="'arm'.*channels first"):
        to_mono_float("arm", np.zeros((2, 4800), np.float32), 48000)
    with pytest.raises(AudioInputError, match="'arm'.*NaN"):
        to_mono_float("arm", np.array([0.0, np.nan], np.float32), 16000)
    with pytest.raises(AudioInputError, match="'arm'.*int16, int32"):
        to_mono_float("arm", np.zeros(10, np.complex64), 16000)
    with pytest.raises(AudioInputError, match="'arm'.*t must be"):
        PushResampler("arm").push(np.zeros(160, np.float32), 16000, float("nan"))
    x = to_mono_float("arm", np.array([[-32768, 32767]], np.int16), 16000)  # int16 scaled, channels averaged
    assert x.dtype == np.float32 and x.shape == (1,) and abs(x[0]) < 1e-4


def test_a_video_without_audio_is_no_audio_not_an_error():
    path = speech.silent_video()
    with pytest.raises(NoAudioTrack):
        list(read_audio(str(path), "cam"))
    ended = threading.Event()
    reader = AudioReader(str(path), "cam", lambda b: None, on_end=lambda state: ended.set()).start()
    assert ended.wait(10) and reader.state == "no_audio" and reader.error is None


def test_a_corrupt_audio_track_reports_an_error_and_leaves_the_video_alone():
    path = speech.corrupt_audio_video()
    with pytest.raises(AudioTrackError, match="badaudio.*audio track"):
        list(read_audio(str(path), "cam"))
    got = []
    reader = AudioReader(str(path), "cam", got.append).start()
    assert reader.join(10) and reader.state == "error"
    assert str(path) in reader.error and "undecodable" in reader.error and not got
    with PyAVDecoder(str(path), "cam", fps=5.0) as dec:  # the video decodes in full, untouched
        frames = list(dec)
    assert len(frames) == 30 and not dec.stats.errors
    with av.open(str(path)) as c:
        assert c.streams.audio  # the track is there, only broken


def test_a_missing_file_is_an_error_state_not_an_exception(tmp_path):
    reader = AudioReader(str(tmp_path / "nope.mp4"), "cam", lambda b: None).start()
    assert reader.join(10) and reader.state == "error" and "nope.mp4" in reader.error


def test_realtime_paces_a_file_at_1x():
    path = speech.speech_video(((0.2, speech.KEYS),), 1.5)
    started = time.monotonic()
    blocks = list(read_audio(str(path), "cam", realtime=True))
    paced = time.monotonic() - started
    started = time.monotonic()
    list(read_audio(str(path), "cam"))
    fast = time.monotonic() - started
    span = blocks[-1].t_end - blocks[0].t_end  # each block is handed on when its last sample is due
    assert paced >= span * 0.95 and fast < span * 0.5


def test_a_live_http_stream_is_read_on_the_same_axis_as_its_file():
    path = speech.speech_video(((1.0, speech.PLANTS),), 4.0, video_start_s=1.0, audio_start_s=0.3,
                               container="mpegts", suffix=".ts")
    from_file = _onset(list(read_audio(str(path), "cam")))
    with TsServer(path) as server:
        blocks = list(read_audio(server.url, "cam", timeout_s=5.0))
    assert _onset(blocks) == pytest.approx(from_file, abs=0.002)
    assert blocks[-1].t_end == pytest.approx(0.3 - 1.0 + 4.0, abs=0.1)
