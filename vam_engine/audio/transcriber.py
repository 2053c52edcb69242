"""Speech chunks from many cameras in, timed transcript segments out, on ASR's own thread.

``submit(chunk)`` only appends to a queue (a lock, no waiting): whoever calls it (a camera's
audio thread, the push thread) never waits for ASR. One worker thread takes the oldest
chunks, whatever their cameras, and hands them to the body as one batch.

Packing. Whisper's encoder costs the same for 2 s of speech as for 30 s (every piece is
padded to its 30 s window), so a body that ``packs`` gets pieces of up to ``window_s`` made
of several chunks laid end to end with ``gap_s`` of silence between them, and its word times
say which chunk each word came from (the chunk whose span, widened by half the gap, holds
the word's middle). When ASR keeps up, a chunk waits for no other and goes alone; when it
falls behind, the queue fills and each window carries more speech. Chunks of a camera whose
language is not known yet go alone in their piece (the body detects it per piece); with a
language set (config) or once detected for a camera (re-detected every ``redetect_every``
chunks of that camera), chunks of one language share pieces.

Overlap, once. A chunk keeps the words whose middle (on the camera axis) lies in
``[keep_from, keep_until)`` (vad.py sets these so that consecutive chunks of one utterance
tile it), so the overlap two chunks share is emitted by exactly one of them, whichever order
they are transcribed in and even when a neighbour was dropped. Kept words become segments,
split at sentence ends and at pauses of ``split_pause_s``. A body without word times gives
segments: a segment is kept when its middle is in the chunk's keep range.

Falling behind. The queue holds at most ``max_backlog_s`` of speech; beyond it the oldest
chunks are dropped (counted per camera: ``chunks_dropped``, ``seconds_dropped``). A batch the
body fails on is dropped the same way and counted in ``asr_errors`` with the error's text.

``on_segments(list[TranscriptSegment])`` runs on the worker thread after each batch, with its
segments in time order; it should be quick (commit and return).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from .asr import SpeechRecognizer
from .priority import lower_thread_priority
from .records import MAX_PIECE_S, SAMPLE_RATE, Recognition, RecognizedWord, SpeechChunk, TranscriptSegment

SENTENCE_END = (".", "?", "!", "。", "？", "！")
SEAM_S = 0.6  # a repeated word this close across a cut between chunks is one word (_seam)


def _norm(word: str) -> str:
    return "".join(ch for ch in word.lower() if ch.isalnum())


@dataclass
class CameraCounters:
    """What the transcriber knows of one camera (AudioHub merges it into AudioStatus)."""

    pending_s: float = 0.0
    chunks_dropped: int = 0
    seconds_dropped: float = 0.0
    seconds_transcribed: float = 0.0
    segments: int = 0
    transcribed_until: float | None = None
    asr_errors: int = 0
    last_asr_error: str | None = None
    language: str | None = None
    chunks_since_detect: int = 0
    last_word: tuple | None = None  # (chunk seq, word, t_end) of the last word emitted (_seam)


@dataclass
class _Piece:
    """One piece of audio for the body: chunks laid end to end (offsets in seconds)."""

    parts: list[tuple[SpeechChunk, float]] = field(default_factory=list)
    length_s: float = 0.0

    def audio(self, gap_n: int) -> np.ndarray:
        out = []
        for i, (chunk, _) in enumerate(self.parts):
            if i:
                out.append(np.zeros(gap_n, np.float32))
            out.append(chunk.samples)
        return np.concatenate(out)


def words_to_segments(chunk: SpeechChunk, words: Sequence[RecognizedWord], offset: float, language: str | None,
                      split_pause_s: float) -> list[TranscriptSegment]:
    """The words of one chunk (times relative to a piece in which the chunk starts at
    ``offset``) kept by its keep range, as segments split at sentence ends and pauses."""
    # kept words are pulled into the keep range (segments of consecutive chunks never overlap)
    # and out of the padding, which is silence
    lo = max(chunk.voice_start if chunk.voice_start is not None else chunk.t_start, chunk.keep_from)
    hi = min(chunk.voice_end if chunk.voice_end is not None else chunk.t_end, chunk.keep_until)
    kept = []
    for w in words:
        a = chunk.t_start + min(max(w.start - offset, 0.0), chunk.duration)
        b = chunk.t_start + min(max(w.end - offset, 0.0), chunk.duration)
        if chunk.keep_from <= (a + b) / 2 < chunk.keep_until and w.text.strip():
            a, b = min(max(a, lo), hi), max(min(b, hi), lo)
            kept.append((a, max(a, b), w.text, w.probability))
    segments, current = [], []

    def close():
        if current:
            text = "".join(x[2] for x in current).strip()
            conf = float(np.mean([x[3] for x in current]))
            segments.append(TranscriptSegment(chunk.camera_id, current[0][0], current[-1][1], text, language, conf))
            current.clear()

    for x in kept:
        if current and x[0] - current[-1][1] >= split_pause_s:
            close()
        current.append(x)
        if x[2].strip().endswith(SENTENCE_END):
            close()
    close()
    return segments


class Transcriber:
    def __init__(self, recognizer: SpeechRecognizer, on_segments: Callable[[list[TranscriptSegment]], None], *,
                 language: str | None = None, max_backlog_s: float = 300.0, window_s: float = MAX_PIECE_S,
                 gap_s: float = 0.5, split_pause_s: float = 0.8, redetect_every: int = 50, start: bool = True):
        if not 0 < window_s <= MAX_PIECE_S:
            raise ValueError(f"window_s must be in (0, {MAX_PIECE_S:g}], got {window_s}")
        if max_backlog_s < window_s:
            raise ValueError(f"max_backlog_s ({max_backlog_s}) must be at least window_s ({window_s})")
        self.recognizer = recognizer
        self.on_segments = on_segments
        self.language = language
        self.max_backlog_s, self.window_s, self.gap_s = float(max_backlog_s), float(window_s), float(gap_s)
        self.split_pause_s, self.redetect_every = float(split_pause_s), int(redetect_every)
        self.batches = 0  # body calls made
        self.busy_s = 0.0  # wall seconds spent in the body
        self._queue: deque[SpeechChunk] = deque()
        self._queued_s = 0.0
        self._in_flight = 0
        self._flight: list[SpeechChunk] = []  # the chunks of the batch in the body now
        self._cams: dict[str, CameraCounters] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="vam-asr", daemon=True)
        self._started = False
        if start:
            self.start()

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._thread.start()

    # -- the caller's side ---------------------------------------------------------------------
    def submit(self, chunk: SpeechChunk) -> None:
        """Queue a chunk; never waits for ASR (drops the oldest speech beyond max_backlog_s)."""
        with self._cond:
            if self._closed:
                return
            self._queue.append(chunk)
            self._queued_s += chunk.duration
            self._cam(chunk.camera_id).pending_s += chunk.duration
            while self._queued_s > self.max_backlog_s and len(self._queue) > 1:
                old = self._queue.popleft()
                self._queued_s -= old.duration
                c = self._cam(old.camera_id)
                c.pending_s -= old.duration
                c.chunks_dropped += 1
                c.seconds_dropped += old.duration
            self._cond.notify_all()

    def counters(self, camera_id: str) -> CameraCounters:
        with self._cond:
            c = self._cams.get(camera_id)
            return CameraCounters(**vars(c)) if c is not None else CameraCounters()

    def earliest_pending(self, camera_id: str) -> float | None:
        """Camera-axis start of the camera's oldest speech queued or being transcribed (None: none)."""
        with self._cond:
            starts = [c.t_start for c in (*self._queue, *self._flight) if c.camera_id == camera_id]
        return min(starts) if starts else None

    def pending_s(self) -> float:
        with self._cond:
            return self._queued_s

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every chunk submitted so far is transcribed (or dropped)."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._queue or self._in_flight:
                if self._closed and not self._in_flight:
                    return False  # closed with speech left: it will never be transcribed
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left if left is not None else 1.0)
        return True

    def close(self, timeout: float | None = 10.0) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._started:
            self._thread.join(timeout)

    def forget(self, camera_id: str) -> None:
        """Drop a removed camera's queued speech and counters."""
        with self._cond:
            kept = deque(c for c in self._queue if c.camera_id != camera_id)
            self._queued_s = sum(c.duration for c in kept)
            self._queue = kept
            self._cams.pop(camera_id, None)

    def _cam(self, camera_id: str) -> CameraCounters:
        c = self._cams.get(camera_id)
        if c is None:
            c = self._cams[camera_id] = CameraCounters()
        return c

    # -- the worker ----------------------------------------------------------------------------
    def _loop(self) -> None:
        lower_thread_priority()
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                pieces, language = self._take()
                self._flight = [c for p in pieces for c, _ in p.parts]
                self._in_flight = len(self._flight)
            try:
                self._run(pieces, language)
            finally:
                with self._cond:
                    self._in_flight = 0
                    self._flight = []
                    self._cond.notify_all()

    def _language_of(self, camera_id: str) -> str | None:
        if self.language is not None:
            return self.language
        if not self.recognizer.multilingual:
            return "en"
        return self._cam(camera_id).language

    def _take(self) -> tuple[list[_Piece], str | None]:
        """Under the lock: the oldest chunks of one language, packed into at most max_batch pieces."""
        language = self._language_of(self._queue[0].camera_id)
        packs = self.recognizer.packs
        pieces: list[_Piece] = []
        taken: set[int] = set()
        for i, chunk in enumerate(self._queue):
            if self._language_of(chunk.camera_id) != language:
                continue
            # the first piece it fits in; never two chunks of one utterance in a piece: stitched
            # together, its pieces make Whisper skip (the audio two neighbours share said twice
            # in a row: tiny.en kept 1 of 4 sentences; parts of it with a jump between them: the
            # last part was dropped)
            room = None if not packs or language is None else next(
                (p for p in pieces if p.length_s + self.gap_s + chunk.duration <= self.window_s
                 and not any(c.camera_id == chunk.camera_id and c.utterance == chunk.utterance for c, _ in p.parts)),
                None)
            if room is not None:
                room.parts.append((chunk, room.length_s + self.gap_s))
                room.length_s += self.gap_s + chunk.duration
            elif len(pieces) < self.recognizer.max_batch:
                pieces.append(_Piece([(chunk, 0.0)], chunk.duration))
            else:
                break
            taken.add(i)
        left = deque()
        for i, chunk in enumerate(self._queue):
            if i in taken:
                self._queued_s -= chunk.duration
                self._cam(chunk.camera_id).pending_s -= chunk.duration
            else:
                left.append(chunk)
        self._queue = left
        return pieces, language

    def _run(self, pieces: list[_Piece], language: str | None) -> None:
        gap_n = int(self.gap_s * SAMPLE_RATE)
        started = time.perf_counter()
        try:
            recs = self.recognizer.recognize([p.audio(gap_n) for p in pieces], language)
            if len(recs) != len(pieces):
                raise RuntimeError(f"{self.recognizer.name} answered {len(recs)} recognitions for {len(pieces)} pieces")
        except Exception as e:  # noqa: BLE001 - a failed batch is counted and dropped, never raised into ingest
            with self._cond:
                for p in pieces:
                    for chunk, _ in p.parts:
                        c = self._cam(chunk.camera_id)
                        c.asr_errors += 1
                        c.last_asr_error = f"{type(e).__name__}: {e}"
                        c.chunks_dropped += 1
                        c.seconds_dropped += chunk.duration
            return
        finally:
            self.busy_s += time.perf_counter() - started
            self.batches += 1
        out: list[TranscriptSegment] = []
        for piece, rec in zip(pieces, recs):
            for k, (chunk, offset) in enumerate(piece.parts):
                segs = self._segments(piece, k, chunk, offset, rec)
                out += segs
                self._done(chunk, rec, len(segs))
        if out:
            out.sort(key=lambda seg: (seg.t_start, seg.camera_id))  # pieces hold chunks in any order
            try:
                self.on_segments(out)
            except Exception as e:  # noqa: BLE001 - the consumer's failure is reported, the worker lives on
                with self._cond:
                    for s in out:
                        self._cam(s.camera_id).last_asr_error = f"on_segments failed: {type(e).__name__}: {e}"

    def _segments(self, piece: _Piece, k: int, chunk: SpeechChunk, offset: float,
                  rec: Recognition) -> list[TranscriptSegment]:
        lo = offset - (self.gap_s / 2 if k else float("inf"))
        hi = offset + chunk.duration + (self.gap_s / 2 if k + 1 < len(piece.parts) else float("inf"))
        words = [w for s in rec.segments for w in s.words if lo <= (w.start + w.end) / 2 < hi]
        if words:
            segs = words_to_segments(chunk, words, offset, rec.language, self.split_pause_s)
            return self._seam(chunk, segs)
        out = []
        for s in rec.segments:  # no word times (one chunk per piece): whole segments by their middle
            if s.words or not s.text.strip():
                continue
            a = chunk.t_start + min(max(s.start - offset, 0.0), chunk.duration)
            b = chunk.t_start + min(max(s.end - offset, 0.0), chunk.duration)
            if chunk.keep_from <= (a + b) / 2 < chunk.keep_until:
                out.append(TranscriptSegment(chunk.camera_id, a, max(a, b), s.text.strip(), rec.language,
                                             s.confidence))
        return out

    def _seam(self, chunk: SpeechChunk, segs: list[TranscriptSegment]) -> list[TranscriptSegment]:
        """At the cut between two chunks of one utterance, word times near the chunks' edges are
        rough: both copies of a word may land on their own side of the cut. The continuing
        chunk's first word is dropped when it repeats the previous chunk's last word and starts
        within ``SEAM_S`` of it (a real "no, no" across a cut is rarer than that error)."""
        with self._cond:
            c = self._cam(chunk.camera_id)
            last, c.last_word = c.last_word, None
            if segs:
                c.last_word = (chunk.seq, _norm(segs[-1].text.split()[-1]), segs[-1].t_end)
        if (not segs or last is None or last[0] != chunk.seq - 1 or chunk.keep_from <= chunk.t_start + 1e-9):
            return segs
        head = segs[0]
        first, *rest = head.text.split(" ", 1)
        if _norm(first) != last[1] or head.t_start - last[2] > SEAM_S:
            return segs
        if not rest:
            return segs[1:]
        return [replace(head, text=rest[0])] + segs[1:]

    def _done(self, chunk: SpeechChunk, rec: Recognition, n_segments: int) -> None:
        with self._cond:
            c = self._cam(chunk.camera_id)
            c.seconds_transcribed += chunk.duration
            c.segments += n_segments
            c.transcribed_until = max(c.transcribed_until or chunk.t_end, chunk.t_end)
            if self.language is None and self.recognizer.multilingual:
                if c.language is None and rec.language:
                    c.language, c.chunks_since_detect = rec.language, 0
                else:
                    c.chunks_since_detect += 1
                    if c.chunks_since_detect >= self.redetect_every:
                        c.language = None
