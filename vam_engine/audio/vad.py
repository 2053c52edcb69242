"""Voice activity first: only speech reaches ASR, and silence costs almost nothing.

``SpeechDetector`` is one camera's streaming VAD: 32 ms windows (512 samples at 16 kHz). A
window whose RMS is under ``energy_floor`` is quiet without asking any model (a numpy mean
over the block: microseconds per second of audio); a block with any louder window goes
through Silero VAD, the ONNX model faster-whisper ships in its package (one onnxruntime
session shared by every camera, one thread, about 3 ms per second of audio here), with each
window's 64-sample context and the model's recurrent state carried from block to block, as
faster-whisper's own batched call carries them within one file. After a quiet block the state
restarts, as at the start of a stream.

``SpeechChunker`` turns a camera's speech probabilities into ``SpeechChunk``s with the rule
of faster-whisper's ``get_speech_timestamps``: speech starts at a window at or above
``threshold`` and ends after ``min_silence_s`` under ``threshold - 0.15``; runs shorter than
``min_speech_s`` are dropped; chunks are padded by ``pad_s`` of audio each side. An utterance
longer than ``chunk_s`` is cut into chunks of ``chunk_s`` that overlap by ``overlap_s``; the
cut between two chunks is the middle of their overlap (``keep_until`` of one, ``keep_from``
of the next), so each word is kept by exactly one of them (transcriber.py). A gap in the
audio (a block that does not continue the previous one) ends the utterance in progress.
"""
from __future__ import annotations

import functools

import numpy as np

from .records import SAMPLE_RATE, SpeechChunk

WINDOW = 512  # Silero's window at 16 kHz
CONTEXT = 64  # samples of the previous window each window is scored with
NEG_OFFSET = 0.15  # silence is under threshold - this (Silero's rule)
CLOCK_BACK_S = 1.0  # a new run starting this far before the last chunk's end: the clock restarted


@functools.lru_cache(maxsize=1)
def _silero_session():
    """faster-whisper's Silero VAD session (loaded once; onnxruntime sessions run concurrently)."""
    try:
        from faster_whisper.vad import get_vad_model
    except ImportError:
        raise ImportError("voice activity detection needs faster-whisper and onnxruntime: "
                          "pip install 'vam_engine[audio]'") from None
    return get_vad_model().session


class SpeechDetector:
    """Streaming speech probabilities of one camera's 16 kHz audio (module doc)."""

    def __init__(self, energy_floor: float = 0.003):
        self.energy_floor = float(energy_floor)
        self.seconds_quiet = 0.0  # decided by energy alone
        self.seconds_scored = 0.0  # through the model
        self._reset()

    def _reset(self) -> None:
        self._h = np.zeros((1, 1, 128), np.float32)
        self._c = np.zeros((1, 1, 128), np.float32)
        self._context = np.zeros(CONTEXT, np.float32)

    def probabilities(self, windows: np.ndarray) -> np.ndarray:
        """Speech probability of each row of ``windows`` (k x 512, consecutive audio)."""
        k = len(windows)
        if k == 0:
            return np.zeros(0, np.float32)
        rms = np.sqrt(np.einsum("ij,ij->i", windows, windows) / WINDOW)
        if float(rms.max()) < self.energy_floor:
            self.seconds_quiet += k * WINDOW / SAMPLE_RATE
            self._reset()
            return np.zeros(k, np.float32)
        batch = np.empty((k, CONTEXT + WINDOW), np.float32)
        batch[:, CONTEXT:] = windows
        batch[0, :CONTEXT] = self._context
        batch[1:, :CONTEXT] = windows[:-1, -CONTEXT:]
        out, self._h, self._c = _silero_session().run(None, {"input": batch, "h": self._h, "c": self._c})
        self._context = windows[-1, -CONTEXT:].copy()
        self.seconds_scored += k * WINDOW / SAMPLE_RATE
        return np.asarray(out, np.float32).reshape(-1)[:k]


