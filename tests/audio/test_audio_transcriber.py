"""The transcriber's own rules with a scripted body (no model): language per camera (detected
once, then shared pieces per language, detected again after ``redetect_every`` chunks), a
failing body counted and dropped without stopping the worker, a failing consumer reported,
and the words a body returns mapped back to their chunks and keep ranges."""
import threading

import numpy as np
import pytest

from vam_engine.audio import Recognition, RecognizedSegment, RecognizedWord, SpeechChunk, Transcriber
from vam_engine.audio.transcriber import words_to_segments

RATE = 16000


def _chunk(cam: str, seq: int, t: float, level: float, seconds: float = 2.0) -> SpeechChunk:
    samples = np.full(int(seconds * RATE), level, np.float32)
    return SpeechChunk(cam, seq, t, samples, t, t + seconds, t, t + seconds, utterance=seq)  # each its own


class ScriptedBody:
    """A multilingual body: a part of a piece whose samples are > 0 is German, < 0 English; each
    part (a run of non-zero samples) becomes one word spanning it, named by its level."""

    name, max_batch, multilingual, packs = "scripted", 4, True, True

    def __init__(self, fail: int = 0):
        self.calls: list[tuple[list[int], str | None]] = []
        self.fail = fail

    def recognize(self, pieces, language):
        self.calls.append(([len(p) for p in pieces], language))
        if self.fail:
            self.fail -= 1
            raise RuntimeError("server on fire")
        out = []
        for p in pieces:
            nz = np.flatnonzero(p)
            runs = np.split(nz, np.flatnonzero(np.diff(nz) > 1) + 1) if len(nz) else []
            words = tuple(RecognizedWord(r[0] / RATE, (r[-1] + 1) / RATE, f" w{abs(p[r[0]]):.2f}.", 0.9) for r in runs)
            lang = language or ("de" if p[nz[0]] > 0 else "en")
            out.append(Recognition((RecognizedSegment(0.0, len(p) / RATE, "", 0.9, words),), lang, 0.99))
        return out

    def close(self):
        pass


def test_language_is_detected_per_camera_then_shared_and_detected_again():
    body = ScriptedBody()
    got = []
    tr = Transcriber(body, got.extend, redetect_every=3, start=False)
    tr.submit(_chunk("berlin", 0, 0.0, 0.25))
    tr.submit(_chunk("london", 0, 0.0, -0.5))
    tr.start()
    assert tr.flush(10)
    assert body.calls == [([32000, 32000], None)]  # unknown languages: one chunk per piece, detected
    assert tr.counters("berlin").language == "de" and tr.counters("london").language == "en"
    body.calls.clear()
    for k in range(1, 4):
        tr.submit(_chunk("berlin", k, 10.0 * k, 0.25))
        tr.submit(_chunk("london", k, 10.0 * k, -0.5))
    assert tr.flush(10)
    langs = [lang for _, lang in body.calls]
    assert set(langs) == {"de", "en"}  # known now: sent with each call (one language per call)
    assert sum(sum(sizes) for sizes, _ in body.calls) >= 6 * 32000  # all six chunks went (packed or not)
    assert tr.counters("berlin").language is None  # 3 chunks since detection: detected again next time
    tr.submit(_chunk("berlin", 4, 40.0, 0.25))
    assert tr.flush(10)
    assert body.calls[-1][1] is None and tr.counters("berlin").language == "de"
    tr.close()
    assert {s.language for s in got if s.camera_id == "berlin"} == {"de"}
    assert {s.language for s in got if s.camera_id == "london"} == {"en"}
    assert sorted(s.t_start for s in got if s.camera_id == "london") == [0.0, 10.0, 20.0, 30.0]


def test_a_set_language_is_used_for_every_piece():
    body = ScriptedBody()
    tr = Transcriber(body, lambda segs: None, language="fr")
    for k in range(3):
        tr.submit(_chunk(f"c{k}", 0, 0.0, 0.1 * (k + 1)))
    assert tr.flush(10)
    tr.close()
    assert {lang for _, lang in body.calls} == {"fr"}


