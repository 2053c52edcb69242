"""Camera ids: the one check of an id a caller gives, the one reading of "a camera id or a list
of them", and the ids of sources given without one. Shared by every entry point that names a
camera (the engine, its live cameras, the memory's queries, the server, a cluster's router, the
CLI)."""
from __future__ import annotations

from pathlib import Path

from ..errors import VamError
from .source import is_url

MAX_CAMERA_ID = 256


class CameraIdError(VamError, ValueError):
    """A camera id, or a list of them, that is not one. A ValueError too: callers that check
    their arguments with ValueError keep doing so."""


def check_camera_id(camera_id) -> str:
    """``camera_id`` unchanged when it is a non-empty string of at most 256 characters; else a
    ValueError naming it."""
    if not isinstance(camera_id, str) or not camera_id.strip() or len(camera_id) > MAX_CAMERA_ID:
        raise CameraIdError(f"camera_id must be a non-empty string of at most {MAX_CAMERA_ID} characters, "
                         f"got {camera_id!r}")
    return camera_id


def camera_list(cameras, name: str = "cameras", *, nonempty: bool = False) -> list[str] | None:
    """What an argument that takes "one camera id or a list of them" means: None stays None (no
    scope: every camera), a string is a list of one, any other iterable a list in its order.
    Each id must be a non-empty string, else a CameraIdError naming ``name``; an empty list is
    kept (callers where it means every camera write ``camera_list(x) or None``) unless
    ``nonempty``, where it is an error too."""
    if cameras is None:
        return None
    if isinstance(cameras, str):
        cams = [cameras]
    elif isinstance(cameras, (bytes, dict)) or not hasattr(cameras, "__iter__"):
        cams = None  # bytes and mappings iterate, but into no list of ids a caller meant
    else:
        cams = list(cameras)
    if cams is None or (nonempty and not cams) or not all(isinstance(c, str) and c.strip() for c in cams):
        raise CameraIdError(f"{name} must be a camera id or a {'non-empty ' if nonempty else ''}list of them "
                            f"(non-empty strings), got {cameras!r:.120}")
    return cams


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
