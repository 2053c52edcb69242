"""Live cameras at run time: one added and removed while another keeps indexing, bad URLs that
fail fast and clearly, giving up after max_retries, per-camera gate overrides, and the cameras
file (TOML): validation that names camera and field, and a reload that applies its diff."""
import json
import time

import pytest

from support.clips import changing_clip
from support.live import codes, status_of
from support.net import free_port, silent_listener
from support.paths import REPO
from support.waiting import wait_for
from vam_engine.engine import Engine
from vam_engine.ingest.cameras_file import CamerasFileError, CameraSpec, diff_cameras, load_cameras
from vam_engine.ingest.live import redact
from vam_engine.llm.scripted import ScriptedLLM


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("clips")
    return changing_clip(d / "a.mp4", seconds=8, seed=1), changing_clip(d / "b.mp4", seconds=8, seed=2)


def test_a_camera_added_and_removed_while_another_indexes(tmp_path, clips):
    a, b = clips
    with Engine(tmp_path / "store", {"ingest": {"fps": 2.0}}, device="cpu") as eng:
        eng.add_camera("a", str(a), realtime=True)
        wait_for("camera a online", lambda: status_of(eng, "a").frames_kept >= 2, 10)
        eng.add_camera("b", str(b), realtime=True)
        wait_for("camera b indexing", lambda: status_of(eng, "b").frames_kept >= 3, 10)
        kept_a_at_add = status_of(eng, "a").frames_kept
        t0 = time.monotonic()
        eng.remove_camera("b")
        removing = time.monotonic() - t0
        t_removed = time.time()
        assert [s.camera_id for s in eng.status()] == ["a"]
        with pytest.raises(ValueError, match="no live camera 'b'"):
            eng.status("b")
        wait_for("camera a to keep indexing after b's removal",
                 lambda: status_of(eng, "a").frames_kept >= kept_a_at_add + 4, 10)
        eng.remove_camera("a")
        eng.flush()
        ma, mb = eng.moments("a"), eng.moments("b")
        sources = {s["camera_id"]: s for s in eng.store.sources.all()}
    assert removing < 2.0  # removal returns at once (the reader stops on its own thread)
    assert len(mb) >= 3 and all(m.t_abs <= t_removed for m in mb)
    assert sources["b"]["done"] and sources["a"]["done"]
    assert sum(m.t_abs > t_removed for m in ma) >= 3  # a went on indexing past b's removal
    assert codes(ma) == [5 * k for k in range(len(ma))]  # every 0.5 s of a's 10 fps clip, in order, once
    assert ma[0].t_rel == 0.0 and ma[-1].t_rel == pytest.approx(0.5 * (len(ma) - 1), abs=0.03)  # paced at 1x


def test_a_file_camera_not_realtime_runs_at_full_speed_and_ends(tmp_path, clips):
    with Engine(tmp_path / "store", {"ingest": {"fps": 1.0}}, device="cpu") as eng:
        eng.add_camera("fast", str(clips[0]))
        wait_for("the file's end", lambda: status_of(eng, "fast").state == "offline", 10)
        st = status_of(eng, "fast")
        eng.flush()
        ms = eng.moments("fast")
    assert st.error is None and st.gaps == 0 and len(ms) == 8
    assert [round(m.t_rel, 3) for m in ms] == [float(k) for k in range(8)]


def test_an_unreachable_server_is_an_error_within_seconds(tmp_path):
    port = free_port()  # nothing listens there: refused
    silent = silent_listener()  # accepts (the kernel does) and never answers
    with Engine(tmp_path / "store", device="cpu") as eng:
        t0 = time.monotonic()
        eng.add_camera("refused", f"rtsp://127.0.0.1:{port}/cam", stall_s=1.0, backoff_s=0.1, backoff_max_s=0.2)
        eng.add_camera("silent", f"rtsp://admin:hunter2@127.0.0.1:{silent.getsockname()[1]}/cam", stall_s=1.0,
                       backoff_s=0.1, backoff_max_s=0.2)
        refused = wait_for("an error for the refused port", lambda: status_of(eng, "refused").error, 3)
        t_refused = time.monotonic() - t0
        timed_out = wait_for("an error for the silent server", lambda: status_of(eng, "silent").error, 5)
        t_silent = time.monotonic() - t0
        st = status_of(eng, "silent")
        gaps = eng.gaps()
    silent.close()
    assert "hunter2" not in str([g.reason for g in gaps])
    assert "refused" in refused.lower() and t_refused < 3
    assert "timed out" in timed_out and t_silent < 5
    assert st.state == "connecting" and "hunter2" not in st.url and "admin:***@" in st.url
    # a camera that never connected has one open gap from its start, whatever the retries
    assert sorted(g.camera_id for g in gaps) == ["refused", "silent"] and all(g.open for g in gaps)


