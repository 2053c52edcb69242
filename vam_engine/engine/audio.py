"""The engine's audio path (issue 21): each camera's speech transcribed beside its video, into the
store's transcripts (rows, full-text index, "speech" vectors), the present's recent transcript
and the monitors.

Nothing here runs unless ``audio.active`` (a model is configured and audio is enabled): the hub
(audio/hub.py: per-camera decode and VAD threads, one ASR thread for all cameras) is built at the
first call that needs it, never at construction, and never on the video path's threads except a
live camera's (which hands its demuxed audio packets over; their VAD runs there, a few ms per
second of speech).

Where audio comes from:
- files and URLs indexed with ``index_files``: their audio track is read on its own thread from
  a second opening of the source (``open_file``), on the video's axis, resuming after the
  camera's last stored segment; ``finish_file`` waits for it and records in the video's source
  row that its audio is done, so a re-run of a finished file transcribes nothing again, and a
  run killed after the video but before the audio finished transcribes the rest;
- live cameras: the reader demuxes the audio track from the same connection (``LiveAudio``);
- robots: ``push`` (any rate and layout), ``end`` when their stream ends.

Deletion. Segments still in flight when a range is deleted (queued for ASR, or being embedded)
would come back after it: each deletion leaves a tombstone, and a segment that overlaps a
deleted range and started before the camera's audio position at the deletion is dropped. A
tombstone lapses once its cameras' speech heard by then is transcribed (what comes later is
new speech). Storing a batch and a deletion's tombstone exclude each
other, so a segment is either stored before the deletion (and deleted) or dropped after it.
"""
from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from ..config import EngineConfig
from ..errors import VamError
from ..memory import Store
from ..numerics import finite_time

STATE_DONE = ("ended", "no_audio", "error")  # a file's audio is over (a re-run does it no more)
BEHIND_PENDING_S = 30.0  # speech waiting for ASR beyond this: the camera's audio is reported "behind"
MAX_TOMBSTONES = 64
CLOSE_DRAIN_S = 30.0  # closing transcribes the speech already heard for at most this long


@dataclass(frozen=True)
class _Tombstone:
    cameras: frozenset | None  # None: every camera
    t0: float
    t1: float  # inf: an open end
    heard: dict  # camera -> its audio position at the deletion: speech in flight started before it


def audio_summary(st, error_hint: str | None = None) -> dict:
    """An AudioStatus as a camera status shows it: state ("no_audio", "running", "error" with
    ``error``, "behind" with the seconds dropped or waiting, "ended"), with the counts behind it."""
    state = st.state
    if state in ("running", "pushed", "starting") and (st.seconds_dropped > 0 or st.pending_s > BEHIND_PENDING_S):
        state = "behind"
    elif state == "pushed":
        state = "running"
    return {"state": state, "error": st.error or st.last_asr_error or error_hint, "codec": st.codec,
            "seconds_in": round(st.seconds_in, 3), "seconds_speech": round(st.seconds_speech, 3),
            "pending_s": round(st.pending_s, 3), "seconds_dropped": round(st.seconds_dropped, 3),
            "segments": st.segments, "transcribed_until": st.transcribed_until, "asr_errors": st.asr_errors}


