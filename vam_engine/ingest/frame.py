"""What every decoder yields: a sampled frame with its PTS-derived time and lazy RGB; with
``present_fps`` set, also the present's frames (``PresentFrame``) between them."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass
class Frame:
    """One sampled frame of one camera.

    ``gray`` is the H x W uint8 luma plane (a numpy array from CPU decoders, a CUDA tensor from
    GPU decoders); gate statistics read only this. It may be given as a callable that makes it:
    it then runs at the first read, on the reader's thread (the gate thread), so a pushed frame
    is converted there and not on the caller's thread. ``rgb()`` converts to H x W x 3 uint8 on
    demand, so frames dropped by the gates are never converted.
    """

    camera_id: str
    t_rel: float  # seconds since the stream's first frame, from PTS
    t_abs: float | None  # unix seconds, when the caller or the container gives a start time
    pts: int | None  # raw presentation timestamp in the stream's time base
    _gray: Any = field(repr=False)  # the luma plane, or a callable returning it
    _to_rgb: Callable[[], np.ndarray] = field(repr=False)
    pose: Any = None  # ingest.poses.Pose: where the camera was (pushed with the frame, or its pose source)

    @property
    def gray(self) -> Any:
        g = self._gray
        if callable(g):
            g = self._gray = g()
        return g

    def rgb(self) -> np.ndarray:
        out = self.decoded_rgb()
        if hasattr(out, "cpu"):  # a torch tensor from a GPU decoder
            out = out.cpu().numpy()
        return np.ascontiguousarray(out, dtype=np.uint8)

    def decoded_rgb(self) -> Any:
        """The H x W x 3 uint8 RGB where the decoder made it, before ``rgb`` copies it to the
        host: a torch tensor on the GPU for the NVDEC and DALI GPU bodies, a numpy array for CPU
        bodies (the present shrinks it first and copies only the small frame; the device path,
        index/device_path.py, stacks these)."""
        return self._to_rgb()

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.gray.shape[0]), int(self.gray.shape[1])


@dataclass
class PresentFrame:
    """A decoded frame for the present (the working memory), taken at the present's own rate
    (the decoder's ``present_fps``) beside the index samples and independently of them: it
    never reaches the gates, the embedder or the store.

    ``rgb(max_side)`` converts it to H x W x 3 uint8 with both sides at most ``max_side``
    (bodies that can scale while converting do: PyAV through swscale); call it before asking
    the decoder for its next frame, as the decode worker does (a body may reuse the payload).
    """

    camera_id: str
    t_rel: float
    t_abs: float | None
    _to_rgb: Callable[[int], np.ndarray] = field(repr=False)

    def rgb(self, max_side: int) -> np.ndarray:
        return self._to_rgb(max_side)


def fit_rgb(out: Any, max_side: int) -> np.ndarray:
    """A body's RGB (numpy array or torch tensor) strided down to at most ``max_side`` per side
    and on the host: a GPU body's frame is strided on the device, so only the small copy
    crosses to the host."""
    k = max(1, math.ceil(max(int(out.shape[0]), int(out.shape[1])) / max_side))
    if k > 1:
        out = out[::k, ::k]
    if hasattr(out, "cpu"):
        out = out.contiguous().cpu().numpy()
    return np.ascontiguousarray(out, dtype=np.uint8)


@dataclass
class StreamInfo:
    """What a decoder learned about its source when it opened it."""

    path: str
    codec: str
    width: int
    height: int
    fps: float | None  # average frame rate, None when the container does not say
    duration_s: float | None
    start_time_abs: float | None  # unix seconds of t_rel == 0, when known
    keyframe_interval_s: float | None  # estimated from the first keyframes, when cheap to know


@dataclass
class DecodeStats:
    decoded: int = 0  # frames the codec produced
    sampled: int = 0  # frames handed on to the gates
    present: int = 0  # frames handed to the present (present_fps), beside the samples
    packets_bad: int = 0  # undecodable packets skipped
    skipped_packets: int = 0  # packets not decoded because no sample could come from them
    errors: list[str] = field(default_factory=list)  # human-readable notes on what was skipped
    # seconds its reader spent decoding (live cameras: packets to frames; files: the decode
    # worker's wait on the decoder): the pipeline's decode stage sums it (index/meter.py)
    busy_s: float = 0.0