def test_a_missing_capture_device_keeps_trying_with_a_clear_error(tmp_path):
    with Engine(tmp_path / "store", device="cpu") as eng:  # it may be plugged in later: not refused
        eng.add_camera("usb", "/dev/video99", backoff_s=0.05, backoff_max_s=0.1)
        st = wait_for("an error", lambda: (s := status_of(eng, "usb")).error and s, 3)
    assert st.state == "connecting" and "No such file or directory" in st.error


def test_max_retries_gives_up_and_goes_offline(tmp_path):
    with Engine(tmp_path / "store", device="cpu") as eng:
        eng.add_camera("gone", f"http://127.0.0.1:{free_port()}/live.ts", max_retries=2, backoff_s=0.05,
                       backoff_max_s=0.1)
        st = wait_for("offline", lambda: (s := status_of(eng, "gone")).state == "offline" and s, 5)
        (gap,) = eng.gaps("gone")
        eng.remove_camera("gone")
        eng.delete(time_range=(0.0, 1e12))  # a range keeps the record of outages
        assert len(eng.gaps("gone")) == 1
        eng.delete(cameras=["gone"])  # the whole camera takes it along
        assert eng.gaps("gone") == []
    assert st.error.startswith("gave up after 2 retries:") and st.reconnects == 2
    assert gap.ended_by == "gave_up" and gap.t_end is None


def test_bad_arguments_fail_at_once_naming_the_camera_and_field(tmp_path):
    with Engine(tmp_path / "store", device="cpu") as eng:
        with pytest.raises(ValueError, match=r"camera 'x': url 'ftp://h/v': unsupported URL scheme 'ftp'"):
            eng.add_camera("x", "ftp://h/v")
        with pytest.raises(ValueError, match=r"camera 'x': url '/no/such.mp4' is neither"):
            eng.add_camera("x", "/no/such.mp4")
        with pytest.raises(ValueError, match=r"camera 'x': stall_s must be a positive number, got 0"):
            eng.add_camera("x", "rtsp://h/v", stall_s=0)
        with pytest.raises(ValueError, match=r"camera 'x': max_retries must be a non-negative integer"):
            eng.add_camera("x", "rtsp://h/v", max_retries=1.5)
        with pytest.raises(ValueError, match=r"camera 'x': gate.ssim_max"):
            eng.add_camera("x", "rtsp://h/v", gate={"ssim_max": 7})
        with pytest.raises(ValueError, match=r"camera 'x': gate.tile_size applies to every camera"):
            eng.add_camera("x", "rtsp://h/v", gate={"tile_size": 16})
        with pytest.raises(ValueError, match=r"no live camera 'nope'"):
            eng.remove_camera("nope")
        assert eng.status() == []


def test_redact_hides_passwords_and_secret_query_values():
    assert redact("rtsp://u:p4ss@10.0.0.1:554/s?token=abc&ch=1") == "rtsp://u:***@10.0.0.1:554/s?token=***&ch=1"
    assert redact("http://10.0.0.1/live.ts") == "http://10.0.0.1/live.ts"


def test_per_camera_gate_overrides_apply_to_that_camera_only(tmp_path, clips):
    with Engine(tmp_path / "store", {"ingest": {"fps": 4.0}}, device="cpu") as eng:
        # every frame is new noise: kept by default; redundant under a huge diff_min_mad (a global
        # change) when a new texture is not taken for a cut either
        eng.add_camera("strict", str(clips[0]), gate={"diff_min_mad": 1000.0, "ssim_max": -1.0, "cut_max_ssim": -1.0})
        eng.add_camera("plain", str(clips[0]))
        wait_for("both files' ends", lambda: all(s.state == "offline" for s in eng.status()), 10)
        eng.flush()
        strict, plain = eng.moments("strict"), eng.moments("plain")
    assert len(plain) == 32 and len(strict) < 4


TOML = """
[defaults]
fps = 1.0
stall_s = 5

[cameras.door]
url = "rtsp://user:secret@10.0.0.5/stream1"
fps = 2.0
gate = { diff_min_mad = 12.0 }
monitors = ["a person at the door"]

[[camera]]
id = "yard"
url = "http://10.0.0.6/live.ts"
max_retries = 3
"""


