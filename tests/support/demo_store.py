"""A store of the demo clip whose event documents say what each scene shows (a scripted writer),
for the tests that search, plan and calibrate over real documents."""
from pathlib import Path

from support.scripted import TagScript, event_of, joined_parts, payload
from vam_engine.engine import Engine
from vam_engine.llm import ScriptedLLM
from vam_engine.synthetic.demo import DEMO_SCENES, make_demo_clip

# what each demo scene's event document says: two door events let anchors count occurrences
TOPICS = ["a person opens the blue door and walks into the kitchen",
          "a red car parks in the driveway next to the house",
          "the hallway lights flicker on and off",
          "a blurry view of the garden fence",
          "a person opens the blue door and walks out with a dog"]
DOOR = "a person opens the blue door"


def _scene(t: float) -> int:
    start, idx = 0.0, 0
    for k, (secs, _) in enumerate(DEMO_SCENES):
        if t + 1e-6 >= start:
            idx = k
        start += secs
    return idx


def _document(req) -> str:
    cam, t0, t1 = event_of(req)
    return f"{TOPICS[_scene(t0)]} (camera {cam}, {t0}-{t1} s)"


def _window(req) -> str:
    p = payload(req)
    w = p["window"]
    return f"window summary {w['start_s']}-{w['end_s']}: {len(p['event_documents'])} events, focus {p['focus']}"


# the memory writer's model: each event document says what its scene shows
writer_reply = TagScript({"event_writer": _document, "node_merger": lambda req: joined_parts(req, 80),
                          "summary_writer": _window})


def documented_demo(directory: Path) -> Engine:
    """An engine over the demo clip indexed as camera "cam" at 2 fps in ``directory``/store, every
    event documented by ``writer_reply`` (minilm text vectors)."""
    clip = make_demo_clip(directory / "demo.mp4")
    eng = Engine(directory / "store", {"ingest": {"fps": 2.0}, "embed": {"text_model": "minilm"}}, device="cpu",
                 llm=ScriptedLLM(writer_reply))
    eng.index_file(clip["path"], camera_id="cam")
    assert eng.wait_for_documents(timeout=90)
    return eng
