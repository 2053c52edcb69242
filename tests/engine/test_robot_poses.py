"""A robot's run with poses (vam_engine.synthetic.robot: a square loop, a cat at two known
places): every moment keeps its pose; "where was the cat?" answers with the position of the
last sighting (a scripted model that reads the positions its context shows); distance and
region filters on moments and search return exactly what a brute-force pass over the poses
says; poses survive kill -9 and resume; a store of the previous schema migrates."""
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from support.paths import REPO, unpack_store
from support.scripted import TagScript, images, joined_parts
from vam_engine.audio.records import TranscriptSegment
from vam_engine.engine import Engine
from vam_engine.memory.db import SCHEMA_VERSION
from vam_engine.errors import VamError
from vam_engine.index import load_state
from vam_engine.ingest.poses import Pose
from vam_engine.llm import ScriptedLLM
from vam_engine.memory.places import in_polygon
from vam_engine.memory.store import Store
from vam_engine.synthetic.robot import RobotRun

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 300
RUN = RobotRun()


def _at(t: float) -> Pose:
    """Where the robot was at ``t`` (its poses are in the default map frame)."""
    return Pose(*RobotRun().pose(t))
CAT_DOC = "a tabby cat sits on the floor and looks at the camera"
WALL_DOC = "a corridor wall with pictures"


def _is_cat(img) -> bool:
    a = np.asarray(img.array(), np.float32)
    if a.shape != RUN.cat.shape:
        return False
    return float(np.abs(a - RUN.cat.astype(np.float32)).mean()) < 20


def _document(req) -> str:
    return CAT_DOC if any(_is_cat(i) for i in images(req)) else WALL_DOC


CONTEXT_LINE = re.compile(r"\[(\d+)\.(\d+)\] camera \S+, ([0-9.]+)-([0-9.]+) s, event.*?seen at "
                          r"\(([-0-9.]+), ([-0-9.]+)\) in map '([^']+)': (.*)")


def _where(req) -> dict:
    """The planner: first search for the cat; then answer with the position of the latest
    result whose document shows it (as the context shows it: "seen at (x, y) in map m")."""
    state = req.messages[1].content[0]
    if "Turn 1" not in state:
        return {"action": "search", "queries": [{"q": "a cat", "top_k": 20, "threshold": 0.0}], "sources": ["event"]}
    cats = [m for m in map(CONTEXT_LINE.search, state.splitlines()) if m and "cat" in m.group(8)]
    last = max(cats, key=lambda m: float(m.group(3)))
    return {"action": "answer", "response": f"The cat was last seen at ({last.group(5)}, {last.group(6)}) in map "
                                            f"'{last.group(7)}'.",
            "best_ref": {"turn_idx": int(last.group(1)), "result_idx": int(last.group(2))}}


def _model() -> TagScript:
    return TagScript({"event_writer": _document, "node_merger": lambda req: joined_parts(req, 60),
                      "summary_writer": "the corridor wall, window by window",
                      "router": lambda req: json.dumps({"type": "tool", "name": "retrieve", "args": {
                          "question": "where was the cat?"}}),
                      "planner": _where, "qa_summarizer": "asked where the cat was"})


@pytest.fixture(scope="module")
def robot(tmp_path_factory):
    """One event per frame (max_event_s under the frame interval): each event document is one
    sighting, so its position is exact."""
    cfg = {"ingest": {"fps": RUN.fps}, "commit": {"max_event_s": 0.3}, "embed": {"text_model": "minilm"}}
    eng = Engine(tmp_path_factory.mktemp("robot") / "store", cfg, device="cpu", llm=ScriptedLLM(_model()))
    for t, frame, pose in RUN.frames():
        eng.push("rover", frame, t, pose=pose)
    eng.end_push("rover")
    assert eng.wait_for_documents(timeout=120)
    yield eng
    eng.close()


def test_every_moment_keeps_the_pose_it_was_pushed_with(robot):
    ms = robot.moments("rover")
    assert len(ms) >= len(RUN.times) // 2  # the gates keep most of a moving view
    for m in ms:
        assert m.pose == _at(m.t), m.t
    cats = [m for m in ms if m.t in RUN.cat_times]
    assert [m.pose for m in cats] == [_at(t) for t in RUN.cat_times]