def test_load_cameras_reads_both_forms_with_defaults(tmp_path):
    p = tmp_path / "cameras.toml"
    p.write_text(TOML)
    door, yard = load_cameras(p)
    assert (door.camera_id, door.fps, door.stall_s, door.gate, door.monitors) == \
        ("door", 2.0, 5, {"diff_min_mad": 12.0}, ["a person at the door"])
    assert (yard.camera_id, yard.fps, yard.stall_s, yard.max_retries, yard.monitors) == ("yard", 1.0, 5, 3, [])


@pytest.mark.parametrize("text, message", [
    ('[cameras.door]\nurl = "rtsp://h/s"\nfps = -1\n', r"camera 'door': fps must be a positive number, got -1"),
    ('[cameras.door]\nurl = "rtsp://h/s"\nfsp = 1\n', r"camera 'door': unknown field 'fsp'"),
    ('[cameras.door]\nfps = 1\n', r"camera 'door': url is required"),
    ('[cameras.door]\nurl = "rtsp://h/s"\ngate = { blur = 1 }\n', r"camera 'door': gate.blur: Extra inputs"),
    ('[cameras.door]\nurl = "rtsp://h/s"\nmonitors = "a cat"\n', r"camera 'door': monitors must be a list"),
    ('[cameras.door]\nurl = "rtsp://h/s"\n[[camera]]\nid = "door"\nurl = "rtsp://h/t"\n',
     r"camera 'door' is defined twice"),
    ('[[camera]]\nurl = "rtsp://h/s"\n', r"camera #1 of \[\[camera\]\]: id is required"),
    ('[camera]\nurl = 1\n', r"'camera' must be an array of tables"),
    ('[cameras.door\nurl = "x"\n', r"not valid TOML"),
    ('[defaults]\nurl = "rtsp://h/s"\n', r"\[defaults\]: unknown or per-camera field 'url'"),
])
def test_cameras_file_errors_name_camera_and_field(tmp_path, text, message):
    p = tmp_path / "cameras.toml"
    p.write_text(text)
    with pytest.raises(CamerasFileError, match=message) as e:
        load_cameras(p)
    assert str(p) in str(e.value)


def test_diff_cameras():
    old = [CameraSpec("a", "rtsp://h/a"), CameraSpec("b", "rtsp://h/b"), CameraSpec("c", "rtsp://h/c")]
    new = [CameraSpec("a", "rtsp://h/a", monitors=["a dog"]), CameraSpec("c", "rtsp://h/c", fps=2.0),
           CameraSpec("d", "rtsp://h/d")]
    d = diff_cameras(old, new)
    assert (d.added, d.removed, d.changed, d.monitors_changed) == (("d",), ("b",), ("c",), ("a",))
    assert diff_cameras(new, new).empty


def test_reload_applies_the_diff_and_an_invalid_file_changes_nothing(tmp_path, clips):
    a, b = clips
    p = tmp_path / "cameras.toml"
    p.write_text(f'[cameras.one]\nurl = "{a}"\nrealtime = true\n[cameras.two]\nurl = "{b}"\nrealtime = true\n')
    judge = ScriptedLLM(lambda req: json.dumps({"match": False, "confidence": 0.1, "observed_event": "-", "reason": "-"}))
    with Engine(tmp_path / "store", {"writer": {"enabled": False}}, device="cpu", llm=judge) as eng:
        d = eng.reload_cameras(p)
        assert d.added == ("one", "two") and [s.camera_id for s in eng.status()] == ["one", "two"]
        p.write_text(f'[cameras.one]\nurl = "{a}"\nrealtime = true\nmonitors = ["a cat"]\n'
                     f'[cameras.three]\nurl = "{b}"\nrealtime = true\nfps = 1.0\n')
        d = eng.reload_cameras(p)
        assert (d.added, d.removed, d.changed, d.monitors_changed) == (("three",), ("two",), (), ("one",))
        assert [s.camera_id for s in eng.status()] == ["one", "three"]
        runs = [s["camera_id"] for s in eng.store.sources.all()]
        assert runs.count("one") == 1 and runs.count("three") == 1  # one not restarted for a monitor change
        p.write_text(f'[cameras.one]\nurl = "{a}"\nfps = 0\n')
        with pytest.raises(CamerasFileError, match="camera 'one': fps"):
            eng.reload_cameras(p)
        assert [s.camera_id for s in eng.status()] == ["one", "three"]
        # a camera added at run time (the HTTP API) is not the file's to remove on a reload
        eng.add_camera("api", str(a), realtime=True)
        p.write_text(f'[cameras.one]\nurl = "{a}"\nrealtime = true\nmonitors = ["a cat"]\n')
        d = eng.reload_cameras(p)
        assert d.removed == ("three",) and sorted(s.camera_id for s in eng.status()) == ["api", "one"]
        # monitors beyond the cap are refused before any camera changes
        conds = ", ".join(f'"thing {k}"' for k in range(9))
        p.write_text(f'[cameras.one]\nurl = "{a}"\nrealtime = true\nmonitors = [{conds}]\n'
                     f'[cameras.four]\nurl = "{b}"\nrealtime = true\n')
        with pytest.raises(ValueError, match="at most 8"):
            eng.reload_cameras(p)
        assert sorted(s.camera_id for s in eng.status()) == ["api", "one"] and len(eng.monitors()) == 1


