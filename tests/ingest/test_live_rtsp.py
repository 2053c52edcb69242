"""A live RTSP camera end to end, against a real RTSP server (GStreamer's, run by the system
Python as a separate process on a loopback port): the server is killed mid-stream and started
again; the camera goes stalled/connecting, reconnects, the gap is recorded, and the moments
before and after it are all there exactly once."""
import os
import time

import pytest

from support.clips import changing_clip
from support.live import RtspServer, codes, status_of
from support.waiting import wait_for
from vam_engine.engine import Engine

pytestmark = pytest.mark.rtsp  # tests/conftest.py skips it without GStreamer's RTSP server


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return changing_clip(tmp_path_factory.mktemp("rtsp") / "clip.mp4", seconds=30)


def test_rtsp_camera_reconnects_and_records_the_gap(tmp_path, clip):
    server = RtspServer(clip).start()
    try:
        with Engine(tmp_path / "store", {"ingest": {"fps": 2.0}}, device="cpu") as eng:
            t_added = time.time()
            st = eng.add_camera("door", server.url, stall_s=3.0, backoff_s=0.2, backoff_max_s=0.5)
            assert st.state == "connecting" and st.url == server.url
            wait_for("the camera online with 4 kept samples",
                     lambda: status_of(eng, "door").state == "online" and status_of(eng, "door").frames_kept >= 4, 20)
            on = status_of(eng, "door")
            assert on.input_fps > 5 and on.error is None and on.lag_s is not None and on.lag_s < 5
            assert abs(on.last_frame_t - time.time()) < 5  # t_abs: the wall clock, not the clip's PTS
            eng.flush()
            before = eng.moments("door")

            server.kill()  # mid-stream: the RTSP connection drops
            down = wait_for("the camera to notice the loss",
                            lambda: (s := status_of(eng, "door")).state in ("stalled", "connecting") and s.gaps == 1
                            and s, 10)
            wait_for("the reconnection to fail against the dead server",
                     lambda: "refused" in (status_of(eng, "door").error or ""), 10)
            (gap,) = eng.gaps("door")
            assert gap.open and gap.t_end is None and before[-1].t <= gap.t_start < before[-1].t + 5
            time.sleep(1.0)  # a gap of a second or more
            server.start()  # the same port again
            wait_for("the camera back online with 4 more samples",
                     lambda: (s := status_of(eng, "door")).state == "online" and s.frames_sampled >= down.frames_sampled + 4,
                     20)
            back = status_of(eng, "door")
            assert back.reconnects >= 1 and back.gaps == 1 and back.error is None
            eng.remove_camera("door")
            assert eng.status() == []
            eng.flush()
            after = eng.moments("door")
            (gap,) = eng.gaps("door")
            sources = [s for s in eng.store.sources.all() if s["camera_id"] == "door"]
    finally:
        server.kill()

    assert gap.ended_by == "frame" and gap.t_end - gap.t_start >= 1.0 and "ended" in gap.reason
    # Nothing committed before the loss is lost or changed.
    assert {(m.moment_id, m.t) for m in before} <= {(m.moment_id, m.t) for m in after}
    # One source for the run: t_rel continues across the reconnection, on the camera's axis.
    assert len(sources) == 1 and sources[0]["done"] and len({m.t_rel for m in after}) == len(after)
    ts = [m.t for m in after]
    assert ts == sorted(ts) and len(set(ts)) == len(ts)
    assert all(m.t_abs is not None and t_added - 1 < m.t_abs < time.time() for m in after)
    assert all(m.t_rel == pytest.approx(m.t_abs - after[0].t_abs, abs=1e-6) for m in after)
    pre = [m for m in after if m.t <= gap.t_start]
    post = [m for m in after if m.t >= gap.t_end]
    assert len(pre) >= 4 and len(post) >= 3 and len(pre) + len(post) == len(after)  # none inside the gap
    assert all(os.path.isfile(m.frame_path) for m in after)
    # Each connection played the clip from its start: within one, every frame shown at most once.
    c_pre, c_post = codes(pre), codes(post)
    assert c_pre == sorted(set(c_pre)) and c_post == sorted(set(c_post))
    assert c_post[0] < c_pre[-1]  # the restarted server began the clip again
    # samples every 0.5 s of the camera's axis within a connection (2 fps of a 10 fps stream)
    assert all(0.35 < b.t - a.t < 0.75 for a, b in zip(pre[1:], pre[2:]))