def test_a_failing_body_is_counted_and_the_worker_goes_on():
    body = ScriptedBody(fail=1)
    got = []
    tr = Transcriber(body, got.extend, language="en")
    tr.submit(_chunk("a", 0, 0.0, 0.3))
    assert tr.flush(10)
    c = tr.counters("a")
    assert c.asr_errors == 1 and "server on fire" in c.last_asr_error and c.chunks_dropped == 1 and got == []
    tr.submit(_chunk("a", 1, 5.0, 0.3))
    assert tr.flush(10) and len(got) == 1 and tr.counters("a").seconds_transcribed == pytest.approx(2.0)
    tr.close()


def test_a_failing_consumer_is_reported_and_the_worker_goes_on():
    calls = []

    def consumer(segs):
        calls.append(segs)
        if len(calls) == 1:
            raise ValueError("store closed")

    tr = Transcriber(ScriptedBody(), consumer, language="en")
    tr.submit(_chunk("a", 0, 0.0, 0.3))
    assert tr.flush(10)
    assert "store closed" in tr.counters("a").last_asr_error
    tr.submit(_chunk("a", 1, 5.0, 0.3))
    assert tr.flush(10) and len(calls) == 2
    tr.close()


def test_submit_never_waits_for_a_busy_body():
    release = threading.Event()

    inside = threading.Event()

    class SlowBody(ScriptedBody):
        def recognize(self, pieces, language):
            inside.set()
            release.wait(10)
            return super().recognize(pieces, language)

    tr = Transcriber(SlowBody(), lambda s: None, language="en", max_backlog_s=30.0)
    tr.submit(_chunk("a", 0, 0.0, 0.3))
    assert inside.wait(10)  # the worker took it and is blocked in the body
    for k in range(1, 40):  # 78 s of speech offered while it is blocked: returns at once, drops the oldest
        tr.submit(_chunk("a", k, 10.0 * k, 0.3))
    c = tr.counters("a")
    assert c.pending_s == pytest.approx(30.0) and c.chunks_dropped == 39 - 15
    release.set()
    assert tr.flush(10)
    tr.close()


def test_words_are_kept_by_their_chunks_keep_range_and_split_into_sentences():
    chunk = SpeechChunk("a", 3, 100.0, np.zeros(6 * RATE, np.float32), keep_from=101.0, keep_until=105.0,
                        voice_start=100.5, voice_end=105.5)
    words = [RecognizedWord(0.0, 0.9, " dropped", 0.9),  # middle 100.45: before keep_from
             RecognizedWord(1.0, 1.4, " Hello", 0.8), RecognizedWord(1.4, 1.8, " there.", 0.6),
             RecognizedWord(1.9, 2.2, " How", 0.9), RecognizedWord(2.2, 2.5, " are", 0.9),
             RecognizedWord(3.6, 3.9, " you", 0.9),  # after a 1.1 s pause: a new segment
             RecognizedWord(4.8, 5.3, " late", 0.9)]  # middle 105.05: the next chunk's
    segs = words_to_segments(chunk, words, 0.0, "en", split_pause_s=0.8)
    assert [s.text for s in segs] == ["Hello there.", "How are", "you"]
    assert segs[0].t_start == pytest.approx(101.0) and segs[0].t_end == pytest.approx(101.8)
    assert segs[0].confidence == pytest.approx(0.7) and segs[-1].t_end == pytest.approx(103.9)
    assert all(s.camera_id == "a" and s.language == "en" for s in segs)


def test_chunks_of_one_utterance_never_share_a_piece():
    body = ScriptedBody()
    tr = Transcriber(body, lambda s: None, language="en", start=False)
    for k in range(3):  # one long utterance cut in three (its own pieces), and two short ones (packed)
        tr.submit(SpeechChunk("a", k, 4.0 * k, np.full(4 * RATE, 0.2, np.float32), 4.0 * k, 4.0 * k + 4,
                              utterance=7))
    tr.submit(_chunk("a", 3, 20.0, 0.3))
    tr.submit(_chunk("a", 4, 25.0, 0.3))
    tr.start()
    assert tr.flush(10)
    tr.close()
    ((sizes, _),) = body.calls
    # three pieces, one per cut of the long utterance; the short ones joined the first (0.5 s gaps)
    assert sorted(sizes) == [4 * RATE, 4 * RATE, 4 * RATE + 2 * (8000 + 2 * RATE)]
