"""A built-in example: a short H.264 clip with known scene changes, a blurred stretch and a
static stretch, so the gates have something to decide on every path."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

# (seconds, kind): each scene is a distinct textured image; "pan" moves it (every sample kept),
# "static" holds it (low change), "flicker" brightens and darkens it every 2 s (a large mean
# difference but the same structure: SSIM-redundant), "blur" shows a defocused version.
DEMO_SCENES = [(8, "pan"), (8, "static"), (8, "flicker"), (6, "blur"), (10, "pan")]


def _scene_image(k: int, h: int, w: int) -> np.ndarray:
    rng = np.random.default_rng(1000 + k)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    base = rng.uniform(40, 215, 3).astype(np.float32)
    img = np.empty((h, w, 3), np.float32)
    for c in range(3):
        fx, fy, ph = rng.uniform(0.02, 0.12, 2).tolist() + [rng.uniform(0, 6.28)]
        img[..., c] = base[c] + 40 * np.sin(fx * xx + ph) * np.cos(fy * yy)
    blocks = rng.integers(0, 2, (h // 16 + 1, w // 16 + 1)).repeat(16, 0).repeat(16, 1)[:h, :w]
    img += (blocks[..., None] * 60 - 30)
    return np.clip(img, 0, 255)


def _box_blur(img: np.ndarray, r: int) -> np.ndarray:
    out = img.copy()
    for axis in (0, 1):
        acc = np.cumsum(np.pad(out, [(r + 1, r) if a == axis else (0, 0) for a in range(3)], mode="edge"), axis=axis)
        hi = np.take(acc, np.arange(2 * r + 1, acc.shape[axis]), axis=axis)
        lo = np.take(acc, np.arange(0, acc.shape[axis] - 2 * r - 1), axis=axis)
        out = (hi - lo) / (2 * r + 1)
    return out


def make_demo_clip(path: str | Path, *, width: int = 320, height: int = 240, fps: int = 10,
                   scenes=DEMO_SCENES) -> dict:
    """Write the clip and return what it contains: scene start times and kinds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    starts, t = [], 0.0
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.time_base = Fraction(1, fps)
        stream.options = {"g": str(2 * fps), "preset": "ultrafast", "crf": "20"}
        n = 0
        for k, (secs, kind) in enumerate(scenes):
            starts.append((t, kind))
            big = _scene_image(k, height + 64, width + 64)
            sharp = big[:height, :width]
            blurred = _box_blur(sharp, 6) if kind == "blur" else None
            for i in range(secs * fps):
                if kind == "pan":
                    dx = int(i * 64 / (secs * fps))
                    img = big[dx // 2: dx // 2 + height, dx: dx + width]
                elif kind == "blur":
                    img = blurred
                elif kind == "flicker":
                    img = np.clip(sharp + (30.0 if (i // (2 * fps)) % 2 else 0.0), 0, 255)
                else:
                    img = sharp
                frame = av.VideoFrame.from_ndarray(img.astype(np.uint8), format="rgb24")
                frame.pts = n
                for p in stream.encode(frame):
                    out.mux(p)
                n += 1
            t += secs
        for p in stream.encode():
            out.mux(p)
    return {"path": str(path), "duration_s": t, "scenes": starts, "fps": fps, "size": (width, height)}
