"""Live HTTP cameras from loopback servers: MPEG-TS read at 1x (a network source is never read
ahead of real time), t_abs on the wall clock, the end of the stream a loss that reconnects with
a gap, a server that goes silent mid-stream caught by the stall watchdog; HLS; MJPEG."""
import time

import pytest

from support.clips import changing_clip, code_frame
from support.live import HttpServer, TsServer, codes, hls_from, mjpeg_handler, status_of
from support.waiting import wait_for
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
    assert noticed < 10  # the half clip plays out (2 s), then stall_s: long before the server lets go (30 s)
    assert gap.ended_by == "frame" and gap.t_end > gap.t_start + 1.5


def test_hls_playlist_plays_at_1x(tmp_path):
    playlist = hls_from(changing_clip(tmp_path / "clip.mp4", seconds=3), tmp_path / "hls")
    with HttpServer(playlist.parent) as server, Engine(tmp_path / "store", {"ingest": {"fps": 2.0}},
                                                        device="cpu") as eng:
        t0 = time.time()
        eng.add_camera("hls", f"{server.base}/live.m3u8", stall_s=3.0, backoff_s=0.2, backoff_max_s=0.4)
        wait_for("the playlist's end", lambda: status_of(eng, "hls").gaps == 1, 10)
        t_end = time.time()
        eng.remove_camera("hls")
        eng.flush()
        ms = eng.moments("hls")
        (gap,) = eng.gaps("hls")
    first = [m for m in ms if m.t <= gap.t_start]
    assert codes(first) == [0, 5, 10, 15, 20, 25]
    assert t_end - t0 >= 2.5  # 3 s of segments served at once, played in real time
    assert first[-1].t_abs - first[0].t_abs == pytest.approx(2.5, abs=0.05)


def test_mjpeg_camera_is_timed_by_arrival(tmp_path):
    frames = [code_frame(i, seed=3) for i in range(40)]
    with HttpServer(handler=mjpeg_handler(frames, fps=10)) as server, \
            Engine(tmp_path / "store", {"ingest": {"fps": 2.0}}, device="cpu") as eng:
        eng.add_camera("mj", f"{server.base}/video", stall_s=3.0, backoff_s=0.2, backoff_max_s=0.4)
        wait_for("3 s of MJPEG", lambda: status_of(eng, "mj").frames_decoded >= 30, 10)
        st = status_of(eng, "mj")
        eng.remove_camera("mj")
        eng.flush()
        ms = eng.moments("mj")
    # MJPEG's demuxer stamps a nominal 25 fps: frames are timed by arrival (10 fps here) instead
    assert 8 < st.input_fps < 12 and len(ms) >= 5
    c = codes(ms)
    steps = [b - a for a, b in zip(c, c[1:])]  # frames between samples: ~5 (arrival times jitter)
    assert c == sorted(set(c)) and all(1 <= d <= 12 for d in steps) and 3.5 <= sum(steps) / len(steps) <= 6.5
