"""Poses (ingest/poses.py): what a pose may be, how yaw is normalised, how a pose track
interpolates onto frame times (linear x/y/z, the shorter way round in yaw, no extrapolation
past the hold time, nothing across a gap or a change of map), and a JSON-lines pose file read
as it grows. Bad poses are errors naming the camera."""
import json
import math

import numpy as np
import pytest

from vam_engine.engine import Engine
from vam_engine.errors import FrameError
from vam_engine.ingest.poses import (JsonlPoses, Pose, PoseError, PoseTrack, check_pose, interpolate,
                                     make_pose_source, normalize_yaw, pose_at)


def test_a_pose_is_four_finite_numbers_or_a_record_and_yaw_is_normalised():
    assert check_pose((1, 2.5, 0, 0.5), "r") == Pose(1.0, 2.5, 0.0, 0.5, "map")
    assert check_pose(np.array([1.0, 2.0, 3.0, 0.0]), "r") == Pose(1.0, 2.0, 3.0, 0.0)
    assert check_pose({"x": 1, "y": 2, "z": 0, "yaw": 0, "frame": "floor2"}, "r").frame == "floor2"
    assert check_pose(None, "r") is None
    p = check_pose((0, 0, 0, 3 * math.pi / 2), "r")  # out of range is allowed, and normalised
    assert p.yaw == pytest.approx(-math.pi / 2)
    assert check_pose(Pose(0, 0, 0, 7 * math.pi), "r").yaw == pytest.approx(-math.pi)
    assert normalize_yaw(math.pi) == -math.pi and normalize_yaw(-math.pi) == -math.pi
    for yaw in np.linspace(-20, 20, 101):
        y = normalize_yaw(yaw)
        assert -math.pi <= y < math.pi and math.isclose(math.cos(y), math.cos(yaw), abs_tol=1e-9)
    bad = [((1, 2, 3), "4 values"), ((1, 2, 3, 4, 5), "4 values"), ((1, float("nan"), 0, 0), "y must be finite"),
           ((1, 2, float("inf"), 0), "z must be finite"), (("1", 2, 3, 4), "x must be a number"),
           ("1,2,3,4", "must be (x, y, z, yaw)"), ({"x": 1, "y": 2, "z": 3}, "missing ['yaw']"),
           ({"x": 1, "y": 2, "z": 3, "yaw": 0, "roll": 1}, "unknown ['roll']"),
           (Pose(0, 0, 0, 0, ""), "map frame"), ((True, 0, 0, 0), "x must be a number")]
    for value, what in bad:
        with pytest.raises(PoseError, match="camera 'robot-7'") as e:
            check_pose(value, "robot-7")
        assert what in str(e.value), (value, str(e.value))


def test_interpolation_is_linear_in_position_and_takes_the_short_way_round_in_yaw():
    a, b = Pose(0, 0, 0, math.radians(170)), Pose(2, -4, 1, math.radians(-170))
    mid = interpolate(a, b, 0.5)
    assert (mid.x, mid.y, mid.z) == (1, -2, 0.5)
    assert abs(mid.yaw) == pytest.approx(math.pi)  # through 180 degrees, not through 0
    q = interpolate(a, b, 0.25)
    assert math.degrees(q.yaw) == pytest.approx(175)


def test_a_track_interpolates_between_poses_and_never_extrapolates():
    tr = PoseTrack("r", max_gap_s=1.0, hold_s=0.25)
    for t, x in ((10.0, 0.0), (10.5, 1.0), (11.0, 2.0), (13.0, 6.0)):  # 11 -> 13: localisation lost
        tr.add(t, Pose(x, 0, 0, 0))
    assert tr.at(10.25).x == pytest.approx(0.5) and tr.at(10.9).x == pytest.approx(1.8)
    assert tr.at(10.5).x == 1.0
    assert tr.at(12.0) is None  # the poses around it are 2 s apart
    assert tr.at(9.8).x == 0.0 and tr.at(9.7) is None  # before the first: held 0.25 s only
    assert tr.at(13.2).x == 6.0 and tr.at(13.3) is None  # after the last: the same
    tr2 = PoseTrack("r")
    tr2.add(0.0, Pose(0, 0, 0, 0, "floor1"))
    tr2.add(0.5, Pose(1, 0, 0, 0, "floor2"))
    assert tr2.at(0.25) is None  # no interpolation from one map to another
    with pytest.raises(PoseError, match="not after"):
        tr2.add(0.5, Pose(0, 0, 0, 0))