def test_where_was_the_cat_answers_with_the_last_sighting(robot):
    ans = robot.ask("where was the cat?", mode="agentic")
    last = _at(RUN.cat_times[-1])  # (1, 4): the second sighting, after (3, 0)
    assert ans.found and ans.position is not None
    assert math.hypot(ans.position.x - last.x, ans.position.y - last.y) <= RUN.resolution_m
    assert ans.evidence[0].text == CAT_DOC and ans.evidence[0].pose == ans.position
    assert f"({last.x:.2f}, {last.y:.2f}) in map 'map'" in ans.text
    first = _at(RUN.cat_times[0])
    assert any(e.pose == first for e in ans.evidence[1:])  # the earlier sighting is cited too, at its place


def _brute(ms, inside):
    return sorted(m.moment_id for m in ms if m.pose is not None and inside(m.pose.x, m.pose.y))


@pytest.mark.parametrize("centre,radius", [((2.0, 0.0), 1.3), ((4.0, 4.0), 0.75), ((0.0, 2.0), 0.25),
                                           ((2.0, 2.0), 1.9), ((9.0, 9.0), 1.0), ((3.0, 0.0), 0.5)])
def test_distance_filters_return_exactly_the_moments_inside_the_radius(robot, centre, radius):
    every = robot.moments("rover")
    (cx, cy), r2 = centre, radius * radius
    want = _brute(every, lambda x, y: (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r2)
    assert [m.moment_id for m in robot.moments("rover", near=centre, radius=radius)] == want
    assert robot.moments(near=centre, radius=radius, map_frame="elsewhere") == []
    # search: the same filter before ranking; with room for all, exactly those frames
    hits = robot.search(image=RUN.cat, top_k=200, sources=("frame",), near=centre, radius=radius).evidence
    assert sorted(h.moment_ids[0] for h in hits) == want
    assert all(h.pose is not None and (h.pose.x - cx) ** 2 + (h.pose.y - cy) ** 2 <= r2 for h in hits)


def test_region_filters_box_and_polygon(robot):
    every = robot.moments("rover")
    box = (3.5, -0.5, 4.5, 4.5)  # the loop's second side
    want = _brute(every, lambda x, y: 3.5 <= x <= 4.5 and -0.5 <= y <= 4.5)
    assert [m.moment_id for m in robot.moments(region=box)] == want and len(want) > 5
    tri = [(-1.0, -1.0), (5.0, -1.0), (-1.0, 5.0)]  # the half of the loop below the diagonal x + y = 4
    want = _brute(every, lambda x, y: in_polygon(tri, x, y))
    got = [m.moment_id for m in robot.moments(region=tri)]
    assert got == want and 0 < len(got) < len(every)
    assert all(m.pose.x + m.pose.y < 4 + 1e-9 for m in robot.moments(region=tri))
    hits = robot.search(image=RUN.cat, top_k=200, region=tri, sources=("frame", "event")).evidence
    assert hits and all(h.pose.x + h.pose.y < 4 + 1e-9 for h in hits)
    frames = sorted(h.moment_ids[0] for h in hits if h.source == "frame")
    assert frames == want
    both = robot.moments(near=(0.0, 0.0), radius=2.0, region=tri)
    assert [m.moment_id for m in both] == _brute(every, lambda x, y: x * x + y * y <= 4.0 and in_polygon(tri, x, y))


def test_summaries_and_speech_are_filtered_by_the_places_of_their_moments(robot):
    docs = robot.summarize((0.0, 8.0), 4.0, "what the wall shows", cameras="rover")
    assert len(docs) == 2  # [0, 4): x 0..1.75 on the first side; [4, 8): x 2..3.75
    near_start = robot.search("the corridor wall", sources=("summary",), near=(0.5, 0.0), radius=0.6).evidence
    assert [(e.t_start, e.t_end) for e in near_start] == [(docs[0].t0, docs[0].t1)]
    assert robot.search("the corridor wall", sources=("summary",), near=(0.5, 0.0), radius=0.6,
                        map_frame="elsewhere").evidence == []
    robot.store.transcripts.append([TranscriptSegment("rover", 5.9, 6.1, "look, a cat", "en", 0.9),
                                    TranscriptSegment("rover", 21.9, 22.1, "the cat again", "en", 0.9)])
    said = robot.search("cat", sources=("speech",), top_k=5).evidence
    assert sorted(e.text for e in said) == ["look, a cat", "the cat again"]
    there = robot.search("cat", sources=("speech",), top_k=5, near=(1.0, 4.0), radius=0.5).evidence
    assert [e.text for e in there] == ["the cat again"] and there[0].pose == _at(22.0)


def test_bad_place_filters_are_clear_errors(robot):
    for kw, what in (({"near": (1, 2)}, "near and radius go together"), ({"near": (1, 2), "radius": 0}, "positive"),
                     ({"near": (1, 2, 3), "radius": 1}, "point (x, y)"), ({"region": (4, 0, 1, 1)}, "x0 <= x1"),
                     ({"region": [(0, 0), (1, 1)]}, "3.."), ({"near": ("a", 1), "radius": 1}, "finite number"),
                     ({"region": (0, 0, 1, math.inf)}, "finite")):
        with pytest.raises(VamError, match=re.escape(what)):
            robot.moments(**kw)


CHILD = r"""
import sys, time
from vam_engine.engine import Engine
from vam_engine.synthetic.robot import RobotRun
run = RobotRun(seconds=400.0)
eng = Engine(sys.argv[1], {"ingest": {"fps": 2.0}, "store": {"commit_interval_s": 0.05}}, device="cpu")
for t, frame, pose in run.frames():
    eng.push("rover", frame, t, pose=pose)
    time.sleep(0.01)
"""


def _committed(store_dir):
    """The moments committed, and the frame the committer held at that commit (None: none)."""
    s = Store(store_dir, create=False)
    try:
        state = load_state(s, "rover")
        return s.moments.list(), None if state is None or state.held is None else state.held
    finally:
        s.close()


def test_poses_survive_kill_9_and_resume(tmp_path):
    run = RobotRun(seconds=400.0)
    store_dir = tmp_path / "store"
    Store(store_dir).close()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO)] + [p for p in sys.path if p]))
    log = tmp_path / "child.log"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(store_dir)], stdout=subprocess.DEVNULL,
                             stderr=open(log, "w"), env=env, cwd=str(REPO))
    try:
        deadline = time.monotonic() + 90
        while True:  # killed once 25 moments are in and a frame is held (its pose only in the saved state)
            ms, held = _committed(store_dir)
            if len(ms) >= 25 and held is not None:
                child.send_signal(signal.SIGKILL)
                break
            assert child.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"no 25 moments and a held frame in 90 s ({len(ms)} moments)"
            time.sleep(0.02)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(10)
    assert child.returncode == -signal.SIGKILL
    before, held = _committed(store_dir)
    assert len(before) >= 25 and all(m.pose == _at(m.t) for m in before)
    assert held is not None and held.key.pose == _at(held.t)  # the held frame's pose survived too
    with Engine(store_dir, {"ingest": {"fps": 2.0}}, device="cpu") as eng:
        after_t = eng.push_progress("rover")
        assert after_t is not None and after_t >= before[-1].t
        for t, frame, pose in run.frames():  # resume after what is committed, as a pusher would
            if t > after_t:
                eng.push("rover", frame, t, pose=pose)
            if t > after_t + 20:
                break
        eng.end_push("rover")
        ms = eng.moments("rover")
    assert len(ms) > len(before) and [m.moment_id for m in ms[:len(before)]] == [m.moment_id for m in before]
    assert all(m.pose == _at(m.t) for m in ms)  # every committed moment has its pose, none wrong


def test_a_store_of_the_previous_schema_migrates_and_its_moments_have_no_pose(tmp_path):
    root = unpack_store(8, tmp_path, "store_v8_robot.tar.gz")  # a robot's pushed frames, before poses
    with Engine(root, {"ingest": {"fps": 2.0}}, device="cpu") as eng:
        old = eng.moments("robot")
        assert len(old) >= 4 and all(m.pose is None for m in old)
        assert eng.moments(near=(0, 0), radius=100.0) == []  # no pose: never inside a place
        t = eng.push_progress("robot") + 1.0
        eng.push("robot", np.full((96, 96, 3), 200, np.uint8), t, pose=(1.0, 2.0, 0.0, 0.0))
        eng.end_push("robot")
        new = [m for m in eng.moments("robot") if m.t >= t]
        assert [m.pose.x for m in new] == [1.0]
        assert [m.moment_id for m in eng.moments(near=(1, 2), radius=0.1)] == [new[0].moment_id]
    import sqlite3

    with sqlite3.connect(root / "store.sqlite") as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        cols = {r[1] for r in conn.execute("PRAGMA table_info(moments)")}
    assert {"pose_x", "pose_y", "pose_z", "pose_yaw", "pose_frame"} <= cols
