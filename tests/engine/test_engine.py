"""Engine end to end: files, two concurrent sources, pushed frames, readers during indexing, CLI."""
import subprocess
import sys
import threading

import numpy as np
import pytest
from PIL import Image

from support.clips import changing_clip, code_frame, read_code
from vam_engine.config import EngineConfig
from vam_engine.engine import Engine
from vam_engine.errors import FrameError
from vam_engine.memory import Store


def test_index_file_keeps_frames_with_their_pts_and_files(tmp_path):
    changing_clip(tmp_path / "a.mp4", 20)  # frame i at i / 10 s
    with Engine(tmp_path / "store", {"ingest": {"fps": 1.0}}, device="cpu") as eng:
        rep = eng.index_file(tmp_path / "a.mp4", camera_id="front")
        ms = eng.moments()
    assert rep.sampled == 20 and rep.kept == 20
    assert rep.decoded < 60  # ticks fall on keyframes (1 s GOP): the GOPs between are skipped
    assert [m.t_rel for m in ms] == [float(k) for k in range(20)]
    for m in ms[::5]:
        img = np.asarray(Image.open(m.frame_path))
        assert read_code(img) == round(m.t_rel * 10)
        assert m.camera_id == "front" and (m.width, m.height) == (128, 96)


def test_moments_filters(tmp_path):
    changing_clip(tmp_path / "a.mp4", 20)
    with Engine(tmp_path / "store", {"ingest": {"fps": 1.0}}, device="cpu") as eng:
        eng.index_file(tmp_path / "a.mp4", camera_id="a")
        assert [m.t_rel for m in eng.moments("a", t0=3, t1=5)] == [3.0, 4.0, 5.0]
        assert eng.moments("nope") == []


def test_two_sources_index_concurrently_as_two_cameras(tmp_path):
    changing_clip(tmp_path / "a.mp4", 20, seed=1)
    changing_clip(tmp_path / "b.mp4", seconds=15, seed=2)
    with Engine(tmp_path / "store", {"ingest": {"fps": 2.0}}, device="cpu") as eng:
        seen = []
        reps = eng.index_files([tmp_path / "a.mp4", tmp_path / "b.mp4"], progress=seen.append)
        info = eng.info()
    assert [r.camera_id for r in reps] == ["a", "b"]
    assert [r.sampled for r in reps] == [40, 30]
    # every sample passes the gates (each frame is new); semantic dedup decides the rest
    assert [r.kept + r.dropped["dedup"] for r in reps] == [40, 30]
    assert [info["cameras"][c]["moments"] for c in "ab"] == [r.kept for r in reps]
    # both decoders were running at once: progress events of the two interleave
    cams = [p.camera_id for p in seen if not p.done]
    first_b = cams.index("b")
    assert "a" in cams[first_b:], "source a finished before b started"


def test_pushed_frames_are_sampled_gated_and_stored(tmp_path):
    rng = np.random.default_rng(3)
    with Engine(tmp_path / "store", {"ingest": {"fps": 2.0}}, device="cpu") as eng:
        sampled = [eng.push("robot", code_frame(i, seed=5), i * 0.1) for i in range(40)]  # 10 Hz loop
        static = code_frame(99, seed=5)
        sampled += [eng.push("robot", static, 4.0 + i * 0.5) for i in range(4)]
        assert eng.flush(timeout=30)
        ms = eng.moments("robot")
        with pytest.raises(FrameError, match="not after"):
            eng.push("robot", static, 1.0)
        with pytest.raises(FrameError, match="H x W x 3 uint8"):
            eng.push("robot", rng.random((8, 8, 3)), 10.0)
    assert sum(sampled) == 8 + 4
    log = Store(tmp_path / "store").moments.gate_log("robot")
    assert [r.t_rel for r in log] == [i * 0.5 for i in range(12)]
    assert [r.gate.dropped_by for r in log[-3:]] == ["low_change"] * 3  # the static repeats
    kept = [r.t_rel for r in log if r.gate.dropped_by is None]
    assert [m.t_rel for m in ms] == kept[:len(ms)] and len(ms) >= len(kept) - 1  # the newest may be held
    with Engine(tmp_path / "store", {"ingest": {"fps": 2.0}}, device="cpu") as eng:
        eng.push("robot", static, 7.0)
        eng.end_push("robot")  # the stream ended: the held frame (a run's end) is decided
        ms = eng.moments("robot")
    assert [m.t_rel for m in ms] == [r.t_rel for r in Store(tmp_path / "store").moments.gate_log("robot")
                                         if r.gate.dropped_by is None]


def test_push_accepts_torch_tensors(tmp_path):
    torch = pytest.importorskip("torch")
    with Engine(tmp_path / "store", device="cpu") as eng:
        assert eng.push("t", torch.from_numpy(code_frame(1)), 0.0)
        eng.flush()
        assert len(eng.moments("t")) == 1


