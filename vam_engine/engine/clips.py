"""Clips of any interval of a camera (``Engine.clip``): an MP4 of [t0, t1] on the camera's axis.

Which way: cut from the source file (ingest/clips.py ``cut_file``: every frame, and the sound
where the file has it) when the interval's retained frames all come from one indexed file that
is still there and still the same file (its fingerprint); else built from the retained frames at
their times (``frames_clip``: a live camera's, a pushed one's, a file moved or deleted since).

Bounds (config ``clips``): a clip is at most ``max_s`` long; ``max_encodes`` are encoded at
once (one more is refused with ClipBusy: the service answers 429); encoded clips are kept in a
memory cache of ``cache_bytes`` (least recently used go first), keyed by what the clip is made
of (the interval, the moments in it, the source file's fingerprint), so a deletion or
retention that changes the frames changes the key and an old clip is never served again.
"""
from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

from ..config import ClipsConfig
from ..errors import SourceError
from ..index import fingerprint
from ..ingest import ClipBusy, ClipError, Encoding, NoClip, cut_file, frames_clip
from ..numerics import finite_time
from ..memory import ClipFrame, Store


@dataclass(frozen=True)
class Clip:
    camera_id: str
    t0: float
    t1: float
    data: bytes  # the MP4
    made_from: str  # "source": cut from the source file; "frames": built from the retained frames

    @property
    def media_type(self) -> str:
        return "video/mp4"


@dataclass(frozen=True)
class _Plan:
    key: str
    made_from: str
    path: str | None  # the source file ("source")
    start_s: float  # on the source's clock ("source")
    end_s: float
    frames: tuple[ClipFrame, ...]  # the retained frames (the way when the source cannot be cut)


def check_interval(t0, t1, max_s: float) -> tuple[float, float]:
    """(t0, t1) as floats when they make a clip; ClipError naming the problem otherwise."""
    for name, v in (("t0", t0), ("t1", t1)):
        if v is None:
            raise ClipError(f"{name} is required: a clip is of an interval [t0, t1]")
        finite_time(v, name, error=ClipError)
    t0, t1 = float(t0), float(t1)
    if t1 <= t0:
        raise ClipError(f"t1 ({t1:g}) must be after t0 ({t0:g})")
    if t1 - t0 > max_s:
        raise ClipError(f"the interval is {t1 - t0:g} s long; a clip is at most {max_s:g} s (config clips.max_s)")
    return t0, t1


class EngineClips:
    def __init__(self, store: Store, cfg: ClipsConfig):
        self._store, self._cfg = store, cfg
        self._encodes = threading.BoundedSemaphore(cfg.max_encodes)
        self._cache: OrderedDict[str, Clip] = OrderedDict()
        self._cached_bytes = 0
        self._lock = threading.Lock()

    def clip(self, camera_id: str, t0: float, t1: float) -> Clip:
        """See ``Engine.clip``."""
        t0, t1 = check_interval(t0, t1, self._cfg.max_s)
        plan = self._plan(camera_id, t0, t1)
        with self._lock:
            hit = self._cache.get(plan.key)
            if hit is not None:
                self._cache.move_to_end(plan.key)
                return hit
        if not self._encodes.acquire(blocking=False):
            raise ClipBusy(f"{self._cfg.max_encodes} clips are being encoded, the most at once (config "
                           "clips.max_encodes); retry shortly")
        try:
            clip = Clip(camera_id, t0, t1, *self._encode(plan, t0, t1))
        finally:
            self._encodes.release()
        self._keep(plan.key, clip)
        return clip

    def _plan(self, camera_id: str, t0: float, t1: float) -> _Plan:
        frames = [f for f in self._store.moments.clip_frames(camera_id, t0, t1) if os.path.isfile(f.frame_path)]
        if not frames:
            raise NoClip(f"camera {camera_id!r} has no retained frame at or before [{t0:g}, {t1:g}]")
        sources = {f.source_id for f in frames if f.t >= t0} or {frames[0].source_id}
        ids = ",".join(str(f.moment_id) for f in frames)
        if len(sources) == 1:
            sid = next(iter(sources))
            file = self._source_file(sid)
            if file is not None:
                ref = next(f for f in frames if f.source_id == sid)
                offset = ref.t_rel - ref.t  # the source's clock minus the camera's axis
                start, end = max(0.0, t0 + offset), t1 + offset
                key = _key("source", camera_id, t0, t1, file[1], ids)
                return _Plan(key, "source", file[0], start, end, tuple(frames))
        return _Plan(_key("frames", camera_id, t0, t1, ids), "frames", None, t0, t1, tuple(frames))

    def _source_file(self, source_id: int) -> tuple[str, str] | None:
        """(path, fingerprint) of an indexed file that is still there unchanged; None otherwise."""
        row = self._store.sources.uri(source_id)
        if row is None:
            return None
        uri, fp = row
        try:
            return (uri, fp) if os.path.isfile(uri) and fingerprint(uri) == fp else None
        except OSError:
            return None

    def _encode(self, plan: _Plan, t0: float, t1: float) -> tuple[bytes, str]:
        """(the MP4, the way it was made)."""
        enc = Encoding(self._cfg.crf, self._cfg.preset, self._cfg.max_side)
        if plan.made_from == "source":
            try:
                return cut_file(plan.path, plan.start_s, plan.end_s, enc), "source"
            except SourceError:  # unreadable after all: the retained frames still show the interval
                pass
        return frames_clip([(f.t, f.frame_path) for f in plan.frames], t0, t1, enc), "frames"

    def _keep(self, key: str, clip: Clip) -> None:
        if len(clip.data) > self._cfg.cache_bytes:
            return
        with self._lock:
            if key not in self._cache:
                self._cache[key] = clip
                self._cached_bytes += len(clip.data)
            while self._cached_bytes > self._cfg.cache_bytes:
                self._cached_bytes -= len(self._cache.popitem(last=False)[1].data)


def _key(*parts) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()
