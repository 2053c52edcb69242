"""A built-in example: a short H.264 clip with known scene changes, a blurred stretch and a
static stretch, so the gates have something to decide on every path; with ``perception=True``
it ends with a street scene for perception: a sign (``DEMO_SIGN``), a counter that steps every
few seconds, and a cat at another place at each step (scikit-image's photograph ``chelsea``
when scikit-image is installed, else a drawn one). ``scene_spans``/``scene_of`` say which scene
a time range belongs to and ``clip_frame`` reads a frame back from the clip: what the demo's
search by image is checked with."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from .scenes import box_blur, scene_image

# (seconds, kind): each scene is a distinct textured image; "pan" moves it (every sample kept),
# "static" holds it (low change), "flicker" brightens and darkens it every 2 s (a large mean
# difference but the same structure: SSIM-redundant), "blur" shows a defocused version.
DEMO_SCENES = [(8, "pan"), (8, "static"), (8, "flicker"), (6, "blur"), (10, "pan")]
PERCEPTION_SCENE = (12, "street")  # appended with perception=True
DEMO_SIGN = "GATE 4721"
DEMO_OBJECT = "cat"            # what the detector finds walking across the street scene
COUNTER_EVERY_S = 4            # the street scene's counter steps this often (from 0041)


def street_cat(height: int) -> tuple[np.ndarray, bool]:
    """The street scene's cat, ``height`` px tall, and whether it is a photograph: scikit-image's
    ``chelsea`` (what a COCO detector names "cat") when scikit-image is installed, else drawn."""
    from .perception import perception_photo, scaled

    try:
        return scaled(perception_photo("chelsea"), height), True
    except ImportError:  # scikit-image is in no extra the demo needs
        return drawn_cat(height), False


def drawn_cat(height: int) -> np.ndarray:
    """An orange cat drawn in flat shapes on grey (body, head, ears, tail, eyes), ``height`` px
    tall: the street scene's stand-in for the photograph."""
    from PIL import Image, ImageDraw

    h = max(16, int(height))
    w = round(h * 1.4)
    img = Image.new("RGB", (w, h), (110, 110, 105))
    d = ImageDraw.Draw(img)
    fur, dark = (214, 130, 52), (120, 70, 30)
    d.ellipse((0.15 * w, 0.40 * h, 0.85 * w, 0.95 * h), fill=fur)                      # body
    d.line((0.82 * w, 0.75 * h, 0.98 * w, 0.30 * h), fill=dark, width=max(2, h // 12))  # tail
    d.ellipse((0.02 * w, 0.15 * h, 0.40 * w, 0.60 * h), fill=fur)                      # head
    d.polygon([(0.05 * w, 0.25 * h), (0.10 * w, 0.02 * h), (0.20 * w, 0.18 * h)], fill=fur)  # ears
    d.polygon([(0.22 * w, 0.18 * h), (0.32 * w, 0.02 * h), (0.38 * w, 0.25 * h)], fill=fur)
    for x in (0.13, 0.27):                                                               # eyes
        d.ellipse(((x - 0.03) * w, 0.30 * h, (x + 0.03) * w, 0.38 * h), fill=(30, 30, 20))
    return np.asarray(img)


def _street(width: int, height: int, fps: int, secs: int, cat: np.ndarray):
    """Frames of the street scene: the sign, the counter, the cat."""
    from .perception import backdrop, draw_sign, place

    rng = np.random.default_rng(4721)
    base = backdrop(rng, height, width, noise=0.0)
    base, _ = draw_sign(base, DEMO_SIGN, int(width * 0.05), int(height * 0.08), max(12, height // 12))
    n = secs * fps
    spots = (0.02, 0.5, 0.25)  # the cat moves on at each step of the counter, as a sparse camera sees it
    for i in range(n):
        step = i // (COUNTER_EVERY_S * fps)
        f, _ = draw_sign(base, f"{41 + step:04d}", int(width * 0.62), int(height * 0.08),
                         max(12, height // 12), fg=(40, 230, 90), bg=(20, 20, 20))
        x = round(spots[step % len(spots)] * width)
        f, _ = place(f, cat, x, height - cat.shape[0] - 4)
        yield f


def _scene_frames(k: int, kind: str, secs: int, width: int, height: int, fps: int):
    big = scene_image(k, height + 64, width + 64)
    sharp = big[:height, :width]
    blurred = box_blur(sharp, 6) if kind == "blur" else None
    for i in range(secs * fps):
        if kind == "pan":
            dx = int(i * 64 / (secs * fps))
            yield big[dx // 2: dx // 2 + height, dx: dx + width]
        elif kind == "blur":
            yield blurred
        elif kind == "flicker":
            yield np.clip(sharp + (30.0 if (i // (2 * fps)) % 2 else 0.0), 0, 255)
        else:
            yield sharp


def make_demo_clip(path: str | Path, *, width: int = 320, height: int = 240, fps: int = 10,
                   scenes=DEMO_SCENES, perception: bool = False) -> dict:
    """Write the clip and return what it contains: scene start times and kinds (and, with
    ``perception``, the street scene's ``sign``, ``object`` and whether that is a photograph,
    ``object_photo``)."""
    scenes = list(scenes) + ([PERCEPTION_SCENE] if perception else [])
    cat, photographed = street_cat(int(height * 0.3)) if perception else (None, False)
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
            frames = (_street(width, height, fps, secs, cat) if kind == "street"
                      else _scene_frames(k, kind, secs, width, height, fps))
            for img in frames:
                frame = av.VideoFrame.from_ndarray(img.astype(np.uint8), format="rgb24")
                frame.pts = n
                for p in stream.encode(frame):
                    out.mux(p)
                n += 1
            t += secs
        for p in stream.encode():
            out.mux(p)
    made = {"path": str(path), "duration_s": t, "scenes": starts, "fps": fps, "size": (width, height)}
    if perception:
        made.update(sign=DEMO_SIGN, object=DEMO_OBJECT, object_photo=photographed)
    return made


@dataclass(frozen=True)
class SceneSpan:
    """One scene of a demo clip: its number (from 1), kind and [t0, t1) in seconds."""

    number: int
    kind: str
    t0: float
    t1: float

    def label(self) -> str:
        return f"scene {self.number} ({self.kind}, {self.t0:g}-{self.t1:g} s)"


def scene_spans(clip: dict) -> list[SceneSpan]:
    """The scenes of a clip ``make_demo_clip`` returned, in order."""
    starts = [t for t, _ in clip["scenes"]] + [clip["duration_s"]]
    return [SceneSpan(i + 1, kind, t0, t1) for i, ((t0, kind), t1) in enumerate(zip(clip["scenes"], starts[1:]))]


def scene_of(clip: dict, t0: float, t1: float | None = None) -> SceneSpan | None:
    """The scene that holds the whole time range [t0, t1] (a time when t1 is None); None when
    it spans a scene change or lies outside the clip."""
    t1 = t0 if t1 is None else t1
    return next((s for s in scene_spans(clip) if s.t0 <= t0 and t1 < s.t1), None)


def clip_frame(path: str | Path, t: float) -> np.ndarray:
    """The frame of the clip shown at ``t`` seconds (the first at or after it), H x W x 3 RGB."""
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            if frame.time is not None and frame.time >= t - 1e-6:
                return frame.to_ndarray(format="rgb24")
    raise ValueError(f"clip_frame: {path} has no frame at or after {t:g} s")