class EngineAudio:
    """``texts``: the engine's text embedder, built at first use (None: segments stored without
    vectors, found by words only); ``claim``: makes this engine the store's writer; ``working``:
    the present (its recent transcript); ``device``: the engine's."""

    def __init__(self, store: Store, config: EngineConfig, device: str, texts: Callable, claim: Callable[[], None],
                 working):
        self.cfg = config.audio
        self._store = store
        self._device = device
        self._texts = texts
        self._claim = claim
        self._working = working
        self._hub = None
        self._writer = None
        self._lock = threading.Lock()
        self._store_lock = threading.Lock()  # a batch's check and write vs a deletion's tombstone
        self._tombstones: deque[_Tombstone] = deque(maxlen=MAX_TOMBSTONES)
        self._expected: dict[str, int] = {}  # cameras whose file audio is being started: not settled
        self.start_error: str | None = None  # why the hub could not be built (its model did not load)
        self._closed = False

    @property
    def active(self) -> bool:
        return self.cfg.active

    @property
    def started(self) -> bool:
        return self._hub is not None

    def hub(self):
        """The audio hub (built, and the store claimed, at the first call)."""
        if not self.active:
            raise VamError("the audio path is off: set audio.model (a CTranslate2 Whisper directory, CLI "
                           "--audio-model DIR) to transcribe speech")
        with self._lock:
            if self._closed:
                raise VamError("the engine is closed")
            if self._hub is None:
                from ..audio import AudioHub
                from ..memory import TranscriptWriter

                self._claim()
                writer = TranscriptWriter(self._store.transcripts, self._texts())
                try:  # the recognizer puts audio.device over the engine's (device.section_device)
                    self._hub = AudioHub(self.cfg, self._on_segments, device=self._device)
                except Exception as e:  # a model that cannot load: every camera's status says so
                    self.start_error = f"the audio path cannot start: {type(e).__name__}: {e}"
                    raise
                self._writer, self.start_error = writer, None
            return self._hub

    # -- segments in -----------------------------------------------------------------------------
    def _on_segments(self, segments) -> None:
        """On the ASR thread: store a batch (minus what a deletion since took), then hand what
        was stored to the present and its listeners (the monitors)."""
        with self._store_lock:
            self._lapse_tombstones()  # (this batch is still counted in flight: its tombstones hold)
            segments = [s for s in segments if not self._deleted(s)]
            stored = self._writer(segments) if segments else []
        if not stored:
            return
        if self._working is not None:
            hub = self._hub
            by_cam: dict[str, list] = {}
            for seg in stored:
                by_cam.setdefault(seg.camera_id, []).append(seg)
            for cam, segs in by_cam.items():  # each camera's listeners on its own axis
                self._working.hear(segs, hub.heard_until(cam) if hub is not None else None)

    def _deleted(self, seg) -> bool:
        for ts in self._tombstones:
            heard = ts.heard.get(seg.camera_id)
            if heard is None or (ts.cameras is not None and seg.camera_id not in ts.cameras):
                continue
            if seg.t_end >= ts.t0 and seg.t_start <= ts.t1 and seg.t_start < heard:
                return True
        return False

    def _lapse_tombstones(self) -> None:
        """Drop the tombstones whose cameras' speech heard before the deletion is all transcribed."""
        hub = self._hub
        if hub is None:
            return
        for ts in list(self._tombstones):
            if all((hub.settled_until(c) if hub.settled_until(c) is not None else math.inf) >= h
                   for c, h in ts.heard.items()):
                self._tombstones.remove(ts)

    def forget(self, cameras, t0: float | None, t1: float | None) -> None:
        """A deletion of ``cameras`` (None: all) over [t0, t1] happened: segments of it still in
        flight are dropped when they arrive, and the present forgets its recent lines there."""
        if self._working is not None:
            self._working.forget_speech(None if cameras is None else set(cameras), t0, t1)
        hub = self._hub
        if hub is None:
            return
        heard = {}
        for c in (cameras if cameras is not None else hub.cameras()):
            h, settled = hub.heard_until(c), hub.settled_until(c)
            if h is not None and settled is not None and settled < h:  # speech of it still in flight
                heard[c] = h
        if not heard:
            return
        with self._store_lock:
            self._tombstones.append(_Tombstone(None if cameras is None else frozenset(cameras),
                                               -math.inf if t0 is None else float(t0),
                                               math.inf if t1 is None else float(t1), heard))

    # -- files -----------------------------------------------------------------------------------
    def expect(self, cameras) -> None:
        """These cameras' file audio is about to start (``open_file`` or ``unexpect`` ends it):
        meanwhile their speech is not settled (the writer holds their events)."""
        with self._lock:
            for c in cameras:
                self._expected[c] = self._expected.get(c, 0) + 1

    def unexpect(self, camera_id: str) -> None:
        with self._lock:
            n = self._expected.get(camera_id, 0) - 1
            if n > 0:
                self._expected[camera_id] = n
            else:
                self._expected.pop(camera_id, None)

    def open_file(self, camera_id: str, path: str, source_id: int, start_time_abs: float | None, *,
                  resume: bool = True) -> bool:
        """Start transcribing a file's (or URL's) audio beside its video, unless its source row
        says its audio is done; ``resume``: after the camera's last stored segment (a file; a
        stream restarts its clock). Returns whether it started."""
        if not self.active or self._store.sources.info(source_id).get("audio_done"):
            return False
        self.hub().open_source(camera_id, path, start_time_abs=start_time_abs,
                               resume_after=self._store.transcripts.progress(camera_id) if resume else None)
        return True

    def finish_file(self, camera_id: str, source_id: int, timeout: float | None = None) -> dict | None:
        """Wait for a file's audio (its reading, then ASR of what it said); record in its source
        row whether it is done. Returns the camera's audio summary (None: no audio path ran)."""
        hub = self._hub
        if hub is None or camera_id not in hub.cameras():
            return None
        t0 = time.monotonic()
        done = hub.wait_source(camera_id, timeout)
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - t0))
        done = done and hub.transcriber.flush(left)
        st = hub.status(camera_id)
        out = audio_summary(st)
        out["wall_s"] = round(time.monotonic() - t0, 3)
        if done and st.state in STATE_DONE:
            self._store.sources.update_info(source_id, audio_done=True, audio_state=st.state, audio_error=st.error)
        return out

    # -- pushed and live audio -------------------------------------------------------------------
    def push(self, camera_id: str, samples, sample_rate: int, t: float) -> None:
        t = finite_time(t, f"camera {camera_id!r}: push_audio's t")
        self.hub().push(camera_id, samples, sample_rate, t)

    def end(self, camera_id: str) -> bool:
        """The camera's audio ended: speech in progress goes to ASR. False: it had none."""
        hub = self._hub
        if hub is None or camera_id not in hub.cameras():
            return False
        hub.end(camera_id)
        return True

    def live(self, camera_id: str) -> "LiveAudio | None":
        """What a live camera hands its demuxed audio to (None when the audio path is off); the
        hub (and its model) is built at the camera's first connection, on the camera's thread."""
        return LiveAudio(self.hub, camera_id) if self.active else None

    # -- state -----------------------------------------------------------------------------------
    def summary(self, camera_id: str) -> dict | None:
        hub = self._hub
        if hub is None and self.start_error is not None:
            return {"state": "error", "error": self.start_error}
        st = hub.status(camera_id) if hub is not None else None
        return None if st is None else audio_summary(st)

    def statuses(self) -> dict[str, dict]:
        hub = self._hub
        return {} if hub is None else {c: audio_summary(s) for c, s in hub.statuses().items()}

    def settled(self, camera_id: str, t: float) -> bool:
        """Whether everything the camera said up to ``t`` is stored (or will never be): what
        the memory writer waits for before documenting an event that ends at ``t``."""
        if camera_id in self._expected:
            return False
        hub = self._hub
        if hub is None:
            return True
        until = hub.settled_until(camera_id)
        return until is None or until >= t

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every source has ended and all speech so far is stored; False on timeout."""
        hub = self._hub
        return True if hub is None else hub.flush(timeout)

    def close(self) -> None:
        """Stop every source; what was heard so far is transcribed and stored first (for at most
        CLOSE_DRAIN_S: a kill loses it likewise, and a file's run resumes after its last segment)."""
        with self._lock:
            self._closed = True
            hub = self._hub
        if hub is not None:
            hub.close(drain_s=CLOSE_DRAIN_S)
            self._hub = None


class LiveAudio:
    """A live camera's audio track, decoded by the camera's reader from its own connection
    (ingest/live.py's ``AudioTap``): each connection's track is a TrackDecoder; its samples,
    timed on the camera's axis by the reader, go to the hub (``hub()``: built at first use)."""

    def __init__(self, hub: Callable, camera_id: str):
        self.hub = hub
        self.camera_id = camera_id

    def decoder(self, stream):
        """A decoder for a connection's audio stream (None: the connection has none)."""
        from ..audio import TrackDecoder

        if stream is None:
            self.hub().set_state(self.camera_id, "no_audio")
            return None
        dec = TrackDecoder(stream)
        self.hub().set_state(self.camera_id, "running")
        return dec

    def samples(self, t: float, samples) -> None:
        self.hub().feed(self.camera_id, t, samples)

    def broken(self, reason: str) -> None:
        hub = self.hub()
        hub.end(self.camera_id)
        hub.set_state(self.camera_id, "error", reason)

    def ended(self) -> None:
        self.hub().end(self.camera_id)
