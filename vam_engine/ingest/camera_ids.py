"""Camera ids: the one check of an id a caller gives, and the ids of sources given without one.
Shared by every entry point that names a camera (the engine, its live cameras, a cluster's
router, the CLI)."""
from __future__ import annotations

from pathlib import Path

from .source import is_url

MAX_CAMERA_ID = 256


def check_camera_id(camera_id) -> str:
    """``camera_id`` unchanged when it is a non-empty string of at most 256 characters; else a
    ValueError naming it."""
    if not isinstance(camera_id, str) or not camera_id.strip() or len(camera_id) > MAX_CAMERA_ID:
        raise ValueError(f"camera_id must be a non-empty string of at most {MAX_CAMERA_ID} characters, "
                         f"got {camera_id!r}")
    return camera_id


def default_camera_ids(paths: list[str]) -> list[str]:
    """One id per source: a file's stem, a URL's last path segment ("stream" without one),
    made unique with "-2", "-3", ... in order."""
    ids = []
    for p in paths:
        base = Path(p).stem if not is_url(p) else p.rstrip("/").rsplit("/", 1)[-1] or "stream"
        cand, k = base, 2
        while cand in ids:
            cand, k = f"{base}-{k}", k + 1
        ids.append(cand)
    return ids
