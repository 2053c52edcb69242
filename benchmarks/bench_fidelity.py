"""Fidelity: does the index keep the evidence? Generated clips with ground-truth segments, made of
real photographs (scikit-image's bundled pictures), through the engine and through the seed's
per-frame gates.

Clips (640x360 at 30 fps unless said; ``--quick``: 320x180 at 15 fps, shorter shots):

- ``pans_static``: photographs under slow pans, static stretches, cuts;
- ``defocus``: sharp views, the same views heavily out of focus (Gaussian blur), refocused;
- ``digits``: a still page with a counter display whose digits change every few seconds;
- ``sprite``: a 24x24 picture crossing a static scene (and once stopping in it);
- ``low_texture``: a normal view, then sharp low-texture scenes (the moon, fog, night);
- ``low_texture_only``: a camera that only ever sees low-texture scenes, with one defocus;
- ``vfr_1080p``: 1920x1080, variable frame rate (10-30 fps runs, jitter, stalls), PTS starting at
  t = 3600 s: a photo wall, its pan, a retina image, a sprite, a defocus.
- ``cut_defocus_360p``, ``cut_defocus_720p_vfr`` (1280x720), ``cut_defocus_1080p_vfr`` (1920x1080,
  both variable frame rate as above): cuts from a sharp view straight into another view heavily
  out of focus for 6 s, which then comes into focus.

Segments (clip-relative seconds, the engine's ``t_rel``): must-keep ``scene`` (a new view),
``pan`` (each stretch over which the view moved by half a frame), ``digits`` (each value shown),
``object`` (the sprite fully in view); ``low_texture`` (a new low-texture view, or its pan
stretches); ``blur`` (heavy defocus: nothing in it should be kept). A segment is recalled when at
least one kept moment lies inside it.

Methods, each clip in a fresh temp store / state:

- ``engine``: ``Engine(store, device="cpu")`` (default config) ``.index_file``; kept = ``moments()``;
  the gate log (``store.moments.gate_log()``) says which gate dropped each sample;
- ``seed``: the baseline, the seed's gates frame by frame (VAM): PyAV decode, sample at the same
  rate (first frame at or after each tick), RGB -> gray with OpenCV, drop blur if
  ``cv2.Laplacian(gray).var() < 20``, drop if mean |gray - last kept| < 20, drop if SSIM of 64x64
  thumbnails vs last kept > 0.92 (scikit-image).

Targets (issue 12), for the engine: must-keep recall 1.0 (small objects and digit changes
included), low-texture recall >= 0.9, 0 blurred frames kept, every kept timestamp a real frame PTS,
and no more frames kept per minute than the seed on clips with no small change and no
low-texture scene (on those the seed keeps nothing by construction).

    python benchmarks/bench_fidelity.py              # all clips (~12 min of video), ~3-5 min on 2 cores
    python benchmarks/bench_fidelity.py --quick      # smoke run
    python benchmarks/bench_fidelity.py --clips digits,sprite --fps 1

Generated clips are cached under benchmarks/results/fidelity_clips/ keyed by their parameters
and the generating code (``--cache-dir``; ``--no-cache`` writes to a temp dir).
"""
from __future__ import annotations

import argparse
import bisect
import hashlib
import inspect
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import RESULTS_DIR, print_table, write_json  # noqa: E402

from vam_engine import synthetic as syn  # noqa: E402

