"""Poses: where a camera was when it took a frame (a robot's localisation), and the pose sources
of live cameras.

A ``Pose`` is (x, y, z, yaw) in a named map frame: metres and radians, yaw about the map's z
axis, normalised to [-pi, pi) (any finite yaw is accepted: 3*pi/2 is stored as -pi/2). A pushed
frame carries one (``Engine.push(..., pose=(x, y, z, yaw))`` or a ``Pose``); a live camera
gets one per sampled frame from its pose source (``add_camera(..., pose=...)``):

- a callable ``t -> Pose | (x, y, z, yaw) | None``, called with the frame's time on the
  camera's axis (unix seconds for a live camera);
- a JSON-lines file, one pose a line, times increasing, read as it grows (a file a localiser
  appends to can be tailed)::

      {"t": 1717171717.25, "x": 1.5, "y": -0.25, "z": 0.0, "yaw": 1.5708, "frame": "map"}

  ``t`` is on the camera's axis, ``frame`` is optional ("map"). Frames between two poses get
  the linear interpolation of x, y, z and the shortest-angle interpolation of yaw; two poses
  more than ``max_gap_s`` apart (localisation lost) or in different map frames interpolate to
  nothing. A frame outside the poses' span gets the nearest end pose when it is within
  ``hold_s`` of it (a pose that lags the video a little), else nothing: motion is never
  extrapolated.

Bad poses are errors naming the camera (``PoseError``, both a FrameError and a ValueError).
"""
from __future__ import annotations

import bisect
import json
import logging
import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from ..errors import FrameError

log = logging.getLogger(__name__)

MAX_FRAME_NAME = 64
DEFAULT_MAP = "map"
MAX_GAP_S = 1.0   # poses further apart than this do not interpolate
HOLD_S = 0.25     # a frame this close past the first/last pose takes it as is
MAX_LINE_BYTES = 4096


class PoseError(FrameError, ValueError):
    """A pose (pushed, from a pose source, or a pose file's line) is unusable."""


@dataclass(frozen=True)
class Pose:
    """Where a camera was: metres in map frame ``frame``, yaw in radians in [-pi, pi)."""

    x: float
    y: float
    z: float
    yaw: float
    frame: str = DEFAULT_MAP

    def where(self) -> str:
        """How prompts and answers say it: ``(1.50, -0.25) in map 'map'``."""
        return f"({self.x:.2f}, {self.y:.2f}) in map {self.frame!r}"

    def to_json(self) -> dict:
        return {"x": self.x, "y": self.y, "z": self.z, "yaw": self.yaw, "frame": self.frame}


def normalize_yaw(yaw: float) -> float:
    """``yaw`` in [-pi, pi)."""
    r = math.remainder(float(yaw), 2 * math.pi)
    return -math.pi if r >= math.pi else r


