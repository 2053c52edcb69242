"""The session tests' stream and model: a static dark noisy camera in which a red square appears
at a known time, pushed at 2 fps; a scripted model that sorts turns by their words (the model's
classifier), judges a monitor check red when the latest frame shows the square, writes replies
that quote what the check observed, and answers questions saying which earlier exchanges of
the dialogue it was shown."""
import json
import re

import numpy as np

from support.scripted import TagScript, images, texts, verdict

H, W = 48, 64
CFG = {"ingest": {"fps": 0.5}, "writer": {"enabled": False}, "retention": {"enabled": False}}
RED = (230, 20, 20)


def frame(red: bool, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)  # the same background every frame: a static camera
    f = rng.integers(20, 40, (H, W, 3), dtype=np.uint8)
    if red:
        f[6:22, 8:28] = RED
    return f


def shows_red(img: np.ndarray) -> bool:
    r, g = img[..., 0].astype(int), img[..., 1].astype(int)
    return bool(((r > 150) & (g < 90)).mean() > 0.03)


def red_judge(req) -> str:
    """A monitor verdict: a match when the latest frame shown has the red square."""
    hit = shows_red(images(req)[-1].array())
    return verdict(hit, 0.9 if hit else 0.1, "a red square in the top-left corner" if hit else "a dark scene",
                   "colour of the latest frame")


def message_of(req) -> str:
    """The user's message in a turn classifier's request."""
    return json.loads(req.messages[-1].content[0])["message"]


def classify(req) -> str:
    """The classifier's reply, by the message's words (as a model would sort them)."""
    msg = message_of(req).lower()
    if msg.startswith(("stop", "never mind", "cancel")):
        return json.dumps({"kind": "cancel", "condition": "", "target": None, "repeat": False})
    m = re.match(r"(?:tell me|let me know) (?:when|if) (.*?)[.!]?$", msg)
    if m:
        return json.dumps({"kind": "watch", "condition": m.group(1), "target": None, "repeat": False})
    return json.dumps({"kind": "question", "condition": "", "target": None, "repeat": False})


def reply(req) -> str:
    """A reply to a fired request: what the check observed, for the request made."""
    said = json.loads(req.messages[-1].content[0])
    return f"As you asked ({said['request']}): {said['observed']} at t={said['t_s']:g}s."


def dialogue_shown(req) -> list[str]:
    """The earlier questions a coarse request shows in its recent dialogue, oldest first."""
    block = next((t for t in texts(req) if t.startswith("Recent dialogue")), "")
    return re.findall(r"^- at t=[-0-9.]+s: (.*)$", block, re.MULTILINE)


def session_model(**extra) -> TagScript:
    """Classifier, monitor judge, reply writer and a coarse answerer that answers with the
    question itself (so a later request's dialogue shows which answers it holds)."""
    def coarse(req):
        question = texts(req)[-1].rsplit("Question: ", 1)[-1]
        return {"answer": f"answer to: {question}", "sufficient": True}

    replies = {"turn_classifier": classify, "monitor": red_judge, "watch_reply": reply, "two_phase_coarse": coarse,
               "qa_summarizer": "asked about the scene"}
    replies.update(extra)
    return TagScript(replies)


def push(eng, cam: str, t0: float, t1: float, red_from: float | None = None, fps: float = 2.0) -> None:
    """Frames over [t0, t1) at ``fps``; the square shows from ``red_from`` on. Every due check is
    judged and every reply written before the next frame (the stream clock pauses)."""
    for k in range(int(round((t1 - t0) * fps))):
        t = t0 + k / fps
        eng.push(cam, frame(red_from is not None and t >= red_from), t)
        assert eng.wait_for_monitors(10) and eng.wait_for_replies(10)