MUST_KEEP = ("scene", "pan", "digits", "object")
SMALL = ("digits", "object")
LOW_TEXTURE = "low_texture"
BLUR = "blur"
KINDS = MUST_KEEP + (LOW_TEXTURE, BLUR)
SEED_BLUR, SEED_MAD, SEED_SSIM = 20.0, 20.0, 0.92  # the seed's gates (VAM), fixed here on purpose
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
    are in shot-local seconds."""
    seconds: float
    render: Callable[[float], np.ndarray]
    segments: list = field(default_factory=list)


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

    @property
    def frames(self) -> int:
        return len(self.frame_times)


# -- metrics ------------------------------------------------------------------------------------------
@dataclass
class Recall:
    hit: int
    total: int

    @property
    def value(self) -> float | None:
        return self.hit / self.total if self.total else None


def recall(kept: list, segments: list, kinds) -> Recall:
    """Segments of ``kinds`` with at least one kept time inside them, of all segments of those kinds."""
    segs = [s for s in segments if s.kind in kinds]
    return Recall(sum(any(s.contains(t) for t in kept) for s in segs), len(segs))


def blurred_kept(kept: list, segments: list) -> int:
    """Kept times that lie inside a heavy-blur segment."""
    blur = [s for s in segments if s.kind == BLUR]
    return sum(any(s.contains(t) for s in blur) for t in kept)


def kept_per_minute(n_kept: int, duration_s: float) -> float:
    if duration_s <= 0:
        raise ValueError(f"kept_per_minute: duration {duration_s} s must be positive")
    return n_kept * 60.0 / duration_s


def off_pts(kept: list, frame_times: list, tol: float = PTS_TOL) -> list:
    """Kept times that are not (within ``tol``) the time of one of the clip's frames."""
    ft = sorted(frame_times)
    bad = []
    for t in kept:
        i = bisect.bisect_left(ft, t - tol)
        if not (i < len(ft) and abs(ft[i] - t) <= tol):
            bad.append(t)
    return bad


@dataclass
class Sample:
    """One sampled frame and what the gates made of it (dropped_by None: kept)."""
    t: float
    lap_var: float
    mad: float | None
    ssim: float | None
    dropped_by: str | None


@dataclass
class Run:
    method: str
    kept: list
    samples: list
    seconds: float


def score(clip: Clip, run: Run) -> dict:
    """The metrics of one method on one clip, and for each missed segment the gates that dropped
    the samples inside it."""
    k, segs = run.kept, clip.segments
    bad = off_pts(k, clip.frame_times)
    missed = []
    for s in segs:
        if s.kind == BLUR or any(s.contains(t) for t in k):
            continue
        inside = [x for x in run.samples if s.contains(x.t)]
        missed.append({"kind": s.kind, "t0": s.t0, "t1": s.t1, "note": s.note, "samples": len(inside),
                       "dropped_by": dict(Counter(x.dropped_by or "kept?" for x in inside)),
                       "lap_var": [round(x.lap_var, 2) for x in inside],
                       "mad": [None if x.mad is None else round(x.mad, 2) for x in inside]})
    per_kind = {kd: asdict(recall(k, segs, (kd,))) for kd in KINDS if kd != BLUR}
    per_segment = []
    for s in segs:  # every segment's outcome and statistics, for whoever tunes a gate on these clips
        inside = [x for x in run.samples if s.contains(x.t)]
        mads = [x.mad for x in inside if x.mad is not None]
        ssims = [x.ssim for x in inside if x.ssim is not None]
        per_segment.append({"kind": s.kind, "note": s.note, "t0": s.t0, "t1": s.t1,
                            "kept": sum(s.contains(t) for t in k), "samples": len(inside),
                            "lap_var_median": statistics.median([x.lap_var for x in inside]) if inside else None,
                            "mad_median": statistics.median(mads) if mads else None,
                            "ssim_median": statistics.median(ssims) if ssims else None})
    return {"must_keep": asdict(recall(k, segs, MUST_KEEP)), "small": asdict(recall(k, segs, SMALL)),
            "low_texture": asdict(recall(k, segs, (LOW_TEXTURE,))), "per_kind": per_kind,
            "blurred_kept": blurred_kept(k, segs), "kept": len(k),
            "kept_per_min": kept_per_minute(len(k), clip.duration_s), "sampled": len(run.samples),
            "off_pts": bad, "pts_ok": not bad, "seconds": run.seconds, "missed": missed, "segments": per_segment,
            "dropped_by": dict(Counter(x.dropped_by or "kept" for x in run.samples))}


# -- the two methods ---------------------------------------------------------------------------------
def _ticks(fps: float):
    """The engine's sampling rule: ticks at k / fps, each takes the first frame at or after it."""
    interval, nxt, eps = 1.0 / fps, [0.0], 1e-9

    def accept(t: float) -> bool:
        if t + eps < nxt[0]:
            return False
        nxt[0] = (math.floor(t / interval + eps) + 1) * interval
        return True
    return accept


