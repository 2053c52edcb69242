"""Poses and outside tools over HTTP: moments and events carry poses and filter by place
(``near``/``radius``, a box or polygon ``region``, ``map_frame``), exactly as the engine does;
search takes the same filters in its body; bad place parameters are 422s naming them; an answer
carries its position and cites tool results apart from its evidence (an engine configured with
a loopback SearXNG)."""
import json

import pytest

from support.scripted import TagScript
from support.tool_server import ToolServer, results
from vam_engine.engine import Engine
from vam_engine.llm import ScriptedLLM
from vam_engine.synthetic.robot import RobotRun

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 120
RUN = RobotRun(seconds=16.0)  # the loop's first two sides


def _planner(req):
    state = req.messages[1].content[0]
    if "Turn 1" not in state:
        return {"action": "inspect", "prompt": "what is here?", "time_range": {"start": 0.0, "end": 4.0}}
    if "Turn 2" not in state:
        return {"action": "web_search", "query": "what is a corridor"}
    return {"action": "answer", "response": "a corridor", "best_ref": {"turn_idx": 1, "result_idx": 0},
            "tool_refs": [{"turn_idx": 2, "result_idx": 0}]}


@pytest.fixture
def robot(tmp_path):
    with ToolServer() as srv:
        srv.web = lambda q: results(("Corridor", "https://example.org/corridor", "A passage in a building."))
        model = TagScript({"router": json.dumps({"type": "tool", "name": "retrieve", "args": {"question": "what?"}}),
                           "planner*": _planner, "inspector": "a wall with pictures"})
        cfg = {"ingest": {"fps": RUN.fps}, "writer": {"enabled": False},
               "tools": {"web_search": {"url": srv.url, "timeout_s": 2.0}}}
        eng = Engine(tmp_path / "store", cfg, device="cpu", llm=ScriptedLLM(model))
        for t, frame, pose in RUN.frames():
            eng.push("rover", frame, t, pose=pose)
        eng.end_push("rover")
        yield eng, srv
        eng.close()


def _ids(page):
    return [m["moment_id"] for m in page["items"]]


def test_moments_and_search_filter_by_place_and_return_poses(robot, client_for):
    eng, _ = robot
    c = client_for(eng)
    page = c.get("/api/moments", params={"camera": "rover", "limit": 500}).json()
    assert page["items"] and all(m["pose"]["frame"] == "map" for m in page["items"])
    first = page["items"][0]
    assert (first["pose"]["x"], first["pose"]["y"], first["pose"]["yaw"]) == (0.0, 0.0, 0.0)
    near = c.get("/api/moments", params={"near": "4,0", "radius": 1.2, "limit": 500}).json()
    assert _ids(near) == [m.moment_id for m in eng.moments(near=(4, 0), radius=1.2)] and _ids(near)
    box = c.get("/api/moments", params={"region": "3.5,-1,4.5,5"}).json()
    assert _ids(box) == [m.moment_id for m in eng.moments(region=(3.5, -1, 4.5, 5))] and _ids(box)
    tri = c.get("/api/moments", params={"region": "0,-1;5,-1;5,4"}).json()
    assert _ids(tri) == [m.moment_id for m in eng.moments(region=[(0, -1), (5, -1), (5, 4)])]
    paged = c.get("/api/moments", params={"near": "4,0", "radius": 1.2, "limit": 2}).json()
    rest = c.get("/api/moments", params={"near": "4,0", "radius": 1.2, "limit": 500,
                                         "cursor": paged["next_cursor"]}).json()
    assert _ids(paged) + _ids(rest) == _ids(near)
    assert c.get("/api/moments", params={"near": "4,0", "radius": 1.2, "map_frame": "other"}).json()["items"] == []
    ev = c.get("/api/events", params={"near": "4,0", "radius": 0.3}).json()["items"]
    assert ev and all(any(m.event_id == e["event_id"] for m in eng.moments(near=(4, 0), radius=0.3)) for e in ev)
    hits = c.post("/api/search", json={"text": "a wall", "top_k": 50, "region": [[0, -1], [5, -1], [5, 4]]})
    assert hits.status_code == 200 and all(e["pose"]["x"] >= e["pose"]["y"] for e in hits.json()["evidence"])
    bad = c.post("/api/search", json={"text": "a wall", "near": [4, 0]})
    assert bad.status_code == 422 and "near and radius go together" in bad.text
    body = c.post("/api/search", files={"image": ("q.jpg", _jpeg(RUN.frame(8.0)), "image/jpeg")},
                  data={"top_k": "50", "near": "[4, 0]", "radius": "1.2", "sources": "frame"}).json()
    assert sorted(e["moment_ids"][0] for e in body["evidence"]) == sorted(_ids(near))
    assert all((e["pose"]["x"] - 4) ** 2 + e["pose"]["y"] ** 2 <= 1.44 for e in body["evidence"])