def test_a_pose_file_is_read_as_it_grows_and_bad_lines_are_clear(tmp_path):
    path = tmp_path / "poses.jsonl"
    path.write_text("".join(json.dumps({"t": t, "x": t, "y": 2 * t, "z": 0, "yaw": 0}) + "\n" for t in (0, 1)))
    src = JsonlPoses(path, "cam")
    assert src.at(0.5).x == pytest.approx(0.5) and src.at(1.5) is None
    with open(path, "a") as f:  # a localiser appends: the next lookup reads it, a half-written line waits
        f.write(json.dumps({"t": 2, "x": 2, "y": 4, "z": 0, "yaw": 0, "frame": "map"}) + "\n" + '{"t": 3, "x"')
    assert src.at(1.5).y == pytest.approx(3.0)
    assert src.at(2.9) is None
    with open(path, "a") as f:
        f.write(': 3, "y": 6, "z": 0, "yaw": 0}\nnot json\n' + json.dumps({"t": 4, "x": 4, "y": 8, "z": 0,
                                                                            "yaw": 0}) + "\n")
    assert src.at(3.5).x == pytest.approx(3.5)  # the bad line appended later is skipped and counted
    assert src.errors == 1 and "line 5 is not JSON" in src.last_error and "camera 'cam'" in src.last_error
    for text, what in (('{"t": 0, "x": 1}\n', "missing"), ('[1, 2]\n', "must be an object"),
                       ('{"t": 1, "x": 0, "y": 0, "z": 0, "yaw": 0}\n{"t": 0.5, "x": 0, "y": 0, "z": 0, "yaw": 0}\n',
                        "not after"), ('{"t": "soon", "x": 0, "y": 0, "z": 0, "yaw": 0}\n', "t must be a number")):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text)
        with pytest.raises(PoseError, match="camera 'cam'") as e:
            JsonlPoses(bad, "cam")
        assert what in str(e.value) and "line" in str(e.value)
    with pytest.raises(PoseError, match="does not exist"):
        make_pose_source(tmp_path / "missing.jsonl", "cam")
    with pytest.raises(PoseError, match="callable"):
        make_pose_source(42, "cam")


def test_a_failing_pose_callable_gives_no_pose_and_keeps_its_error():
    calls = []

    def fn(t):
        calls.append(t)
        if t > 1:
            raise RuntimeError("localiser down")
        return (t, 0, 0, 0) if t < 0.5 else (t, 0, 0)  # wrong length from 0.5 on

    src = make_pose_source(fn, "cam")
    assert pose_at(src, 0.25) == Pose(0.25, 0, 0, 0)
    assert pose_at(src, 0.75) is None and "4 values" in src.last_error
    assert pose_at(src, 2.0) is None and "localiser down" in src.last_error and "camera 'cam'" in src.last_error
    assert src.errors == 2 and calls == [0.25, 0.75, 2.0]


def test_push_takes_poses_and_refuses_bad_ones_naming_the_camera(tmp_path):
    frame = np.zeros((48, 64, 3), np.uint8)
    with Engine(tmp_path / "s", {"ingest": {"fps": 50}}, device="cpu") as eng:
        for i in range(4):
            frame[:, :, i % 3] = 60 * (i + 1)
            eng.push("rover", frame, 0.1 * i, pose=Pose(i, -i, 0.5, 4.0, "yard"))
        for bad, what in (((1, 2, 3), "4 values"), ((0, math.nan, 0, 0), "finite"), ("here", "must be")):
            with pytest.raises(FrameError, match="camera 'rover'") as e:
                eng.push("rover", frame, 1.0, pose=bad)
            assert what in str(e.value)
        eng.end_push("rover")
        ms = eng.moments("rover")
    assert ms and all(m.pose is not None for m in ms)
    for m in ms:
        i = round(m.t / 0.1)
        assert m.pose == Pose(i, -i, 0.5, pytest.approx(4.0 - 2 * math.pi), "yard")
