"""The hub's state a reader of transcripts relies on (with a scripted body: no ASR model): pushed
audio ended right after the push is still analysed (the push thread's block counts until it is
fed), and ``settled_until`` says how far every word a camera said is stored: up to its speech in
progress, then everything once nothing waits."""
import math
import threading

import pytest

from support import speech
from vam_engine.audio import AudioHub, Recognition, RecognizedSegment, RecognizedWord
from vam_engine.config import AudioConfig

pytestmark = pytest.mark.skipif(not speech.have_espeak(), reason="needs espeak-ng")


class OneWord:
    """Every piece is one word spanning its audio; ``gate`` (when set) holds each call until released."""

    name, max_batch, multilingual, packs = "one-word", 4, False, False

    def __init__(self, gate: threading.Event | None = None):
        self.gate, self.calls = gate, 0

    def recognize(self, pieces, language):
        if self.gate is not None:
            self.gate.wait(30)
        self.calls += 1
        return [Recognition((RecognizedSegment(0.0, len(p) / 16000, " word.", 0.9,
                                               (RecognizedWord(0.1, len(p) / 16000 - 0.1, " word.", 0.9),)),), "en")
                for p in pieces]

    def close(self):
        pass


def _cfg():
    return AudioConfig(model="scripted", language="en")


def test_audio_ended_right_after_its_push_is_still_transcribed():
    for _ in range(5):  # the push thread may not have taken the block yet when end() comes
        got = []
        hub = AudioHub(_cfg(), got.extend, recognizer=OneWord())
        try:
            track = speech.speech_track(((0.3, speech.TRUCK),), 4.0)
            hub.push("robot", track, speech.ESPEAK_RATE, 0.0)
            hub.end("robot")
            assert hub.flush(30) and len(got) == 1 and got[0].camera_id == "robot"
        finally:
            hub.close()


def test_settled_until_follows_speech_in_progress_and_waiting_for_asr():
    gate = threading.Event()
    got = []
    hub = AudioHub(_cfg(), got.extend, recognizer=OneWord(gate))
    try:
        assert hub.settled_until("robot") is None  # never heard
        track = speech.speech_track(((0.5, speech.TRUCK),), 6.0)
        onset, end = speech.spoken(0.5, speech.TRUCK)
        cut = int((onset + 1.0) * speech.ESPEAK_RATE)  # mid-sentence
        hub.push("robot", track[:cut], speech.ESPEAK_RATE, 0.0)
        hub.flush(10)
        mid = hub.settled_until("robot")
        assert mid is not None and onset - 0.6 <= mid <= onset  # the utterance in progress (padded) holds it
        hub.push("robot", track[cut:], speech.ESPEAK_RATE, cut / speech.ESPEAK_RATE)
        hub.end("robot")
        assert not hub.flush(0.5)  # ASR is held: the chunk waits
        assert hub.settled_until("robot") <= onset
        gate.set()
        assert hub.flush(30) and len(got) == 1
        assert hub.settled_until("robot") == math.inf  # nothing it said waits
    finally:
        gate.set()
        hub.close()