def _number(camera_id: str, name: str, v, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
        raise PoseError(f"camera {camera_id!r}: {what} {name} must be a number, got {type(v).__name__}")
    f = float(v)
    if not math.isfinite(f):
        raise PoseError(f"camera {camera_id!r}: {what} {name} must be finite, got {f}")
    return f


def _frame_name(camera_id: str, frame, what: str) -> str:
    if not isinstance(frame, str) or not 0 < len(frame) <= MAX_FRAME_NAME or not frame.isprintable():
        raise PoseError(f"camera {camera_id!r}: {what} map frame must be a printable name of 1..{MAX_FRAME_NAME} "
                        f"characters, got {frame!r:.80}")
    return frame


def check_pose(value, camera_id: str, *, what: str = "pose") -> Pose | None:
    """``value`` as a Pose (None stays None): a Pose, a dict with x, y, z, yaw (and frame), or a
    sequence of exactly four numbers (x, y, z, yaw). Raises PoseError naming the camera."""
    if value is None:
        return None
    if isinstance(value, Pose):
        x, y, z, yaw, frame = value.x, value.y, value.z, value.yaw, value.frame
    elif isinstance(value, dict):
        missing = [k for k in ("x", "y", "z", "yaw") if k not in value]
        extra = sorted(set(value) - {"x", "y", "z", "yaw", "frame", "t"})
        if missing or extra:
            raise PoseError(f"camera {camera_id!r}: {what} needs keys x, y, z, yaw (and optionally frame): "
                            + (f"missing {missing}" if missing else f"unknown {extra}"))
        x, y, z, yaw, frame = value["x"], value["y"], value["z"], value["yaw"], value.get("frame", DEFAULT_MAP)
    elif isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise PoseError(f"camera {camera_id!r}: {what} must be (x, y, z, yaw), a dict or a Pose, "
                        f"got {type(value).__name__}")
    else:
        if len(value) != 4:
            raise PoseError(f"camera {camera_id!r}: {what} must have 4 values (x, y, z, yaw), got {len(value)}")
        (x, y, z, yaw), frame = value, DEFAULT_MAP
    nums = [_number(camera_id, n, v, what) for n, v in zip(("x", "y", "z", "yaw"), (x, y, z, yaw))]
    return Pose(nums[0], nums[1], nums[2], normalize_yaw(nums[3]), _frame_name(camera_id, frame, what))


def interpolate(a: Pose, b: Pose, w: float) -> Pose:
    """The pose ``w`` (0..1) of the way from ``a`` to ``b``: linear in x, y, z, the shorter way
    round in yaw."""
    turn = math.remainder(b.yaw - a.yaw, 2 * math.pi)
    return Pose(a.x + (b.x - a.x) * w, a.y + (b.y - a.y) * w, a.z + (b.z - a.z) * w,
                normalize_yaw(a.yaw + turn * w), a.frame)


class PoseTrack:
    """Timestamped poses of one camera, in time order, looked up at frame times (module doc)."""

    def __init__(self, camera_id: str, *, max_gap_s: float = MAX_GAP_S, hold_s: float = HOLD_S):
        self.camera_id = camera_id
        self.max_gap_s = _number(camera_id, "max_gap_s", max_gap_s, "pose source")
        self.hold_s = _number(camera_id, "hold_s", hold_s, "pose source")
        if self.max_gap_s <= 0 or self.hold_s < 0:
            raise PoseError(f"camera {camera_id!r}: pose source needs max_gap_s > 0 and hold_s >= 0")
        self._t: list[float] = []
        self._poses: list[Pose] = []

    def __len__(self) -> int:
        return len(self._t)

    def add(self, t: float, pose: Pose) -> None:
        if self._t and t <= self._t[-1]:
            raise PoseError(f"camera {self.camera_id!r}: pose time {t} is not after the previous one ({self._t[-1]})")
        self._t.append(t)
        self._poses.append(pose)

    def at(self, t: float) -> Pose | None:
        ts = self._t
        if not ts:
            return None
        i = bisect.bisect_left(ts, t)
        if i < len(ts) and ts[i] == t:
            return self._poses[i]
        if i == 0:
            return self._poses[0] if ts[0] - t <= self.hold_s else None
        if i == len(ts):
            return self._poses[-1] if t - ts[-1] <= self.hold_s else None
        t0, t1 = ts[i - 1], ts[i]
        a, b = self._poses[i - 1], self._poses[i]
        if t1 - t0 > self.max_gap_s or a.frame != b.frame:
            return None
        return interpolate(a, b, (t - t0) / (t1 - t0))

    def forget_before(self, t: float) -> None:
        """Drop poses no later lookup (at ``t`` or after) needs: frames come in time order."""
        i = bisect.bisect_left(self._t, t - self.max_gap_s - self.hold_s) - 1
        if i > 0:
            del self._t[:i]
            del self._poses[:i]


class JsonlPoses:
    """A JSON-lines pose file, read as it grows (module doc). Lines already there when it opens
    must all be valid (PoseError naming camera, file and line); a bad line appended later is
    skipped and logged."""

    def __init__(self, path, camera_id: str, *, max_gap_s: float = MAX_GAP_S, hold_s: float = HOLD_S):
        self.path = Path(path)
        self.camera_id = camera_id
        self.track = PoseTrack(camera_id, max_gap_s=max_gap_s, hold_s=hold_s)
        self.errors = 0
        self.last_error: str | None = None
        self._offset = 0
        self._line = 0
        self._lock = threading.Lock()
        if not self.path.is_file():
            raise PoseError(f"camera {camera_id!r}: pose file {str(self.path)!r} does not exist")
        self._read(strict=True)

    def _read(self, strict: bool) -> None:
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            while True:
                raw = f.readline(MAX_LINE_BYTES + 1)
                if not raw or (not raw.endswith(b"\n") and len(raw) <= MAX_LINE_BYTES):
                    return  # nothing more, or a line still being written
                self._offset += len(raw)
                self._line += 1
                try:
                    self._take(raw)
                except PoseError as e:
                    if strict:
                        raise
                    self.errors += 1
                    self.last_error = str(e)
                    log.warning("%s", e)

    def _take(self, raw: bytes) -> None:
        where = f"pose file {self.path.name!r} line {self._line}"
        if len(raw) > MAX_LINE_BYTES:
            raise PoseError(f"camera {self.camera_id!r}: {where} is over {MAX_LINE_BYTES} bytes")
        text = raw.decode("utf-8", "replace").strip()
        if not text:
            return
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise PoseError(f"camera {self.camera_id!r}: {where} is not JSON ({e})") from None
        if not isinstance(obj, dict) or "t" not in obj:
            raise PoseError(f"camera {self.camera_id!r}: {where} must be an object with t, x, y, z, yaw")
        t = _number(self.camera_id, "t", obj["t"], where)
        pose = check_pose(obj, self.camera_id, what=where)
        try:
            self.track.add(t, pose)
        except PoseError as e:
            raise PoseError(f"{e} ({where})") from None

    def at(self, t: float) -> Pose | None:
        with self._lock:
            try:
                if os.path.getsize(self.path) > self._offset:
                    self._read(strict=False)
            except OSError as e:  # the file went away: the poses read so far still serve
                self.last_error = f"camera {self.camera_id!r}: pose file: {e}"
            pose = self.track.at(t)
            self.track.forget_before(t)
            return pose


class CallablePoses:
    """A callable ``t -> pose or None`` as a pose source; what it returns is checked."""

    def __init__(self, fn, camera_id: str):
        self.fn = fn
        self.camera_id = camera_id
        self.errors = 0
        self.last_error: str | None = None

    def at(self, t: float) -> Pose | None:
        return check_pose(self.fn(t), self.camera_id, what="the pose source's pose")


def make_pose_source(source, camera_id: str, *, max_gap_s: float = MAX_GAP_S, hold_s: float = HOLD_S):
    """A live camera's pose source from ``add_camera(..., pose=...)``: a callable or the path
    of a JSON-lines file (None: no source). PoseError naming the camera when it is neither."""
    if source is None:
        return None
    if callable(source):
        return CallablePoses(source, camera_id)
    if isinstance(source, (str, os.PathLike)):
        return JsonlPoses(source, camera_id, max_gap_s=max_gap_s, hold_s=hold_s)
    raise PoseError(f"camera {camera_id!r}: pose must be a callable t -> pose or the path of a JSON-lines pose "
                    f"file, got {type(source).__name__}")


def pose_at(source, t: float) -> Pose | None:
    """``source.at(t)``, never raising: a failing source gives no pose, and its error is kept on
    it (``errors``, ``last_error``) and logged (a live camera keeps reading)."""
    try:
        return source.at(t)
    except Exception as e:  # noqa: BLE001 - a user callable may raise anything
        source.errors += 1
        msg = str(e) if isinstance(e, PoseError) else f"camera {source.camera_id!r}: pose source failed: " \
                                                       f"{type(e).__name__}: {e}"
        if msg != source.last_error:
            log.warning("%s", msg)
        source.last_error = msg
        return None
