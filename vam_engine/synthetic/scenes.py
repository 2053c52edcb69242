"""Synthetic pictures and clips with known content, shared by the demo, the tests and the
benchmarks (one generator per idea, so a test and the benchmark that measures the same path see
the same kind of input).

- ``gray_scene`` / ``gray_frame``: a camera-like gray scene (illumination, flat objects with hard
  edges, fine texture) for the gate statistics;
- ``gate_batch``: frames of one panning camera plus the reference ("last kept") frame;
- ``rgb_frames``: colour frames of a few distinct scenes, for embedders;
- ``scene_image`` and ``box_blur``: the demo clip's textured colour scenes;
- ``write_scene_clip``: an H.264 clip (PyAV) of panning, static and defocused scenes with a fixed
  GOP and B-frames, written as yuv420p directly;
- photographs (scikit-image's bundled pictures, no download): ``photo``, ``photo_strip`` and
  ``photo_wall`` (canvases to pan over), ``defocus`` (Gaussian blur), ``haze`` (fog and night:
  sharp but low contrast), ``draw_digits`` (a counter display) and ``paste`` (a small sprite);
- ``write_rgb_clip``: an H.264 clip of RGB frames at the PTS the caller gives (variable frame
  rate, any start time), ``vfr_pts`` to make such PTS and ``frame_times`` to read them back.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np


# -- gray frames (gate statistics) -------------------------------------------------------------------
def gray_scene(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A float32 h x w scene in roughly [0, 255]: smooth illumination, a few flat rectangles with
    hard edges, and a fine texture a few pixels in period (so the blur gate has detail to see)."""
    if h < 1 or w < 1:
        raise ValueError(f"gray_scene: size {h}x{w} must be at least 1x1")
    y = np.linspace(0.0, 1.0, h, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, w, dtype=np.float32)[None, :]
    gx, gy = rng.uniform(-60, 60, 2).astype(np.float32)
    img = 120 + gx * (x - 0.5) + gy * (y - 0.5)
    f1, f2, ph = rng.uniform(0.5, 3.0), rng.uniform(0.5, 3.0), rng.uniform(0, 6.28)
    two_pi = np.float32(2 * np.pi)
    img = img + np.float32(25) * np.sin(two_pi * np.float32(f1) * x + np.float32(ph)) \
        * np.cos(two_pi * np.float32(f2) * y)
    for _ in range(14):  # objects: flat rectangles
        bh, bw = int(rng.integers(h // 20 + 1, h // 3 + 2)), int(rng.integers(w // 20 + 1, w // 3 + 2))
        y0, x0 = int(rng.integers(0, max(1, h - bh))), int(rng.integers(0, max(1, w - bw)))
        img[y0:y0 + bh, x0:x0 + bw] += np.float32(rng.uniform(-60, 60))
    kx, ky = rng.uniform(0.6, 1.4, 2) * np.float32(np.pi / 2)
    img = img + np.float32(7) * np.sin(np.arange(w, dtype=np.float32)[None, :] * np.float32(kx)) \
        * np.sin(np.arange(h, dtype=np.float32)[:, None] * np.float32(ky))
    return img


def gray_frame(rng: np.random.Generator, h: int, w: int, noise: float = 3.0) -> np.ndarray:
    """``gray_scene`` with Gaussian sensor noise of std ``noise``, as uint8."""
    img = gray_scene(rng, h, w)
    if noise > 0:
        img = img + rng.standard_normal((h, w), dtype=np.float32) * np.float32(noise)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def near_copy(rng: np.random.Generator, frame: np.ndarray, spread: int = 2) -> np.ndarray:
    """``frame`` with every pixel moved by at most ``spread`` levels (SSIM close to 1)."""
    d = rng.integers(-spread, spread + 1, frame.shape, dtype=np.int16)
    return np.clip(frame.astype(np.int16) + d, 0, 255).astype(np.uint8)


@dataclass
class GateBatch:
    """Frames (n x h x w uint8) and the reference frame (h x w) they are gated against."""
    frames: np.ndarray
    ref: np.ndarray


def gate_batch(rng: np.random.Generator, n: int, h: int, w: int, noise: float = 3.0) -> GateBatch:
    """n frames of one panning camera plus its reference (the 'last kept' frame). Frame 0 is a
    near copy of the reference (SSIM ~ 1); the others pan away from it, each with sensor noise."""
    if n < 1:
        raise ValueError(f"gate_batch: n={n} frames, need at least 1")
    pad = 3 * (n + 1)
    base = gray_scene(rng, h + pad, w + pad)
    out = np.empty((n + 1, h, w), np.uint8)
    for i in range(n + 1):
        dy, dx = (i * 2) % pad, (i * 3) % pad
        img = base[dy:dy + h, dx:dx + w] + rng.standard_normal((h, w), dtype=np.float32) * np.float32(noise)
        np.clip(img, 0, 255, out=img)
        out[i] = img
    ref = out[0].copy()
    frames = out[1:].copy()
    frames[0] = near_copy(rng, ref)
    return GateBatch(frames, ref)


# -- colour frames ------------------------------------------------------------------------------------
def rgb_frames(rng: np.random.Generator, n: int, h: int, w: int, distinct: int = 16) -> np.ndarray:
    """n x h x w x 3 uint8 frames: ``distinct`` different scenes (each channel its own gray
    scene), repeated in order."""
    base = [np.stack([np.clip(gray_scene(rng, h, w), 0, 255) for _ in range(3)], -1).astype(np.uint8)
            for _ in range(max(1, min(n, distinct)))]
    return np.stack([base[i % len(base)] for i in range(n)]) if n else np.empty((0, h, w, 3), np.uint8)


def scene_image(k: int, h: int, w: int) -> np.ndarray:
    """The k-th textured colour scene (float32 h x w x 3 in [0, 255]): sinusoidal shading per
    channel and 16-pixel blocks; the same k gives the same picture."""
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


def box_blur(img: np.ndarray, r: int) -> np.ndarray:
    """A (2r+1)-wide box blur of an h x w x c image along both axes (edges replicated)."""
    out = img.copy()
    for axis in (0, 1):
        acc = np.cumsum(np.pad(out, [(r + 1, r) if a == axis else (0, 0) for a in range(out.ndim)], mode="edge"),
                        axis=axis)
        hi = np.take(acc, np.arange(2 * r + 1, acc.shape[axis]), axis=axis)
        lo = np.take(acc, np.arange(0, acc.shape[axis] - 2 * r - 1), axis=axis)
        out = (hi - lo) / (2 * r + 1)
    return out


# -- an H.264 clip ------------------------------------------------------------------------------------
SCENE_KINDS = ("pan", "static", "pan_fast", "blur", "static", "pan")  # cycled; scene lengths 3-5 s


@dataclass
class SceneClip:
    """What ``write_scene_clip`` wrote: the file, its format and its scenes (start s, length s, kind)."""
    path: str
    width: int
    height: int
    fps: int
    frames: int
    gop_frames: int
    bframes: int
    scenes: list = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.frames / self.fps


def _scene_planes(k: int, kind: str, h: int, w: int, pad: int, rng):
    """A scene's luma and chroma canvases (larger than the frame, so pans can crop them)."""
    hh, ww = h + pad, w + pad
    yy, xx = np.mgrid[0:hh, 0:ww].astype(np.float32)
    base = rng.uniform(60, 190)
    fx, fy = rng.uniform(0.004, 0.02, 2)
    y = base + 35 * np.sin(fx * xx + rng.uniform(0, 6.3)) * np.cos(fy * yy) + 25 * (yy / hh - 0.5)
    if kind != "blur":  # blocky texture and fine detail; a "blur" scene is smooth shading only
        b = int(rng.integers(8, 24))
        blocks = rng.integers(0, 2, (hh // b + 1, ww // b + 1)).repeat(b, 0).repeat(b, 1)[:hh, :ww]
        y += blocks.astype(np.float32) * 50 - 25
        y += 8 * np.sin(xx * rng.uniform(0.5, 1.2)) * np.sin(yy * rng.uniform(0.5, 1.2))
    y = np.clip(y, 16, 235).astype(np.uint8)
    cu, cv = rng.uniform(90, 166, 2)
    uy, ux = np.mgrid[0:hh // 2, 0:ww // 2].astype(np.float32)
    u = np.clip(cu + 20 * np.sin(ux * 0.01 + k), 16, 240).astype(np.uint8)
    v = np.clip(cv + 20 * np.cos(uy * 0.013 + k), 16, 240).astype(np.uint8)
    return y, u, v


def write_scene_clip(path: str | Path, *, width: int, height: int, fps: int = 30, seconds: float = 10.0,
                     gop_s: float = 2.0, bframes: int = 2, seed: int = 7, codec: str = "libx264") -> SceneClip:
    """Write an H.264 clip (libx264 ultrafast, fixed GOP, B-frames) with a scene change every
    3-5 s: panning textured scenes, a static scene and a defocused (smooth) one, cycled. The file
    appears only when complete (written under a temporary name, then renamed)."""
    import av

    if width % 2 or height % 2 or width < 16 or height < 16:
        raise ValueError(f"write_scene_clip: size {width}x{height} must be even and at least 16x16 (yuv420p)")
    if seconds <= 0 or fps <= 0:
        raise ValueError(f"write_scene_clip: seconds={seconds} and fps={fps} must be positive")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    n_frames = int(round(seconds * fps))
    pad = 384  # a 5 s scene at 2.5 px/frame pans 375 px
    scenes, t = [], 0.0
    while t < seconds:
        length = float(rng.integers(3, 6))
        scenes.append((t, min(length, seconds - t), SCENE_KINDS[len(scenes) % len(SCENE_KINDS)]))
        t += length
    g = max(1, int(round(gop_s * fps)))
    tmp = path.with_suffix(".tmp" + path.suffix)
    with av.open(str(tmp), "w") as out:
        s = out.add_stream(codec, rate=fps)
        s.width, s.height, s.pix_fmt = width, height, "yuv420p"
        s.codec_context.time_base = Fraction(1, fps)
        if codec == "libx264":
            s.options = {"preset": "ultrafast", "crf": "23", "g": str(g), "keyint_min": str(g), "sc_threshold": "0",
                         "bf": str(bframes)}
        else:
            s.options = {"g": str(g), "bf": str(bframes)}
        frame_buf = np.empty((height * 3 // 2, width), np.uint8)
        i = 0
        for k, (t0, length, kind) in enumerate(scenes):
            y, u, v = _scene_planes(k, kind, height, width, pad, rng)
            n = int(round((t0 + length) * fps)) - int(round(t0 * fps))
            speed = {"pan": 1.0, "pan_fast": 2.5}.get(kind, 0.0)  # pixels per frame, horizontal
            for j in range(n):
                if i >= n_frames:
                    break
                dx = (int(j * speed) // 2) * 2 % pad
                dy = (int(j * speed * 0.4) // 2) * 2 % pad
                frame_buf[:height] = y[dy:dy + height, dx:dx + width]
                qu = u[dy // 2:dy // 2 + height // 2, dx // 2:dx // 2 + width // 2]
                qv = v[dy // 2:dy // 2 + height // 2, dx // 2:dx // 2 + width // 2]
                frame_buf[height:height + height // 4] = qu.reshape(height // 4, width)
                frame_buf[height + height // 4:] = qv.reshape(height // 4, width)
                f = av.VideoFrame.from_ndarray(frame_buf, format="yuv420p")
                f.pts = i
                for p in s.encode(f):
                    out.mux(p)
                i += 1
        for p in s.encode():
            out.mux(p)
    os.replace(tmp, path)
    return SceneClip(str(path), width, height, fps, i, g, bframes,
                     [(round(a, 3), round(b, 3), c) for a, b, c in scenes])


# -- photographs ----------------------------------------------------------------------------------------
PHOTOS = ("astronaut", "camera", "cat", "chelsea", "coffee", "moon", "retina", "rocket", "page", "brick",
          "grass", "gravel", "hubble_deep_field", "coins", "text", "clock")


def photo(name: str) -> np.ndarray:
    """One of scikit-image's bundled photographs as H x W x 3 uint8 RGB (gray ones replicated, an
    alpha channel dropped); only pictures shipped with the package, nothing is downloaded."""
    if name not in PHOTOS:
        raise ValueError(f"photo: {name!r} is not one of the bundled photographs {', '.join(PHOTOS)}")
    import skimage.data

    img = np.asarray(getattr(skimage.data, name)())
    if img.dtype != np.uint8:  # some are stored as float or bool
        img = np.clip(img.astype(np.float64) * (255.0 if img.max() <= 1.0 else 1.0), 0, 255).astype(np.uint8)
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=2)
    return np.ascontiguousarray(img[..., :3])


def resize_rgb(img: np.ndarray, h: int, w: int) -> np.ndarray:
    """``img`` resized to h x w (area averaging when shrinking, bicubic when enlarging)."""
    import cv2

    if h < 1 or w < 1:
        raise ValueError(f"resize_rgb: size {h}x{w} must be at least 1x1")
    shrink = h * w < img.shape[0] * img.shape[1]
    return cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)


def photo_strip(names, height: int) -> np.ndarray:
    """Photographs scaled to ``height`` (aspect kept) and set side by side: a wide canvas a camera
    can pan across."""
    if not names:
        raise ValueError("photo_strip: no photograph names given")
    parts = []
    for n in names:
        p = photo(n)
        parts.append(resize_rgb(p, height, max(1, round(p.shape[1] * height / p.shape[0]))))
    return np.ascontiguousarray(np.concatenate(parts, axis=1))


def photo_wall(rows, row_height: int) -> np.ndarray:
    """Rows of ``photo_strip`` stacked, each cropped to the narrowest row: a canvas for large
    frames at (close to) the photographs' own resolution, so they stay sharp."""
    strips = [photo_strip(r, row_height) for r in rows]
    w = min(s.shape[1] for s in strips)
    return np.ascontiguousarray(np.concatenate([s[:, :w] for s in strips], axis=0))


def defocus(img: np.ndarray, sigma: float) -> np.ndarray:
    """A Gaussian blur of std ``sigma`` pixels (an out-of-focus lens)."""
    import cv2

    if sigma <= 0:
        raise ValueError(f"defocus: sigma={sigma} must be positive")
    return cv2.GaussianBlur(img, (0, 0), sigma, borderType=cv2.BORDER_REFLECT_101)


def haze(img: np.ndarray, keep: float, veil: float) -> np.ndarray:
    """``keep * img + (1 - keep) * veil``: fog (a bright veil) or a night scene (a dark one). The
    picture stays sharp, its contrast (and so its Laplacian variance) falls by keep**2."""
    if not 0 < keep <= 1 or not 0 <= veil <= 255:
        raise ValueError(f"haze: keep={keep} must be in (0, 1] and veil={veil} in [0, 255]")
    return np.clip(np.rint(img.astype(np.float32) * keep + (1 - keep) * veil), 0, 255).astype(np.uint8)


def draw_digits(img: np.ndarray, text: str, x: int, y: int, size: int, *, fg=(40, 230, 90),
                bg=(20, 20, 20), pad: int = 6) -> np.ndarray:
    """A copy of ``img`` with ``text`` drawn as a counter display: ``fg`` glyphs of ``size``
    pixels on a ``bg`` box whose top-left corner is (x, y). The box is sized for ``text``'s
    length in '8's, so changing the digits changes the glyphs only."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=size)
    pil = Image.fromarray(img)
    d = ImageDraw.Draw(pil)
    _, _, x1, y1 = d.textbbox((x + pad, y + pad), "8" * len(text), font=font)
    d.rectangle((x, y, x1 + pad, y1 + pad), fill=tuple(bg))
    d.text((x + pad, y + pad), text, fill=tuple(fg), font=font)
    return np.asarray(pil)


def paste(img: np.ndarray, sprite: np.ndarray, x: int, y: int) -> np.ndarray:
    """A copy of ``img`` with ``sprite`` over it at top-left (x, y), clipped at the borders (a
    sprite partly or wholly outside the frame is drawn partly or not at all)."""
    out = img.copy()
    h, w = sprite.shape[:2]
    ya, xa, yb, xb = max(0, y), max(0, x), min(img.shape[0], y + h), min(img.shape[1], x + w)
    if ya < yb and xa < xb:
        out[ya:yb, xa:xb] = sprite[ya - y:yb - y, xa - x:xb - x]
    return out


# -- clips of RGB frames at given PTS ----------------------------------------------------------------------
@dataclass
class WrittenClip:
    """What ``write_rgb_clip`` wrote: the file, its size, its time base and every frame's PTS in
    that time base (display order, as written)."""
    path: str
    width: int
    height: int
    time_base: Fraction
    pts: list

    def times(self) -> list[float]:
        return [float(p * self.time_base) for p in self.pts]


def vfr_pts(rng: np.random.Generator, seconds: float, *, start_s: float = 0.0,
            time_base: Fraction = Fraction(1, 90000), rates=(30.0, 24.0, 15.0, 10.0),
            run_s=(1.0, 4.0), gap_every_s: float = 20.0, gap_s: float = 1.2) -> list[int]:
    """PTS (in ``time_base``) of a variable-frame-rate stream of ``seconds`` starting at ``start_s``:
    runs of ``run_s`` seconds at a rate drawn from ``rates`` with +-10% jitter per frame, and a
    ``gap_s`` hole (a camera that stalled) every ``gap_every_s`` seconds."""
    if seconds <= 0 or start_s < 0:
        raise ValueError(f"vfr_pts: seconds={seconds} must be positive and start_s={start_s} not negative")
    per_s = 1 / time_base
    out, t, next_gap = [], 0.0, gap_every_s
    while t < seconds:
        rate, end = float(rng.choice(rates)), t + float(rng.uniform(*run_s))
        while t < min(end, seconds):
            p = int(round((start_s + t) * per_s))
            if not out or p > out[-1]:
                out.append(p)
            t += float(rng.uniform(0.9, 1.1)) / rate
            if gap_every_s > 0 and t >= next_gap:
                t, next_gap = t + gap_s, next_gap + gap_every_s
    return out


def write_rgb_clip(path: str | Path, frames, pts, time_base: Fraction, *, rate: int = 30, gop: int = 60,
                   bframes: int = 2, crf: int = 23, preset: str = "ultrafast", codec: str = "libx264",
                   pix_fmt: str = "yuv420p", options: dict | None = None, container: str | None = None,
                   container_options: dict | None = None) -> WrittenClip:
    """Encode RGB frames (an iterable of H x W x 3 uint8, one per entry of ``pts``) at exactly the
    PTS given (strictly increasing, in ``time_base``); ``rate`` is only the encoder's rate-control
    hint. H.264 in an MP4 by default (fixed GOPs of ``gop`` frames); another ``codec`` (VP9, MJPEG,
    ...) gets only its GOP size, ``options`` are the encoder's own (``x264-params``, ...) over these,
    ``container`` a format name where the suffix does not say it, ``container_options`` the muxer's
    (``movflags``). The file appears only when complete."""
    import av

    pts = [int(p) for p in pts]
    if not pts or any(b <= a for a, b in zip(pts, pts[1:])) or pts[0] < 0:
        raise ValueError(f"write_rgb_clip: pts must be non-empty, non-negative and strictly increasing ({path})")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp" + path.suffix)
    n, shape = 0, None
    with av.open(str(tmp), "w", format=container, options=container_options or {}) as out:
        s = None
        for img, p in zip(frames, pts):
            if s is None:
                shape = img.shape
                if img.ndim != 3 or img.shape[2] != 3 or img.shape[0] % 2 or img.shape[1] % 2:
                    raise ValueError(f"write_rgb_clip: frames must be H x W x 3 with even sides, got {img.shape}")
                s = out.add_stream(codec, rate=rate)
                s.width, s.height, s.pix_fmt = img.shape[1], img.shape[0], pix_fmt
                s.codec_context.time_base = time_base
                s.time_base = time_base
                if codec == "libx264":
                    s.options = {"preset": preset, "crf": str(crf), "g": str(gop), "keyint_min": str(gop),
                                 "sc_threshold": "0", "bf": str(bframes), **(options or {})}
                else:
                    s.codec_context.gop_size = gop
                    s.options = dict(options or {})
            elif img.shape != shape:
                raise ValueError(f"write_rgb_clip: frame {n} is {img.shape}, the clip is {shape}")
            f = av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")
            f.pts, f.time_base = p, time_base
            for pkt in s.encode(f):
                out.mux(pkt)
            n += 1
        if n != len(pts):
            raise ValueError(f"write_rgb_clip: {n} frames for {len(pts)} PTS ({path})")
        for pkt in s.encode():
            out.mux(pkt)
    os.replace(tmp, path)
    return WrittenClip(str(path), shape[1], shape[0], time_base, pts)


def frame_times(path: str | Path) -> list[float]:
    """Every decoded frame's PTS in seconds (the container's time, not relative to its start), in
    display order."""
    import av

    with av.open(str(path)) as c:
        s = c.streams.video[0]
        return sorted(float(f.pts * s.time_base) for f in c.decode(s) if f.pts is not None)
