"""A store of the demo clip whose event documents say what each scene shows (a scripted writer),
for the tests that search, plan and calibrate over real documents."""
import json

from vam_engine.synthetic.demo import DEMO_SCENES

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


def writer_reply(req) -> str:
    p = json.loads(req.messages[1].content[0])
    if p["task"] == "event_document":
        r = p["time_range"]
        return f"{TOPICS[_scene(r['start_s'])]} (camera {p['camera']}, {r['start_s']}-{r['end_s']} s)"
    if p["task"] == "merge_summaries":
        return " | ".join(part["summary"][:80] for part in p["parts"])
    if p["task"] == "window_summary":
        w = p["window"]
        return f"window summary {w['start_s']}-{w['end_s']}: {len(p['event_documents'])} events, focus {p['focus']}"
    raise AssertionError(f"unexpected writer task {p['task']}")
