"""A robot's run with known places: a camera driven around a square loop at a steady speed,
its pose at every time known exactly, looking at a panned wall of photographs, with a cat
(scikit-image's ``chelsea``) in view at chosen places along the path. For the poses tests and
examples: where was the cat? (at the cat's places); which moments lie within r of a point?
(the poses, brute force).

The loop: corners (0, 0), (side, 0), (side, side), (0, side), driven counter-clockwise from
(0, 0) at ``speed`` m/s; yaw is the heading (0, pi/2, -pi, -pi/2 on the four sides), z 0."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .scenes import photo, photo_strip, resize_rgb

_HEADINGS = (0.0, math.pi / 2, -math.pi, -math.pi / 2)
_WALL = ("brick", "coffee", "grass", "rocket", "gravel", "astronaut", "coins", "camera")


@dataclass(frozen=True)
class RobotRun:
    """``fps`` frames per second of ``height`` x ``width`` for ``seconds``; the cat is in view at
    the path distances ``cat_at_m`` (the frame nearest each)."""

    seconds: float = 32.0
    fps: float = 2.0
    side_m: float = 4.0
    speed: float = 0.5
    height: int = 96
    width: int = 128
    cat_at_m: tuple[float, ...] = (3.0, 11.0)
    px_per_m: float = field(default=40.0)  # how far the wall pans per metre driven

    def pose(self, t: float) -> tuple[float, float, float, float]:
        """(x, y, z, yaw) at ``t``."""
        s = (t * self.speed) % (4 * self.side_m)
        k = min(3, int(s // self.side_m))
        a = s - k * self.side_m
        x, y = ((a, 0.0), (self.side_m, a), (self.side_m - a, self.side_m), (0.0, self.side_m - a))[k]
        return x, y, 0.0, _HEADINGS[k]

    @property
    def times(self) -> list[float]:
        return [i / self.fps for i in range(int(round(self.seconds * self.fps)))]

    @property
    def cat_times(self) -> list[float]:
        """The frame times the cat is in view (the frame nearest each cat place)."""
        return [min(self.times, key=lambda t: abs(t * self.speed - s)) for s in self.cat_at_m]

    @property
    def resolution_m(self) -> float:
        """The distance driven between two frames."""
        return self.speed / self.fps

    @cached_property
    def _wall(self) -> np.ndarray:
        return photo_strip(_WALL, self.height)

    @cached_property
    def cat(self) -> np.ndarray:
        return resize_rgb(photo("chelsea"), self.height, self.width)

    def frame(self, t: float) -> np.ndarray:
        if any(abs(t - c) < 1e-9 for c in self.cat_times):
            return self.cat.copy()
        span = self._wall.shape[1] - self.width
        x = int(round(t * self.speed * self.px_per_m)) % span
        return np.ascontiguousarray(self._wall[:, x:x + self.width])

    def frames(self):
        """(t, frame, pose) in time order."""
        for t in self.times:
            yield t, self.frame(t), self.pose(t)