def test_push_resumes_after_restart(tmp_path):
    with Engine(tmp_path / "store", {"ingest": {"fps": 1.0}}, device="cpu") as eng:
        for i in range(5):
            eng.push("r", code_frame(i), float(i))
    with Engine(tmp_path / "store", {"ingest": {"fps": 1.0}}, device="cpu") as eng:
        with pytest.raises(FrameError):
            eng.push("r", code_frame(9), 3.0)  # already committed time
        eng.push("r", code_frame(4), 5.0)  # same picture as the last kept one: gated against it
        eng.flush()
        assert [m.t_rel for m in eng.moments("r")] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_readers_query_while_a_writer_indexes(tmp_path):
    changing_clip(tmp_path / "a.mp4", seconds=30)
    counts, stop = [], threading.Event()
    cfg = EngineConfig(ingest={"fps": 5.0}, store={"commit_every": 4}, retention={"enabled": False})
    with Engine(tmp_path / "store", cfg, device="cpu") as eng:
        def reader():
            store = Store(tmp_path / "store")
            while not stop.is_set():
                counts.append(len(store.moments.list()))
        th = threading.Thread(target=reader)
        th.start()
        eng.index_file(tmp_path / "a.mp4")
        stop.set()
        th.join()
    assert counts and counts == sorted(counts)
    assert any(0 < c < 150 for c in counts), "the reader never saw a partial store"


def test_reindexing_a_finished_file_does_nothing(tmp_path):
    changing_clip(tmp_path / "a.mp4", seconds=5)
    with Engine(tmp_path / "store", device="cpu") as eng:
        eng.index_file(tmp_path / "a.mp4")
        n = len(eng.moments())
        rep = eng.index_file(tmp_path / "a.mp4")
        assert rep.already_done and len(eng.moments()) == n


def test_cli_demo_index_and_info(tmp_path):
    out = subprocess.run([sys.executable, "-m", "vam_engine.cli", "demo", "--dir", str(tmp_path), "--device", "cpu"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "kept" in out.stdout and "x realtime" in out.stdout and "dropped: blur" in out.stdout
    info = subprocess.run([sys.executable, "-m", "vam_engine.cli", "info", "--store", str(tmp_path / "store")],
                          capture_output=True, text=True, timeout=60)
    assert info.returncode == 0 and "camera demo" in info.stdout
    again = subprocess.run([sys.executable, "-m", "vam_engine.cli", "index", str(tmp_path / "demo.mp4"),
                            "--store", str(tmp_path / "store"), "-q"], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "already indexed" in again.stdout


def test_demo_clip_scenes_get_the_gates_they_were_made_for(tmp_path):
    from vam_engine.synthetic.demo import make_demo_clip

    clip = make_demo_clip(tmp_path / "demo.mp4")
    with Engine(tmp_path / "store", device="cpu") as eng:
        eng.index_file(clip["path"])
        log = eng.store.moments.gate_log()
        marked = [m.t_rel for m in eng.moments() if m.gate.blurred]
    starts = [t for t, _ in clip["scenes"]] + [clip["duration_s"]]
    by_kind, gates = {}, {}
    for (t0, kind), t1 in zip(clip["scenes"], starts[1:]):
        by_kind.setdefault(kind, []).extend(r.gate.dropped_by for r in log if t0 <= r.t_rel < t1)
        gates.setdefault(kind, []).extend(r.gate for r in log if t0 <= r.t_rel < t1)
    assert set(by_kind["pan"]) == {None}
    assert by_kind["static"][0] is None and set(by_kind["static"][1:]) == {"low_change"}
    assert by_kind["flicker"][0] is None and "ssim" in by_kind["flicker"]
    # the blur scene is a view of its own never in focus: the gates' view rule keeps its
    # sharpest sample once, marked blurred, and drops the others
    blur = gates["blur"]
    kept = [g for g in blur if g.dropped_by is None]
    assert len(blur) >= 3 and len(kept) == 1 and kept[0].blurred
    assert kept[0].lap_var == max(g.lap_var for g in blur) and {g.dropped_by for g in blur} == {None, "blur"}
    assert not any(g.blurred for k, gs in gates.items() if k != "blur" for g in gs)
    (span,) = [(t0, t1) for (t0, k), t1 in zip(clip["scenes"], starts[1:]) if k == "blur"]
    assert len(marked) == 1 and span[0] <= marked[0] < span[1]  # the moment carries the mark too


@pytest.mark.gpu
def test_cuda_engine_keeps_the_moments_the_cpu_engine_keeps(tmp_path):
    """Engine(device="cuda") (NVDEC when present, the Triton gates) against device="cpu" on
    the same clip: the same samples, and the same kept moments but for at most one decision
    (float32 statistics on the device can land on the other side of a threshold)."""
    from vam_engine.synthetic import write_scene_clip

    clip = write_scene_clip(tmp_path / "scenes.mp4", width=640, height=360, fps=30, seconds=12.0)
    got = {}
    for dev in ("cpu", "cuda"):
        with Engine(tmp_path / f"store_{dev}", {"ingest": {"fps": 2.0}}, device=dev) as eng:
            rep = eng.index_file(clip.path, "cam")
            assert not rep.failed, (dev, rep.failed)
            got[dev] = (rep.sampled, [round(m.t_rel, 6) for m in eng.moments("cam")])
    assert got["cuda"][0] == got["cpu"][0] == round(2.0 * clip.seconds)
    a, b = set(got["cuda"][1]), set(got["cpu"][1])
    assert len(a ^ b) <= 1, f"only cuda {sorted(a - b)}, only cpu {sorted(b - a)}"
