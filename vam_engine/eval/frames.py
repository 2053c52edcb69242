"""Frames of an evaluation video, decoded from its files with PyAV: the stream at the
protocol's rate (each frame once, never rewound), and frames at given times for the
uniform baseline."""
from __future__ import annotations

import math

import numpy as np

from .records import EvalVideo

_EPS = 1e-6


def _fit(rgb: np.ndarray, max_side: int | None) -> np.ndarray:
    h, w = rgb.shape[:2]
    if max_side is None or max(h, w) <= max_side:
        return rgb
    import cv2

    s = max_side / max(h, w)
    nh, nw = max(2, int(round(h * s)) // 2 * 2), max(2, int(round(w * s)) // 2 * 2)
    return cv2.resize(rgb, (nw, nh), interpolation=cv2.INTER_AREA)


def _decoded(path: str):
    """(t seconds from the file's start, av frame) in display order."""
    import av

    with av.open(path) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        start = float(s.start_time * s.time_base) if s.start_time is not None else 0.0
        for f in c.decode(s):
            if f.pts is None:
                continue
            yield float(f.pts * s.time_base) - start, f


def stream_frames(video: EvalVideo, fps: float, max_side: int | None = None):
    """(t on the stream's axis, H x W x 3 RGB) at ticks k / fps: for each tick the first frame
    at or after it, as a camera sampled at that rate would deliver; segments in order, times
    strictly increasing; frames as decoded, or shrunk to ``max_side``."""
    if not (fps > 0 and math.isfinite(fps)):
        raise ValueError(f"the protocol's frame rate must be positive, got {fps!r}")
    interval = 1.0 / fps
    last = -math.inf
    for seg in video.segments:
        next_tick = math.ceil((max(seg.offset_s, last + _EPS)) / interval - _EPS) * interval
        for t_file, frame in _decoded(seg.path):
            t = seg.offset_s + t_file
            if t + _EPS < next_tick or t <= last:
                continue
            next_tick = (math.floor(t / interval + _EPS) + 1) * interval
            last = t
            yield t, _fit(frame.to_ndarray(format="rgb24"), max_side)


def frames_at(video: EvalVideo, times, max_side: int | None = None) -> list:
    """(t, RGB) of the last frame at or before each of ``times`` (video axis; sorted), decoded
    with seeks, so a long video is not held in memory for the uniform baseline."""
    import av

    out = []
    for seg_i, seg in enumerate(video.segments):
        nxt = video.segments[seg_i + 1].offset_s if seg_i + 1 < len(video.segments) else math.inf
        want = [t for t in times if seg.offset_s <= t < nxt]
        if not want:
            continue
        with av.open(seg.path) as c:
            s = c.streams.video[0]
            start = float(s.start_time * s.time_base) if s.start_time is not None else 0.0
            for t in want:
                local = t - seg.offset_s
                c.seek(int((local + start) / s.time_base), stream=s, backward=True, any_frame=False)
                best = None
                for f in c.decode(s):
                    if f.pts is None:
                        continue
                    ft = float(f.pts * s.time_base) - start
                    if ft > local + _EPS:
                        break
                    best = (seg.offset_s + ft, f)
                if best is not None:
                    out.append((best[0], _fit(best[1].to_ndarray(format="rgb24"), max_side)))
    return out


def video_duration(path) -> float:
    """A video file's duration in seconds (the container's, else its video stream's)."""
    import av

    try:
        with av.open(str(path)) as c:
            if c.duration is not None:
                return c.duration / 1_000_000
            s = c.streams.video[0]
            if s.duration is not None:
                return float(s.duration * s.time_base)
    except (av.error.FFmpegError, IndexError) as e:
        raise ValueError(f"{path}: cannot read the video's duration: {e}") from None
    raise ValueError(f"{path}: the video does not say how long it is")
