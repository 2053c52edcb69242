"""Detections of one camera joined over time into tracks, by motion and appearance.

Kept frames come sparsely (0.5 fps by default, and the gates drop still ones), so motion alone
(IoU of consecutive boxes, as in trackers fed 30 fps) fails: a walking person moves a body width
between two samples. Here a detection may join an active track of the same label when

- its centre lies within a gate that widens with the time since the track was last seen:
  ``base_gate + max_speed * dt`` box diagonals from the track's last centre or from the centre
  its velocity predicts (whichever is nearer), and its area is within a factor ``max_scale``;
- its appearance vector (appearance.py) is at least ``min_appearance`` similar to the track's
  (a running mean of its sightings').

Among the pairs that pass, the score mixes motion (IoU with the predicted box, or closeness
within the gate) and appearance, with the motion weight exp(-dt / motion_tau_s): at 2 fps motion
leads, at 0.5 fps appearance. Pairs are matched greedily, best score first. A track not seen for
``max_gap_s`` is closed; linking across longer gaps (a car parked for an hour) is the entity
linker's job.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .records import KEEP_SIGHTINGS, Box, Detection, Sighting, Track


@dataclass(frozen=True)
class TrackerParams:
    max_gap_s: float = 10.0       # a track unseen this long is closed
    base_gate: float = 0.5        # box diagonals a detection may be from the track at dt = 0
    max_speed: float = 1.0        # box diagonals per second the gate widens by
    max_scale: float = 3.0        # largest area ratio between a track's last box and a detection
    min_appearance: float = 0.55  # least appearance similarity (dot of appearance vectors)
    motion_tau_s: float = 2.0     # motion weight exp(-dt / tau)
    smoothing: float = 0.3        # weight of a new sighting in the track's appearance mean

    def __post_init__(self):
        for name in ("max_gap_s", "base_gate", "motion_tau_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"TrackerParams.{name} must be positive, got {getattr(self, name)}")
        if self.max_speed < 0 or self.max_scale < 1 or not 0 < self.smoothing <= 1:
            raise ValueError(f"TrackerParams: need max_speed >= 0, max_scale >= 1, 0 < smoothing <= 1; got "
                             f"{self.max_speed}, {self.max_scale}, {self.smoothing}")


def _centre(b: Box) -> np.ndarray:
    return np.array([(b[0] + b[2]) / 2, (b[1] + b[3]) / 2])


def _diag(b: Box) -> float:
    return math.hypot(b[2] - b[0], b[3] - b[1])


def _area(b: Box) -> float:
    return max(b[2] - b[0], 0.0) * max(b[3] - b[1], 0.0)


def iou(a: Box, b: Box) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = _area(a) + _area(b) - inter
    return inter / union if union > 0 else 0.0


@dataclass
class _Active:
    track: Track
    appearance: np.ndarray
    velocity: np.ndarray  # px / s of the centre


@dataclass(frozen=True)
class ActiveTrack:
    """An active track as a tracker saves it (``CameraTracker.export``): the track with its
    recent sightings, its running appearance and its centre's velocity (px / s)."""

    track: Track
    appearance: np.ndarray
    velocity: np.ndarray


