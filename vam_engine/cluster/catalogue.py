"""The router's durable catalogue: which shards exist and where each camera and monitor lives.

A JSON file at ``<root>/cluster.json``, rewritten whole (write to a temporary file, fsync,
rename) on every change, so a router that crashes mid-write leaves the previous version and a
restarted router finds every placement. It is small: one line per shard, camera and monitor.

Cluster ids. Moments, events and alerts keep their shard's integer ids; the router hands out
``shard_no << SHARD_SHIFT | local_id`` (``shard_no`` is the shard's catalogue number, never
reused), so a cluster id names its shard, stays an integer (every HTTP route and record type
keeps working) and is below 2**53 (exact in JSON) for shard numbers under 2**12.
"""
from __future__ import annotations

import json
import os
import threading
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import VamError

SHARD_SHIFT = 40
MAX_SHARDS = 1 << 12
CATALOGUE = "cluster.json"


def cluster_id(shard_no: int, local_id: int) -> int:
    if not 0 <= local_id < (1 << SHARD_SHIFT):
        raise VamError(f"local id {local_id} does not fit a cluster id (below 2**{SHARD_SHIFT})")
    return (shard_no << SHARD_SHIFT) | local_id


def split_id(cid: int) -> tuple[int, int]:
    """(shard number, local id) of a cluster id."""
    if not isinstance(cid, int) or cid < 0:
        raise VamError(f"a cluster id is a non-negative integer, got {cid!r}")
    return cid >> SHARD_SHIFT, cid & ((1 << SHARD_SHIFT) - 1)


@dataclass
class ShardEntry:
    name: str
    no: int  # its number in cluster ids


@dataclass
class MonitorEntry:
    monitor_id: str                 # the router's id
    parts: dict[str, str]           # shard name -> the shard's own monitor id
    # a monitor of every camera: its condition and watch options, so a shard added later gets it too
    every_camera: dict | None = None


@dataclass
class CatalogueState:
    shards: list[ShardEntry] = field(default_factory=list)
    cameras: dict[str, str] = field(default_factory=dict)  # camera id -> shard name
    monitors: dict[str, MonitorEntry] = field(default_factory=dict)


class Catalogue:
    """``Catalogue(root)``: load (or start) ``<root>/cluster.json``; every change is durable on return."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.path = self.root / CATALOGUE
        self._lock = threading.RLock()
        self.state = self._load()

    def _load(self) -> CatalogueState:
        if not self.path.exists():
            return CatalogueState()
        try:
            raw = json.loads(self.path.read_text())
            return CatalogueState([ShardEntry(**s) for s in raw["shards"]], dict(raw["cameras"]),
                                  {k: MonitorEntry(**m) for k, m in raw["monitors"].items()})
        except (ValueError, KeyError, TypeError) as e:
            raise VamError(f"{self.path}: not a readable cluster catalogue ({e}); restore it or move it away") from None

    def _save(self) -> None:
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        data = {"shards": [asdict(s) for s in self.state.shards], "cameras": self.state.cameras,
                "monitors": {k: asdict(m) for k, m in self.state.monitors.items()}}
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    # -- shards ------------------------------------------------------------------------------
    def shards(self) -> list[ShardEntry]:
        with self._lock:
            return list(self.state.shards)

    def add_shard(self, name: str) -> ShardEntry:
        if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
            raise VamError(f"a shard name is letters, digits, '-' and '_', got {name!r}")
        with self._lock:
            for s in self.state.shards:
                if s.name == name:
                    return s
            no = max((s.no for s in self.state.shards), default=-1) + 1
            if no >= MAX_SHARDS:
                raise VamError(f"at most {MAX_SHARDS} shards per cluster")
            entry = ShardEntry(name, no)
            self.state.shards.append(entry)
            self._save()
            return entry

    def shard_by_no(self, no: int) -> ShardEntry:
        for s in self.shards():
            if s.no == no:
                return s
        raise VamError(f"no shard number {no} in {self.path} (an id from another cluster?)")

    # -- cameras -----------------------------------------------------------------------------
    def cameras(self) -> dict[str, str]:
        with self._lock:
            return dict(self.state.cameras)

    def place(self, camera_id: str) -> str:
        """The camera's shard: where it already is, else the shard with the fewest cameras (the
        first such in catalogue order), recorded before anything is sent to it."""
        with self._lock:
            got = self.state.cameras.get(camera_id)
            if got is not None:
                return got
            if not self.state.shards:
                raise VamError("the cluster has no shards to place a camera on")
            load = {s.name: 0 for s in self.state.shards}
            for shard in self.state.cameras.values():
                if shard in load:
                    load[shard] += 1
            target = min(self.state.shards, key=lambda s: load[s.name]).name
            self.state.cameras[camera_id] = target
            self._save()
            return target

    def forget_cameras(self, cameras) -> None:
        with self._lock:
            for c in cameras:
                self.state.cameras.pop(c, None)
            self._save()

    # -- monitors ----------------------------------------------------------------------------
    def add_monitor(self, parts: dict[str, str], every_camera: dict | None = None) -> MonitorEntry:
        with self._lock:
            entry = MonitorEntry(f"cmon_{uuid.uuid4().hex[:12]}", dict(parts), every_camera)
            self.state.monitors[entry.monitor_id] = entry
            self._save()
            return entry

    def add_monitor_part(self, monitor_id: str, shard: str, local_id: str) -> None:
        with self._lock:
            self.state.monitors[monitor_id].parts[shard] = local_id
            self._save()

    def monitor(self, monitor_id: str) -> MonitorEntry | None:
        with self._lock:
            return self.state.monitors.get(monitor_id)

    def monitors(self) -> list[MonitorEntry]:
        with self._lock:
            return list(self.state.monitors.values())

    def local_monitor(self, shard: str, local_id: str) -> str:
        """The router's id of a shard's monitor (the shard's own id when the router did not make it)."""
        with self._lock:
            for m in self.state.monitors.values():
                if m.parts.get(shard) == local_id:
                    return m.monitor_id
        return local_id
