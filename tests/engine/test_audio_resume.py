"""kill -9 while ``vam-engine index --audio-model`` transcribes, then the same command again: the
store ends with the segments of an uninterrupted run, none duplicated, none lost (the video
resumes after its last commit, the audio after the camera's last stored segment; a file whose
video finished before the kill gets only its audio finished)."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from support import speech
from support.paths import REPO

MODEL = speech.whisper_model_dir()
pytestmark = [speech.needs_speech(), pytest.mark.usefixtures("watchdog")]
WATCHDOG_S = 400
SAID = ((1.0, speech.PLANTS), (7.0, speech.TRUCK), (13.0, speech.WAREHOUSE), (19.0, speech.PLANTS))
TRIES = 4  # runs killed until one dies with some but not all segments stored


def _cli(clip, store, config, log):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO)] + [p for p in sys.path if p]))
    cmd = [sys.executable, "-m", "vam_engine.cli", "index", str(clip), "--store", str(store), "--camera", "door",
           "--device", "cpu", "--fps", "1", "--text-model", "minilm", "--audio-model", str(MODEL),
           "--config", str(config), "-q"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log, "w"), env=env, cwd=str(REPO))


def _segments(store) -> list[tuple]:
    path = store / "store.sqlite"
    if not path.exists():
        return []
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as conn:
        try:
            return conn.execute("SELECT t_start, t_end, text FROM transcripts ORDER BY t_start").fetchall()
        except sqlite3.OperationalError:  # the schema is being created
            return []


def _counts(store) -> tuple[int, int, int]:
    with sqlite3.connect(store / "store.sqlite") as conn:
        return tuple(conn.execute(q).fetchone()[0] for q in (
            "SELECT COUNT(*) FROM transcripts", "SELECT COUNT(*) FROM fulltext_docs WHERE kind='speech'",
            "SELECT COUNT(*) FROM vectors WHERE space='speech'"))


def _same(got, want) -> None:
    assert len(got) == len(want), (got, want)
    for (a0, a1, at), (b0, b1, bt) in zip(got, want):
        assert abs(a0 - b0) <= 0.3 and abs(a1 - b1) <= 0.3, (got, want)
        assert speech.word_error_rate(bt, at) <= 0.15, (at, bt)  # the same audio, cut at a resume point
    for (_, a1, _), (b0, _, _) in zip(got, got[1:]):
        assert a1 <= b0 + 1e-6, got  # no segment twice


def test_kill_9_during_transcription_then_resume_gives_the_same_segments(tmp_path):
    clip = speech.speech_video(SAID, 24.0, scene_s=3.0)
    config = tmp_path / "slow.json"  # one thread, one piece per ASR call: a run lasts long enough to be killed
    config.write_text(json.dumps({"audio": {"cpu_threads": 1, "batch_size": 1}, "retention": {"enabled": False}}))
    whole = tmp_path / "whole"
    first = _cli(clip, whole, config, tmp_path / "whole.log")
    assert first.wait(WATCHDOG_S) == 0, (tmp_path / "whole.log").read_text()[-3000:]
    want = _segments(whole)
    assert len(want) == len(SAID)
    assert _counts(whole) == (len(SAID),) * 3
    landed = []
    for k in range(TRIES):
        store = tmp_path / f"run{k}"
        child = _cli(clip, store, config, tmp_path / f"run{k}.log")
        try:
            while child.poll() is None:
                n = len(_segments(store))
                if 1 <= n < len(SAID):
                    child.send_signal(signal.SIGKILL)
                    landed.append(n)
                    break
                time.sleep(0.02)
        finally:
            child.wait(30)
        if child.returncode != -signal.SIGKILL:
            continue  # it finished before a kill could land mid-transcription: try again
        resumed = _cli(clip, store, config, tmp_path / f"resume{k}.log")
        assert resumed.wait(WATCHDOG_S) == 0, (tmp_path / f"resume{k}.log").read_text()[-3000:]
        _same(_segments(store), want)
        assert _counts(store) == (len(SAID),) * 3  # every segment with its full-text row and vector
        break
    assert landed, f"no kill landed mid-transcription in {TRIES} runs"
