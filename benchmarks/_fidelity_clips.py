"""bench_fidelity.py's clips: shots of real photographs (scikit-image's) with their ground-truth
segments, written as H.264 clips with known PTS and cached by their parameters and this code."""
from __future__ import annotations

import bisect
import hashlib
import inspect
import json
import sys
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Callable

import numpy as np

from vam_engine import synthetic as syn

MUST_KEEP = ("scene", "pan", "digits", "object")
SMALL = ("digits", "object")
LOW_TEXTURE = "low_texture"
BLUR = "blur"
KINDS = MUST_KEEP + (LOW_TEXTURE, BLUR)
PTS_TOL = 1e-6


# -- ground truth -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Segment:
    """A stretch of a clip, [t0, t1) in clip-relative seconds, of one kind (see KINDS)."""
    kind: str
    t0: float
    t1: float
    note: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Segment: kind {self.kind!r} is not one of {KINDS}")
        if not self.t1 > self.t0:
            raise ValueError(f"Segment {self.kind} {self.note!r}: t1={self.t1} must be after t0={self.t0}")

    def contains(self, t: float) -> bool:
        return self.t0 - 1e-9 <= t < self.t1


@dataclass
class Shot:
    """What the camera shows for ``seconds``: ``render(local_t)`` gives the RGB frame; segments
    are in shot-local seconds. ``view``: the shot starts a new view (a cut); else it goes on
    with the previous shot's view (a pan from a still, the view refocused, a digit changed)."""
    seconds: float
    render: Callable[[float], np.ndarray]
    segments: list = field(default_factory=list)
    view: bool = True


@dataclass(frozen=True)
class View:
    """The span between two cuts, [t0, t1) clip-relative; ``blurred``: every segment in it is
    a heavy-blur one (no sample of it is sharp)."""
    t0: float
    t1: float
    blurred: bool

    def contains(self, t: float) -> bool:
        return self.t0 - 1e-9 <= t < self.t1


@dataclass
class Clip:
    """A generated clip: its file, every frame's time (clip-relative, from the decoded PTS) and
    its ground-truth segments."""
    name: str
    path: str
    width: int
    height: int
    duration_s: float
    frame_times: list
    segments: list
    start_s: float = 0.0
    vfr: bool = False
    views: list = field(default_factory=list)

    @property
    def frames(self) -> int:
        return len(self.frame_times)


# -- clips: shots and their segments -------------------------------------------------------------------
def still(img, seconds: float, kind: str | None = "scene", note: str = "", view: bool | None = None) -> Shot:
    """A static view; ``kind`` labels the whole shot (None: no segment, e.g. a refocused view);
    ``view``: a new view (default: when it has a segment)."""
    return Shot(seconds, lambda t: img, [Segment(kind, 0.0, seconds, note)] if kind else [],
                kind is not None if view is None else view)


def pan(canvas, h: int, w: int, seconds: float, *, x0: int = 0, y0: int = 0, speed: float,
        dy_per_s: float = 0.0, kind: str | None = "pan", note: str = "", cut: bool = False) -> Shot:
    """A view of h x w panning right over ``canvas`` at ``speed`` px/s. Segments: every stretch
    over which the view moved by half a frame width (the last one when at least half as long),
    labelled ``kind``; with ``cut`` the pan starts on a new view, its first stretch a ``scene``
    (or low-texture) segment."""
    xmax, ymax = canvas.shape[1] - w, canvas.shape[0] - h
    if x0 + speed * seconds > xmax + 1 or y0 + dy_per_s * seconds > ymax + 1 or speed <= 0:
        raise ValueError(f"pan {note!r}: {seconds} s at {speed} px/s from x={x0} leaves the "
                         f"{canvas.shape[1]}x{canvas.shape[0]} canvas")

    def render(t):
        x, y = min(xmax, int(x0 + speed * t)), min(ymax, int(y0 + dy_per_s * t))
        return canvas[y:y + h, x:x + w]
    win = (w / 2) / speed
    segs = []
    k = 0 if cut else 1
    while k * win < seconds:
        a, b = k * win, min(seconds, (k + 1) * win)
        if b - a >= win / 2 and kind:
            first = cut and k == 0
            segs.append(Segment(("scene" if kind == "pan" else kind) if first else kind, a, b, f"{note} #{k}"))
        k += 1
    return Shot(seconds, render, segs, cut)


