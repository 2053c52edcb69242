"""``AudioHub``: the audio path of every camera of an engine, behind one object.

Per camera: a source (a file or URL read on the camera's own thread, ``AudioReader``; or
audio pushed by the caller, or fed already decoded by a reader that demuxes it with the
video), a ``SpeechChunker`` (energy check, Silero VAD, chunks with overlap), and one shared
``Transcriber`` (ASR on its own thread, batched across cameras). Segments leave through
``on_segments`` on the transcriber's thread.

Threads: one per file/URL camera (decode, resample, VAD, chunking: a few % of a core while
someone speaks, well under 1% in silence), one for all pushed cameras (``push`` validates and
queues; resampling and VAD run there), one for ASR. ``push`` and ``feed`` never wait for ASR;
``push`` never waits for VAD either (its queue holds ``PUSH_QUEUE_S`` of audio per hub, the
oldest dropped beyond it, counted in the camera's ``seconds_dropped``). These threads run at a
lower CPU priority than the video path's (priority.py), and the CTranslate2 body by default in a
process of its own (isolated.py), so a core shared with the video gives the video the CPU first.
"""
from __future__ import annotations

import math
import queue
import threading
import time
from dataclasses import replace
from typing import Callable

import numpy as np

from ..errors import VamError
from .asr import SpeechRecognizer, make_recognizer
from .decode import AudioReader
from .priority import lower_thread_priority
from .push import PushResampler, to_mono_float
from .records import SAMPLE_RATE, AudioStatus, TranscriptSegment
from .transcriber import Transcriber
from .vad import SpeechChunker

PUSH_QUEUE_S = 60.0  # pushed audio (all cameras) waiting for the push thread, at most
FILE_BACKLOG_SHARE = 0.5  # a file read faster than real time waits while more than this share of max_backlog_s waits


class _Camera:
    """One camera's chunker and status; fed from one thread at a time (its lock)."""

    def __init__(self, camera_id: str, chunker: SpeechChunker, state: str):
        self.lock = threading.Lock()
        self.chunker = chunker
        self.status = AudioStatus(camera_id, state)
        self.reader: AudioReader | None = None
        self.resampler: PushResampler | None = None
        self.push_dropped_s = 0.0


