"""Synthetic gray sequences with a known right answer for the gate decisions, shared by
tests/gate/test_cascade.py and the calibration table of benchmarks/bench_gate.py (``--calibrate``),
so the defaults are chosen on the same inputs the tests hold them to.

Each sequence starts with the camera's first frame (kept: nothing to compare with) and then
holds frames that must all be dropped (``static_*``) or must all be kept (``sprite``,
``digits``), seen through sensor noise and, optionally, a JPEG or H.264 round trip.
"""
from __future__ import annotations

import io

import numpy as np

from .scenes import box_blur, gray_frame, gray_scene


def noisy(rng, img: np.ndarray, sigma: float) -> np.ndarray:
    """``img`` through Gaussian sensor noise of ``sigma`` gray levels, rounded to uint8."""
    out = img.astype(np.float32)
    if sigma > 0:
        out = out + rng.standard_normal(img.shape, dtype=np.float32) * np.float32(sigma)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)




def jpeg_roundtrip(gray: np.ndarray, quality: int) -> np.ndarray:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(gray).save(buf, format="JPEG", quality=int(quality))
    return np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("L"))


def h264_roundtrip(grays: list[np.ndarray], crf: int = 30, gop: int = 4) -> list[np.ndarray]:
    """The frames through libx264 (yuv420p, B-frames, a keyframe every ``gop``) and back: the
    artefacts a camera's stream adds, which differ between I, P and B frames."""
    import av

    h, w = grays[0].shape
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        st = out.add_stream("libx264", rate=30)
        st.width, st.height, st.pix_fmt = w, h, "yuv420p"
        st.options = {"crf": str(crf), "g": str(gop), "bf": "2", "preset": "ultrafast"}
        for g in grays:
            rgb = np.repeat(g[..., None], 3, axis=2)
            for p in st.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                out.mux(p)
        for p in st.encode():
            out.mux(p)
    buf.seek(0)
    with av.open(buf) as inp:
        return [f.to_ndarray(format="gray") for f in inp.decode(video=0)]


def static_scene(rng, n: int, h: int, w: int, sigma: float, codec: str | None = None,
                 quality: int = 75) -> list[np.ndarray]:
    """n frames of one still textured scene, fresh sensor noise of std ``sigma`` in each; codec
    None, "jpeg" (at ``quality``) or "h264". Every frame after the first must be dropped."""
    scene = gray_scene(rng, h, w)
    return through_codec([noisy(rng, scene, sigma) for _ in range(n)], codec, quality)


