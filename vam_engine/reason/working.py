"""Working memory of the present (OASIS 3.1): per camera, a short window (8 s at 2 fps) and a
medium buffer (32 s at 1 fps) of recent frames kept from ingest, and the transcript of the last
``medium_s`` seconds of speech beside them (``hear``: fed with each batch of segments as it is
stored; read by the two-phase coarse prompt and the monitors). (The QA history lives in the
store: memory/qa.py, read through the view.)

What feeds it (``observe``):
- pushed frames: ``Engine.push`` offers every pushed frame (numpy or CUDA tensor), before and
  apart from sampling;
- files and URLs, when the present is wanted (the engine has a model: ``Engine._pipe`` gives
  the pipeline ``present_fps`` = the short window's rate): the decoder's own present sampler
  at that rate, from decode, beside the index's samples and independently of the sampling
  rate and the gates (``PresentFrame``: ingest/frame.py; the decode worker in pipeline.py).
  Those frames are scaled to ``max_side`` as they are converted, on the decode thread, and
  never go through the gates, the embedder or the store;
- files and URLs without a model: the frames that passed the index sampling and the gates
  (index/present.py), as nothing reads the present then and no extra frame is decoded for it.
Each buffer keeps the first frame offered in each 1/fps-second cell of its camera's axis
(cells k/fps .. (k+1)/fps, the decoders' tick grid), for its last span*fps cells, so a feed
at or above its rate fills it exactly: 16 frames for the short window, 32 for the medium one.
The buffers live in memory only: after a restart they are empty and the two-phase answerer
reads the same spans from the store instead.
"""
from __future__ import annotations

import math
import sys
import threading
from collections import deque

import numpy as np

from ..ingest import fit_rgb
from ..native import load
from ..numerics import finite_time

# Frames that arrive this close to a cell's start count as in it (float time stamps: 0.1 * 5
# is not exactly 0.5).
_RATE_SLACK = 1e-6
DEFAULT_SIDE = 448  # the present's frames' long side when the config names no model image side
SPEECH_LINES = 64  # recent transcript segments kept per camera at most
# Frames the buffers dropped for age, kept per camera to be filled again: a fresh 720p
# present frame (307 KB) faults in its pages on the caller's thread (Engine.push), about a
# third of that call's time; a reused one does not.
_SPARES = 4
_FREE_REFS = 2  # a list's entry and getrefcount's own argument: nothing else holds the array


def present_side(llm_cfg) -> int:
    """The long side the present's frames are kept at: the model's image side when the config
    sets one (``llm.max_image_side``, explicitly), else DEFAULT_SIDE (a VLM's typical input;
    the config's default 1280 is a cap for any image sent, not the model's input size)."""
    if llm_cfg is not None and "max_image_side" in llm_cfg.model_fields_set:
        return int(llm_cfg.max_image_side)
    return DEFAULT_SIDE


class _Ring:
    """Frames of one camera at one rate over one span: (t, cell, array), oldest first."""

    def __init__(self, span_s: float, fps: float):
        self.fps = fps
        self.cells = max(1, round(span_s * fps))  # 8 s at 2 fps: 16
        self.frames: deque = deque()
        self.last_kept = -math.inf   # time of the newest kept frame
        self.last_cell: int | None = None
        self.evicted_cell: float = -math.inf  # cell of the newest frame dropped for age

    def cell(self, t: float) -> int:
        return math.floor(t * self.fps + _RATE_SLACK)

    def wants(self, t: float) -> bool:
        return self.last_cell is None or self.cell(t) > self.last_cell

    def add(self, t: float, arr: np.ndarray) -> list:
        """Keep ``arr``; returns the frames dropped for age."""
        c = self.cell(t)
        self.frames.append((t, c, arr))
        self.last_kept, self.last_cell = t, c
        evicted = []
        while self.frames and self.frames[0][1] <= c - self.cells:  # keep the newest `cells` cells
            _, self.evicted_cell, old = self.frames.popleft()
            evicted.append(old)
        return evicted

    def window(self, now: float) -> list:
        first = self.cell(now) - self.cells  # cells (first, cell(now)]
        return [(a, t) for t, c, a in self.frames if c > first and t <= now]

    def covers(self, now: float) -> bool:
        """No frame of the span before ``now`` was dropped for age."""
        return self.evicted_cell <= self.cell(now) - self.cells


_U8 = np.dtype(np.uint8)


