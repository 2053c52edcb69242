"""The CTranslate2 body in a process of its own (``audio.isolate``, the default): the same words
as in the engine's process, a bad model named before anything runs, and a child that dies is
started again at the next call. Real tiny.en and espeak-ng speech."""
import numpy as np
import pytest

from support import speech
from vam_engine.audio import ASRError, make_recognizer
from vam_engine.config import AudioConfig

pytestmark = [speech.needs_speech(), pytest.mark.usefixtures("watchdog")]
WATCHDOG_S = 120


def _piece(text: str) -> np.ndarray:
    x = speech.speech_track(((0.2, text),), 4.0)
    return np.interp(np.arange(0, len(x), speech.ESPEAK_RATE / 16000), np.arange(len(x)), x).astype(np.float32)


def test_the_isolated_body_hears_what_the_in_process_one_hears():
    cfg = AudioConfig(model=str(speech.whisper_model_dir()), cpu_threads=1)
    inside = make_recognizer(cfg.model_copy(update={"isolate": False}), "cpu")
    apart = make_recognizer(cfg, "cpu")
    try:
        assert apart.name.endswith("(own process)") and (apart.max_batch, apart.multilingual, apart.packs) == \
            (inside.max_batch, inside.multilingual, inside.packs)
        pieces = [_piece(speech.TRUCK), _piece(speech.PLANTS)]
        want = inside.recognize(pieces, "en")
        got = apart.recognize(pieces, "en")
        assert [[s.text for s in r.segments] for r in got] == [[s.text for s in r.segments] for r in want]
        assert got[0].segments[0].words[0].start == pytest.approx(want[0].segments[0].words[0].start, abs=1e-3)
        apart._proc.kill()  # the child dies between calls: the next call starts a new one
        apart._proc.wait(10)
        again = apart.recognize(pieces[:1], "en")
        assert [s.text for s in again[0].segments] == [s.text for s in want[0].segments]
    finally:
        inside.close()
        apart.close()
    assert apart._proc is None


def test_a_bad_model_is_named_by_the_isolated_body(tmp_path):
    with pytest.raises(ASRError, match="no model.bin"):
        make_recognizer(AudioConfig(model=str(tmp_path)), "cpu")


def test_a_child_that_does_not_start_in_time_is_an_error_not_a_hang():
    from vam_engine.audio.isolated import IsolatedRecognizer

    options = dict(model=str(speech.whisper_model_dir()), device="cpu", compute_type="auto", cpu_threads=1,
                   beam_size=1, batch_size=4)
    with pytest.raises(ASRError, match="did not start within 0.01 s"):
        IsolatedRecognizer(options, start_timeout_s=0.01)  # loading the model takes longer than that