def _jpeg(rgb) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(rgb).save(out, "JPEG")
    return out.getvalue()


@pytest.mark.parametrize("params,what", [({"near": "4,0"}, "near and radius go together"),
                                         ({"near": "4", "radius": 1}, "point (x, y)"),
                                         ({"near": "a,b", "radius": 1}, "comma-separated numbers"),
                                         ({"region": "1,2,0,0"}, "x0 <= x1"), ({"region": "0,0;1,1"}, "3.."),
                                         ({"near": "0,0", "radius": -1}, "positive")])
def test_bad_place_parameters_are_422s_naming_them(robot, client_for, params, what):
    r = client_for(robot[0]).get("/api/moments", params=params)
    assert r.status_code == 422 and what in r.text, r.text


def test_an_answer_carries_its_position_and_cites_tool_results_apart(robot, client_for):
    eng, srv = robot
    r = client_for(eng).post("/api/ask", json={"question": "what is this place?", "mode": "agentic"})
    assert r.status_code == 200, r.text
    a = r.json()
    assert a["text"] == "a corridor" and a["found"]
    assert a["tool_citations"] == [{"tool": "web_search", "query": "what is a corridor", "title": "Corridor",
                                    "url": "https://example.org/corridor", "text": "A passage in a building.",
                                    "moment_id": None, "camera_id": None, "t": None}]
    assert all(e["camera_id"] == "rover" for e in a["evidence"])  # the tool result is not evidence
    last = max(m.t for m in eng.moments() if m.t <= 4.0)
    x, y, z, yaw = RUN.pose(last)
    assert a["position"] == a["evidence"][0]["pose"] == {"x": x, "y": y, "z": z, "yaw": yaw, "frame": "map"}
    assert [h.query["q"] for h in srv.hits("/search")] == ["what is a corridor"]


def test_a_polygon_over_the_corner_bound_is_a_422_naming_it(robot, client_for):
    import math

    from vam_engine.memory import MAX_CORNERS

    c = client_for(robot[0])
    ring = [[round(5 * math.cos(a), 4), round(5 * math.sin(a), 4)]
            for a in (2 * math.pi * k / (MAX_CORNERS + 1) for k in range(MAX_CORNERS + 1))]
    r = c.get("/api/moments", params={"region": ";".join(f"{x},{y}" for x, y in ring)})
    assert r.status_code == 422 and f"3..{MAX_CORNERS} corners, got {MAX_CORNERS + 1}" in r.text
    r = c.post("/api/search", json={"text": "a wall", "region": ring})
    assert r.status_code == 422 and f"at most {MAX_CORNERS}" in r.text, r.text
    inside = c.get("/api/moments", params={"region": ";".join(f"{x},{y}" for x, y in ring[:MAX_CORNERS]),
                                           "limit": 500})
    assert inside.status_code == 200 and inside.json()["items"]  # at the bound: served