def sprite(rng, n: int, h: int, w: int, size: int = 16, sigma: float = 3.0, step: int = 24,
           codec: str | None = None) -> list[np.ndarray]:
    """A size x size sprite (a dark square with a bright cross: about 60 levels from the scene)
    crossing a still textured scene by ``step`` pixels a frame. Every frame must be kept."""
    scene = gray_scene(rng, h, w)
    spr = np.full((size, size), 40.0, np.float32)
    spr[size // 2 - 2:size // 2 + 2, :] = spr[:, size // 2 - 2:size // 2 + 2] = 230.0
    y0 = h // 3
    frames = []
    for i in range(n):
        img = scene.copy()
        x0 = 8 + i * step
        if x0 + size > w:
            raise ValueError(f"sprite: {n} steps of {step} px do not fit {w} px")
        img[y0:y0 + size, x0:x0 + size] = spr
        frames.append(noisy(rng, img, sigma))
    return through_codec(frames, codec)


def through_codec(frames: list[np.ndarray], codec: str | None, quality: int = 75) -> list[np.ndarray]:
    """The frames as a camera would deliver them: unchanged, or through JPEG (at ``quality``) or H.264."""
    if codec == "jpeg":
        return [jpeg_roundtrip(f, quality) for f in frames]
    if codec == "h264":
        return h264_roundtrip(frames)
    return frames


_SEGMENTS = {0: "abcdef", 1: "bc", 2: "abdeg", 3: "abcdg", 4: "bcfg", 5: "acdfg", 6: "acdefg", 7: "abc",
             8: "abcdefg", 9: "abcdfg"}


def _digit(img: np.ndarray, y: int, x: int, d: int, hgt: int = 24, stroke: int = 3, ink: float = 20.0) -> None:
    """A seven-segment digit ``d`` of height ``hgt`` drawn into img at (y, x)."""
    wd, half = hgt // 2, hgt // 2
    boxes = {"a": (0, 0, stroke, wd), "g": (half - stroke // 2, 0, stroke, wd), "d": (hgt - stroke, 0, stroke, wd),
             "f": (0, 0, half, stroke), "b": (0, wd - stroke, half, stroke),
             "e": (half, 0, half, stroke), "c": (half, wd - stroke, half, stroke)}
    for s in _SEGMENTS[d]:
        dy, dx, hh, ww = boxes[s]
        img[y + dy:y + dy + hh, x + dx:x + dx + ww] = ink


def digits(rng, n: int, h: int, w: int, sigma: float = 2.0, codec: str | None = None, hgt: int = 32,
           stroke: int = 4) -> list[np.ndarray]:
    """A still page (light paper, lines of dark 'text' blocks) with a four-digit counter of
    seven-segment digits ``hgt`` pixels high that counts up by one each frame (one digit changes,
    sometimes more; 8 -> 9 changes one segment). Every frame must be kept."""
    page = np.full((h, w), 225.0, np.float32)
    for y in range(12, h - 12, 14):  # text lines: dark words of random widths
        x = 10
        while x < w - 40:
            ww = int(rng.integers(10, 40))
            page[y:y + 6, x:x + ww] = 60.0
            x += ww + int(rng.integers(6, 14))
    pitch = hgt // 2 + hgt // 4
    y0, x0 = h // 2 - hgt // 2, w // 2 - 2 * pitch
    page[y0 - 4:y0 + hgt + 4, x0 - 4:x0 + 4 * pitch + 4] = 225.0  # the counter's blank box
    start = int(rng.integers(1000, 9000))
    frames = []
    for i in range(n):
        img = page.copy()
        for k, ch in enumerate(f"{start + i:04d}"):
            _digit(img, y0, x0 + pitch * k, int(ch), hgt, stroke)
        frames.append(noisy(rng, img, sigma))
    return through_codec(frames, codec)


def blurred(frame: np.ndarray, r: int = 4) -> np.ndarray:
    """A defocused copy of a frame: a (2r+1) box blur, twice (close to a Gaussian)."""
    out = box_blur(box_blur(frame.astype(np.float32)[..., None], r), r)[..., 0]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def low_texture(rng, h: int, w: int, level: float | None = None, sigma: float = 0.6,
                view: int | None = None) -> np.ndarray:
    """A sharp view with little texture (fog, night sky, a retina's background): a smooth wide
    gradient and a few sharp-edged faint blobs, faint noise. Laplacian variance well under 20.
    The same ``view`` number gives the same view (fresh noise from ``rng`` each time)."""
    noise_rng, rng = rng, (rng if view is None else np.random.default_rng(10_000 + view))
    level = float(rng.uniform(30, 200)) if level is None else level
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = level + 25.0 * np.sin(xx / w * rng.uniform(1, 3) + rng.uniform(0, 6)) * np.cos(yy / h * rng.uniform(1, 3))
    for _ in range(3):  # faint discs with hard edges: sharp, but few edge pixels
        cy, cx, r = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(min(h, w) / 10, min(h, w) / 4)
        img[(yy - cy) ** 2 + (xx - cx) ** 2 < r * r] += float(rng.choice([-1, 1])) * 6.0
    return noisy(noise_rng, img, sigma)


def textured(rng, h: int, w: int, sigma: float = 3.0) -> np.ndarray:
    """A sharp textured camera view (``synthetic.gray_frame``)."""
    return gray_frame(rng, h, w, noise=sigma)