def run_seed(path: str, fps: float) -> Run:
    """The seed's gates, frame by frame (see the module docstring)."""
    import av
    import cv2
    from skimage.metrics import structural_similarity

    t_start = time.perf_counter()
    accept = _ticks(fps)
    kept, samples, ref, ref_thumb = [], [], None, None
    with av.open(path) as c:
        s = c.streams.video[0]
        t0 = s.start_time
        for f in c.decode(s):
            if f.pts is None:
                continue
            if t0 is None:
                t0 = f.pts
            t = float((f.pts - t0) * s.time_base)
            if not accept(t):
                continue
            gray = cv2.cvtColor(f.to_ndarray(format="rgb24"), cv2.COLOR_RGB2GRAY)
            lap = float(cv2.Laplacian(gray, cv2.CV_64F).var())
            mad = ssim = None
            drop = "blur" if lap < SEED_BLUR else None
            if drop is None and ref is not None:
                mad = float(cv2.absdiff(gray, ref).mean())
                if mad < SEED_MAD:
                    drop = "low_change"
                else:
                    thumb = cv2.resize(gray, (64, 64))
                    ssim = float(structural_similarity(thumb, ref_thumb, data_range=255))
                    drop = "ssim" if ssim > SEED_SSIM else None
            samples.append(Sample(t, lap, mad, ssim, drop))
            if drop is None:
                kept.append(t)
                ref, ref_thumb = gray, cv2.resize(gray, (64, 64))
    return Run("seed", kept, samples, time.perf_counter() - t_start)


def run_engine(path: str, fps: float | None) -> Run:
    """The engine with its default config on the CPU, a fresh store; only the public API."""
    from vam_engine import Engine

    cfg = None if fps is None else {"ingest": {"fps": fps}}
    with tempfile.TemporaryDirectory(prefix="vam_fidelity_") as d:
        t_start = time.perf_counter()
        with Engine(Path(d) / "store", cfg, device="cpu") as eng:
            eng.index_file(path, camera_id="cam")
            kept = sorted(m.t_rel for m in eng.moments("cam"))
            log = eng.store.moments.gate_log("cam")
        secs = time.perf_counter() - t_start
    samples = [Sample(g.t_rel, g.gate.lap_var, g.gate.mad, g.gate.ssim, g.gate.dropped_by) for g in log]
    return Run("engine", kept, samples, secs)