class CameraTracker:
    """Tracks of one camera. ``update`` takes one frame's detections (time order) and returns a
    track per detection; ``next_id`` hands out track ids (shared by the stage's cameras)."""

    def __init__(self, camera_id: str, next_id, params: TrackerParams | None = None):
        self.camera_id = camera_id
        self.params = params or TrackerParams()
        self._next_id = next_id
        self._active: list[_Active] = []
        self.last_t: float | None = None

    def _score(self, a: _Active, det: Detection, app: np.ndarray, t: float) -> float | None:
        p = self.params
        last = a.track.sightings[-1]
        if det.label != a.track.label:
            return None
        dt = max(0.0, t - last.t)
        ratio = _area(det.box) / max(_area(last.box), 1e-9)
        if not 1 / p.max_scale <= ratio <= p.max_scale:
            return None
        sim = float(np.dot(a.appearance, app))
        if sim < p.min_appearance:
            return None
        shift = a.velocity * dt
        pred: Box = (last.box[0] + shift[0], last.box[1] + shift[1], last.box[2] + shift[0], last.box[3] + shift[1])
        diag = (_diag(last.box) + _diag(det.box)) / 2
        c = _centre(det.box)
        dist = min(np.linalg.norm(c - _centre(last.box)), np.linalg.norm(c - _centre(pred))) / max(diag, 1e-9)
        gate = p.base_gate + p.max_speed * dt
        if dist > gate:
            return None
        motion = max(iou(pred, det.box), 1.0 - dist / gate)
        look = (sim - p.min_appearance) / (1.0 - p.min_appearance)
        wm = math.exp(-dt / p.motion_tau_s)
        return wm * motion + (1 - wm) * look

    def update(self, t: float, detections: list[Detection], appearances: np.ndarray,
               key=None) -> list[tuple[Track, bool]]:
        """Join ``detections`` (seen at ``t``, with their appearance vectors) to tracks; returns
        per detection (its track, True when the track is new). Tracks unseen for max_gap_s
        before ``t`` are closed first."""
        if self.last_t is not None and t < self.last_t:
            raise ValueError(f"camera {self.camera_id!r}: frame at t={t} comes after t={self.last_t}: "
                             f"frames of one camera must be given in time order")
        self.last_t = t
        p = self.params
        self._active = [a for a in self._active if t - a.track.last_t <= p.max_gap_s]
        pairs = []
        for i, a in enumerate(self._active):
            if a.track.last_t >= t:  # already seen in this frame
                continue
            for j, d in enumerate(detections):
                s = self._score(a, d, appearances[j], t)
                if s is not None:
                    pairs.append((s, i, j))
        pairs.sort(key=lambda x: -x[0])
        taken_a, out = set(), [None] * len(detections)
        for _, i, j in pairs:
            if i in taken_a or out[j] is not None:
                continue
            taken_a.add(i)
            out[j] = (self._extend(self._active[i], detections[j], appearances[j], t, key), False)
        for j, d in enumerate(detections):
            if out[j] is None:
                tr = Track(self._next_id(), self.camera_id, d.label, t, t, 1, [Sighting(t, d.box, d.score, key)])
                self._active.append(_Active(tr, appearances[j].astype(np.float32).copy(), np.zeros(2)))
                out[j] = (tr, True)
        return out

    def _extend(self, a: _Active, det: Detection, app: np.ndarray, t: float, key) -> Track:
        last = a.track.sightings[-1]
        dt = t - last.t
        if dt > 0:
            v = (_centre(det.box) - _centre(last.box)) / dt
            a.velocity = v if a.track.count == 1 else 0.5 * a.velocity + 0.5 * v
        m = (1 - self.params.smoothing) * a.appearance + self.params.smoothing * app
        a.appearance = (m / max(float(np.linalg.norm(m)), 1e-12)).astype(np.float32)
        tr = a.track
        tr.sightings.append(Sighting(t, det.box, det.score, key))
        del tr.sightings[:-KEEP_SIGHTINGS]
        tr.count += 1
        tr.last_t = t
        return tr

    def export(self) -> list[ActiveTrack]:
        """Copies of the active tracks with what matching them needs (a resumed run loads them)."""
        return [ActiveTrack(Track(a.track.track_id, a.track.camera_id, a.track.label, a.track.first_t, a.track.last_t,
                                  a.track.count, list(a.track.sightings), a.track.entity_id, list(a.track.texts)),
                            a.appearance.copy(), a.velocity.copy()) for a in self._active]

    def load(self, last_t: float | None, actives: list[ActiveTrack]) -> None:
        """Continue from an ``export``: the tracks (the objects given, not copies: the caller
        may share them with the entity linker) and the last frame time."""
        self.last_t = last_t
        self._active = [_Active(a.track, np.asarray(a.appearance, np.float32).copy(),
                                np.asarray(a.velocity, np.float64).copy()) for a in actives]

    def appearance(self, track_id: int) -> np.ndarray | None:
        """The running appearance of an active track (None once closed)."""
        return next((a.appearance for a in self._active if a.track.track_id == track_id), None)

    @property
    def active(self) -> list[Track]:
        return [a.track for a in self._active]
