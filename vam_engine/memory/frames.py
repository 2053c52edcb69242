"""Frame files: one JPEG per retained frame under ``frames/``, named by camera, source and time.

A file is written to a temporary name carrying its writer's pid and renamed into place before
the transaction inserting its row commits, so after a crash every row has its file; temporary
files of dead writers are swept on open.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

_SAFE = re.compile(r"[^A-Za-z0-9._-]")
try:
    import simplejpeg as _simplejpeg
except ImportError:  # PIL writes the JPEGs instead
    _simplejpeg = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by another user
        return True
    return True


def encode_jpeg(rgb, quality: int) -> bytes:
    """H x W x 3 uint8 RGB -> JPEG bytes (4:2:0, as PIL writes by default). libjpeg-turbo
    through simplejpeg when installed: about twice PIL's speed here (no Image object, no tile
    loop), and it releases the GIL, so encoder threads run beside the gate thread; else PIL."""
    if _simplejpeg is not None:
        import numpy as np

        return _simplejpeg.encode_jpeg(np.ascontiguousarray(rgb), quality, colorspace="RGB", colorsubsampling="420")
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


class FrameFiles:
    def __init__(self, root: Path):
        self.root = Path(root)
        (self.root / "frames").mkdir(exist_ok=True)

    def ref(self, camera_id: str, source_id: int, t_rel: float) -> str:
        """The path (relative to the store root) of a frame's file: deterministic, so a resumed
        run writes the same name."""
        cam = _SAFE.sub("_", camera_id)[:64] or "camera"
        return f"frames/{cam}/{source_id}/{int(round(t_rel * 1e6)):015d}.jpg"

    def path(self, frame_ref: str) -> Path:
        return self.root / frame_ref

    def write(self, frame_ref: str, rgb, quality: int) -> None:
        """Write a JPEG under a temporary name, then rename it into place. ``rgb`` is an
        H x W x 3 uint8 array or a callable returning one (so conversion runs here)."""
        rgb = rgb() if callable(rgb) else rgb
        path = self.root / frame_ref
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # pid: see sweep_temporaries
        with open(tmp, "wb") as f:
            f.write(encode_jpeg(rgb, quality))
        os.replace(tmp, path)

    def size(self, frame_ref: str) -> int | None:
        try:
            return (self.root / frame_ref).stat().st_size
        except OSError:
            return None

    def unlink(self, frame_ref: str) -> None:
        try:
            (self.root / frame_ref).unlink()
        except OSError:
            pass

    def source_files(self, camera_id: str, source_id: int) -> list[str]:
        """Refs of every frame file of one source on disk."""
        folder = (self.root / self.ref(camera_id, source_id, 0.0)).parent
        if not folder.is_dir():
            return []
        rel = folder.relative_to(self.root).as_posix()
        return [f"{rel}/{p.name}" for p in folder.glob("*.jpg")]

    def sweep_temporaries(self) -> None:
        """Temporary JPEGs left by a crash before their rename are never referenced. Those of a
        live writer (another process indexing into this store while this one opens it to read)
        are in flight and stay."""
        temporaries = [p for d in ("frames", "alerts", "monitors") for p in (self.root / d).rglob("*.tmp")]
        for p in temporaries:
            pid = p.name.rsplit(".", 2)[-2] if p.name.count(".") >= 3 else ""
            if pid.isdigit() and _alive(int(pid)):
                continue
            try:
                p.unlink()
            except OSError:
                pass