# -- clips: shots and their segments -------------------------------------------------------------------
def still(img, seconds: float, kind: str | None = "scene", note: str = "") -> Shot:
    """A static view; ``kind`` labels the whole shot (None: no segment, e.g. a refocused view)."""
    return Shot(seconds, lambda t: img, [Segment(kind, 0.0, seconds, note)] if kind else [])


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
    return Shot(seconds, render, segs)


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
    return [still(v1, d(10), note="view 1"), still(syn.defocus(v1, 6.0 * h / 360), d(10), BLUR, "view 1 sigma 6"),
            still(v1, d(8), None), still(v2, d(10), note="view 2 cut"),
            still(syn.defocus(v2, 4.5 * h / 360), d(10), BLUR, "view 2 sigma 4.5"),
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
        shots.append(still(syn.draw_digits(page, f"{value:04d}", x, y, size), d(6), "digits", f"{value:04d}"))
    return shots


def _sprite() -> np.ndarray:
    return syn.resize_rgb(syn.photo("chelsea")[40:260, 120:340], 24, 24)  # a cat's head, 24x24


def _crossing(bg, sprite, seconds: float, y: int, *, park_s: float = 0.0, note: str = "") -> Shot:
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
    return Shot(seconds, lambda t: syn.paste(bg, sprite, xpos(t), y), [Segment("object", t_in, t_out, note)])


def shots_sprite(p: Params) -> list:
    h, w, d = p.height, p.width, lambda s: _sec(p, s)
    bg = cover(syn.photo("coffee"), h, w)
    spr, rng = _sprite(), np.random.default_rng(p.seed + 4)
    shots = [still(bg, d(10), note="static scene")]
    for i in range(2 if p.short else 3):
        y = int(rng.integers(h // 8, h - h // 8 - 24))
        shots += [_crossing(bg, spr, d(6), y, note=f"crossing {i}"), still(bg, d(6), None)]
    shots += [_crossing(bg, spr, d(6) + d(8), h // 2, park_s=d(8), note="enters, stops, leaves"),
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
            still(syn.defocus(moon2, 4.0 * h / 360), d(10), BLUR, "moon defocused"),
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
            _crossing(view, _sprite(), d(10), h // 3, note="sprite over the wall"),
            still(syn.defocus(view, 16.0 * h / 1080), d(8), BLUR, "wall sigma 16"),
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
            still(syn.defocus(b, 4.5 * k), d(6), BLUR, "cut to B, sigma 4.5"), still(b, d(8), note="B in focus"),
            still(syn.defocus(c, 6.0 * k), d(6), BLUR, "cut to C, sigma 6"), still(c, d(8), note="C in focus"),
            still(syn.defocus(e, 9.0 * k), d(6), BLUR, "cut to D, sigma 9"), still(e, d(8), note="D in focus"),
            still(syn.defocus(a, 6.0 * k), d(6), BLUR, "cut to A, sigma 6"), still(a, d(8), note="A in focus")]


CLIPS = {"pans_static": shots_pans_static, "defocus": shots_defocus, "digits": shots_digits,
         "sprite": shots_sprite, "low_texture": shots_low_texture, "low_texture_only": shots_low_texture_only,
         "vfr_1080p": shots_vfr, "cut_defocus_360p": shots_cut_defocus,
         "cut_defocus_720p_vfr": shots_cut_defocus, "cut_defocus_1080p_vfr": shots_cut_defocus}
VFR_START_S = 3600.0
# clips other than 640x360 at 30 fps: (width, height, --quick width, --quick height); VFR_CLIPS: variable rate
SIZES = {"vfr_1080p": (1920, 1080, 640, 360), "cut_defocus_720p_vfr": (1280, 720, 640, 360),
         "cut_defocus_1080p_vfr": (1920, 1080, 640, 360)}
VFR_CLIPS = ("vfr_1080p", "cut_defocus_720p_vfr", "cut_defocus_1080p_vfr")
# keyframe interval in frames where not 2 s (which puts a keyframe on every sample at 0.5 fps): x264's
# default, so the cuts and the samples after them are P-frames, as in a stream the sampling does not line up with
GOP_FRAMES = {"cut_defocus_360p": 250}


def params_for(name: str, quick: bool, seed: int = 0) -> Params:
    if name not in CLIPS:
        raise ValueError(f"unknown clip {name!r}; clips: {', '.join(CLIPS)}")
    if name in SIZES:
        w, h, qw, qh = SIZES[name]
        return Params(name, qw if quick else w, qh if quick else h, 30, quick, seed)
    return Params(name, 320 if quick else 640, 180 if quick else 360, 15 if quick else 30, quick, seed)


def _key(p: Params) -> str:
    """The cache key: the parameters, the clip-making part of this file and the generators' module
    (editing the report does not regenerate the clips)."""
    own = inspect.getsource(sys.modules[__name__])
    src = own[own.index("# -- clips: shots"):own.index("# -- report")] + inspect.getsource(syn)
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
    return Clip(p.name, str(path), p.width, p.height, duration, times, segments, start, vfr)


# -- report -------------------------------------------------------------------------------------------
def _r(r: dict) -> str:
    return "-" if not r["total"] else f"{r['hit']}/{r['total']}"


def targets(clip: Clip, eng: dict, seed: dict) -> list:
    """(target, measured, met) rows for the engine on one clip."""
    kinds = {s.kind for s in clip.segments}
    out = []
    mk = eng["must_keep"]
    if mk["total"]:
        out.append(("must-keep recall = 1.0", _r(mk), mk["hit"] == mk["total"]))
    if eng["low_texture"]["total"]:
        v = eng["low_texture"]["hit"] / eng["low_texture"]["total"]
        out.append(("low-texture recall >= 0.9", f"{v:.2f}", v >= 0.9))
    if BLUR in kinds:
        out.append(("blurred kept = 0", str(eng["blurred_kept"]), eng["blurred_kept"] == 0))
    if not kinds & set(SMALL) and LOW_TEXTURE not in kinds:
        out.append(("kept/min <= seed", f"{eng['kept_per_min']:.1f} vs {seed['kept_per_min']:.1f}",
                    eng["kept_per_min"] <= seed["kept_per_min"] + 1e-9))
    out.append(("every kept t is a frame PTS", "yes" if eng["pts_ok"] else f"{len(eng['off_pts'])} off", eng["pts_ok"]))
    return out


def construction_check(clip: Clip, seed_run: Run) -> list:
    """Segments whose frames are not what they claim by the seed's own statistic (a low-texture
    or blur segment at or over the blur threshold tests nothing): a note per offender."""
    notes = []
    for s in clip.segments:
        lv = [x.lap_var for x in seed_run.samples if s.contains(x.t)]
        if not lv:
            notes.append(f"{clip.name}: {s.kind} {s.note!r} [{s.t0:g}, {s.t1:g}) holds no sample")
        elif s.kind in (LOW_TEXTURE, BLUR) and statistics.median(lv) >= SEED_BLUR:
            notes.append(f"{clip.name}: {s.kind} {s.note!r} has median Laplacian variance {statistics.median(lv):.1f}")
    return notes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: small frames, short shots")
    ap.add_argument("--clips", default=",".join(CLIPS), help=f"comma-separated subset of {','.join(CLIPS)}")
    ap.add_argument("--fps", type=float, default=None,
                    help="sampling rate for both methods (default: the engine's default config)")
    ap.add_argument("--cache-dir", type=Path, default=RESULTS_DIR / "fidelity_clips")
    ap.add_argument("--no-cache", action="store_true", help="generate the clips in a temp dir")
    ap.add_argument("--seed", type=int, default=0, help="content seed (digit values, sprite paths, VFR timing)")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.clips.split(",") if n.strip()]
    for n in names:
        if n not in CLIPS:
            ap.error(f"--clips: unknown clip {n!r}; clips: {', '.join(CLIPS)}")
    from vam_engine.config import IngestConfig

    fps = args.fps or IngestConfig().fps
    tmp = tempfile.TemporaryDirectory(prefix="vam_fidelity_clips_") if args.no_cache else None
    cache = Path(tmp.name) if tmp else args.cache_dir
    load0 = os.getloadavg()
    print(f"bench_fidelity: {'quick' if args.quick else 'full'} clips, sampling {fps:g} fps, engine default "
          f"config on the CPU vs the seed's gates; load {load0[0]:.2f}", flush=True)
    rows, trows, why, notes, results, by_kind = [], [], [], [], {}, {}
    for n in names:
        t = time.perf_counter()
        clip = make_clip(params_for(n, args.quick, args.seed), cache)
        gen_s = time.perf_counter() - t
        seed_run, eng_run = run_seed(clip.path, fps), run_engine(clip.path, args.fps)
        res = {"seed": score(clip, seed_run), "engine": score(clip, eng_run)}
        notes += construction_check(clip, seed_run)
        fmt_t = f"{clip.width}x{clip.height}{' vfr' if clip.vfr else ''}"
        for m in ("engine", "seed"):
            r = res[m]
            rows.append([n if m == "engine" else "", fmt_t if m == "engine" else "", m,
                         round(clip.duration_s, 1), r["sampled"], _r(r["must_keep"]), _r(r["small"]),
                         _r(r["low_texture"]), r["blurred_kept"] if any(s.kind == BLUR for s in clip.segments) else "-",
                         round(r["kept_per_min"], 1), "yes" if r["pts_ok"] else f"NO ({len(r['off_pts'])})",
                         round(r["seconds"], 1)])
        tg = targets(clip, res["engine"], res["seed"])
        trows += [[n, t_, v, "met" if ok else "MISSED"] for t_, v, ok in tg]
        for mm in res["engine"]["missed"]:
            why.append([n, mm["kind"], mm["note"], f"{mm['t0']:g}-{mm['t1']:g}",
                        ", ".join(f"{k} {v}" for k, v in sorted(mm["dropped_by"].items())) or "no sample",
                        fmt_list(mm["lap_var"]), fmt_list(mm["mad"])])
        for m in ("engine", "seed"):
            for kd, r in res[m]["per_kind"].items():
                acc = by_kind.setdefault(kd, {"engine": [0, 0], "seed": [0, 0], "drops": Counter()})
                acc[m][0] += r["hit"]
                acc[m][1] += r["total"]
        for mm in res["engine"]["missed"]:
            by_kind[mm["kind"]]["drops"].update(mm["dropped_by"])
        for sg in clip.segments:  # the engine's own statistic, to see where a blur rule can cut
            acc = by_kind.setdefault(sg.kind, {"engine": [0, 0], "seed": [0, 0], "drops": Counter()})
            acc.setdefault("lap_var", []).extend(x.lap_var for x in eng_run.samples if sg.contains(x.t))
        results[n] = {"clip": {"path": clip.path, "width": clip.width, "height": clip.height,
                               "duration_s": clip.duration_s, "frames": clip.frames, "vfr": clip.vfr,
                               "first_pts_s": clip.start_s, "generate_s": gen_s,
                               "segments": [asdict(s) for s in clip.segments]},
                      **res, "targets": [{"target": a, "measured": b, "met": c} for a, b, c in tg]}
    print()
    print_table(["clip", "size", "method", "clip s", "sampled", "must-keep", "small", "low-tex",
                 "blur kept", "kept/min", "real PTS", "run s"], rows)
    print("\ntargets (engine):")
    print_table(["clip", "target", "measured", "result"], trows)
    kind_rows = [[kd, f"{a['engine'][0]}/{a['engine'][1]}" if a["engine"][1] else "-",
                  f"{a['seed'][0]}/{a['seed'][1]}" if a["seed"][1] else "-", _spread(a.get("lap_var", [])),
                  ", ".join(f"{g} {c}" for g, c in a["drops"].most_common()) or "-"]
                 for kd, a in by_kind.items()]
    print("\nby segment kind, all clips: recall, the engine's lap_var of the samples inside (min/median/max), and "
          "the gates that dropped the engine's samples in missed segments:")
    print_table(["kind", "engine", "seed", "engine lap_var", "dropped by (missed)"], kind_rows)
    if why:
        print("\nwhat the engine missed, and which gate dropped the samples inside (lap_var, mad per sample):")
        print_table(["clip", "kind", "segment", "t", "dropped by", "lap_var", "mad"], why)
    for line in notes:
        print(f"  note: {line}")
    path = write_json("bench_fidelity_quick" if args.quick else "bench_fidelity",
                      {"args": {k: str(v) for k, v in vars(args).items()}, "fps": fps,
                       "seed_gates": {"blur_min_lap_var": SEED_BLUR, "diff_min_mad": SEED_MAD, "ssim_max": SEED_SSIM},
                       "loadavg_at_start": list(load0), "clips": results,
                       "by_kind": {k: {"engine": v["engine"], "seed": v["seed"],
                                       "engine_missed_dropped_by": dict(v["drops"]),
                                       "engine_lap_var": _spread(v.get("lap_var", []))}
                                   for k, v in by_kind.items()}, "construction_notes": notes})
    print(f"wrote {path}")
    if tmp:
        tmp.cleanup()
    return 0


def _spread(xs) -> str:
    return f"{min(xs):.3g} / {statistics.median(xs):.3g} / {max(xs):.3g}" if xs else "-"


def fmt_list(xs) -> str:
    return " ".join("-" if x is None else f"{x:.3g}" for x in xs[:6]) + (" ..." if len(xs) > 6 else "")


if __name__ == "__main__":
    raise SystemExit(main())
