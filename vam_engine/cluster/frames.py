"""Frames the router shows its model: fetched from the shard when the router cannot read them.

A shard's store may sit on its node's local disk, where the router (on another node) cannot
open the frame files that ``ask``'s answerers and inspector load by path. FrameCache gives
each moment and evidence a path the router can read: the shard's own path when it exists here
(a shared root), else a copy fetched from the shard in one call per shard and read, and kept
under ``<root>/_router/frames`` (the oldest files go first past ``max_files``).
"""
from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path

from ..memory import Evidence, Moment
from .catalogue import cluster_id


class FrameCache:
    def __init__(self, router, directory: Path, *, max_files: int = 20_000, always_fetch: bool = False):
        """``always_fetch``: copy every frame, even one readable here (a root shared only in
        appearance, e.g. the same path mounted differently on each node)."""
        self._router = router
        self.dir = Path(directory)
        self.max_files = int(max_files)
        self.always_fetch = always_fetch
        self._lock = threading.Lock()
        self._written = 0

    def localize(self, records: list) -> list:
        """``records`` (Moments, Evidence, with cluster ids) with frame paths readable here."""
        wanted: dict[int, str] = {}  # cluster moment id -> the shard's path
        for r in records:
            for mid, path in _frames_of(r):
                if self.always_fetch or not os.path.exists(path):
                    wanted[mid] = path
        if not wanted:
            return list(records)
        local = self._fetch(list(wanted))
        return [_with_paths(r, local) for r in records]

    def _fetch(self, ids: list[int]) -> dict[int, str]:
        r = self._router
        path = {mid: self.dir / f"{mid}.jpg" for mid in ids}
        need: dict[str, list[int]] = {}
        for mid in ids:
            if not path[mid].exists():
                shard, loc = r.locate(mid)
                need.setdefault(shard, []).append(loc)
        if need:
            self.dir.mkdir(parents=True, exist_ok=True)
            out, _ = r.call_many({s: ("moment_frames", (locs,), {}) for s, locs in need.items()})
            for shard, frames in out.items():  # a shard that does not answer: its frames keep their paths
                no = r.shard_no(shard)
                for loc, data in frames.items():
                    if data is not None:
                        _write(path[cluster_id(no, loc)], data)
                        self._written += 1
            self._trim()
        return {mid: str(p) for mid, p in path.items() if p.exists()}

    def _trim(self) -> None:
        with self._lock:
            if self._written < self.max_files // 10:
                return
            self._written = 0
            files = sorted(self.dir.glob("*.jpg"), key=lambda p: p.stat().st_mtime)
            for p in files[:max(0, len(files) - self.max_files)]:
                p.unlink(missing_ok=True)


def _frames_of(r) -> list[tuple[int, str]]:
    if isinstance(r, Moment):
        return [(r.moment_id, r.frame_path)]
    if isinstance(r, Evidence):
        return list(zip(r.moment_ids, r.frame_paths))
    return []


def _with_paths(r, local: dict[int, str]):
    if isinstance(r, Moment):
        return replace(r, frame_path=local.get(r.moment_id, r.frame_path))
    if isinstance(r, Evidence):
        return replace(r, frame_paths=tuple(local.get(m, p) for m, p in zip(r.moment_ids, r.frame_paths)))
    return r


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
