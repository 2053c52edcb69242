"""The cameras file (TOML) that ``serve`` reads, and the diff a reload applies.

Either form (or both in one file)::

    [defaults]                 # optional: every camera's values unless it sets its own
    fps = 1.0
    stall_s = 20

    [cameras.door]             # the table's name is the camera id
    url = "rtsp://user:pass@10.0.0.5/stream1"
    fps = 2.0
    gate = { diff_min_mad = 12.0 }          # per-camera gate overrides (GateConfig fields)
    monitors = ["a person at the door"]     # condition strings, for engine.watch

    [[camera]]                 # or an array of tables, with an explicit id
    id = "yard"
    url = "http://10.0.0.6/live.ts"

Fields: url (required), fps, realtime, stall_s, max_retries, backoff_s, backoff_max_s,
connect_timeout_s, gate, monitors. Every error names the file, the camera and the field.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import VamError
from .camera_ids import CameraIdError, check_camera_id
from .live import LiveSpec

_FIELDS = {"url", "fps", "realtime", "stall_s", "max_retries", "backoff_s", "backoff_max_s", "connect_timeout_s",
           "gate", "monitors"}
_DEFAULTABLE = _FIELDS - {"url", "monitors"}
# Read by the gate statistics body for every camera at once (gate.cascade.Tiles): not per camera.
_SHARED_GATE_FIELDS = {"tile_size", "tile_min_mad"}


class CamerasFileError(VamError):
    """The cameras file is unreadable or one of its cameras is invalid."""


@dataclass(frozen=True)
class CameraSpec:
    """One camera of the cameras file (or of ``engine.add_camera``'s arguments)."""

    camera_id: str
    url: str
    fps: float | None = None  # None: the engine's ingest.fps
    realtime: bool = False
    stall_s: float = 20.0
    max_retries: int | None = None
    gate: dict = field(default_factory=dict)  # GateConfig overrides for this camera
    monitors: list[str] = field(default_factory=list)  # condition strings
    backoff_s: float = 1.0
    backoff_max_s: float = 60.0
    connect_timeout_s: float | None = None

    def ingest_key(self) -> tuple:
        """What reading the camera depends on: a change restarts it (monitors do not)."""
        return (self.url, self.fps, self.realtime, self.stall_s, self.max_retries, tuple(sorted(self.gate.items())),
                self.backoff_s, self.backoff_max_s, self.connect_timeout_s)

    def live_spec(self, default_fps: float) -> LiveSpec:
        return LiveSpec(self.camera_id, self.url, fps=self.fps if self.fps is not None else default_fps,
                        realtime=self.realtime, stall_s=self.stall_s, max_retries=self.max_retries,
                        backoff_s=self.backoff_s, backoff_max_s=self.backoff_max_s,
                        connect_timeout_s=self.connect_timeout_s)


@dataclass(frozen=True)
class CameraDiff:
    """What a reload changes: camera ids added, removed, changed (restarted: their reading
    changed), and those whose monitors alone changed."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    monitors_changed: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.monitors_changed)


def check_gate(camera_id: str, gate, base=None) -> dict:
    """Validate per-camera gate overrides against GateConfig; returns them as a plain dict."""
    from pydantic import ValidationError

    from ..config import GateConfig

    if gate is None:
        return {}
    if not isinstance(gate, dict):
        raise ValueError(f"camera {camera_id!r}: gate must be a table of GateConfig fields, got {gate!r}")
    shared = sorted(_SHARED_GATE_FIELDS & set(gate))
    if shared:
        raise ValueError(f"camera {camera_id!r}: gate.{shared[0]} applies to every camera (the tiles are shared): "
                         f"set it in the engine config's [gate] section")
    base = base if base is not None else GateConfig()
    try:
        GateConfig(**{**base.model_dump(), **gate})
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err.get("loc", ())) or "?"
        raise ValueError(f"camera {camera_id!r}: gate.{loc}: {err.get('msg')} (got {err.get('input')!r})") from None
    return dict(gate)


def make_spec(camera_id, fields: dict, *, where: str = "") -> CameraSpec:
    """A CameraSpec from a camera's fields, validated (errors name the camera and the field)."""
    pre = f"{where}: " if where else ""
    try:
        check_camera_id(camera_id)
    except CameraIdError as e:
        raise CamerasFileError(f"{pre}{e}") from None
    unknown = sorted(set(fields) - _FIELDS - {"id"})
    if unknown:
        raise CamerasFileError(f"{pre}camera {camera_id!r}: unknown field {unknown[0]!r} (fields: "
                               f"{', '.join(sorted(_FIELDS))})")
    if "url" not in fields:
        raise CamerasFileError(f"{pre}camera {camera_id!r}: url is required")
    monitors = fields.get("monitors", [])
    if not isinstance(monitors, list) or not all(isinstance(m, str) and m.strip() for m in monitors):
        raise CamerasFileError(f"{pre}camera {camera_id!r}: monitors must be a list of non-empty condition "
                               f"strings, got {monitors!r}")
    try:
        gate = check_gate(camera_id, fields.get("gate"))
        spec = CameraSpec(camera_id, fields["url"], fps=fields.get("fps"), realtime=fields.get("realtime", False),
                          stall_s=fields.get("stall_s", 20.0), max_retries=fields.get("max_retries"), gate=gate,
                          monitors=[m.strip() for m in monitors], backoff_s=fields.get("backoff_s", 1.0),
                          backoff_max_s=fields.get("backoff_max_s", 60.0),
                          connect_timeout_s=fields.get("connect_timeout_s"))
        spec.live_spec(1.0 if spec.fps is None else spec.fps)  # validates every reading field
    except ValueError as e:
        raise CamerasFileError(f"{pre}{e}") from None
    return spec


def load_cameras(path) -> list[CameraSpec]:
    """The cameras of a TOML cameras file, validated; CamerasFileError names camera and field."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CamerasFileError(f"{p}: cameras file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CamerasFileError(f"{p}: cannot read the cameras file ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise CamerasFileError(f"{p}: not valid TOML ({e})") from None
    extra = sorted(set(data) - {"defaults", "cameras", "camera"})
    if extra:
        raise CamerasFileError(f"{p}: unknown top-level key {extra[0]!r} (expected [defaults], [cameras.<id>] "
                               f"or [[camera]])")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict) or set(defaults) - _DEFAULTABLE:
        bad = sorted(set(defaults) - _DEFAULTABLE) if isinstance(defaults, dict) else ["(not a table)"]
        raise CamerasFileError(f"{p}: [defaults]: unknown or per-camera field {bad[0]!r} (defaults take: "
                               f"{', '.join(sorted(_DEFAULTABLE))})")
    entries: list[tuple[str, dict]] = []
    table = data.get("cameras", {})
    if not isinstance(table, dict):
        raise CamerasFileError(f"{p}: 'cameras' must be tables [cameras.<id>]; use [[camera]] for a list")
    for cam, fields in table.items():
        if not isinstance(fields, dict):
            raise CamerasFileError(f"{p}: camera {cam!r}: expected a table of fields, got {fields!r}")
        if "id" in fields and fields["id"] != cam:
            raise CamerasFileError(f"{p}: camera {cam!r}: id {fields['id']!r} differs from its table's name")
        entries.append((cam, fields))
    array = data.get("camera", [])
    if not isinstance(array, list):
        raise CamerasFileError(f"{p}: 'camera' must be an array of tables [[camera]]")
    for k, fields in enumerate(array):
        if not isinstance(fields, dict) or "id" not in fields:
            raise CamerasFileError(f"{p}: camera #{k + 1} of [[camera]]: id is required")
        entries.append((fields["id"], fields))
    specs, seen = [], set()
    for cam, fields in entries:
        if cam in seen:
            raise CamerasFileError(f"{p}: camera {cam!r} is defined twice")
        seen.add(cam)
        merged = {**defaults, **fields}
        if "gate" in defaults and "gate" in fields:
            merged["gate"] = {**defaults["gate"], **fields["gate"]}
        specs.append(make_spec(cam, merged, where=str(p)))
    return specs


def diff_cameras(old: list[CameraSpec], new: list[CameraSpec]) -> CameraDiff:
    before = {s.camera_id: s for s in old}
    after = {s.camera_id: s for s in new}
    changed = tuple(c for c in after if c in before and after[c].ingest_key() != before[c].ingest_key())
    return CameraDiff(
        added=tuple(c for c in after if c not in before),
        removed=tuple(c for c in before if c not in after),
        changed=changed,
        monitors_changed=tuple(c for c in after if c in before and c not in changed
                               and after[c].monitors != before[c].monitors))

