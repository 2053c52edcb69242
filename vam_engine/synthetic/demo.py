"""A built-in example: a short H.264 clip with known scene changes, a blurred stretch and a
static stretch, so the gates have something to decide on every path; with ``perception=True``
it ends with a street scene for perception: a sign (``DEMO_SIGN``), a counter that steps every
few seconds, and a photographed cat (scikit-image's ``chelsea``) at another place at each step."""
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
PERCEPTION_SCENE = (12, "street")  # appended with perception=True
DEMO_SIGN = "GATE 4721"
DEMO_OBJECT = "cat"            # what the detector finds walking across the street scene
COUNTER_EVERY_S = 4            # the street scene's counter steps this often (from 0041)


def _street(width: int, height: int, fps: int, secs: int):
    """Frames of the street scene: the sign, the counter, the cat."""
    from .perception import backdrop, draw_sign, perception_photo, place, scaled

    rng = np.random.default_rng(4721)
    base = backdrop(rng, height, width, noise=0.0)
    base, _ = draw_sign(base, DEMO_SIGN, int(width * 0.05), int(height * 0.08), max(12, height // 12))
    cat = scaled(perception_photo("chelsea"), int(height * 0.3))
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
    ``perception``, the street scene's ``sign`` and ``object``)."""
    scenes = list(scenes) + ([PERCEPTION_SCENE] if perception else [])
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
            frames = _street(width, height, fps, secs) if kind == "street" else _scene_frames(k, kind, secs, width,
                                                                                             height, fps)
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
        made.update(sign=DEMO_SIGN, object=DEMO_OBJECT)
    return made
