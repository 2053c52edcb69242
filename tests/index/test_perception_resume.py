"""kill -9 while perception runs, then resume: the same tracks and entities as an uninterrupted
run. A child process indexes the yard camera of support/perception_store.py (a cat crossing,
then a person) with the real detector; the parent kills it once the cat's first detections are
committed, mid-crossing, and resumes in process. The stage's state (active tracks, entity ids,
counters) is committed with the rows it made, so the resumed run goes on with the cat's track
and entity instead of starting new ones."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from support import perception_store as ps
from support.paths import REPO
from vam_engine.engine import Engine

WATCHDOG_S = 300
pytestmark = [pytest.mark.usefixtures("watchdog"), pytest.mark.needs("perception_models")]

CHILD = """
import json, sys, time
from vam_engine.engine import Engine
clip, store, cfg = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
with Engine(store, cfg, device="cpu") as eng:
    eng.index_file(clip, camera_id="yard", progress=lambda p: time.sleep(0.3))
"""


def config() -> dict:
    cfg = ps.perception_config()
    cfg["perception"]["ocr"] = False  # the yard shows no text
    return {**cfg, "ingest": {"batch_size": 1}, "store": {"commit_every": 2, "commit_interval_s": 0.2}}


def what_perception_stored(store) -> dict:
    with sqlite3.connect(store / "store.sqlite") as c:
        return {"entities": c.execute("SELECT e.entity_id, e.label, s.camera_id, s.first_t, s.last_t FROM entities e "
                                      "JOIN entity_seen s ON s.entity_id = e.entity_id ORDER BY 1").fetchall(),
                "tracks": c.execute("SELECT track_id, camera_id, entity_id, label, first_t, last_t, count FROM tracks "
                                    "ORDER BY 1").fetchall(),
                "detections": c.execute("SELECT t, label, track_id, entity_id FROM detections ORDER BY t, label")
                .fetchall()}


def committed_detections(store) -> int:
    try:
        with sqlite3.connect(f"file:{store / 'store.sqlite'}?mode=ro", uri=True, timeout=1) as c:
            return c.execute("SELECT COUNT(*) FROM detections").fetchone()[0]
    except sqlite3.Error:  # not created yet, or mid-migration
        return 0


def test_kill_9_during_perception_then_resume_gives_the_same_entities(tmp_path):
    clip = ps.yard_clip(tmp_path / "yard.mp4")
    cfg = config()
    with Engine(tmp_path / "whole", cfg, device="cpu") as eng:
        eng.index_file(str(clip), "yard")
    whole = what_perception_stored(tmp_path / "whole")
    assert any(label == "cat" for _, label, *_ in whole["entities"])

    store = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO), "VAM_RETENTION__ENABLED": "0"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(clip), str(store), json.dumps(cfg)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while committed_detections(store) < 2:  # the cat's first sightings are committed
            assert child.poll() is None, child.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the child never committed a detection"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    partial = what_perception_stored(store)
    assert 0 < len(partial["detections"]) < len(whole["detections"])  # killed mid-stream

    with Engine(store, cfg, device="cpu") as eng:
        rep = eng.index_file(str(clip), "yard")
        assert rep.resumed_from is not None
    resumed = what_perception_stored(store)
    assert resumed == whole
