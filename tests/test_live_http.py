"""A live HTTP MPEG-TS camera from a loopback server: read at 1x (a network source is never
read ahead of real time), t_abs on the wall clock, the end of the stream a loss that reconnects
with a gap, and a server that goes silent mid-stream caught by the stall watchdog."""
import time

import pytest

from _servers.live_helpers import TsServer, changing_clip, codes, status_of, wait_for
from vam_engine.engine import Engine


@pytest.fixture(scope="module")
def ts_clip(tmp_path_factory):
    return changing_clip(tmp_path_factory.mktemp("ts") / "clip.ts", seconds=4, container="mpegts")


def test_http_ts_is_read_at_1x_and_reconnects_at_its_end(tmp_path, ts_clip):
    with TsServer(ts_clip) as server, Engine(tmp_path / "store", {"ingest": {"fps": 2.0}}, device="cpu") as eng:
        t0 = time.time()
        eng.add_camera("yard", server.url, stall_s=2.0, backoff_s=0.2, backoff_max_s=0.4)
        # The whole file is sent at once; its 4 s still take about 4 s of the wall clock to play.
        wait_for("the stream's end to be noticed", lambda: status_of(eng, "yard").gaps == 1, 15)
        wait_for("the camera to reconnect", lambda: server.connections >= 2 and
                 status_of(eng, "yard").state == "online", 10)
        eng.remove_camera("yard")
        eng.flush()
        ms = eng.moments("yard")
        (gap,) = eng.gaps("yard")
    first = [m for m in ms if m.t <= gap.t_start]
    assert len(first) == 8  # 4 s at 2 fps, each sample kept
    span = first[-1].t_abs - first[0].t_abs
    assert span == pytest.approx(3.5, abs=0.05)  # PTS-advanced: the clip's own spacing
    assert first[0].t_abs >= t0 and first[-1].t_abs <= gap.created_at + 0.5  # paced: no frame in the future
    assert codes(first) == [0, 5, 10, 15, 20, 25, 30, 35]
    assert gap.ended_by == "frame" and gap.reason  # the server closing the response: FFmpeg's I/O error
    second = [m for m in ms if m.t >= gap.t_end]
    assert second and codes(second)[0] == 0 and len(first) + len(second) == len(ms)


def test_a_silent_http_server_is_a_stall(tmp_path, ts_clip):
    with TsServer(ts_clip, hold_after=0.5) as server, \
            Engine(tmp_path / "store", {"ingest": {"fps": 2.0}}, device="cpu") as eng:
        eng.add_camera("yard", server.url, stall_s=1.5, backoff_s=0.2, backoff_max_s=0.4)
        wait_for("the camera online", lambda: status_of(eng, "yard").state == "online", 10)
        t_sent = time.monotonic()
        seen = set()
        wait_for("the watchdog to end the silent connection",
                 lambda: seen.add(status_of(eng, "yard").state) or status_of(eng, "yard").gaps == 1, 15)
        noticed = time.monotonic() - t_sent
        wait_for("the camera back online from a second connection",
                 lambda: server.connections >= 2 and status_of(eng, "yard").state == "online", 10)
        (gap,) = eng.gaps("yard")
        eng.remove_camera("yard")
    assert "stalled" in seen  # no frame for a while before the watchdog gave up on the connection
    assert "no data for 1.5 s" in gap.reason or "no frame for 1.5 s" in gap.reason
    assert noticed < 2 + 1.5 + 2  # the half clip plays out (2 s), then stall_s, then the timeout fires
    assert gap.ended_by == "frame" and gap.t_end > gap.t_start + 1.5
