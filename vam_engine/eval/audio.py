"""A stream's sound for the replay: each segment's audio track decoded (16 kHz mono, on the
video's axis, vam_engine.audio.read_audio) and pushed into the engine camera through
``Engine.push_audio`` in step with the frames, so questions are asked, and monitors judged, with
what the engine has heard up to the stream clock. A segment without audio (or with a broken
track) adds nothing and is noted; the stream plays on."""
from __future__ import annotations

import math

from ..audio import AudioTrackError, NoAudioTrack, read_audio


def engine_hears(engine) -> bool:
    """Whether the engine transcribes audio (a model is configured and audio enabled)."""
    cfg = getattr(engine, "config", None)
    return cfg is not None and cfg.audio.active


class StreamAudio:
    """``until(t)`` pushes the stream's audio that starts before ``t``; ``notes`` says what a
    segment lacked."""

    def __init__(self, engine, camera: str, video):
        self.engine, self.camera = engine, camera
        self.notes: list[str] = []
        self.seconds = 0.0
        self._blocks = self._read(video)
        self._next = None  # a block read but not yet due
        self._done = False

    def _read(self, video):
        for seg in video.segments:
            try:
                for b in read_audio(seg.path, self.camera):
                    yield seg.offset_s + b.t, b.samples
            except NoAudioTrack:
                self.notes.append(f"{seg.path}: no audio track")
            except AudioTrackError as e:
                self.notes.append(f"{seg.path}: {e}")

    def until(self, t: float) -> int:
        """Push every block starting before ``t``; returns how many."""
        n = 0
        while not self._done:
            if self._next is None:
                self._next = next(self._blocks, None)
                if self._next is None:
                    self._done = True
                    break
            t0, x = self._next
            if t0 >= t:
                break
            self.engine.push_audio(self.camera, x, 16_000, t0)
            self.seconds += len(x) / 16_000
            self._next = None
            n += 1
        return n

    def finish(self) -> None:
        self.until(math.inf)