def test_cli_index_live_runs_files_as_cameras_until_they_end(tmp_path, clips, capsys):
    from vam_engine.cli import main

    rc = main(["index", "--store", str(tmp_path / "store"), "--device", "cpu", "--fps", "1", "--live",
               "--stall-s", "5", "-q", str(clips[0]), str(clips[1])])
    out = capsys.readouterr().out
    assert rc == 0
    assert "a: offline" in out and "b: offline" in out and "sampled 8" in out
    with Engine(tmp_path / "store", device="cpu") as eng:
        assert len(eng.moments("a")) == 8 and len(eng.moments("b")) == 8


def test_cameras_file_monitors_are_watched_once_and_ended_when_gone(tmp_path, clips):
    no_match = json.dumps({"match": False, "confidence": 0.1, "observed_event": "an empty scene", "reason": "-"})
    cfg = {"writer": {"enabled": False}, "retention": {"enabled": False}}
    p = tmp_path / "cameras.toml"
    p.write_text(f'[cameras.door]\nurl = "{clips[0]}"\nrealtime = true\nmonitors = ["a person at the door"]\n')

    def active(eng):
        return [(m.cameras, m.condition, m.mode) for m in eng.monitors()]

    with Engine(tmp_path / "store", cfg, device="cpu") as eng:  # no LLM: refused before anything starts
        with pytest.raises(ValueError, match="camera 'door': monitors need an LLM"):
            eng.reload_cameras(p)
        assert eng.status() == []
    for _ in range(2):  # a second process adopts the monitor the first one left active
        with Engine(tmp_path / "store", cfg, device="cpu", llm=ScriptedLLM(lambda req: no_match)) as eng:
            eng.reload_cameras(p)
            eng.reload_cameras(p)
            assert active(eng) == [(("door",), "a person at the door", "repeat")]
    with Engine(tmp_path / "store", cfg, device="cpu", llm=ScriptedLLM(lambda req: no_match)) as eng:
        eng.reload_cameras(p)
        p.write_text(f'[cameras.door]\nurl = "{clips[0]}"\nrealtime = true\nmonitors = ["a dog"]\n')
        d = eng.reload_cameras(p)
        assert d.monitors_changed == ("door",) and active(eng) == [(("door",), "a dog", "repeat")]


def test_failing_cameras_never_slow_a_healthy_one(tmp_path, clips):
    silent = silent_listener()
    with Engine(tmp_path / "store", {"ingest": {"fps": 2.0}}, device="cpu") as eng:
        for k in range(3):  # connections that hang until their timeout, again and again
            eng.add_camera(f"hang{k}", f"rtsp://127.0.0.1:{silent.getsockname()[1]}/cam", stall_s=1.0,
                           backoff_s=0.05, backoff_max_s=0.1)
        eng.add_camera("refused", f"rtsp://127.0.0.1:{free_port()}/cam", backoff_s=0.01, backoff_max_s=0.02)
        eng.add_camera("ok", str(clips[0]), realtime=True)
        wait_for("the healthy camera's 4 s", lambda: status_of(eng, "ok").frames_sampled >= 9, 10)
        ok = status_of(eng, "ok")
        eng.remove_camera("ok")
        eng.flush()
        ms = eng.moments("ok")
        others = eng.status()
    silent.close()
    assert ok.frames_dropped == 0 and codes(ms) == [5 * k for k in range(len(ms))]
    assert ms[-1].t_abs - ms[0].t_abs == pytest.approx(0.5 * (len(ms) - 1), abs=0.03)  # the clip's own pace
    assert all(s.state == "connecting" and s.error for s in others) and sum(s.reconnects for s in others) >= 10


class _Sink:
    def __init__(self):
        self.events = []

    def frame(self, f):
        return True

    def gap(self, t_start, reason):
        self.events.append(("gap", reason))

    def resumed(self, t_end):
        self.events.append(("resumed", t_end))

    def ended(self, error):
        self.events.append(("ended", error))


