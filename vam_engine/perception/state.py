"""What a perception stage saves so that a run resumed after a crash (or a later run on the same
store) goes on with the same tracks and entities as an uninterrupted one.

``PerceptionStage.snapshot()`` returns a ``PerceptionState`` taken between two rounds, and the
caller commits it with the rows of the frames perceived before it; ``restore()`` loads one back.

- per camera (``CameraPerceptionState``, JSON through ``to_json`` / ``from_json``): the tracker's
  active tracks (recent sightings, running appearance, velocity), the last frame time the
  tracker and the stage saw, and the OCR lines of the camera's last read (a resumed run compares
  its first read with them: no text change is reported where none happened);
- the id counters of tracks and entities;
- the entities changed since the previous snapshot (``LinkedEntity``: the entity, its running
  appearance, its crop's rank) and the tracks changed since then (copies, without sightings).
  The caller keeps entities and tracks in its own tables; to restore, it hands back every
  entity to hold (``entities``) and the tracks they are made of (``tracks``).

The text gate's last signature is not saved (a grey thumbnail per camera): a resumed camera's
first kept frame is read again, which costs one OCR read and changes nothing else.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field

import numpy as np

from ..errors import VamError
from .entities import LinkedEntity
from .records import OcrLine, Sighting, Track
from .tracks import ActiveTrack

STATE_VERSION = 1


@dataclass(frozen=True)
class CameraPerceptionState:
    tracks: tuple[ActiveTrack, ...] = ()
    tracker_t: float | None = None    # the tracker's last frame time (None: no tracker yet)
    lines: tuple[OcrLine, ...] = ()
    lines_read: bool = False          # whether the camera has been read at all (lines may be empty)
    submitted_t: float | None = None  # the last frame time the stage accepted

    def to_json(self) -> dict:
        return {"version": STATE_VERSION, "tracker_t": self.tracker_t, "submitted_t": self.submitted_t,
                "lines_read": self.lines_read,
                "lines": [{"box": list(ln.box), "text": ln.text, "confidence": ln.confidence} for ln in self.lines],
                "tracks": [_track_json(a) for a in self.tracks]}

    @classmethod
    def from_json(cls, data: dict) -> "CameraPerceptionState":
        """Read ``to_json()``'s output; VamError naming the problem."""
        try:
            if data.get("version") != STATE_VERSION:
                raise ValueError(f"unknown version {data.get('version')!r}")
            lines = tuple(OcrLine(tuple(float(v) for v in ln["box"]), str(ln["text"]), float(ln["confidence"]))
                          for ln in data["lines"])
            opt = lambda x: None if x is None else float(x)  # noqa: E731
            return cls(tuple(_track_from(d) for d in data["tracks"]), opt(data["tracker_t"]), lines,
                       bool(data["lines_read"]), opt(data["submitted_t"]))
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise VamError(f"invalid perception state: {type(e).__name__}: {e}") from None


@dataclass(frozen=True)
class PerceptionState:
    next_track: int
    next_entity: int
    cameras: dict[str, CameraPerceptionState] = field(default_factory=dict)
    entities: tuple[LinkedEntity, ...] = ()  # snapshot: changed since the last one; restore: all to hold
    tracks: dict[int, Track] = field(default_factory=dict)  # snapshot: changed since the last one;
    # restore: the tracks of the entities held (track id -> Track; sightings may be empty)


def _vec(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a, np.float32).tobytes()).decode()


def _unvec(s: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(s), np.float32).copy()


def _track_json(a: ActiveTrack) -> dict:
    t = a.track
    return {"track_id": t.track_id, "camera_id": t.camera_id, "label": t.label, "first_t": t.first_t,
            "last_t": t.last_t, "count": t.count, "entity_id": t.entity_id, "texts": list(t.texts),
            "sightings": [[s.t, list(s.box), s.score] for s in t.sightings],
            "appearance": _vec(a.appearance), "velocity": [float(v) for v in a.velocity]}


def _track_from(d: dict) -> ActiveTrack:
    sightings = [Sighting(float(t), tuple(float(v) for v in box), float(score)) for t, box, score in d["sightings"]]
    if not sightings:
        raise ValueError(f"active track {d['track_id']} has no sighting")
    track = Track(int(d["track_id"]), str(d["camera_id"]), str(d["label"]), float(d["first_t"]), float(d["last_t"]),
                  int(d["count"]), sightings, None if d["entity_id"] is None else int(d["entity_id"]),
                  [str(x) for x in d["texts"]])
    return ActiveTrack(track, _unvec(d["appearance"]), np.asarray(d["velocity"], np.float64))
