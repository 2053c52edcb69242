"""What the decoder bodies (PyAV, DALI, PyNvVideoCodec) share: telling URLs from files, the
checks on a local file, and ``DecoderBody``, the plumbing of the decoder contract."""
from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Iterator

from ..errors import SourceError
from .frame import DecodeStats, Frame, StreamInfo
from .sampler import NearestKeyframeSampler, TickSampler, sample_frames

_URL_SCHEMES = ("rtsp://", "rtsps://", "rtmp://", "http://", "https://", "udp://", "tcp://", "srt://")


def is_url(path: str) -> bool:
    return str(path).lower().startswith(_URL_SCHEMES)


def check_local_file(path: str) -> None:
    if not os.path.exists(path):
        raise SourceError(path, "file not found")
    if os.path.isdir(path):
        raise SourceError(path, "is a directory, not a video file")
    if os.path.getsize(path) == 0:
        raise SourceError(path, "file is empty (0 bytes)")


COMMON_OPTIONS = frozenset({"fps", "keyframes_only", "start_time_abs", "resume_after", "device_id"})


class DecoderBody:
    """Base of the decoder bodies. A body calls ``_setup`` first, sets ``info`` when it has opened
    its source, and iterates with ``_sample`` over its own decoded ``(t_rel, payload)`` stream."""

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

    def _note(self, msg: str) -> None:
        self.stats.errors.append(msg)

    def _bad_packet(self, msg: str) -> None:
        """Count a damaged or undecodable packet; the first five are noted."""
        self.stats.packets_bad += 1
        if self.stats.packets_bad <= 5:
            self._note(msg)

    def _sample(self, timed: Iterable[tuple[float | None, Any]], make: Callable[[float, Any], Frame],
                hold: Callable[[Any], Any] | None = None) -> Iterator[Frame]:
        return sample_frames(timed, self._sampler, keyframes_only=self.keyframes_only,
                             resume_after=self.resume_after, end_t=self.info.duration_s, make=make, hold=hold)

    def _frame(self, t: float, pts: int | None, gray: Any, to_rgb: Callable[[], Any]) -> Frame:
        """One sample, counted in ``stats.sampled`` (PyAV's GOP skipping watches that count)."""
        t_abs = self.info.start_time_abs + t if self.info.start_time_abs is not None else None
        self.stats.sampled += 1
        return Frame(self.camera_id, t, t_abs, pts, gray, to_rgb)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
