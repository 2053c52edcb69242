"""A live camera across a shard's restart (vam_engine/cluster/shard.py: ``_resume_live``): a
camera added through the router reads a clip paced at 1x (``realtime``: a live source that keeps
running for its length); ``kill -9`` of the shard's process; Ray restarts it, it reopens its store
and re-adds the camera, whose status and gaps show the time it was down; what was committed before
the kill is all still there, once, and ingest goes on after the restart.

One Ray (2 CPUs, loopback) with one shard, as tests/cluster/test_cluster.py sets it up."""
import os
import signal
import time

import pytest

ray = pytest.importorskip("ray", reason="the cluster tests need ray (pip install vam-engine[cluster])")

from support.clips import changing_clip  # noqa: E402
from support.waiting import wait_for  # noqa: E402
from vam_engine.cluster import connect  # noqa: E402

CFG = {"ingest": {"fps": 2.0}, "writer": {"enabled": False}, "retention": {"enabled": False}}
CAM = "door"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    clip = changing_clip(tmp_path_factory.mktemp("clips") / "door.mp4", seconds=40)  # every sample is kept
    ray.init(num_cpus=2, include_dashboard=False, namespace="vam_engine", object_store_memory=80 << 20,
             log_to_driver=False, _node_ip_address="127.0.0.1")
    router = connect(None, root=tmp_path_factory.mktemp("cluster"), shards=1, config=CFG, device="cpu")
    yield router, clip
    router.close()
    router.shutdown_shards()
    ray.shutdown()


def _has_server() -> bool:
    try:
        import fastapi  # noqa: F401
    except ImportError:
        return False
    return True


def _shard(router):
    (info,) = router.info().shards
    return info


def test_a_live_camera_resumes_after_kill_9_of_its_shard_with_the_gap_and_nothing_lost(cluster):
    router, clip = cluster
    router.add_camera(CAM, str(clip), realtime=True)
    wait_for("moments of the first run", lambda: len(router.moments(CAM)) >= 4, 20, every=0.2)
    old = _shard(router).status
    assert not old.restarted and old.live == (CAM,)
    before = list(router.moments(CAM))
    os.kill(old.pid, signal.SIGKILL)  # mid-stream: what it had not committed dies with it
    killed_at = time.time()
    new = wait_for("Ray to restart the shard", lambda: (s := _shard(router)).alive and s.status.pid != old.pid
                   and s.status, 60, every=0.2)
    assert new.restarted and new.live == (CAM,)  # it reopened its store and re-added the camera
    wait_for("the resumed camera's first moments", lambda: [m for m in router.moments(CAM) if m.t > new.started_at],
             20, every=0.2)

    (st,) = router.status(CAM)
    assert st.state == "online" and st.error is None
    assert st.gaps == 1  # the camera's status shows the restart's time without video
    (gap,) = router.gaps(CAM)
    assert gap.ended_by == "frame" and "not watched" in gap.reason
    assert gap.t_start >= before[-1].t and gap.t_start < killed_at  # from the last frame committed before the kill
    assert gap.t_end > new.started_at  # to the resumed run's first frame: it covers the time the shard was down
    if _has_server():  # the same over the router's HTTP API
        import httpx

        from support.server import ServerThread
        from vam_engine.cluster import create_cluster_app

        with ServerThread(create_cluster_app(router)) as srv:
            got = httpx.get(f"{srv.url}/api/cameras/{CAM}/gaps", timeout=30).json()
            cam = httpx.get(f"{srv.url}/api/cameras/{CAM}/status", timeout=30).json()
        assert [(g["gap_id"], g["t_start"], g["t_end"]) for g in got["gaps"]] == [(gap.gap_id, gap.t_start, gap.t_end)]
        assert got["missing_cameras"] == [] and cam["gaps"] == 1 and cam["state"] == "online"

    after = router.moments(CAM)
    assert not after.missing_cameras
    assert [(m.moment_id, m.t) for m in after if m.moment_id in {b.moment_id for b in before}] == \
        [(m.moment_id, m.t) for m in before]  # nothing committed before the kill is lost
    ts = sorted(m.t for m in after)
    assert len(set(ts)) == len(ts)  # nor duplicated
    assert not [t for t in ts if gap.t_start < t < gap.t_end]  # nothing inside the gap
    resumed = sorted((m for m in after if m.t >= gap.t_end), key=lambda m: m.t)
    assert resumed and resumed[0].t == pytest.approx(gap.t_end, abs=1e-6)  # ingest goes on after the restart
    assert router.frame(before[0].moment_id)[:2] == router.frame(resumed[-1].moment_id)[:2] == b"\xff\xd8"


def test_a_camera_that_cannot_be_resumed_does_not_take_its_shard_down(cluster, tmp_path):
    """Its file is gone when the shard restarts: the shard still comes back with its other
    cameras, and that camera's status says why it is not running; removing it forgets it."""
    router, clip = cluster
    gone = tmp_path / "yard.mp4"
    gone.write_bytes(clip.read_bytes())
    router.add_camera("yard", str(gone), realtime=True)
    old = _shard(router).status
    assert set(old.live) == {CAM, "yard"}
    gone.unlink()  # the running camera keeps its open file; the restarted shard cannot open it
    os.kill(old.pid, signal.SIGKILL)
    new = wait_for("Ray to restart the shard", lambda: (s := _shard(router)).alive and s.status.pid != old.pid
                   and s.status, 60, every=0.2)
    assert new.restarted and new.live == (CAM,)
    (yard,) = router.status("yard")
    assert yard.state == "offline" and "not resumed" in yard.error and str(gone) in yard.error
    assert wait_for("the door camera online again", lambda: router.status(CAM)[0].state == "online", 20)
    router.remove_camera("yard")
    assert [s.camera_id for s in router.status()] == [CAM]
    assert "yard" not in router.call("shard-0", "_live_specs")