def test_backoff_doubles_with_jitter_up_to_its_cap():
    from vam_engine.ingest.live import LiveCamera, LiveSpec

    sink = _Sink()
    cam = LiveCamera(LiveSpec("c", f"rtsp://127.0.0.1:{free_port()}/cam", backoff_s=0.3, backoff_max_s=1.2,
                              max_retries=5), sink).start()
    first_wait = {}  # reconnects so far -> the wait seen first after that failure
    while not cam.join(0.005):
        st = cam.status()
        if st.retry_in_s is not None and st.reconnects not in first_wait:
            first_wait[st.reconnects] = st.retry_in_s
    steps = [0.3, 0.6, 1.2, 1.2, 1.2]
    assert sorted(first_wait) == [0, 1, 2, 3, 4]
    for k, step in enumerate(steps):
        assert 0.5 * step - 0.1 <= first_wait[k] <= step, (k, first_wait)  # 0.1: the poll's own delay
    assert sink.events[0][0] == "gap" and "refused" in sink.events[0][1].lower()
    assert sink.events[-1] == ("ended", cam.status().error) and cam.status().error.startswith("gave up after 5")
    assert [e[0] for e in sink.events] == ["gap", "ended"]  # one loss, reported once


def test_a_live_camera_feeds_the_present_from_decode_when_a_model_reads_it(tmp_path, clips):
    cfg = {"ingest": {"fps": 0.25}, "writer": {"enabled": False}, "retention": {"enabled": False}}
    judge = ScriptedLLM(lambda req: "{}")
    with Engine(tmp_path / "store", cfg, device="cpu", llm=judge) as eng:
        eng.add_camera("door", str(clips[0]), realtime=True)
        wait_for("2.5 s of the camera", lambda: status_of(eng, "door").frames_decoded >= 25, 10)
        t = eng.working.latest("door")
        short, _ = eng.working.window("door", t)
        sampled = status_of(eng, "door").frames_sampled
        eng.remove_camera("door")
    ts = [t for _, t in short]
    assert sampled <= 1 and len(ts) >= 4  # the index takes a frame every 4 s, the present every 0.5 s
    assert all(0.45 < b - a < 0.75 for a, b in zip(ts, ts[1:]))
    assert all(max(a.shape[:2]) <= eng.working.max_side for a, _ in short)


def test_a_killed_engine_leaves_a_gap_the_next_run_records(tmp_path, clips):
    import os
    import subprocess
    import sys

    store, clip = tmp_path / "store", clips[0]
    repo = REPO
    script = (
        "import os, signal, time\n"
        "from vam_engine.engine import Engine\n"
        f"eng = Engine({str(store)!r}, {{'ingest': {{'fps': 2.0}}}}, device='cpu')\n"
        f"eng.add_camera('door', {str(clip)!r}, realtime=True)\n"
        "t0 = time.time()\n"
        "while eng.status('door')[0].frames_kept < 4 and time.time() - t0 < 20:\n"
        "    time.sleep(0.05)\n"
        "eng.flush()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -9, proc.stderr[-2000:]
    time.sleep(1.0)
    with Engine(store, {"ingest": {"fps": 2.0}}, device="cpu") as eng:
        before = eng.moments("door")
        eng.add_camera("door", str(clip), realtime=True)
        wait_for("the second run's samples", lambda: status_of(eng, "door").frames_kept >= 2, 10)
        eng.remove_camera("door")
        eng.flush()
        after = eng.moments("door")
        (gap,) = eng.gaps("door")
    assert len(before) >= 4 and {m.moment_id for m in before} <= {m.moment_id for m in after}
    assert all(os.path.isfile(m.frame_path) for m in after)
    run2 = [m for m in after if m.moment_id not in {b.moment_id for b in before}]
    assert "not watched" in gap.reason and gap.ended_by == "frame"
    assert gap.t_start == pytest.approx(before[-1].t, abs=1e-6)  # every sample of the clip is kept
    assert gap.t_end == pytest.approx(run2[0].t, abs=1e-6) and gap.t_end - gap.t_start > 1.0


def test_an_unreadable_file_camera_goes_offline_with_its_error(tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00not a video" * 1000)
    with Engine(tmp_path / "store", device="cpu") as eng:
        eng.add_camera("bad", str(bad), realtime=True)
        st = wait_for("offline", lambda: (s := status_of(eng, "bad")).state == "offline" and s, 5)
    assert st.error.startswith("cannot connect:") and st.reconnects == 0 and st.gaps == 0
