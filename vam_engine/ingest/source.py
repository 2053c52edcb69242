"""What the decoder bodies (PyAV, DALI, PyNvVideoCodec) share: telling URLs from files, the
checks on a local file, and ``DecoderBody``, the plumbing of the decoder contract."""
from __future__ import annotations

import math
import os
from typing import Any, Callable, Iterable, Iterator

from ..errors import SourceError
from .frame import DecodeStats, Frame, PresentFrame, StreamInfo, fit_rgb
from .sampler import NearestKeyframeSampler, TickSampler, sample_frames

# URL scheme -> the kind of source (live.py: how it connects and times its frames)
URL_SCHEMES = {"rtsp": "rtsp", "rtsps": "rtsp", "rtmp": "rtmp", "rtmps": "rtmp", "http": "http", "https": "http",
               "udp": "stream", "tcp": "stream", "srt": "stream"}
_URL_PREFIXES = tuple(f"{s}://" for s in URL_SCHEMES)


def is_url(path: str) -> bool:
    return str(path).lower().startswith(_URL_PREFIXES)


def check_local_file(path: str) -> None:
    if not os.path.exists(path):
        raise SourceError(path, "file not found")
    if os.path.isdir(path):
        raise SourceError(path, "is a directory, not a video file")
    if os.path.getsize(path) == 0:
        raise SourceError(path, "file is empty (0 bytes)")


COMMON_OPTIONS = frozenset({"fps", "keyframes_only", "start_time_abs", "resume_after"})


class DecoderBody:
    """Base of the decoder bodies. A body calls ``_setup`` first, sets ``info`` when it has opened
    its source, and iterates with ``_sample`` over its own decoded ``(t_rel, payload)`` stream.

    ``want_present(fps)`` (before iterating): the body also yields a ``PresentFrame`` for the
    first decoded frame at or after each tick of that rate, between its samples (``_show``);
    which frames it decodes for it is the body's business: PyAV decodes enough for that rate
    (see its module); the GPU bodies skip nothing for it and feed it from what they decode."""

    name = ""
    info: StreamInfo
    # Options of this body beyond COMMON_OPTIONS; ``open_decoder`` refuses an option a body
    # does not list (instead of dropping it) unless its value means "the decoder's choice".
    options: frozenset = frozenset()

    def _setup(self, path: str, camera_id: str, fps: float, keyframes_only: bool,
               resume_after: float | None) -> None:
        self.path = str(path)
        self.camera_id = camera_id
        self.keyframes_only = keyframes_only
        self.resume_after = resume_after
        self.stats = DecodeStats()
        self._sampler = NearestKeyframeSampler(fps) if keyframes_only else TickSampler(fps)
        self._present: TickSampler | None = None  # the present's sampler (want_present)

    def want_present(self, fps: float) -> None:
        """Also yield the present's frames at ``fps`` (``PresentFrame``, between the samples;
        the samples themselves do not change). Call before iterating."""
        if isinstance(fps, bool) or not (isinstance(fps, (int, float)) and math.isfinite(fps) and fps > 0):
            raise ValueError(f"{self.path}: present fps must be a positive number, got {fps!r}")
        self._present = TickSampler(float(fps))
        self._configure_present()

    def _configure_present(self) -> None:
        """Hook: a body that skips decoding work adapts it to the present's rate here."""

    def _note(self, msg: str) -> None:
        self.stats.errors.append(msg)

    def _bad_packet(self, msg: str) -> None:
        """Count a damaged or undecodable packet; the first five are noted."""
        self.stats.packets_bad += 1
        if self.stats.packets_bad <= 5:
            self._note(msg)

    def _sample(self, timed: Iterable[tuple[float | None, Any]], make: Callable[[float, Any], Frame],
                hold: Callable[[Any], Any] | None = None) -> Iterator[Frame | PresentFrame]:
        def sample(t, held):  # counted as it is made: PyAV's GOP skipping watches the count
            self.stats.sampled += 1
            return make(t, held)

        def show(t, held):
            self.stats.present += 1
            return self._show(t, held, make)

        return sample_frames(timed, self._sampler, keyframes_only=self.keyframes_only,
                             resume_after=self.resume_after, end_t=self.info.duration_s, make=sample, hold=hold,
                             present=self._present, show=show)

    def _show(self, t: float, held: Any, make: Callable[[float, Any], Frame]) -> PresentFrame:
        """The present's frame of a held payload. This default converts through the sample
        path (``make``, then the full frame's RGB strided down, on the device for GPU bodies);
        a body that can scale while converting overrides it."""
        f = make(t, held)
        return PresentFrame(self.camera_id, t, f.t_abs, lambda side: fit_rgb(f.decoded_rgb(), side))

    def _t_abs(self, t: float) -> float | None:
        return self.info.start_time_abs + t if self.info.start_time_abs is not None else None

    def _frame(self, t: float, pts: int | None, gray: Any, to_rgb: Callable[[], Any]) -> Frame:
        """One sample (``_sample`` counts it in ``stats.sampled``)."""
        return Frame(self.camera_id, t, self._t_abs(t), pts, gray, to_rgb)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