class AudioHub:
    def __init__(self, cfg, on_segments: Callable[[list[TranscriptSegment]], None], *,
                 recognizer: SpeechRecognizer | None = None, device: str = "auto"):
        """``cfg``: an AudioConfig; ``recognizer``: a body (default: ``make_recognizer(cfg, device)``)."""
        self.cfg = cfg
        self.recognizer = recognizer if recognizer is not None else make_recognizer(cfg, device)
        self.transcriber = Transcriber(self.recognizer, on_segments, language=cfg.language,
                                       max_backlog_s=cfg.max_backlog_s, split_pause_s=cfg.split_pause_s)
        self._cams: dict[str, _Camera] = {}
        self._lock = threading.Lock()
        self._push_q: queue.Queue = queue.Queue()
        self._push_s = 0.0  # seconds queued for the push thread
        self._push_items = 0  # pushed blocks queued or being analysed (``_wait_push`` waits for 0)
        self._push_thread: threading.Thread | None = None
        self._closed = False

    # -- cameras -------------------------------------------------------------------------------
    def _chunker(self, camera_id: str) -> SpeechChunker:
        c = self.cfg
        return SpeechChunker(camera_id, threshold=c.vad_threshold, energy_floor=c.vad_energy_floor, chunk_s=c.chunk_s,
                             overlap_s=c.overlap_s, min_silence_s=c.min_silence_s, pad_s=c.speech_pad_s)

    def _camera(self, camera_id: str, state: str) -> _Camera:
        with self._lock:
            if self._closed:
                raise VamError("the audio hub is closed")
            cam = self._cams.get(camera_id)
            if cam is None:
                cam = self._cams[camera_id] = _Camera(camera_id, self._chunker(camera_id), state)
            return cam

    def open_source(self, camera_id: str, path: str, *, realtime: bool = False,
                    start_time_abs: float | None = None, resume_after: float | None = None) -> None:
        """Start reading the audio of a file or URL on the camera's own thread (decode.py says how
        its times are put on the video's axis). A source without audio ends as "no_audio", a
        broken track as "error": neither raises, neither touches the video. ``resume_after``: a
        resumed run starts where the camera's stored transcripts end
        (``store.transcripts.progress(camera_id)``)."""
        cam = self._camera(camera_id, "starting")
        if cam.reader is not None and cam.reader.alive:
            raise VamError(f"camera {camera_id!r} already has an audio source running")

        def on_end(state: str, cam=cam) -> None:
            self._end(cam)
            with cam.lock:
                cam.status.state = state
                cam.status.error = cam.reader.error if cam.reader is not None else None

        paced = not realtime and "://" not in str(path)  # a file: its reading waits for ASR, a stream cannot
        cam.reader = AudioReader(path, camera_id, lambda block, cam=cam: self._feed(cam, block.t, block.samples,
                                                                                   paced=paced),
                                 start_time_abs=start_time_abs, realtime=realtime, timeout_s=self.cfg.timeout_s,
                                 resume_after=resume_after, on_end=on_end)
        cam.reader.start()

    def _wait_for_room(self, cam: _Camera) -> None:
        """A file decodes far faster than ASR transcribes: its reader waits while the speech
        queued for ASR passes FILE_BACKLOG_SHARE of the backlog, so none of a file's speech is
        dropped and live cameras keep the rest of the room."""
        limit = self.cfg.max_backlog_s * FILE_BACKLOG_SHARE
        while self.transcriber.pending_s() > limit and not self._closed and cam.reader is not None \
                and not cam.reader.stopping:
            time.sleep(0.05)

    def feed(self, camera_id: str, t: float, samples: np.ndarray) -> None:
        """16 kHz mono float32 audio starting at camera-axis ``t``, from a caller that decodes it
        (a live camera demuxing audio beside its video: decode.TrackDecoder). Runs VAD on the
        caller's thread; never waits for ASR."""
        cam = self._camera(camera_id, "running")
        self._feed(cam, float(t), np.asarray(samples, np.float32).reshape(-1))

    def push(self, camera_id: str, samples, sample_rate: int, t: float) -> None:
        """Audio from a robot: any rate, (n,) or (n, channels), int16/int32/uint8/float, starting
        at camera-axis ``t``. Validated here (errors name the camera and the problem), converted
        and analysed on the push thread; returns at once."""
        x = to_mono_float(camera_id, samples, sample_rate)  # a private copy: the caller may reuse its buffer
        if x is samples:
            x = x.copy()
        cam = self._camera(camera_id, "pushed")
        if cam.resampler is None:
            cam.resampler = PushResampler(camera_id)
        seconds = len(x) / int(sample_rate)
        with self._lock:
            self._push_s += seconds
            self._push_items += 1
            self._push_q.put((cam, x, int(sample_rate), t, seconds))
            while self._push_s > PUSH_QUEUE_S:  # the push thread is far behind: drop the oldest audio
                try:
                    old = self._push_q.get_nowait()
                except queue.Empty:
                    break
                if old is None:
                    continue
                self._push_s -= old[4]
                self._push_items -= 1
                old[0].push_dropped_s += old[4]
            if self._push_thread is None:
                self._push_thread = threading.Thread(target=self._push_loop, name="vam-audio-push", daemon=True)
                self._push_thread.start()

    def end(self, camera_id: str) -> None:
        """The camera's audio ended (or paused): speech in progress goes to ASR now."""
        cam = self._cams.get(camera_id)
        if cam is not None:
            if cam.resampler is not None:
                self._wait_push()
            self._end(cam)

    def set_state(self, camera_id: str, state: str, error: str | None = None) -> None:
        """What a caller that decodes the camera's audio itself (``feed``) knows of its track:
        "no_audio" (the connection carries none), "error" (``error`` says why), "running"."""
        cam = self._camera(camera_id, state)
        with cam.lock:
            cam.status.state, cam.status.error = state, error

    def remove(self, camera_id: str) -> None:
        with self._lock:
            cam = self._cams.pop(camera_id, None)
        if cam is not None and cam.reader is not None:
            cam.reader.stop()
        self.transcriber.forget(camera_id)

    # -- feeding -------------------------------------------------------------------------------
    def _feed(self, cam: _Camera, t: float, samples: np.ndarray, paced: bool = False) -> None:
        if paced:
            self._wait_for_room(cam)
        with cam.lock:
            chunks = cam.chunker.feed(t, samples)
            st = cam.status
            st.seconds_in += len(samples) / SAMPLE_RATE
            st.last_t = t + len(samples) / SAMPLE_RATE
            if st.state == "starting":
                st.state = "running"
        for c in chunks:
            self.transcriber.submit(c)

    def _end(self, cam: _Camera) -> None:
        with cam.lock:
            if cam.resampler is not None:
                for t, x in cam.resampler.flush():
                    for c in cam.chunker.feed(t, x):
                        self.transcriber.submit(c)
            chunks = cam.chunker.end()
        for c in chunks:
            self.transcriber.submit(c)

    def _push_loop(self) -> None:
        lower_thread_priority()
        while True:
            item = self._push_q.get()
            if item is None:
                return
            cam, x, rate, t, seconds = item
            with self._lock:
                self._push_s -= seconds
            try:
                with cam.lock:
                    pieces = cam.resampler.push(x, rate, t)
                for t0, y in pieces:
                    self._feed(cam, t0, y)
            except Exception as e:  # noqa: BLE001 - one camera's bad audio never stops the others
                with cam.lock:
                    cam.status.error = f"pushed audio: {type(e).__name__}: {e}"
            finally:
                with self._lock:
                    self._push_items -= 1

    def _wait_push(self, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if self._push_items == 0:
                    return
            time.sleep(0.005)

    # -- state ---------------------------------------------------------------------------------
    def cameras(self) -> list[str]:
        with self._lock:
            return list(self._cams)

    def status(self, camera_id: str) -> AudioStatus | None:
        cam = self._cams.get(camera_id)
        if cam is None:
            return None
        with cam.lock:
            st = replace(cam.status)
            ch = cam.chunker
            st.seconds_quiet, st.seconds_speech, st.chunks = ch.detector.seconds_quiet, ch.seconds_speech, ch.chunks
            dec = cam.reader.decoder if cam.reader is not None else None
            if dec is not None:
                st.codec, st.input_rate, st.input_channels = dec.codec, dec.input_rate, dec.input_channels
                st.packets_bad = dec.packets_bad
            push_dropped = cam.push_dropped_s
        c = self.transcriber.counters(camera_id)
        st.pending_s, st.chunks_dropped = max(c.pending_s, 0.0), c.chunks_dropped
        st.seconds_dropped = c.seconds_dropped + push_dropped
        st.seconds_transcribed, st.segments, st.transcribed_until = c.seconds_transcribed, c.segments, c.transcribed_until
        st.asr_errors, st.last_asr_error = c.asr_errors, c.last_asr_error
        return st

    def heard_until(self, camera_id: str) -> float | None:
        """Camera-axis end of the latest audio the camera delivered (None: none)."""
        cam = self._cams.get(camera_id)
        if cam is None:
            return None
        with cam.lock:
            return cam.status.last_t

    def settled_until(self, camera_id: str) -> float | None:
        """Camera-axis time up to which everything the camera said is transcribed (or dropped):
        a reader that wants the speech before t waits until this passes t. A file or URL still
        being read is settled up to what the VAD has judged; a camera fed or pushed (or whose
        source ended) is settled up to its speech in progress or waiting for ASR, and ``inf``
        when none is (it has said nothing that is not stored). None: a camera the hub never had."""
        cam = self._cams.get(camera_id)
        if cam is None:
            return None
        with cam.lock:
            ch = cam.chunker
            reading = cam.reader is not None and cam.reader.alive
            open_at, scored = ch.open_since(), ch.scored_until()
        waits = [b for b in (open_at, self.transcriber.earliest_pending(camera_id)) if b is not None]
        if reading:
            waits.append(scored if scored is not None else -math.inf)
        return min(waits) if waits else math.inf

    def statuses(self) -> dict[str, AudioStatus]:
        return {c: s for c in self.cameras() if (s := self.status(c)) is not None}

    def wait_sources(self, timeout: float | None = None) -> bool:
        """Wait until every file/URL source has ended (a live one ends when removed)."""
        end = None if timeout is None else time.monotonic() + timeout
        for cam in list(self._cams.values()):
            if cam.reader is not None:
                left = None if end is None else max(0.0, end - time.monotonic())
                if not cam.reader.join(left):
                    return False
        return True

    def wait_source(self, camera_id: str, timeout: float | None = None) -> bool:
        """Wait until the camera's file/URL source has ended (True at once without one)."""
        cam = self._cams.get(camera_id)
        return cam is None or cam.reader is None or cam.reader.join(timeout)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until the sources have ended, pushed audio is analysed and all speech so far is
        transcribed (or dropped). Pushed cameras' speech in progress waits for ``end``."""
        end = None if timeout is None else time.monotonic() + timeout
        if not self.wait_sources(timeout):
            return False
        self._wait_push(30.0 if end is None else max(0.0, end - time.monotonic()))
        return self.transcriber.flush(None if end is None else max(0.0, end - time.monotonic()))

    def close(self, drain_s: float = 0.0) -> None:
        """Stop every source; with ``drain_s``, speech heard so far (in progress included) is
        transcribed first, for at most that long."""
        with self._lock:
            self._closed = True
            cams = list(self._cams.values())
        for cam in cams:
            if cam.reader is not None:
                cam.reader.stop()
        for cam in cams:
            if cam.reader is not None:
                cam.reader.join(5.0)
        if self._push_thread is not None:
            if drain_s > 0:
                self._wait_push(drain_s)
            self._push_q.put(None)
            self._push_thread.join(5.0)
        if drain_s > 0:
            for cam in cams:
                self._end(cam)
            self.transcriber.flush(drain_s)
        self.transcriber.close()
        self.recognizer.close()