def _strided_copy(rgb: np.ndarray, k: int, out: np.ndarray | None = None) -> np.ndarray:
    """A C-contiguous copy of ``rgb[::k, ::k]`` (never a view of the caller's buffer), into
    ``out`` when given, by the native op that keeps the interpreter lock: ``Engine.push`` runs
    this on a camera loop's thread, where numpy's copies (which release it) let pipeline threads
    make the caller wait for milliseconds; it is also 3-5x faster than numpy's per-channel
    strided copies."""
    return load().strided_copy(rgb, k, out)


def _spare(spares: list, shape: tuple, k: int) -> np.ndarray | None:
    """A spare frame (dropped for age, held by nothing) of ``rgb[::k, ::k]``'s shape, made
    writeable to be filled again; None when there is none."""
    want = ((int(shape[0]) + k - 1) // k, (int(shape[1]) + k - 1) // k, 3)
    for i in range(len(spares)):
        if spares[i].shape == want:
            out = spares.pop(i)
            out.flags.writeable = True
            return out
    return None


class WorkingMemory:
    """Per camera ring buffers of recent frames, fed by ``observe`` from ingest threads."""

    def __init__(self, short_s: float = 8.0, short_fps: float = 2.0, medium_s: float = 32.0,
                 medium_fps: float = 1.0, max_side: int = DEFAULT_SIDE):
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
        self._spares: dict[str, list[np.ndarray]] = {}  # camera -> dropped frames nothing holds (_SPARES)
        self._lock = threading.Lock()  # observe runs on ingest threads, window on question threads
        self._listeners: list = []  # fn(camera_id, t) after each kept frame (the monitor worker)
        self._said: dict[str, deque] = {}  # camera -> its recent transcript segments, oldest first
        self._speech_listeners: list = []  # fn(camera_id, segments, now) after each heard batch

    def add_listener(self, fn) -> None:
        """Call ``fn(camera_id, t)`` on the feeding thread after each frame a buffer keeps; it must
        be quick (the monitor worker only decides whether a check is due)."""
        with self._lock:
            self._listeners = [*self._listeners, fn]

    def remove_listener(self, fn) -> None:
        with self._lock:
            self._listeners = [f for f in self._listeners if f != fn]

    def wants(self, camera_id: str, t: float) -> bool:
        """Whether ``observe`` could keep a frame of this camera at time ``t`` (a float): False
        for most frames of a fast feed, decided without the lock and without looking at the
        frame (``Engine.push`` asks first: it runs on a camera loop's thread for every frame).
        A buffer's last cell only grows, so a False read now stays true."""
        rings = self._cams.get(camera_id)
        if rings is None:
            return True
        short, medium = rings
        return (short.last_cell is None or medium.last_cell is None
                or math.floor(t * short.fps + _RATE_SLACK) > short.last_cell
                or math.floor(t * medium.fps + _RATE_SLACK) > medium.last_cell)

    def observe(self, camera_id: str, t: float, rgb: np.ndarray) -> None:
        """Offer one frame (H x W x 3 uint8) seen at time ``t`` (the camera's axis). Kept by a
        buffer only if it is the first in its 1/fps cell (module docstring); stored downscaled
        by integer striding to at most ``max_side`` (a decoded frame comes already fitted) and
        copied (callers reuse their buffers). A frame in or before the newest kept frame's cell
        is dropped: two feeders may offer the same frames late (``Engine.push`` offers every
        pushed frame, the index pipeline the gated ones, possibly far behind under
        backpressure), and restarting on a backward jump would make them thrash. A source on a
        new clock calls ``reset`` first."""
        # numpy first, by C-level reads only: Engine.push offers every pushed frame, and
        # str(dtype) alone (numpy's Python-level __str__) costs ~100 us with cold caches
        tensor = type(rgb) is not np.ndarray and hasattr(rgb, "cpu") and hasattr(rgb, "device")  # strided on its device
        if not (isinstance(rgb, np.ndarray) or tensor) or rgb.ndim != 3 or rgb.shape[2] != 3 or (
                (rgb.dtype != _U8) if not tensor else str(rgb.dtype) != "torch.uint8"):
            got = (f"{rgb.dtype} array of shape {tuple(rgb.shape)}" if isinstance(rgb, np.ndarray) or tensor
                   else type(rgb).__name__)
            raise ValueError(f"WorkingMemory.observe({camera_id!r}): expected an H x W x 3 uint8 array, got {got}")
        t = finite_time(t, f"WorkingMemory.observe({camera_id!r}): t")
        if not self.wants(camera_id, t):
            return
        with self._lock:
            rings = self._cams.get(camera_id)
            if rings is None:
                rings = (_Ring(self.short_s, self.short_fps), _Ring(self.medium_s, self.medium_fps))
                self._cams[camera_id] = rings
            takers = [r for r in rings if r.wants(t)]
            if not takers:
                return  # the common case at high frame rates: nothing to copy
            k = max(1, math.ceil(max(int(rgb.shape[0]), int(rgb.shape[1])) / self.max_side))
            spares = self._spares.setdefault(camera_id, [])
            small = fit_rgb(rgb, self.max_side) if tensor else _strided_copy(rgb, k, _spare(spares, rgb.shape, k))
            small.flags.writeable = False  # shared by both buffers and handed to readers
            evicted = []
            for r in takers:
                evicted += r.add(t, small)
            for i in range(len(evicted)):  # by index: a loop variable would hold a reference
                if type(evicted[i]) is np.ndarray and sys.getrefcount(evicted[i]) <= _FREE_REFS:
                    spares.append(evicted[i])  # in neither buffer and no reader's hands
            del evicted, spares[:-_SPARES]
            listeners = self._listeners
        for fn in listeners:
            fn(camera_id, t)

    def reset(self, camera_id: str) -> None:
        """Forget a camera's frames (a new source whose clock restarts, a deleted camera)."""
        with self._lock:
            self._cams.pop(camera_id, None)
            self._spares.pop(camera_id, None)

    def window(self, camera_id: str, now: float) -> tuple[list, list]:
        """(short, medium): lists of (array, t), oldest first, of the span*fps cells up to
        ``now``'s (about now - span < t) and t <= now (never a frame after ``now``). The arrays
        are read-only and shared: do not modify them."""
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
            has = any(t <= now for t, _, _ in medium.frames) or any(t <= now for t, _, _ in short.frames)
            return has and medium.covers(now) and short.covers(now)

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

    # -- the recent transcript -------------------------------------------------------------------
    def add_speech_listener(self, fn) -> None:
        """Call ``fn(camera_id, segments, now)`` on the feeding thread after each batch ``hear``
        keeps (the monitor worker); it must be quick."""
        with self._lock:
            self._speech_listeners = [*self._speech_listeners, fn]

    def remove_speech_listener(self, fn) -> None:
        with self._lock:
            self._speech_listeners = [f for f in self._speech_listeners if f != fn]

    def hear(self, segments, now: float | None = None) -> None:
        """Transcript segments just stored (records with ``camera_id``, ``t_start``, ``t_end``,
        ``text``: memory.records.Transcript), in time order; ``now``: the camera-axis time the
        audio had reached when they were heard (their listeners' present; default: their end).
        Each camera keeps the segments ending within ``medium_s`` of its newest, at most
        SPEECH_LINES of them."""
        by_cam: dict[str, list] = {}
        for seg in segments:
            by_cam.setdefault(seg.camera_id, []).append(seg)
        with self._lock:
            for cam, segs in by_cam.items():
                ring = self._said.setdefault(cam, deque(maxlen=SPEECH_LINES))
                ring.extend(sorted(segs, key=lambda x: x.t_start))
                newest = max(x.t_end for x in ring)
                while ring and ring[0].t_end < newest - self.medium_s:
                    ring.popleft()
            listeners = self._speech_listeners
        for cam, segs in by_cam.items():
            when = max(x.t_end for x in segs) if now is None else max(float(now), max(x.t_end for x in segs))
            for fn in listeners:
                fn(cam, segs, when)

    def heard(self, camera_id: str, t0: float | None = None, t1: float | None = None) -> list:
        """The camera's recent segments ending in (t0, t1] (None: unbounded), oldest first."""
        with self._lock:
            ring = list(self._said.get(camera_id, ()))
        return [x for x in ring if (t0 is None or x.t_end > t0) and (t1 is None or x.t_end <= t1)]

    def forget_speech(self, cameras=None, t0: float | None = None, t1: float | None = None) -> None:
        """Drop recent segments of ``cameras`` (None: all) overlapping [t0, t1] (a deletion)."""
        with self._lock:
            for cam, ring in self._said.items():
                if cameras is not None and cam not in cameras:
                    continue
                keep = [x for x in ring if (t0 is not None and x.t_end < t0) or (t1 is not None and x.t_start > t1)]
                self._said[cam] = deque(keep, maxlen=SPEECH_LINES)
