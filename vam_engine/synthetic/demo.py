"""A built-in example: a short H.264 clip with known scene changes, a blurred stretch and a
static stretch, so the gates have something to decide on every path."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from .scenes import box_blur, scene_image

# (seconds, kind): each scene is a distinct textured image; "pan" moves it (every sample kept),
# "static" holds it (low change), "flicker" brightens and darkens it every 2 s (a large mean
# difference but the same structure: SSIM-redundant), "blur" shows a defocused version.
DEMO_SCENES = [(8, "pan"), (8, "static"), (8, "flicker"), (6, "blur"), (10, "pan")]


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
            big = scene_image(k, height + 64, width + 64)
            sharp = big[:height, :width]
            blurred = box_blur(sharp, 6) if kind == "blur" else None
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
