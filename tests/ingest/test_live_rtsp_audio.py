"""A live RTSP camera with an audio track (the test RTSP server serves the clip's AAC track beside
its H.264 one): the camera's reader demuxes the audio from the same connection, the real tiny.en
model transcribes it, and the segment lands on the camera's axis where the sentence was said; a
stream without audio reports "no_audio" in the camera's status and indexes as before."""
import time

import pytest

from support import speech
from support.live import RtspServer, status_of
from support.waiting import wait_for
from vam_engine.engine import Engine

MODEL = speech.whisper_model_dir()
pytestmark = [pytest.mark.rtsp, speech.needs_speech(), pytest.mark.usefixtures("watchdog")]
WATCHDOG_S = 120
SAID_AT = 1.0


def _config() -> dict:
    return {"ingest": {"fps": 2.0}, "audio": {"model": str(MODEL), "device": "cpu"}}


def test_a_live_rtsp_camera_with_an_audio_track_is_transcribed(tmp_path):
    clip = speech.speech_video(((SAID_AT, speech.PLANTS),), 7.0, scene_s=2.0)
    with RtspServer(clip) as server, Engine(tmp_path / "store", _config(), device="cpu") as eng:
        assert server.audio
        eng.add_camera("door", server.url, stall_s=5.0, backoff_s=0.2, backoff_max_s=0.5)
        wait_for("the sentence transcribed", lambda: eng.transcripts("door"), 60)
        (seg,) = eng.transcripts("door")
        assert seg.text == speech.PLANTS
        st = status_of(eng, "door")
        assert st.audio["state"] in ("running", "ended") and st.audio["segments"] >= 1 and st.audio["error"] is None
        src = [s for s in eng.store.sources.all() if s["camera_id"] == "door"][0]
        epoch = eng.store.sources.info(src["source_id"])["epoch"]  # t_abs of the run's first frame
        onset, end = speech.spoken(SAID_AT, speech.PLANTS)
        # on the frames' clock (the wall clock at the first frame, advanced by the stream's PTS)
        assert abs(seg.t_start - epoch - onset) < 1.0 and abs(seg.t_end - epoch - end) < 1.0
        assert abs(seg.t_end - time.time()) < 30
        eng.remove_camera("door")


def test_a_live_stream_without_audio_says_so_in_its_status(tmp_path):
    with RtspServer(speech.silent_video(6.0)) as server, Engine(tmp_path / "store", _config(), device="cpu") as eng:
        assert not server.audio
        eng.add_camera("mute", server.url, stall_s=5.0)
        wait_for("frames kept", lambda: status_of(eng, "mute").frames_sampled >= 2, 30)
        assert status_of(eng, "mute").audio["state"] == "no_audio"
        eng.remove_camera("mute")
        assert eng.moments("mute") and eng.transcripts() == []
