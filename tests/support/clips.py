"""Small generated clips for tests, written by ``vam_engine.synthetic.write_rgb_clip``. By default
each frame shows its own index as a pattern of 8 big black or white blocks (``code_frame``), so
a test can read back which source frame a decoder returned (``read_code``)."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

from vam_engine.synthetic import write_rgb_clip

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


def write_clip(path, pts_ms, *, frames=None, w: int = W, h: int = H, seed: int = 0, codec: str = "libx264",
               container: str | None = None, gop: int = 10, bframes: int = 0, pix_fmt: str = "yuv420p",
               crf: int = 18, rate: int = 30, x264_params: str | None = None, options: dict | None = None,
               container_options: dict | None = None) -> list[float]:
    """Write frames at the given presentation times (ms): ``frames`` a list, or a callable(index)
    returning the frame (default: ``code_frame(index, w, h, seed)``). ``codec``, ``container``,
    ``options`` and ``container_options`` as ``write_rgb_clip`` takes them. Returns the times in
    seconds."""
    if frames is None:
        frame = lambda i: code_frame(i, w, h, seed)  # noqa: E731
    else:
        frame = frames if callable(frames) else frames.__getitem__
    opts = {**({"x264-params": x264_params} if x264_params else {}), **(options or {})}
    write_rgb_clip(path, (frame(i) for i in range(len(pts_ms))), pts_ms, Fraction(1, 1000), rate=rate, gop=gop,
                   bframes=bframes, crf=crf, codec=codec, pix_fmt=pix_fmt, options=opts, container=container,
                   container_options=container_options)
    return [t / 1000.0 for t in pts_ms]


def changing_clip(path, seconds: float, fps: int = 10, container: str | None = None, seed: int = 0) -> Path:
    """Every frame a new random texture carrying its index code (every sample is kept); GOP 1 s.
    Frame i is at i / fps seconds."""
    write_clip(path, [int(i * 1000 / fps) for i in range(int(seconds * fps))], gop=fps, container=container,
               seed=seed)
    return Path(path)
