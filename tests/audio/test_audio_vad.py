"""Voice activity first: silence never reaches the VAD model (energy check) nor ASR; speech
becomes chunks at its times; long speech is cut into overlapping chunks whose keep ranges tile it."""
import numpy as np
import pytest

from support import speech
from vam_engine.audio import SpeechChunker, read_audio

pytestmark = pytest.mark.skipif(not speech.have_espeak(), reason="espeak-ng is not installed")


def _feed_array(chunker, x, t0=0.0, block=8000):
    chunks = []
    for a in range(0, len(x), block):
        chunks += chunker.feed(t0 + a / 16000, x[a:a + block])
    return chunks + chunker.end()


def _track16k(sentences, duration_s, noise=0.0):
    """espeak's track resampled to 16 kHz through the decode path (a WAV file)."""
    x = speech.speech_track(sentences, duration_s, noise=noise)
    path = speech.cache_dir() / f"track-{abs(hash((sentences, duration_s, noise)))}.wav"
    speech.write_wav(path, x)
    return np.concatenate([b.samples for b in read_audio(str(path), "cam")])


def test_silence_costs_no_model_call_and_no_chunk():
    chunker = SpeechChunker("cam")
    x = np.zeros(16000 * 20, np.float32)
    x += np.random.default_rng(0).standard_normal(len(x)).astype(np.float32) * 0.001  # a quiet room's hiss
    assert _feed_array(chunker, x) == []
    det = chunker.detector
    assert det.seconds_scored == 0.0 and det.seconds_quiet == pytest.approx(20.0, abs=0.05)


def test_loud_noise_goes_through_the_model_but_is_not_speech():
    chunker = SpeechChunker("cam")
    x = np.random.default_rng(1).standard_normal(16000 * 6).astype(np.float32) * 0.05
    assert _feed_array(chunker, x) == []
    assert chunker.detector.seconds_scored == pytest.approx(6.0, abs=0.05)


def test_two_sentences_become_two_chunks_at_their_times():
    x = _track16k(((1.0, speech.PLANTS), (8.0, speech.TRUCK)), 13.0)
    chunker = SpeechChunker("cam", chunk_s=20.0, overlap_s=1.0)
    chunks = _feed_array(chunker, x, t0=50.0)
    assert len(chunks) == 2
    for chunk, (t, text) in zip(chunks, ((1.0, speech.PLANTS), (8.0, speech.TRUCK))):
        voice = speech.speak(text)
        loud = np.flatnonzero(np.abs(voice) > 0.02) / speech.ESPEAK_RATE
        onset, offset = 50.0 + t + loud[0], 50.0 + t + loud[-1]
        assert chunk.voice_start == pytest.approx(onset, abs=0.1)
        assert chunk.voice_end == pytest.approx(offset, abs=0.3)
        assert chunk.t_start == pytest.approx(chunk.voice_start - 0.4, abs=0.05)  # padded
        assert chunk.keep_from == chunk.t_start and chunk.keep_until == pytest.approx(chunk.t_end)
    assert [c.seq for c in chunks] == [0, 1]
    assert chunker.seconds_speech == pytest.approx(sum(c.duration for c in chunks))
    assert chunker.detector.seconds_quiet > 3.0  # the silence between them never reached the model


def test_long_speech_is_cut_into_overlapping_chunks_that_tile_it():
    said = ((0.5, speech.PLANTS), (3.9, speech.TRUCK), (6.8, speech.KEYS), (9.1, speech.WAREHOUSE))
    x = _track16k(said, 14.0)
    chunker = SpeechChunker("cam", chunk_s=4.0, overlap_s=1.0)
    chunks = _feed_array(chunker, x)
    assert len(chunks) >= 3
    for a, b in zip(chunks, chunks[1:]):
        assert b.t_start == pytest.approx(a.t_end - 1.0, abs=1e-6)  # 1 s of audio shared
        assert a.keep_until == pytest.approx(b.keep_from) == pytest.approx(a.t_end - 0.5, abs=1e-6)
        assert np.array_equal(a.samples[-16000:], b.samples[:16000])
    assert all(c.duration <= 4.0 + 1e-6 for c in chunks)
    assert chunks[0].keep_from == chunks[0].t_start and chunks[-1].keep_until == pytest.approx(chunks[-1].t_end)


def test_a_gap_in_the_audio_ends_the_utterance():
    x = _track16k(((0.2, speech.PLANTS),), 4.0)
    chunker = SpeechChunker("cam")
    first = chunker.feed(0.0, x[:16000 * 2])  # mid-sentence...
    after = chunker.feed(30.0, np.zeros(16000, np.float32))  # ...then audio resumes 28 s later
    assert first == [] and len(after) == 1
    assert after[0].t_end == pytest.approx(2.0, abs=1e-6) and after[0].t_start < 1.0


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="overlap_s"):
        SpeechChunker("cam", chunk_s=4.0, overlap_s=2.5)
    with pytest.raises(ValueError, match="threshold"):
        SpeechChunker("cam", threshold=1.5)
    with pytest.raises(ValueError, match="pad_s"):
        SpeechChunker("cam", pad_s=0.5, min_silence_s=0.6)
