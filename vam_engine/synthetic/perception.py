"""Generated inputs with known content for perception: signs and counters with known text,
photographs of known objects placed at known boxes, things crossing a scene, coloured shapes.
Shared by tests/perception and benchmarks/bench_perception.py (one generator per idea).

- ``perception_photo``: scikit-image's bundled photographs (``synthetic.photo``'s, plus
  ``motorcycle_left`` / ``motorcycle_right`` from its stereo pair and ``horse``), RGB uint8;
- ``backdrop``: a camera-like background without text-like texture (sky, walls, road, noise);
- ``draw_sign``: dark text on a light plate (a sign, a plate) with its box;
- ``place``: a sprite pasted at a position, with its box;
- ``crossing``: a sprite crossing a backdrop, sampled at given times (sparse sampling);
- ``text_clip``: frames with a static sign, a counter that changes every k frames and,
  optionally, a photograph moving about (non-text change), with the strings visible per frame;
- ``coloured_shape``: a single-colour shape on a background, for colour names;
- ``through_h264``: frames through an H.264 encode/decode round trip (codec artefacts).
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from .scenes import PHOTOS, box_blur, paste, photo, resize_rgb, write_rgb_clip

EXTRA_PHOTOS = ("motorcycle_left", "motorcycle_right", "horse")


def perception_photo(name: str) -> np.ndarray:
    """A bundled photograph as H x W x 3 uint8 RGB: ``synthetic.PHOTOS`` and EXTRA_PHOTOS."""
    if name in PHOTOS:
        return photo(name)
    if name not in EXTRA_PHOTOS:
        raise ValueError(f"perception_photo: {name!r} is not a bundled photograph "
                         f"({', '.join(PHOTOS + EXTRA_PHOTOS)})")
    import skimage.data

    if name == "horse":  # a silhouette (bool): dark horse on white
        img = np.where(np.asarray(skimage.data.horse()), 255, 40).astype(np.uint8)
        return np.repeat(img[..., None], 3, axis=2)
    left, right, _ = skimage.data.stereo_motorcycle()
    return np.ascontiguousarray(np.asarray(left if name == "motorcycle_left" else right)[..., :3])


def scaled(img: np.ndarray, height: int) -> np.ndarray:
    """``img`` scaled to ``height`` px, aspect kept."""
    return resize_rgb(img, height, max(1, round(img.shape[1] * height / img.shape[0])))


def backdrop(rng: np.random.Generator, h: int, w: int, *, noise: float = 2.0, tint=None) -> np.ndarray:
    """A street-like background: a sky gradient over a grey road, a few flat wall blocks with
    soft edges, mild sensor noise; no text-like texture. ``tint``: an RGB colour mixed in."""
    y = np.linspace(0, 1, h, dtype=np.float32)[:, None, None]
    sky = np.array([150, 175, 205], np.float32) * (1 - 0.3 * y)
    road = np.array([105, 105, 100], np.float32)
    img = np.where(y < 0.55, sky, road) * np.ones((1, w, 1), np.float32)
    for _ in range(3):
        bw, bh = int(rng.integers(w // 8, w // 3)), int(rng.integers(h // 6, h // 2))
        x0, y0 = int(rng.integers(0, w - bw)), int(rng.integers(h // 8, max(h // 8 + 1, int(h * 0.55) - bh)))
        img[y0:y0 + bh, x0:x0 + bw] = rng.uniform(70, 190, 3).astype(np.float32)
    if tint is not None:
        img = 0.6 * img + 0.4 * np.asarray(tint, np.float32)
    img = box_blur(img.astype(np.float32), 3)
    img = img + rng.normal(0, noise, img.shape).astype(np.float32)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def draw_sign(img: np.ndarray, text: str, x: int, y: int, size: int, *, fg=(15, 15, 15), bg=(240, 240, 235),
              pad: int = 10) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """A copy of ``img`` with ``text`` in ``fg`` on a ``bg`` plate whose top-left is (x, y);
    returns (image, plate box x0, y0, x1, y1). PIL's bundled scalable font: no system fonts."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=size)
    pil = Image.fromarray(img)
    d = ImageDraw.Draw(pil)
    _, _, x1, y1 = d.textbbox((x + pad, y + pad), text, font=font)
    box = (x, y, x1 + pad, y1 + pad)
    d.rectangle(box, fill=tuple(bg))
    d.text((x + pad, y + pad), text, fill=tuple(fg), font=font)
    return np.asarray(pil), box


def place(img: np.ndarray, sprite: np.ndarray, x: int, y: int) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """``paste`` returning the sprite's box clipped to the frame."""
    h, w = img.shape[:2]
    box = (max(0, x), max(0, y), min(w, x + sprite.shape[1]), min(h, y + sprite.shape[0]))
    return paste(img, sprite, x, y), box


@dataclass
class Crossing:
    """Frames of a sprite crossing a scene: ``times`` (seconds) and the sprite's ``boxes``."""

    frames: list[np.ndarray]
    times: list[float]
    boxes: list[tuple[int, int, int, int]]


