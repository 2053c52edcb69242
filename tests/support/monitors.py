"""The monitor tests' stream and judge: frames of a static dark noisy camera in which "the
event" is a bright square in the top-left corner, pushed at 2 fps, and a scripted monitor model
that looks at the latest frame it is shown and says whether the square is there."""
import numpy as np

from support.scripted import TagScript, images, verdict

H, W = 48, 64
CFG = {"ingest": {"fps": 0.5}, "writer": {"enabled": False}, "retention": {"enabled": False}}


def frame(t: float, event: bool, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)  # the same background every frame: a static camera
    f = rng.integers(20, 40, (H, W, 3), dtype=np.uint8)
    if event:
        f[4:20, 4:24] = 230
    return f


def latest_image(req) -> np.ndarray:
    return images(req)[-1].array()


def shows_event(img: np.ndarray) -> bool:
    h, w = img.shape[:2]
    return bool(img[: h // 3, : w // 3].mean() > 120)


def square_verdict(match: bool, confidence: float = 0.9) -> str:
    return verdict(match, confidence, "a bright square" if match else "an empty scene", "the top-left corner")


def judge(confidence: float = 0.9) -> TagScript:
    """A monitor model (no other role) that matches when the latest frame shows the square."""
    return TagScript({"monitor": lambda req: square_verdict(shows_event(latest_image(req)), confidence)})


def push_stream(eng, cam: str, t0: float, t1: float, event_spans=(), fps: float = 2.0, wait=True):
    n = int(round((t1 - t0) * fps))
    for k in range(n):
        t = t0 + k / fps
        eng.push(cam, frame(t, any(a <= t < b for a, b in event_spans)), t)
        if wait:  # judge each due check before the next frame: the stream clock pauses
            assert eng.wait_for_monitors(10)
