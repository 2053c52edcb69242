"""A live camera's pose source: a JSON-lines pose file (unix times, the live camera's axis)
interpolated onto the frames of a clip played at 1x, and a callable; a gap in the poses leaves
the frames in it without one; a bad source is refused at add_camera, naming the camera."""
import json
import math
import time

import pytest

from support.clips import changing_clip
from support.live import status_of
from support.waiting import wait_for
from vam_engine.engine import Engine
from vam_engine.ingest.poses import HOLD_S, MAX_GAP_S, Pose, normalize_yaw

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 120


def _truth(t: float, t0: float) -> Pose:
    """The path the pose file samples: straight and steady, turning through +-pi."""
    d = t - t0
    return Pose(0.5 * d, -0.25 * d, 0.1, normalize_yaw(3.0 + 0.5 * d), "yard")


def test_a_pose_file_is_interpolated_onto_a_live_cameras_frames(tmp_path):
    clip = changing_clip(tmp_path / "a.mp4", seconds=8, seed=3)
    t0 = time.time()
    gap = (t0 + 3.0, t0 + 5.5)  # no poses here: localisation lost
    path = tmp_path / "poses.jsonl"
    with open(path, "w") as f:
        for k in range(-10, 150):  # 5 Hz from 2 s before now to 30 s after
            t = t0 + 0.2 * k
            if gap[0] < t < gap[1]:
                continue
            f.write(json.dumps({"t": t, **_truth(t, t0).to_json()}) + "\n")
    with Engine(tmp_path / "store", {"ingest": {"fps": 2.0}}, device="cpu") as eng:
        eng.add_camera("cart", str(clip), realtime=True, pose=str(path))
        wait_for("the clip's 8 s", lambda: status_of(eng, "cart").frames_sampled >= 15, 20)
        eng.remove_camera("cart")
        eng.flush()
        ms = eng.moments("cart")
    assert len(ms) >= 12
    inside = [m for m in ms if gap[0] + HOLD_S < m.t < gap[1] - HOLD_S]
    assert inside and all(m.pose is None for m in inside)
    posed = [m for m in ms if not gap[0] - 0.2 < m.t < gap[1] + 0.2]  # bracketed by poses 0.2 s apart
    assert len(posed) >= 8
    for m in posed:
        want = _truth(m.t, t0)
        got = m.pose
        assert got is not None and got.frame == "yard", m.t
        assert (got.x, got.y, got.z) == pytest.approx((want.x, want.y, want.z), abs=1e-6)
        assert math.isclose(math.remainder(got.yaw - want.yaw, 2 * math.pi), 0.0, abs_tol=1e-6)
    assert MAX_GAP_S < gap[1] - gap[0]


def test_a_pose_callable_and_bad_sources(tmp_path):
    clip = changing_clip(tmp_path / "b.mp4", seconds=3, seed=4)
    asked = []

    def where(t):
        asked.append(t)
        return (1.0, 2.0, 0.0, t)

    with Engine(tmp_path / "store", {"ingest": {"fps": 2.0}}, device="cpu") as eng:
        for bad, what in ((tmp_path / "none.jsonl", "does not exist"), (3.5, "callable")):
            with pytest.raises(ValueError, match="camera 'cart'") as e:
                eng.add_camera("cart", str(clip), pose=bad)
            assert what in str(e.value)
        (tmp_path / "bad.jsonl").write_text('{"t": 1, "x": 0, "y": 0, "z": 0}\n')
        with pytest.raises(ValueError, match="line 1"):
            eng.add_camera("cart", str(clip), pose=tmp_path / "bad.jsonl")
        assert eng.status() == []  # nothing started
        eng.add_camera("cart", str(clip), realtime=True, pose=where)
        wait_for("the clip", lambda: status_of(eng, "cart").frames_sampled >= 5, 20)
        eng.remove_camera("cart")
        eng.flush()
        ms = eng.moments("cart")
    assert ms and all(m.pose == Pose(1.0, 2.0, 0.0, normalize_yaw(m.t)) for m in ms)
    assert {round(m.t, 6) for m in ms} <= {round(t, 6) for t in asked}  # asked at each sample's own time