def crossing(rng: np.random.Generator, sprite: np.ndarray, *, h: int, w: int, times, x_from: int, x_to: int,
             y: int, background: np.ndarray | None = None, noise: float = 2.0) -> Crossing:
    """``sprite`` moving at constant speed from x_from (at times[0]) to x_to (at times[-1]) along
    row ``y`` of a fixed backdrop, with fresh sensor noise per frame."""
    times = [float(t) for t in times]
    bg = background if background is not None else backdrop(rng, h, w, noise=0.0)
    span = max(times[-1] - times[0], 1e-9)
    frames, boxes = [], []
    for t in times:
        x = round(x_from + (x_to - x_from) * (t - times[0]) / span)
        f, box = place(bg, sprite, x, y)
        f = np.clip(f.astype(np.float32) + rng.normal(0, noise, f.shape), 0, 255).astype(np.uint8)
        frames.append(f)
        boxes.append(box)
    return Crossing(frames, times, boxes)


@dataclass
class TextClip:
    """Frames with known text: ``texts[i]`` the strings visible in frame i; ``counter_changed[i]``
    whether the counter differs from frame i - 1."""

    frames: list[np.ndarray]
    texts: list[tuple[str, ...]]
    counter_changed: list[bool] = field(default_factory=list)


def text_clip(rng: np.random.Generator, n: int, *, h: int = 720, w: int = 1280, sign: str = "GATE 4721",
              counter_start: int = 41, counter_every: int = 4, counter_size: int = 32,
              mover: str | None = "chelsea", mover_height: int = 180, noise: float = 2.0) -> TextClip:
    """``n`` frames of a fixed scene with a sign (``sign``), a 4-digit counter that steps every
    ``counter_every`` frames (0: never), and a photograph (``mover``) wandering about the lower
    half (a non-text change each frame; None: none)."""
    base = backdrop(rng, h, w, noise=0.0)
    base, _ = draw_sign(base, sign, int(w * 0.08), int(h * 0.12), max(12, h // 18))
    sprite = scaled(perception_photo(mover), mover_height) if mover else None
    frames, texts, changed = [], [], []
    value, prev = counter_start, None
    cx, cy = int(w * 0.62), int(h * 0.1)
    for i in range(n):
        if counter_every and i and i % counter_every == 0:
            value += 1
        label = f"{value:04d}"
        f, _ = draw_sign(base, label, cx, cy, counter_size, fg=(40, 230, 90), bg=(20, 20, 20))
        if sprite is not None:
            x = int(rng.integers(0, w - sprite.shape[1]))
            y = int(rng.integers(int(h * 0.45), h - sprite.shape[0]))
            f = paste(f, sprite, x, y)
        f = np.clip(f.astype(np.float32) + rng.normal(0, noise, f.shape), 0, 255).astype(np.uint8)
        frames.append(f)
        texts.append((sign, label))
        changed.append(prev is not None and label != prev)
        prev = label
    return TextClip(frames, texts, changed)


def coloured_shape(rng: np.random.Generator, colour, *, h: int = 240, w: int = 320, background=(110, 110, 105),
                   shape: str = "box", second=None, noise: float = 3.0) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """A ``colour`` shape ("box": a rounded body; "ellipse") on a ``background`` colour (an RGB
    triple or "texture": a noisy green field); ``second``: the lower half in another colour.
    Returns (frame, the shape's box with a 10% margin, as a detector's loose box would be)."""
    if isinstance(background, str):
        if background != "texture":
            raise ValueError(f"coloured_shape: background must be an RGB triple or 'texture', got {background!r}")
        img = np.array([60, 140, 50], np.float32) + rng.normal(0, 18, (h, w, 3)).astype(np.float32)
    else:
        img = np.ones((h, w, 3), np.float32) * np.asarray(background, np.float32)
    sh, sw = h // 2, w // 2
    y0, x0 = (h - sh) // 2, (w - sw) // 2
    yy, xx = np.mgrid[0:sh, 0:sw]
    if shape == "ellipse":
        mask = ((yy - sh / 2) / (sh / 2)) ** 2 + ((xx - sw / 2) / (sw / 2)) ** 2 <= 1
    elif shape == "box":
        r = min(sh, sw) // 5
        cy, cx = np.clip(yy, r, sh - 1 - r), np.clip(xx, r, sw - 1 - r)
        mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    else:
        raise ValueError(f"coloured_shape: shape must be 'box' or 'ellipse', got {shape!r}")
    region = img[y0:y0 + sh, x0:x0 + sw]
    region[mask] = np.asarray(colour, np.float32)
    if second is not None:
        low = np.zeros_like(mask)
        low[sh // 2:] = True
        region[mask & low] = np.asarray(second, np.float32)
    img = np.clip(img + rng.normal(0, noise, img.shape), 0, 255).astype(np.uint8)
    mx, my = sw // 10, sh // 10
    return img, (x0 - mx, y0 - my, x0 + sw + mx, y0 + sh + my)


def through_h264(frames: list[np.ndarray], *, crf: int = 28, gop: int = 8) -> list[np.ndarray]:
    """``frames`` (even sides) encoded as H.264 at ``crf`` and decoded again (RGB)."""
    import av

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "clip.mp4"
        write_rgb_clip(path, frames, list(range(len(frames))), Fraction(1, 30), gop=gop, crf=crf, bframes=0)
        with av.open(str(path)) as c:
            return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
