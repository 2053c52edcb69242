"""kill -9 while indexing, then resume: the store stays consistent and the result equals an
uninterrupted run.

A child process indexes a 60 s 640x360 clip (a new texture every second, and every frame shows
its own index as 12 black/white blocks); the parent reads the store while the child writes and
SIGKILLs it at random points. After each kill the store must open, hold exactly the moments and
gate records an uninterrupted run has up to the committed progress, with every row's JPEG in
place, decodable and showing the frame whose PTS is the row's t_rel, and no temporary files.
Resuming must then finish with exactly the uninterrupted run's moments and gate decisions.
"""
import json
import os
from dataclasses import astuple
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support.clips import write_clip
from support.legacy_state import V1_STATE
from support.paths import REPO as ROOT
from vam_engine.engine import Engine
from vam_engine.index import load_state, sweep_source
from vam_engine.memory import Store

W, H, FPS, SECONDS, BITS = 640, 360, 30, 60, 12
# Every frame shows its index as blocks: a local change the tile gate keeps, so it is switched off
# here (the test needs samples both kept and dropped).
CFG = {"ingest": {"fps": 2.0, "batch_size": 4}, "store": {"commit_every": 4, "commit_interval_s": 0.2},
       "gate": {"tile_min_mad": 1e9}}
CAMERA = "cam"
KILLS = 3
THROTTLE_S = 0.1  # the child sleeps this long per progress event, so a run lasts a few seconds
WATCHDOG_S = 120

CHILD = """
import json, sys, time
from vam_engine.engine import Engine
clip, store, cfg, throttle = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4])
with Engine(store, cfg, device="cpu") as eng:
    eng.index_file(clip, camera_id="cam", progress=lambda p: time.sleep(throttle))
"""


pytestmark = pytest.mark.usefixtures("watchdog")  # a hang fails the test (tests/conftest.py)