class SpeechChunker:
    """One camera's audio in, speech chunks out (module doc). ``feed(t, samples)`` takes 16 kHz
    mono float32 starting at camera-axis time ``t``; ``end()`` flushes speech in progress."""

    def __init__(self, camera_id: str, *, threshold: float = 0.5, energy_floor: float = 0.003,
                 chunk_s: float = 20.0, overlap_s: float = 2.0, min_silence_s: float = 0.8, pad_s: float = 0.4,
                 min_speech_s: float = 0.25):
        if not 0 < threshold < 1:
            raise ValueError(f"VAD threshold must be in (0, 1), got {threshold}")
        if not 0 <= overlap_s < chunk_s / 2:
            raise ValueError(f"overlap_s must be in [0, chunk_s / 2), got {overlap_s} with chunk_s {chunk_s}")
        if pad_s * 2 > min_silence_s:
            raise ValueError(f"pad_s ({pad_s}) must be at most half of min_silence_s ({min_silence_s}): "
                             f"padded chunks would overlap")
        self.camera_id = camera_id
        self.detector = SpeechDetector(energy_floor)
        self.threshold, self.neg_threshold = threshold, max(threshold - NEG_OFFSET, 0.01)
        self.chunk_n = int(chunk_s * SAMPLE_RATE)
        self.overlap_n = int(overlap_s * SAMPLE_RATE)
        self.min_silence_n = int(min_silence_s * SAMPLE_RATE)
        self.pad_n = int(pad_s * SAMPLE_RATE)
        self.min_speech_n = int(min_speech_s * SAMPLE_RATE)
        self.seq = 0
        self.utterances = 0
        self.chunks = 0
        self.seconds_speech = 0.0
        self._kept_until: float | None = None  # keep_until of the last chunk: the next keeps from there
        self._new_run(None)

    # -- the buffer: absolute sample indices since the run's first sample ----------------------
    def _new_run(self, t0: float | None) -> None:
        if t0 is not None and self._kept_until is not None and t0 < self._kept_until - CLOCK_BACK_S:
            self._kept_until = None  # the camera's clock went back (a restart): nothing before is ours
        self._t0 = t0  # camera-axis time of sample 0 of this run
        self._buf = np.zeros(4 * SAMPLE_RATE, np.float32)  # grows to a chunk while speech lasts
        self._base = 0  # absolute index of _buf[0]
        self._len = 0  # samples held
        self._scored = 0  # absolute index of the next window to score
        self._speech_start: int | None = None  # absolute index where speech started (in speech)
        self._chunk_start: int | None = None  # absolute start of the chunk being gathered
        self._cut: float | None = None  # keep_from of the chunk being gathered
        self._silence_at: int | None = None  # absolute index where the current silence began

    def _time(self, idx: int) -> float:
        return self._t0 + idx / SAMPLE_RATE

    def _append(self, x: np.ndarray) -> None:
        need = self._len + len(x)
        if need > len(self._buf):
            grown = np.zeros(max(need, 2 * len(self._buf)), np.float32)
            grown[:self._len] = self._buf[:self._len]
            self._buf = grown
        self._buf[self._len:need] = x
        self._len = need

    def _drop_before(self, idx: int) -> None:
        k = min(max(idx - self._base, 0), self._len)
        if k:
            self._buf[:self._len - k] = self._buf[k:self._len]
            self._len -= k
            self._base += k

    def _slice(self, a: int, b: int) -> np.ndarray:
        return self._buf[a - self._base:b - self._base].copy()

    # -- feeding -----------------------------------------------------------------------------
    def feed(self, t: float, samples: np.ndarray) -> list[SpeechChunk]:
        out: list[SpeechChunk] = []
        if self._t0 is None:
            self._new_run(float(t))
        elif abs(self._time(self._base + self._len) - t) > WINDOW / SAMPLE_RATE:
            out += self.end()  # a gap or jump: what was being said ends here
            self._new_run(float(t))
        self._append(np.asarray(samples, np.float32))
        end = self._base + self._len
        k = (end - self._scored) // WINDOW
        if k <= 0:
            return out
        a = self._scored - self._base
        probs = self.detector.probabilities(self._buf[a:a + k * WINDOW].reshape(k, WINDOW))
        for i, p in enumerate(probs.tolist()):
            out += self._step(self._scored + i * WINDOW, p)
        self._scored += k * WINDOW
        if self._chunk_start is None:  # not in speech: keep the pre-roll only
            self._drop_before(self._scored - self.pad_n)
        return out

    def _step(self, idx: int, p: float) -> list[SpeechChunk]:
        if self._speech_start is None:
            if p >= self.threshold:
                self.utterances += 1
                self._speech_start = idx
                self._chunk_start = max(idx - self.pad_n, self._base)
                self._silence_at = None
            return []
        out: list[SpeechChunk] = []
        if p >= self.threshold:
            self._silence_at = None
        elif p < self.neg_threshold:
            if self._silence_at is None:
                self._silence_at = idx
            if idx + WINDOW - self._silence_at >= self.min_silence_n:
                return self._finish(self._silence_at)
        if idx + WINDOW - self._chunk_start >= self.chunk_n:  # long speech: cut, with overlap
            b = self._chunk_start + self.chunk_n
            cut = self._time(b - self.overlap_n / 2)
            out.append(self._chunk(self._chunk_start, b, cut, max(self._speech_start, self._chunk_start), b))
            self._chunk_start = b - self.overlap_n
            self._cut = cut
            self._drop_before(self._chunk_start)
        return out

    def _finish(self, speech_end: int) -> list[SpeechChunk]:
        """The utterance ended at ``speech_end``: its last chunk, padded."""
        start, a = self._speech_start, self._chunk_start
        b = min(speech_end + self.pad_n, self._base + self._len)
        self._speech_start = self._chunk_start = self._silence_at = None
        out = []
        if self._cut is not None or speech_end - start >= self.min_speech_n:
            out.append(self._chunk(a, b, self._time(b), max(start, a), speech_end))
        self._cut = None
        return out

    def _chunk(self, a: int, b: int, keep_until: float, voice_a: int, voice_b: int) -> SpeechChunk:
        t_start = self._time(a)
        keep_from = self._cut if self._cut is not None else t_start
        if self._kept_until is not None:
            keep_from = max(keep_from, self._kept_until)
        self._kept_until = keep_until
        chunk = SpeechChunk(self.camera_id, self.seq, t_start, self._slice(a, b), keep_from, keep_until,
                            self._time(voice_a), self._time(max(voice_a, voice_b)), self.utterances)
        self.seq += 1
        self.chunks += 1
        self.seconds_speech += chunk.duration
        return chunk

    def open_since(self) -> float | None:
        """Camera-axis start of the speech being gathered (None: not in speech)."""
        return None if self._chunk_start is None else self._time(self._chunk_start)

    def scored_until(self) -> float | None:
        """Camera-axis end of the audio the VAD has judged (None: nothing yet)."""
        return None if self._t0 is None else self._time(self._scored)

    def end(self) -> list[SpeechChunk]:
        """The source ended (or paused): speech in progress becomes its last chunk."""
        if self._speech_start is None:
            return []
        return self._finish(self._base + self._len)
