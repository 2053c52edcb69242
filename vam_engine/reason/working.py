"""Working memory of the present (OASIS 3.1): per camera, a short window (8 s at 2 fps) and a
medium buffer (32 s at 1 fps) of recent frames kept from ingest. (The QA history lives in the
store: memory/qa.py, read through the view.)

The ring buffers hold what ingest saw: the pushed frames (``Engine.push`` feeds every pushed
frame), and for files the frames that passed the gates (the sampler's rate and the blur /
change gates come first). So with a base sampling rate below 2 fps, or a scene the gates thin
out, the short window is sparser than 2 fps. They live in memory only: after a restart they are
empty and the two-phase answerer reads the same spans from the store instead.
"""
from __future__ import annotations

import math
import threading
from collections import deque

import numpy as np

# Frames that arrive this close to the rate's interval count as on time (float time stamps:
# 0.1 * 5 is not exactly 0.5).
_RATE_SLACK = 1e-6


class _Ring:
    """Frames of one camera at one rate over one span: (t, array), oldest first."""

    def __init__(self, span_s: float, fps: float):
        self.span_s = span_s
        self.interval = 1.0 / fps
        self.frames: deque = deque()
        self.last_kept = -math.inf   # time of the newest kept frame
        self.evicted_t = -math.inf   # time of the newest frame dropped for age

    def wants(self, t: float) -> bool:
        return t - self.last_kept >= self.interval - _RATE_SLACK

    def add(self, t: float, arr: np.ndarray) -> None:
        self.frames.append((t, arr))
        self.last_kept = t
        # keep (newest - span, newest]: 8 s at 2 fps is 16 frames
        while self.frames and self.frames[0][0] <= t - self.span_s:
            self.evicted_t = self.frames.popleft()[0]

    def window(self, now: float) -> list:
        return [(a, t) for t, a in self.frames if now - self.span_s < t <= now]


def _strided_copy(rgb: np.ndarray, k: int) -> np.ndarray:
    """A C-contiguous copy of ``rgb[::k, ::k]`` (never a view of the caller's buffer). Pixels
    of a channel-contiguous array are copied as one 3-byte item each, about 4x faster than
    numpy's per-byte strided copy."""
    if rgb.strides[2] != 1:
        return np.array(rgb[::k, ::k], copy=True, order="C")
    px = rgb.view(np.dtype((np.void, 3)))[..., 0]  # H x W of 3-byte pixels, same memory
    out = np.array(px[::k, ::k], copy=True, order="C")
    return out.view(np.uint8).reshape(out.shape[0], out.shape[1], 3)


class WorkingMemory:
    """Per camera ring buffers of recent frames, fed by ``observe`` from ingest threads."""

    def __init__(self, short_s: float = 8.0, short_fps: float = 2.0, medium_s: float = 32.0,
                 medium_fps: float = 1.0, max_side: int = 448):
        for name, v in (("short_s", short_s), ("short_fps", short_fps), ("medium_s", medium_s),
                        ("medium_fps", medium_fps)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"WorkingMemory: {name} must be a positive number, got {v!r}")
        if not isinstance(max_side, int) or max_side < 1:
            raise ValueError(f"WorkingMemory: max_side must be a positive int, got {max_side!r}")
        self.short_s, self.short_fps = float(short_s), float(short_fps)
        self.medium_s, self.medium_fps = float(medium_s), float(medium_fps)
        self.max_side = max_side
        self._cams: dict[str, tuple[_Ring, _Ring]] = {}  # camera -> (short, medium)
        self._lock = threading.Lock()  # observe runs on ingest threads, window on question threads
        self._listeners: list = []  # fn(camera_id, t) after each kept frame (the monitor worker)

    def add_listener(self, fn) -> None:
        """Call ``fn(camera_id, t)`` on the feeding thread after each frame a buffer keeps; it must
        be quick (the monitor worker only decides whether a check is due)."""
        with self._lock:
            self._listeners = [*self._listeners, fn]

    def remove_listener(self, fn) -> None:
        with self._lock:
            self._listeners = [f for f in self._listeners if f != fn]

    def observe(self, camera_id: str, t: float, rgb: np.ndarray) -> None:
        """Offer one frame (H x W x 3 uint8) seen at time ``t`` (the camera's axis). Kept by a
        buffer only if it comes at least 1/fps after that buffer's last kept frame; stored
        downscaled by integer striding to at most ``max_side`` and copied (callers reuse their
        buffers). A frame at or before the buffer's newest is dropped: two feeders may offer the
        same frames late (``Engine.push`` offers every pushed frame, the index pipeline the
        gated ones, possibly far behind under backpressure), and restarting on a backward jump
        would make them thrash. A source on a new clock calls ``reset`` first."""
        if not (isinstance(rgb, np.ndarray) and rgb.ndim == 3 and rgb.shape[2] == 3 and rgb.dtype == np.uint8):
            got = f"{rgb.dtype} array of shape {rgb.shape}" if isinstance(rgb, np.ndarray) else type(rgb).__name__
            raise ValueError(f"WorkingMemory.observe({camera_id!r}): expected an H x W x 3 uint8 array, got {got}")
        t = float(t)
        if not math.isfinite(t):
            raise ValueError(f"WorkingMemory.observe({camera_id!r}): time must be finite, got {t}")
        with self._lock:
            rings = self._cams.get(camera_id)
            if rings is None:
                rings = (_Ring(self.short_s, self.short_fps), _Ring(self.medium_s, self.medium_fps))
                self._cams[camera_id] = rings
            takers = [r for r in rings if r.wants(t)]
            if not takers:
                return  # the common case at high frame rates: nothing to copy
            small = _strided_copy(rgb, max(1, math.ceil(max(rgb.shape[0], rgb.shape[1]) / self.max_side)))
            small.flags.writeable = False  # shared by both buffers and handed to readers
            for r in takers:
                r.add(t, small)
            listeners = self._listeners
        for fn in listeners:
            fn(camera_id, t)

    def reset(self, camera_id: str) -> None:
        """Forget a camera's frames (a new source whose clock restarts, a deleted camera)."""
        with self._lock:
            self._cams.pop(camera_id, None)

    def window(self, camera_id: str, now: float) -> tuple[list, list]:
        """(short, medium): lists of (array, t), oldest first, with now - span < t <= now (never
        a frame after ``now``). The arrays are read-only and shared: do not modify them."""
        with self._lock:
            rings = self._cams.get(camera_id)
            if rings is None:
                return [], []
            return rings[0].window(now), rings[1].window(now)

    def covers(self, camera_id: str, now: float) -> bool:
        """Whether the buffers hold everything ingest kept of the medium span before ``now``:
        some frame at or before ``now``, and no frame of (now - medium_s, now] dropped for age.
        False after a restart (empty) or for a ``now`` well before the newest frame."""
        with self._lock:
            rings = self._cams.get(camera_id)
            if rings is None:
                return False
            short, medium = rings
            has = any(t <= now for t, _ in medium.frames) or any(t <= now for t, _ in short.frames)
            return has and medium.evicted_t <= now - self.medium_s and short.evicted_t <= now - self.short_s

    def latest(self, camera_id: str) -> float | None:
        """Time of the newest frame kept for the camera (None: none)."""
        with self._lock:
            rings = self._cams.get(camera_id)
            if rings is None:
                return None
            t = max(rings[0].last_kept, rings[1].last_kept)
            return t if math.isfinite(t) else None

    def cameras(self) -> list[str]:
        with self._lock:
            return sorted(self._cams)