# -- the clip -----------------------------------------------------------------------------------
def frame_image(i: int) -> np.ndarray:
    rng = np.random.default_rng(1000 + i // FPS)  # a new texture every second
    small = rng.integers(40, 216, (H // 40 + 1, W // 40 + 1, 3), dtype=np.uint8)
    img = np.repeat(np.repeat(small, 40, 0), 40, 1)[:H, :W].copy()
    bw = W // BITS
    for b in range(BITS):  # frame index, 12 bits, in the top quarter
        img[: H // 4, b * bw:(b + 1) * bw] = 255 if (i >> b) & 1 else 0
    return img


def read_index(rgb: np.ndarray) -> int:
    g = rgb.astype(np.float32).mean(axis=2)
    bw = W // BITS
    return sum(1 << b for b in range(BITS) if g[8: H // 4 - 8, b * bw + 8:(b + 1) * bw - 8].mean() > 128)


def pts_ms(i: int) -> int:
    return round(i * 1000 / FPS)


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    path = tmp_path_factory.mktemp("crash") / "long.mp4"
    write_clip(path, [pts_ms(i) for i in range(SECONDS * FPS)], frames=frame_image, gop=FPS, crf=23, rate=FPS)
    return path


@pytest.fixture(scope="module")
def reference(clip, tmp_path_factory):
    """An uninterrupted run in a fresh store: its moments' times and its gate log."""
    store = tmp_path_factory.mktemp("reference") / "store"
    with Engine(store, CFG, device="cpu") as eng:
        rep = eng.index_file(clip, camera_id=CAMERA)
        times = [m.t_rel for m in eng.moments()]
        log = eng.store.moments.gate_log()
    assert rep.failed is None and rep.sampled == SECONDS * 2
    assert 20 < len(times) < rep.sampled, "the clip should keep some samples and drop others"
    return times, log


# -- checks -------------------------------------------------------------------------------------
def same_log(got, want):
    """Gate records equal: times and decisions exactly, statistics to float precision."""
    assert [(r.camera_id, r.t_rel, r.gate.dropped_by) for r in got] == \
        [(r.camera_id, r.t_rel, r.gate.dropped_by) for r in want]
    for g, w in zip(got, want):
        for a, b in zip(astuple(g.gate)[:4], astuple(w.gate)[:4]):
            assert (a is None and b is None) or a == pytest.approx(b, rel=1e-6, abs=1e-9), (g, w)


def check_consistent(store_dir, reference, frames_of=None):
    """What a reopened store must hold after a crash; returns the committed progress."""
    store = Store(store_dir, create=False)  # sweeps temporaries of dead writers
    try:
        assert not list(Path(store_dir).rglob("*.tmp")), "temporary files left after reopen"
        (src,) = store.info()["sources"]
        progress = src["progress_t"]
        ms = store.moments.list()
        times = [m.t_rel for m in ms]
        assert len(times) == len(set(times)), "duplicate moments"
        want_times, want_log = reference
        done_up_to = -1.0 if progress is None else progress
        state = load_state(store, src["camera_id"])
        held = state.held.key.t_rel if state is not None and state.held is not None else None
        # exactly the uninterrupted run's moments and gate records up to the committed progress,
        # but for a frame the online committer still holds (its decision waits for the next frame)
        assert times == [t for t in want_times if t <= done_up_to and t != held]
        if held is not None:
            assert Path(store.root, store.frames.ref(src["camera_id"], src["source_id"], held)).is_file()
        vec_ids = {r[0] for r in store.vector_table.rows("frame")}
        assert vec_ids == {m.moment_id for m in ms}, "every row has its vector and every vector its row"
        same_log([r for r in store.moments.gate_log() if r.t_rel != held],
                 [r for r in want_log if r.t_rel <= done_up_to and r.t_rel != held])
        for m in ms:
            assert Path(m.frame_path).is_file(), m.frame_path
            with Image.open(m.frame_path) as im:
                rgb = np.asarray(im.convert("RGB"))
            assert rgb.shape == (H, W, 3)
            i = read_index(rgb)
            assert pts_ms(i) == round(m.t_rel * 1000), f"{m.frame_path} shows frame {i}, row says t={m.t_rel}"
        return progress, src["done"]
    finally:
        store.close()


def poll_until(store_dir, target_t, child, after_t):
    """Read the store (a fresh reader each time) while the child writes, until the child has
    committed a moment after ``after_t`` and at or after ``target_t``. Returns how many reads
    were made, or None when the child exited first."""
    reads = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if child.poll() is not None:
            return None
        s = Store(store_dir, create=False)
        try:
            ms = s.moments.list()
        finally:
            s.close()
        reads += 1
        if ms and ms[-1].t_rel >= target_t and ms[-1].t_rel > after_t:
            return reads
        time.sleep(0.01)
    raise AssertionError(f"no moment at t >= {target_t} after 60 s")


def start_child(clip, store_dir, log_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in sys.path if p]))
    return subprocess.Popen([sys.executable, "-c", CHILD, str(clip), str(store_dir), json.dumps(CFG), str(THROTTLE_S)],
                            stdout=subprocess.DEVNULL, stderr=open(log_path, "w"), env=env, cwd=str(ROOT))


# -- tests --------------------------------------------------------------------------------------
def test_kill_9_at_random_points_then_resume_equals_an_uninterrupted_run(clip, reference, tmp_path):
    seed = int(os.environ.get("VAM_CRASH_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    store_dir = tmp_path / "store"
    Store(store_dir).close()  # the store exists before the first writer: readers never create it
    targets = sorted(rng.uniform(0.5, SECONDS - 8) for _ in range(KILLS))
    progress = []
    for k, target in enumerate(targets):
        log = tmp_path / f"child{k}.log"
        child = start_child(clip, store_dir, log)
        try:
            reads = poll_until(store_dir, target, child, after_t=progress[-1] if progress else -1.0)
            assert reads is not None, f"seed {seed}: child {k} exited ({child.returncode}) before the kill: " \
                                      + log.read_text()[-3000:]
            time.sleep(rng.uniform(0, 0.15))  # land anywhere in a gate / write / commit cycle
            assert child.poll() is None, f"seed {seed}: child {k} finished before the kill"
            child.send_signal(signal.SIGKILL)
        finally:
            if child.poll() is None:
                child.kill()
            child.wait(10)  # reaped: its pid is gone, so its temporaries count as dead
        assert child.returncode == -signal.SIGKILL
        p, done = check_consistent(store_dir, reference)
        assert not done and p is not None and p >= target, f"seed {seed}: kill {k} at target {target:.1f}: {p}"
        progress.append(p)
    assert progress == sorted(progress) and len(set(progress)) == KILLS, f"seed {seed}: {progress}"

    # resume, uninterrupted: the result equals the uninterrupted run, nothing repeated
    with Engine(store_dir, CFG, device="cpu") as eng:
        rep = eng.index_file(clip, camera_id=CAMERA)
        assert rep.resumed_from == progress[-1] and rep.failed is None
        assert rep.sampled == sum(1 for r in reference[1] if r.t_rel > progress[-1])
    p, done = check_consistent(store_dir, reference)
    assert done and p == reference[1][-1].t_rel
    store = Store(store_dir, create=False)
    try:
        ms = store.moments.list()
        assert [m.t_rel for m in ms] == reference[0]
        same_log(store.moments.gate_log(), reference[1])
        # every frame file on disk belongs to a row: frames written before a kill but never
        # committed were written again, under the same name, by the resumed run
        assert {str(p) for p in Path(store_dir, "frames").rglob("*.jpg")} == {m.frame_path for m in ms}
    finally:
        store.close()


def test_indexing_a_finished_file_again_does_nothing(clip, reference, tmp_path):
    store_dir = tmp_path / "store"
    with Engine(store_dir, CFG, device="cpu") as eng:
        first = eng.index_file(clip, camera_id=CAMERA)
        assert not first.already_done and first.kept == len(reference[0])
        before = [(m.moment_id, m.t_rel, m.frame_path) for m in eng.moments()]
        log = eng.store.moments.gate_log()
    with Engine(store_dir, CFG, device="cpu") as eng:  # a new process would see the same
        again = eng.index_file(clip, camera_id=CAMERA)
        assert again.already_done and again.sampled == again.kept == again.decoded == 0
        assert [(m.moment_id, m.t_rel, m.frame_path) for m in eng.moments()] == before
        assert eng.store.moments.gate_log() == log
        assert eng.info()["sources"][0]["done"]


def test_killed_before_any_commit_resumes_from_the_start(clip, reference, tmp_path):
    """Killed right after start: a store with at most a source row; the rerun does everything."""
    store_dir = tmp_path / "store"
    Store(store_dir).close()
    child = start_child(clip, store_dir, tmp_path / "child.log")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and child.poll() is None:
            s = Store(store_dir, create=False)
            try:
                if s.info()["sources"]:
                    break
            finally:
                s.close()
            time.sleep(0.005)
        child.send_signal(signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(10)
    assert child.returncode == -signal.SIGKILL
    progress, done = check_consistent(store_dir, reference)
    assert not done
    with Engine(store_dir, CFG, device="cpu") as eng:
        eng.index_file(clip, camera_id=CAMERA)
    assert check_consistent(store_dir, reference)[1]
    s = Store(store_dir, create=False)
    try:
        assert [m.t_rel for m in s.moments.list()] == reference[0]
    finally:
        s.close()


def test_reopen_sweeps_temporaries_of_dead_writers_only(tmp_path):
    """A temporary JPEG names its writer's pid: a dead writer's is swept on open, a live one's
    (another process indexing into the store right now) is left alone."""
    store_dir = tmp_path / "store"
    Store(store_dir).close()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    d = store_dir / "frames" / "cam" / "1"
    d.mkdir(parents=True)
    stale = [d / f"000000000000000.jpg.{dead.pid}.tmp", d / "000000000500000.jpg.tmp"]
    live = d / f"000000001000000.jpg.{os.getpid()}.tmp"
    for p in stale + [live]:
        p.write_bytes(b"partial jpeg")
    Store(store_dir).close()
    assert not any(p.exists() for p in stale) and live.exists()


def test_resume_removes_frame_files_no_row_or_held_frame_references(tmp_path):
    """A kill between a held frame's write and the commit recording it (or between a commit that
    drops a held frame and its file's removal) leaves a file nothing references: resuming the
    source removes it and keeps the files of rows and of the held frame."""
    from vam_engine.index.online import CommitterState, HeldFrame
    from vam_engine.index.semantic import FrameKey
    from vam_engine.memory.records import GateRecord
    from vam_engine.memory.commit import CommitBatch
    from vam_engine.memory.records import PendingMoment

    store = Store(tmp_path / "store")
    try:
        src = store.sources.open(CAMERA, "clip.mp4", "fp", "fps=2").source_id
        rgb = np.full((8, 8, 3), 128, np.uint8)
        refs = {t: store.frames.ref(CAMERA, src, t) for t in (0.0, 0.5, 1.0, 1.5)}
        for ref in refs.values():
            store.frames.write(ref, rgb, 90)
        gate = GateRecord(100.0, 50.0, 0.1, float("nan"), None)
        batch = CommitBatch()
        batch.moments.append(PendingMoment(CAMERA, src, 0.0, None, 0, refs[0.0], 8, 8, gate))
        held = HeldFrame(1.0, np.ones(1), FrameKey(src, 1.0, None, 30, 8, 8, gate), 0.01)
        batch.commit_states[CAMERA] = CommitterState(dim=1, reference=np.ones(1), held=held, event_t0=0.0)
        store.commit(batch)
        assert sweep_source(store, CAMERA, src) == 2
        left = {p.relative_to(store.root).as_posix() for p in store.root.rglob("*.jpg")}
        assert left == {refs[0.0], refs[1.0]}
    finally:
        store.close()


# -- resume decides as an uninterrupted run: every commit point, and kill -9 of the CLI ------------
# A 120 s clip of the demo's scenes (pans, static stretches, flicker, blur) at 640x360: long
# enough for the adaptive thresholds to settle, so scene cuts keep a run's last frame and the
# next scene's first frame 0.5 s apart, the second opening an event that goes on. That is the
# shape the recent tier's 1 s thinning gap bites on while the event is still open.
DEMO_SECONDS = 120
DEMO_CFG = {"ingest": {"fps": 2.0, "batch_size": 4}, "store": {"commit_every": 8, "commit_interval_s": 30.0}}
CAMPAIGN_KILLS = 3  # fresh store, kill -9 at a random moment, resume; test_cli_kill_campaign_long runs more


@pytest.fixture(scope="module")
def demo_clip(tmp_path_factory):
    from vam_engine.synthetic.demo import DEMO_SCENES, make_demo_clip

    path = tmp_path_factory.mktemp("demo") / "scenes.mp4"
    make_demo_clip(path, width=640, height=360, fps=10, scenes=DEMO_SCENES * (DEMO_SECONDS // 40))
    return path


def retain(store_dir) -> None:
    """One retention pass, as `vam-engine index` runs at its start (tests run no worker)."""
    from vam_engine.memory.retention import RetentionPass

    store = Store(store_dir, create=False)
    try:
        RetentionPass(store.moments).run()
    finally:
        store.close()


def memory_of(store_dir):
    """What the store remembers: the moments' times and each event's members and keyframes."""
    store = Store(store_dir, create=False)
    try:
        ms = store.moments.list()
        t_of = {m.moment_id: m.t_rel for m in ms}
        events = [(tuple(m.t_rel for m in ms if m.event_id == e.event_id),
                   tuple(t_of.get(k) for k in e.keyframes)) for e in store.events.list()]
        assert all(Path(m.frame_path).is_file() for m in ms), "a row without its file"
        return [m.t_rel for m in ms], events
    finally:
        store.close()


@pytest.fixture(scope="module")
def demo_reference(demo_clip, tmp_path_factory):
    """An uninterrupted in-process run, a copy of the store after each of its commits, and what
    the finished store remembers (retention passes over it change nothing: see the tests)."""
    import shutil
    import sqlite3

    base = tmp_path_factory.mktemp("demo_ref")
    snaps = []
    commit = Store.commit

    def commit_and_copy(self, batch):
        changes = commit(self, batch)
        d = base / f"after_commit_{len(snaps)}"
        d.mkdir()
        dst = sqlite3.connect(str(d / "store.sqlite"))
        self.db.conn().backup(dst)  # this thread's connection: the commit just made is in it
        dst.close()
        shutil.copytree(self.root / "frames", d / "frames", ignore=shutil.ignore_patterns("*.tmp"))
        snaps.append(d)
        return changes

    Store.commit = commit_and_copy
    try:
        with Engine(base / "store", DEMO_CFG, device="cpu") as eng:
            rep = eng.index_file(demo_clip, camera_id=CAMERA)
    finally:
        Store.commit = commit
    assert rep.failed is None and rep.sampled == 2 * DEMO_SECONDS
    return memory_of(base / "store"), snaps[:-1]  # the last commit finished the source


def test_resume_after_any_commit_remembers_what_an_uninterrupted_run_does(demo_clip, demo_reference):
    """A kill -9 leaves the store as it was after some commit. From each commit point: the
    resumed `index` runs its retention pass first (as the CLI does), then indexes the rest; the
    moments and events equal the uninterrupted run's, exactly, and a retention pass after it
    changes nothing. (Retention thinning a moment of the still-open event, a future keyframe,
    broke this once; its recent tier thinning what 2 fps sampling kept broke it again.)"""
    want, snaps = demo_reference
    assert len(snaps) >= 20 and len(want[0]) > 20
    for d in snaps:
        retain(d)
        with Engine(d, DEMO_CFG, device="cpu") as eng:
            rep = eng.index_file(demo_clip, camera_id=CAMERA)
        assert rep.failed is None and rep.resumed_from is not None
        got = memory_of(d)
        assert got[0] == want[0], f"resumed after {d.name}: moments differ"
        assert got[1] == want[1], f"resumed after {d.name}: events differ"
        retain(d)
        assert memory_of(d) == got, f"resumed after {d.name}: a retention pass changed the store"


CLI_CHILD = [sys.executable, "-m", "vam_engine.cli", "index", "--fps", "2", "--camera", CAMERA, "--device", "cpu", "-q"]


def run_cli_campaign(clip, want, tmp_path, kills: int) -> None:
    """``kills`` runs of the CLI killed at a random moment, each resumed: each ends with ``want``
    (None: what the uninterrupted CLI run keeps), exactly, retention on as the CLI runs it."""
    seed = int(os.environ.get("VAM_CRASH_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in sys.path if p]),
               VAM_RETENTION__ENABLED="1")  # the CLI's default: its pass runs at once, on what a kill left

    def cli(store_dir, log):
        return subprocess.Popen(CLI_CHILD + [str(clip), "--store", str(store_dir)], stdout=subprocess.DEVNULL,
                                stderr=open(log, "w"), env=env, cwd=str(ROOT))

    t0 = time.monotonic()
    first = cli(tmp_path / "whole", tmp_path / "whole.log")
    assert first.wait(WATCHDOG_S) == 0, (tmp_path / "whole.log").read_text()[-3000:]
    wall = time.monotonic() - t0
    if want is None:
        want = memory_of(tmp_path / "whole")
    assert memory_of(tmp_path / "whole") == want, "the CLI's uninterrupted run differs from the in-process one"
    for k in range(kills):
        store_dir = tmp_path / f"run{k}"
        at = rng.uniform(0, wall)
        child = cli(store_dir, tmp_path / f"run{k}.log")
        try:
            time.sleep(at)
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait(10)
        resumed = cli(store_dir, tmp_path / f"resume{k}.log")
        assert resumed.wait(WATCHDOG_S) == 0, (tmp_path / f"resume{k}.log").read_text()[-3000:]
        assert memory_of(store_dir) == want, f"seed {seed}: run {k}, killed {at:.2f} s after start " \
                                             f"(exit {child.returncode})"


def test_cli_killed_at_random_moments_resumes_as_an_uninterrupted_run(demo_clip, demo_reference, tmp_path):
    run_cli_campaign(demo_clip, demo_reference[0], tmp_path, CAMPAIGN_KILLS)


def test_killed_runs_of_a_clip_retention_would_thin_resume_exactly(strip_pan, tmp_path):
    """The campaign on a clip whose moments a recent-tier gap would thin: resumed runs run a
    retention pass on what the kill left, and still end with exactly the uninterrupted run's moments."""
    run_cli_campaign(strip_pan, None, tmp_path, CAMPAIGN_KILLS)


@pytest.fixture(scope="module")
def strip_pan(tmp_path_factory):
    """40 s of a steady pan over a strip of photographs at 320x240, 10 fps: at 2 fps almost every
    sample is kept, 0.5 s apart, and most of them are no event's keyframe (nothing protects them)."""
    from fractions import Fraction

    from vam_engine.synthetic import photo_strip, write_rgb_clip

    strip = photo_strip(["chelsea", "coffee", "astronaut", "rocket", "coins", "camera", "page", "retina"], 240)
    fps, seconds, w = 10, 40, 320
    step = (strip.shape[1] - w) / (fps * seconds)
    frames = [np.ascontiguousarray(strip[:, int(step * k):int(step * k) + w]) for k in range(fps * seconds)]
    path = tmp_path_factory.mktemp("strip") / "strip.mp4"
    write_rgb_clip(path, frames, range(len(frames)), Fraction(1, fps), rate=fps, gop=20)
    return path


def test_a_second_run_and_retain_delete_nothing_the_first_kept(strip_pan, tmp_path):
    """`vam-engine index` of a finished file again ("already indexed") and `vam-engine retain`
    leave exactly what the first run kept, though both run a retention pass: 2 fps sampling kept
    unprotected moments 0.5 s apart, which VAM's 1 s recent-tier gap thinned."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in sys.path if p]),
               VAM_RETENTION__ENABLED="1")
    store_dir = tmp_path / "s"

    def run(*argv):
        out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=WATCHDOG_S)
        assert out.returncode == 0, out.stdout + out.stderr[-3000:]
        return out.stdout

    run(*CLI_CHILD, str(strip_pan), "--store", str(store_dir))
    first = memory_of(store_dir)
    store = Store(store_dir, create=False)
    try:
        rows = store.moments.retention_rows(CAMERA)
        close = [b for a, b in zip(rows, rows[1:]) if b.t - a.t < 0.99 and not b.protected]
        assert len(close) >= 10  # the case this test is about: moments 2 fps sampling kept, unprotected
    finally:
        store.close()
    assert "already indexed" in run(*CLI_CHILD, str(strip_pan), "--store", str(store_dir))
    assert memory_of(store_dir) == first
    assert "thinned 0" in run(sys.executable, "-m", "vam_engine.cli", "retain", "--store", str(store_dir))
    assert memory_of(store_dir) == first


@pytest.mark.slow
def test_cli_kill_campaign_long(demo_clip, demo_reference, tmp_path):
    run_cli_campaign(demo_clip, demo_reference[0], tmp_path, 12)


def test_a_store_with_a_version_1_committer_state_resumes(tmp_path):
    """Stores written before the committer's state had full names hold it abbreviated (its held
    frame's key too): the store reads it as the typed state and keeps the held frame's file."""
    store = Store(tmp_path / "store")
    try:
        src = store.sources.open(CAMERA, "clip.mp4", "fp", "fps=2").source_id
        held_ref, stray = store.frames.ref(CAMERA, src, 1.0), store.frames.ref(CAMERA, src, 0.5)
        for ref in (held_ref, stray):
            store.frames.write(ref, np.full((8, 8, 3), 128, np.uint8), 90)
        with store.db.transaction() as conn:
            conn.execute("INSERT INTO commit_state VALUES (?, ?)", (CAMERA, V1_STATE.replace('"s": 3', f'"s": {src}')))
        state = load_state(store, CAMERA)
        assert state.held.key.source_id == src and state.held.key.t_rel == 1.0 and state.held.key.width == 64
        assert sweep_source(store, CAMERA, src) == 1
        assert (store.root / held_ref).is_file() and not (store.root / stray).exists()
    finally:
        store.close()
    with Engine(tmp_path / "store", CFG, device="cpu") as eng:  # the pipeline adopts it (dim 4 here)
        assert eng._life.pipe().semantic._committer(CAMERA).pending