def crop(canvas, h: int, w: int, x: int = 0, y: int = 0):
    if x + w > canvas.shape[1] or y + h > canvas.shape[0]:
        raise ValueError(f"crop: {w}x{h} at ({x}, {y}) leaves the {canvas.shape[1]}x{canvas.shape[0]} canvas")
    return np.ascontiguousarray(canvas[y:y + h, x:x + w])


def cover(img, h: int, w: int, scale: float = 1.0):
    """``img`` scaled to cover h x w (times ``scale``) and centre-cropped to it."""
    s = max(h / img.shape[0], w / img.shape[1]) * scale
    r = syn.resize_rgb(img, max(h, round(img.shape[0] * s)), max(w, round(img.shape[1] * s)))
    return crop(r, h, w, (r.shape[1] - w) // 2, (r.shape[0] - h) // 2)


@dataclass(frozen=True)
class Params:
    """Everything a clip's content depends on (with the generating code: the cache key)."""
    name: str
    width: int
    height: int
    fps: int
    short: bool
    seed: int = 0


def _sec(p: Params, s: float) -> float:
    return max(4.0, round(s * 0.4)) if p.short else s


def shots_pans_static(p: Params) -> list:
    h, w, d = p.height, p.width, lambda s: _sec(p, s)
    a = syn.photo_strip(["astronaut", "coffee", "rocket", "camera"], int(h * 1.15))
    b = syn.photo_strip(["chelsea", "hubble_deep_field", "coffee"], int(h * 1.15))
    sa, sb = (w / 2) / d(6), (w / 2) / d(10)  # half a frame per 6 s / 10 s
    pa, pb = d(24), d(30)
    return [still(crop(a, h, w), d(10), note="A"), pan(a, h, w, pa, speed=sa, note="A slow pan"),
            still(crop(a, h, w, int(sa * pa)), d(10), None),
            still(crop(b, h, w, 0, h // 8), d(10), note="B cut"),
            pan(b, h, w, pb, y0=h // 8, speed=sb, note="B slower pan"),
            still(crop(b, h, w, int(sb * pb), h // 8), d(8), None)]


def shots_defocus(p: Params) -> list:
    h, w, d = p.height, p.width, lambda s: _sec(p, s)
    a = syn.photo_strip(["astronaut", "coffee", "rocket", "camera"], int(h * 1.15))
    v1, v2, v3 = crop(a, h, w), crop(a, h, w, a.shape[1] - w), crop(a, h, w, a.shape[1] // 3)
    blurred = syn.defocus(a, 5.0 * h / 360)
    speed = (w / 2) / d(6)
    return [still(v1, d(10), note="view 1"), still(syn.defocus(v1, 6.0 * h / 360), d(10), BLUR, "view 1 sigma 6", False),
            still(v1, d(8), None), still(v2, d(10), note="view 2 cut"),
            still(syn.defocus(v2, 4.5 * h / 360), d(10), BLUR, "view 2 sigma 4.5", False),
            pan(blurred, h, w, d(10), speed=speed, kind=BLUR, cut=True, note="defocused pan"),
            still(v3, d(8), note="view 3 cut")]


def _page(p: Params) -> np.ndarray:
    h, w = p.height, p.width
    paper = np.full((h, w, 3), (236, 232, 224), np.uint8)
    scan = syn.photo("page")
    sh = int(h * 0.8)
    scan = syn.resize_rgb(scan, sh, round(scan.shape[1] * sh / scan.shape[0]))[:, : int(w * 0.62)]
    paper[h // 10:h // 10 + sh, w // 24:w // 24 + scan.shape[1]] = scan
    return paper


def shots_digits(p: Params) -> list:
    h, w, d = p.height, p.width, lambda s: _sec(p, s)
    page, rng = _page(p), np.random.default_rng(p.seed + 3)
    size, x, y = max(8, int(h * 0.11)), int(w * 0.72), int(h * 0.18)
    value = 417
    shots = [still(syn.draw_digits(page, f"{value:04d}", x, y, size), d(10), note=f"page {value:04d}")]
    for _ in range(4 if p.short else 12):
        value += int(rng.integers(1, 8))  # a counter: mostly one or two digits change
        shots.append(still(syn.draw_digits(page, f"{value:04d}", x, y, size), d(6), "digits", f"{value:04d}", False))
    return shots


def _sprite() -> np.ndarray:
    return syn.resize_rgb(syn.photo("chelsea")[40:260, 120:340], 24, 24)  # a cat's head, 24x24


def crossing(bg, sprite, seconds: float, y: int, *, park_s: float = 0.0, note: str = "") -> Shot:
    """The sprite enters at the left, crosses at constant speed (stopping mid-frame for
    ``park_s``) and has left at the right after ``seconds``; the segment is the time it is wholly
    in view."""
    w, sw = bg.shape[1], sprite.shape[1]
    if seconds <= park_s:
        raise ValueError(f"crossing {note!r}: {seconds} s leaves no time to move (parked {park_s} s)")
    speed = (w + sw) / (seconds - park_s)  # from x = -sw to x = w
    mid = (w - sw) // 2
    t_mid = (mid + sw) / speed

    def xpos(t):
        if park_s and t >= t_mid:
            return int(round(mid + speed * max(0.0, t - t_mid - park_s)))
        return int(round(-sw + speed * t))
    t_in, t_out = sw / speed, w / speed + park_s  # x in [0, w - sw]
    return Shot(seconds, lambda t: syn.paste(bg, sprite, xpos(t), y), [Segment("object", t_in, t_out, note)],
                view=False)


def shots_sprite(p: Params) -> list:
    h, w, d = p.height, p.width, lambda s: _sec(p, s)
    bg = cover(syn.photo("coffee"), h, w)
    spr, rng = _sprite(), np.random.default_rng(p.seed + 4)
    shots = [still(bg, d(10), note="static scene")]
    for i in range(2 if p.short else 3):
        y = int(rng.integers(h // 8, h - h // 8 - 24))
        shots += [crossing(bg, spr, d(6), y, note=f"crossing {i}"), still(bg, d(6), None)]
    shots += [crossing(bg, spr, d(6) + d(8), h // 2, park_s=d(8), note="enters, stops, leaves"),
              still(bg, d(6), None)]
    return shots


FOG, NIGHT = (0.13, 205.0), (0.11, 8.0)  # haze(keep, veil) at 360p: sharp, Laplacian variance well under 20


def _low(p: Params):
    """(fog, night, zoom) for the frame size: smaller frames are sharper (a photograph shrunk has
    more detail per pixel), so they get less contrast and a closer view to stay under 20."""
    f = min(1.0, p.height / 360)
    return (FOG[0] * f ** 0.5, FOG[1]), (NIGHT[0] * f ** 0.5, NIGHT[1]), 1 / f


def _moon(h, w, zoom: float):
    return cover(syn.photo("moon"), h, w, zoom)


def shots_low_texture(p: Params) -> list:
    fog, night, zoom = _low(p)
    h, w, d = p.height, p.width, lambda s: _sec(p, s)
    a = syn.photo_strip(["astronaut", "coffee", "rocket", "camera"], int(h * 1.15))
    fog_strip = syn.haze(a, *fog)
    speed = (w / 2) / d(8)
    return [still(crop(a, h, w), d(10), note="normal view"),
            still(_moon(h, w, 1.3 * zoom), d(12), LOW_TEXTURE, "moon"),
            still(syn.haze(cover(syn.photo("coffee"), h, w), *fog), d(12), LOW_TEXTURE, "fog"),
            still(syn.haze(cover(syn.photo("rocket"), h, w), *night), d(12), LOW_TEXTURE, "night"),
            pan(fog_strip, h, w, d(24), speed=speed, kind=LOW_TEXTURE, cut=True,
                note="foggy pan"),
            still(crop(a, h, w, a.shape[1] - w), d(10), note="normal view 2")]


def shots_low_texture_only(p: Params) -> list:
    fog, night, zoom = _low(p)
    h, w, d = p.height, p.width, lambda s: _sec(p, s)
    night_strip = syn.haze(syn.photo_strip(["astronaut", "coffee", "rocket", "camera"], int(h * 1.15)), *night)
    moon2 = cover(syn.photo("moon")[200:, 150:], h, w, 1.2 * zoom)
    speed = (w / 2) / d(8)
    return [still(_moon(h, w, 1.3 * zoom), d(12), LOW_TEXTURE, "moon"),
            still(syn.haze(cover(syn.photo("coffee"), h, w), *fog), d(12), LOW_TEXTURE, "fog coffee"),
            still(syn.haze(cover(syn.photo("rocket"), h, w), *night), d(12), LOW_TEXTURE, "night rocket"),
            still(moon2, d(10), LOW_TEXTURE, "moon, other crop"),
            still(syn.defocus(moon2, 4.0 * h / 360), d(10), BLUR, "moon defocused", False),
            pan(night_strip, h, w, d(24), speed=speed, kind=LOW_TEXTURE, cut=True, note="night pan"),
            still(syn.haze(cover(syn.photo("astronaut"), h, w), *fog), d(10), LOW_TEXTURE, "fog astronaut")]


def shots_vfr(p: Params) -> list:
    h, w, d = p.height, p.width, lambda s: _sec(p, s)
    wall = syn.photo_wall([["astronaut", "coffee", "rocket", "camera", "cat"],
                           ["chelsea", "hubble_deep_field", "coins", "gravel", "brick"]], int(h * 0.6))
    span = wall.shape[1] - w
    speed = (w / 2) / d(8)
    pan_s = min(d(14), (span - 1) / speed)
    view = crop(wall, h, w, 0, (wall.shape[0] - h) // 2)
    retina = cover(syn.photo("retina"), h, w, 1080 / h)  # about its own resolution
    return [still(view, d(10), note="wall"),
            pan(wall, h, w, pan_s, y0=(wall.shape[0] - h) // 2, speed=speed, note="wall pan"),
            still(crop(wall, h, w, int(speed * pan_s), (wall.shape[0] - h) // 2), d(8), None),
            still(retina, d(10), LOW_TEXTURE, "retina"),
            still(view, d(4), note="wall again"),
            crossing(view, _sprite(), d(10), h // 3, note="sprite over the wall"),
            still(syn.defocus(view, 16.0 * h / 1080), d(8), BLUR, "wall sigma 16", False),
            still(crop(wall, h, w, span // 2, 0), d(8), note="wall, other view")]


def shots_cut_defocus(p: Params) -> list:
    """Cuts from a sharp view straight into a different view heavily out of focus (6 s), which
    then comes into focus: four cuts, sigma 4.5 to 9 at 360p (scaled with the height). Views are
    crops of photo walls with rows of half the frame height (photographs near their own
    resolution at 1080p, so the views in focus are sharp at every size). In the VFR clips a sample
    lands on each cut's first frame (the codec's P-frame at the cut: the most noise); at 360p
    (CFR, keyframes every 250 frames) the cuts fall between samples, 1 s before the next one: a
    sample on a P-coded cut frame there carries blocking over the absolute threshold (Laplacian
    variance 21), which the seed's rule keeps too and no relative rule can see."""
    h, w, d = p.height, p.width, lambda s: _sec(p, s)
    w1 = syn.photo_wall([["chelsea", "coins", "grass", "clock"], ["brick", "text", "gravel", "hubble_deep_field"]],
                        h // 2)
    w2 = syn.photo_wall([["astronaut", "camera", "cat", "page"], ["retina", "coffee", "rocket", "moon"]], h // 2)
    a, b = crop(w1, h, w), crop(w2, h, w)
    c, e = crop(w1, h, w, w1.shape[1] - w), crop(w2, h, w, w2.shape[1] - w)
    k = h / 360
    lead = d(10) - (1 if p.name == "cut_defocus_360p" else 0)  # the first cut at an odd or an even second
    return [still(a, lead, note="A"),
            still(syn.defocus(b, 4.5 * k), d(6), BLUR, "cut to B, sigma 4.5"), still(b, d(8), note="B in focus", view=False),
            still(syn.defocus(c, 6.0 * k), d(6), BLUR, "cut to C, sigma 6"), still(c, d(8), note="C in focus", view=False),
            still(syn.defocus(e, 9.0 * k), d(6), BLUR, "cut to D, sigma 9"), still(e, d(8), note="D in focus", view=False),
            still(syn.defocus(a, 6.0 * k), d(6), BLUR, "cut to A, sigma 6"), still(a, d(8), note="A in focus", view=False)]


def pan_zoom(canvas, h: int, w: int, seconds: float, *, speed: float, zoom: float = 1.0, noise: float = 0.0,
             seed: int = 0, kind: str = LOW_TEXTURE, note: str = "") -> Shot:
    """A new view panning right over ``canvas`` at ``speed`` canvas px/s while zooming in from 1
    to ``zoom`` (the crop shrinks to 1 / zoom of h x w about the pan's centre and is scaled back
    up to h x w), with fresh Gaussian sensor noise of std ``noise`` in every frame. Segments as
    ``pan``'s with ``cut``: a ``kind`` segment for every half frame width the view pans."""
    ymid = canvas.shape[0] / 2
    if canvas.shape[0] < h or w / 2 + speed * seconds + w / 2 > canvas.shape[1] or speed <= 0 or zoom < 1:
        raise ValueError(f"pan_zoom {note!r}: {seconds} s at {speed} px/s, zoom {zoom} leaves the "
                         f"{canvas.shape[1]}x{canvas.shape[0]} canvas")

    def render(t):
        z = 1.0 + (zoom - 1.0) * t / seconds
        ch, cw = h / z, w / z
        x0, y0 = w / 2 + speed * t - cw / 2, ymid - ch / 2
        view = canvas[int(y0):int(y0) + int(round(ch)), int(x0):int(x0) + int(round(cw))]
        img = syn.resize_rgb(view, h, w).astype(np.float32)
        if noise > 0:
            img += np.random.default_rng([seed, int(round(t * 1000))]).normal(0, noise, img.shape[:2])[..., None]
        return np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return Shot(seconds, render, pan(canvas, h, w, seconds, speed=speed, kind=kind, cut=True, note=note).segments)


def _mirrored_strip(img, height: int, width: int) -> np.ndarray:
    """``img`` scaled to ``height`` and repeated, mirrored every other time, to at least ``width``."""
    img = syn.resize_rgb(img, height, max(1, round(img.shape[1] * height / img.shape[0])))
    parts, n = [], 0
    while n < width:
        parts.append(img if len(parts) % 2 == 0 else img[:, ::-1])
        n += img.shape[1]
    return np.ascontiguousarray(np.concatenate(parts, axis=1))


def _cells(height: int, width: int) -> np.ndarray:
    """A microscope's field of cells: the part of scikit-image's ``cell`` (a phase-contrast
    image, 660x550) around its cell, rows 150-560 and columns 250-550, as RGB, mirrored into a
    strip (a cell every 0.7 frame heights). Smooth at the thumbnail's scale (coarse sharpness
    0.21-0.26 from 360p to 1080p: the blur rule alone reads it as defocused)."""
    import skimage.data

    patch = np.asarray(skimage.data.cell(), np.uint8)[150:560, 250:550]
    return _mirrored_strip(np.repeat(patch[..., None], 3, axis=2), height, width)


def _clouds(rng, height: int, width: int) -> np.ndarray:
    """A sky of clouds: fractal noise (amplitude 1 / f^1.6, so soft but down to the pixel) over a
    blue-white gradient, in a few dozen gray levels."""
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    f = np.sqrt(fx * fx + fy * fy)
    f[0, 0] = 1.0
    spec = (rng.normal(size=f.shape) + 1j * rng.normal(size=f.shape)) / f ** 1.6
    spec[0, 0] = 0
    n = np.fft.irfft2(spec, s=(height, width))
    n = (n - n.mean()) / n.std()
    cover = np.clip(0.5 + 0.35 * n, 0, 1)[..., None]
    sky = np.array([120.0, 150.0, 200.0]) * (0.9 + 0.1 * np.linspace(0, 1, height))[:, None, None]
    return np.clip(sky * (1 - cover) + 215.0 * cover, 0, 255).astype(np.uint8)


LIGHT_NOISE = 1.0  # the sensor noise of the low-texture motion clips (std, gray levels, before the codec)
DARK_ROOM = (0.12, 22.0)  # haze(keep, veil): a dim room with little contrast


def shots_low_texture_motion(p: Params) -> list:
    """Sharp low-texture scenes under slow pans and zooms with light sensor noise, each after a
    normal view (so the camera's sharpness history is that of a textured scene): a microscope's
    cells (45 s), clouds, fog and a dark room with little contrast (20 s each)."""
    fog, _, _ = _low(p)
    h, w, d = p.height, p.width, lambda s: _sec(p, s)
    a = syn.photo_strip(["astronaut", "coffee", "rocket", "camera"], int(h * 1.15))
    rng = np.random.default_rng(p.seed + 11)
    speed = (w / 2) / 12  # half a frame per 12 s
    pz = {"speed": speed, "zoom": 1.3, "noise": LIGHT_NOISE}
    lead = w + int(speed * d(45)) + 2

    def normal(k, secs):
        return still(crop(a, h, w, k * (a.shape[1] - w) // 4), d(secs), note=f"normal view {k}")
    return [normal(0, 10),
            pan_zoom(_cells(int(h * 1.1), lead), h, w, d(45), seed=p.seed + 1, note="cells", **pz),
            normal(1, 8),
            pan_zoom(_clouds(rng, int(h * 1.1), lead), h, w, d(20), seed=p.seed + 2, note="clouds", **pz),
            normal(2, 8),
            pan_zoom(syn.haze(_mirrored_strip(syn.photo("coffee"), int(h * 1.1), lead), *fog), h, w, d(20),
                     seed=p.seed + 3, note="fog", **pz),
            normal(3, 8),
            pan_zoom(syn.haze(syn.photo_strip(["chelsea", "camera", "coffee", "astronaut"], int(h * 1.1)),
                              *DARK_ROOM), h, w, d(20), seed=p.seed + 4, note="dark room", **pz),
            normal(4, 8)]


CLIPS = {"pans_static": shots_pans_static, "defocus": shots_defocus, "digits": shots_digits,
         "sprite": shots_sprite, "low_texture": shots_low_texture, "low_texture_only": shots_low_texture_only,
         "vfr_1080p": shots_vfr, "cut_defocus_360p": shots_cut_defocus,
         "cut_defocus_720p_vfr": shots_cut_defocus, "cut_defocus_1080p_vfr": shots_cut_defocus,
         "low_texture_motion_360p": shots_low_texture_motion, "low_texture_motion_720p": shots_low_texture_motion,
         "low_texture_motion_1080p": shots_low_texture_motion}
VFR_START_S = 3600.0
# clips other than 640x360 at 30 fps: (width, height, --quick width, --quick height); VFR_CLIPS: variable rate
SIZES = {"vfr_1080p": (1920, 1080, 640, 360), "cut_defocus_720p_vfr": (1280, 720, 640, 360),
         "cut_defocus_1080p_vfr": (1920, 1080, 640, 360), "low_texture_motion_720p": (1280, 720, 640, 360),
         "low_texture_motion_1080p": (1920, 1080, 640, 360)}
VFR_CLIPS = ("vfr_1080p", "cut_defocus_720p_vfr", "cut_defocus_1080p_vfr")
# keyframe interval in frames where not 2 s (which puts a keyframe on every sample at 0.5 fps): x264's
# default, so the cuts and the samples after them are P-frames, as in a stream the sampling does not line up with
GOP_FRAMES = {"cut_defocus_360p": 250}
# frame rate where not 30 fps (the long low-texture clips: 10 fps is enough for 0.5 fps sampling and
# keeps the 1080p encode short)
FPS = {"low_texture_motion_360p": 10, "low_texture_motion_720p": 10, "low_texture_motion_1080p": 10}


def params_for(name: str, quick: bool, seed: int = 0) -> Params:
    if name not in CLIPS:
        raise ValueError(f"unknown clip {name!r}; clips: {', '.join(CLIPS)}")
    if name in SIZES:
        w, h, qw, qh = SIZES[name]
        return Params(name, qw if quick else w, qh if quick else h, FPS.get(name, 30), quick, seed)
    return Params(name, 320 if quick else 640, 180 if quick else 360, 15 if quick else FPS.get(name, 30), quick, seed)


def _key(p: Params) -> str:
    """The cache key: the parameters, this module's source and the generators' module (editing
    bench_fidelity's report does not regenerate the clips)."""
    src = inspect.getsource(sys.modules[__name__]) + inspect.getsource(syn)
    return hashlib.sha1((json.dumps(asdict(p), sort_keys=True) + src).encode()).hexdigest()[:12]


def make_clip(p: Params, cache_dir: Path) -> Clip:
    """Generate (or reuse from ``cache_dir``) the clip for ``p``; the decoded PTS are checked
    against the written ones."""
    shots = CLIPS[p.name](p)
    for s in shots:
        if s.seconds <= 0:
            raise ValueError(f"clip {p.name}: a shot of {s.seconds} s")
    starts = np.cumsum([0.0] + [s.seconds for s in shots])
    duration = float(starts[-1])
    segments = [Segment(g.kind, round(float(a) + g.t0, 6), round(float(a) + g.t1, 6), g.note)
                for a, s in zip(starts, shots) for g in s.segments]
    views = clip_views(shots, starts)
    path = cache_dir / f"{p.name}-{p.width}x{p.height}-{_key(p)}.mp4"
    meta = path.with_suffix(".json")
    vfr = p.name in VFR_CLIPS
    start = VFR_START_S if vfr else 0.0
    if path.exists() and meta.exists():
        times = json.loads(meta.read_text())["frame_times"]
    else:
        if vfr:
            tb = Fraction(1, 90000)
            pts = syn.vfr_pts(np.random.default_rng(p.seed + 7), duration, start_s=start, time_base=tb)
        else:
            tb = Fraction(1, p.fps)
            pts = list(range(int(round(duration * p.fps))))
        rel = [float(q * tb) - start for q in pts]

        def frames():
            for t in rel:
                i = min(len(shots) - 1, bisect.bisect_right(starts, t) - 1)
                yield np.ascontiguousarray(shots[i].render(t - starts[i]))
        wc = syn.write_rgb_clip(path, frames(), pts, tb, rate=p.fps, gop=GOP_FRAMES.get(p.name, 2 * p.fps))
        decoded = syn.frame_times(path)
        if len(decoded) != len(pts) or any(abs(a - b) > PTS_TOL for a, b in zip(decoded, wc.times())):
            path.unlink()
            raise RuntimeError(f"clip {p.name}: decoded PTS differ from the written ones "
                               f"({len(decoded)} decoded, {len(pts)} written; first {decoded[:3]} vs {wc.times()[:3]})")
        times = [round(t - decoded[0], 9) for t in decoded]  # clip-relative, as the engine's t_rel
        meta.write_text(json.dumps({"params": asdict(p), "frame_times": times, "first_pts_s": decoded[0]}))
    return Clip(p.name, str(path), p.width, p.height, duration, times, segments, start, vfr, views)


def clip_views(shots: list, starts) -> list:
    """The clip's views: from each shot that starts one to the next such shot."""
    firsts = [i for i, s in enumerate(shots) if s.view or i == 0]
    out = []
    for a, b in zip(firsts, firsts[1:] + [len(shots)]):
        segs = [g for s in shots[a:b] for g in s.segments]
        out.append(View(round(float(starts[a]), 6), round(float(starts[b]), 6),
                        bool(segs) and all(g.kind == BLUR for g in segs)))
    return out
