"""Small generated clips for tests. Each frame shows its own index as a pattern of 8 big black
or white blocks, so a test can read back which source frame a decoder returned."""
from __future__ import annotations

from fractions import Fraction

import av
import numpy as np

W, H = 128, 96


def code_frame(index: int, w: int = W, h: int = H, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed * 100003 + index)
    img = rng.integers(60, 200, (h, w, 3), dtype=np.uint8)
    bw = w // 8
    for b in range(8):
        img[: h // 3, b * bw:(b + 1) * bw] = 255 if (index >> b) & 1 else 0
    return img


def read_code(rgb_or_gray: np.ndarray) -> int:
    g = rgb_or_gray if rgb_or_gray.ndim == 2 else rgb_or_gray.mean(axis=2)
    h, w = g.shape
    bw = w // 8
    return sum(1 << b for b in range(8) if g[2: h // 3 - 2, b * bw + 2:(b + 1) * bw - 2].mean() > 128)


def write_clip(path, pts_ms, *, codec="libx264", container=None, w=W, h=H, gop=10, bframes=0,
               frames=None, pix_fmt="yuv420p", seed=0, x264_params=None) -> list[float]:
    """Write frames at the given presentation times (ms). Returns the times in seconds."""
    with av.open(str(path), "w", format=container) as out:
        s = out.add_stream(codec, rate=30)
        s.width, s.height, s.pix_fmt = w, h, pix_fmt
        s.codec_context.time_base = Fraction(1, 1000)
        s.time_base = Fraction(1, 1000)
        if codec == "libx264":
            s.options = {"g": str(gop), "bf": str(bframes), "preset": "ultrafast", "crf": "18"}
            if x264_params:
                s.options["x264-params"] = x264_params
        for i, t in enumerate(pts_ms):
            img = code_frame(i, w, h, seed) if frames is None else frames[i]
            f = av.VideoFrame.from_ndarray(img, format="rgb24")
            f.pts = int(t)
            f.time_base = Fraction(1, 1000)
            for p in s.encode(f):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return [t / 1000.0 for t in pts_ms]
