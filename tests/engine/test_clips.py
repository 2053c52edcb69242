"""Clips of any interval (Engine.clip, ``vam-engine clip``): read back with ffprobe. Cut from the
source file with its sound (a video with espeak-ng speech), without sound where the source had
none, built from the retained frames once the source file is gone, and bad ranges refused
naming the problem."""
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from support.speech import have_espeak, silent_video, speech_video
from vam_engine.engine import ClipError, Engine, NoClip

pytestmark = [pytest.mark.usefixtures("watchdog"),
              pytest.mark.skipif(not (have_espeak() and shutil.which("ffprobe")), reason="needs espeak-ng and ffprobe")]
WATCHDOG_S = 300
REPO = Path(__file__).resolve().parents[2]


def probe(path) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries",
                          "stream=codec_type,codec_name,duration,nb_frames:format=duration,format_name", "-of", "json",
                          str(path)], capture_output=True, text=True, check=True).stdout
    info = json.loads(out)
    return {"duration": float(info["format"]["duration"]), "format": info["format"]["format_name"],
            "streams": {s["codec_type"]: s for s in info["streams"]}}


def write(tmp_path, data: bytes, name: str) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """One store: a 13 s video with speech ('talk'), a silent one ('quiet'), and a copy of the
    speech video indexed then deleted ('gone')."""
    root = tmp_path_factory.mktemp("clips")
    gone = root / "gone.mp4"
    shutil.copy(speech_video(), gone)
    eng = Engine(root / "store", {"ingest": {"fps": 2.0}}, device="cpu")
    eng.index_file(speech_video(), camera_id="talk")
    eng.index_file(silent_video(), camera_id="quiet")
    eng.index_file(gone, camera_id="gone")
    gone.unlink()
    yield eng
    eng.close()


def test_a_clip_is_cut_from_the_source_file_with_its_sound(engine, tmp_path):
    made = engine.clip("talk", 2.0, 7.5)
    assert made.made_from == "source"
    info = probe(write(tmp_path, made.data, "talk.mp4"))
    assert "mp4" in info["format"]
    assert info["streams"]["video"]["codec_name"] == "h264"
    assert info["streams"]["audio"]["codec_name"] == "aac"
    assert info["duration"] == pytest.approx(5.5, abs=0.25)  # one frame of the 5 fps source at most
    assert float(info["streams"]["audio"]["duration"]) == pytest.approx(5.5, abs=0.1)


def test_the_clips_sound_is_the_sources_at_those_times(engine, tmp_path):
    """The speech starts 1 s into the source (support.speech: PLANTS at 1.0): a clip from 0.5 s
    is silent for its first half second, then loud."""
    made = engine.clip("talk", 0.5, 4.0)
    with av.open(str(write(tmp_path, made.data, "s.mp4"))) as c:
        samples = np.concatenate([f.to_ndarray().mean(axis=0) for f in c.decode(audio=0)])
        rate = c.streams.audio[0].rate
    rms = lambda a, b: float(np.sqrt(np.mean(samples[int(a * rate):int(b * rate)] ** 2)))  # noqa: E731
    assert rms(0.0, 0.4) < 0.2 * rms(0.6, 2.0)


def test_a_source_without_sound_gives_a_clip_without_an_audio_track(engine, tmp_path):
    made = engine.clip("quiet", 1.0, 4.0)
    info = probe(write(tmp_path, made.data, "quiet.mp4"))
    assert made.made_from == "source" and set(info["streams"]) == {"video"}
    assert info["duration"] == pytest.approx(3.0, abs=0.25)


def test_a_clip_is_built_from_the_retained_frames_when_the_source_is_gone(engine, tmp_path):
    made = engine.clip("gone", 1.0, 9.0)
    assert made.made_from == "frames"
    info = probe(write(tmp_path, made.data, "gone.mp4"))
    assert info["streams"]["video"]["codec_name"] == "h264" and "audio" not in info["streams"]
    assert info["duration"] == pytest.approx(8.0, abs=0.01)
    # each tick shows the retained frame at or before it: the clip's frames are the moments' pictures
    moments = engine.moments("gone")
    with av.open(str(tmp_path / "gone.mp4")) as c:
        got = [(f.time, f.to_ndarray(format="rgb24").astype(float)) for f in c.decode(video=0)]
    from PIL import Image

    for t, rgb in got[::7]:
        shown = max((m for m in moments if m.t <= 1.0 + t + 1e-6), key=lambda m: m.t)
        want = np.asarray(Image.open(shown.frame_path).convert("RGB").resize(rgb.shape[1::-1]), float)
        assert np.abs(rgb - want).mean() < 12, t


def test_a_clip_is_cached_until_what_it_shows_changes(engine):
    a = engine.clip("talk", 3.0, 4.0)
    assert engine.clip("talk", 3.0, 4.0) is a  # the cache: the same clip, not encoded again
    assert engine.clip("talk", 3.0, 4.5) is not a


@pytest.mark.parametrize("t0, t1, problem", [
    (5.0, 5.0, "t1 (5) must be after t0 (5)"),
    (7.0, 2.0, "t1 (2) must be after t0 (7)"),
    (0.0, 301.0, "a clip is at most 300 s (config clips.max_s)"),
    (math.nan, 2.0, "t0 must be a finite time"),
    (0.0, math.inf, "t1 must be a finite time"),
])
def test_bad_ranges_are_refused_naming_the_problem(engine, t0, t1, problem):
    with pytest.raises(ClipError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        engine.clip("talk", t0, t1)


def test_a_camera_with_nothing_retained_there_has_no_clip(engine):
    with pytest.raises(NoClip, match="camera 'nobody' has no retained frame"):
        engine.clip("nobody", 0.0, 2.0)
    with pytest.raises(NoClip):
        engine.clip("talk", -100.0, -90.0)  # before the camera's first frame


def test_the_clip_command_writes_the_mp4(engine, tmp_path):
    import os

    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = tmp_path / "cli.mp4"
    r = subprocess.run([sys.executable, "-m", "vam_engine.cli", "clip", "--store", str(engine.store.root), "--device",
                        "cpu", "--camera", "talk", "--t0", "1", "--t1", "3", "-o", str(out)], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "cut from the source file" in r.stderr
    assert probe(out)["duration"] == pytest.approx(2.0, abs=0.25)
    r = subprocess.run([sys.executable, "-m", "vam_engine.cli", "clip", "--store", str(engine.store.root), "--device",
                        "cpu", "--camera", "talk", "--t0", "3", "--t1", "1", "-o", str(out)], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 2 and "t1 (1) must be after t0 (3)" in r.stderr
