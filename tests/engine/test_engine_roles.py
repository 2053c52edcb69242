"""What an engine starts, and when: reads change nothing (retention enabled), write-side calls
claim the store (one writer per store, readers meanwhile), a failed construction leaks nothing,
and the model is loaded only when used."""
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from support.clips import code_frame
from support.paths import REPO
from vam_engine import Engine, StoreError, VamError
from vam_engine.cli import main
from vam_engine.llm import ScriptedLLM
from vam_engine.memory.writer_lock import WriterLock



def _old_store(path) -> int:
    """A store whose old frames retention would thin and re-encode: 2 fps of new pictures for
    10 s, then one moment two hours later (the first ten seconds are then in the "mid" tier:
    a 20 s gap, recompressed). Built with retention off, as conftest sets it; returns the
    moments it holds."""
    # one event over the first 10 s (no boundary: the fallback similarity is never undercut and
    # the adaptive one never applies), so only its 8 keyframes are protected from thinning
    cfg = {"ingest": {"fps": 2.0}, "commit": {"event_fallback_sim": -1.0, "min_history": 1000}}
    with Engine(path, cfg, device="cpu") as eng:
        for i in range(20):
            eng.push("cam", code_frame(i, seed=3), i * 0.5)
        eng.push("cam", code_frame(200, seed=3), 7200.0)
        eng.end_push("cam")
        n = len(eng.moments("cam"))
    assert n >= 15  # new pictures: the gates keep (nearly) all
    return n


def _snapshot(path) -> tuple:
    """Every frame file with its size and mtime, and every moment row."""
    files = sorted((str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns)
                   for p in (Path(path) / "frames").rglob("*") if p.is_file())
    with sqlite3.connect(Path(path) / "store.sqlite") as conn:
        rows = conn.execute("SELECT * FROM moments ORDER BY moment_id").fetchall()
    return files, rows


@pytest.fixture
def old_store(tmp_path, monkeypatch):
    store = tmp_path / "store"
    _old_store(store)
    monkeypatch.setenv("VAM_RETENTION__ENABLED", "1")  # what a user gets: retention on
    return store


def test_reads_never_change_the_store_and_retain_thins_it(old_store, capsys):
    before = _snapshot(old_store)
    n0 = len(before[1])
    with Engine(old_store, device="cpu") as eng:
        assert eng.config.retention.enabled
        assert len(eng.search(image=code_frame(3, seed=3), top_k=5).evidence) > 0
        assert len(eng.moments()) == n0 and eng.info()["moments"] == n0
        assert not eng.writing and eng.writer is None
        assert not any(t.name in ("vam-retention", "vam-writer") for t in threading.enumerate())
    assert main(["info", "--store", str(old_store)]) == 0
    assert main(["search", "anything", "--store", str(old_store), "--device", "cpu"]) == 0
    assert main(["search", "--image", str(old_store / before[0][0][0]), "--store", str(old_store),
                 "--device", "cpu"]) == 0
    assert _snapshot(old_store) == before
    capsys.readouterr()

    assert main(["retain", "--store", str(old_store)]) == 0
    out = capsys.readouterr().out
    files, rows = _snapshot(old_store)
    thinned = re.search(r"thinned (\d+), re-encoded (\d+)", out)
    assert thinned and int(thinned[1]) == n0 - len(rows) > 0, out  # 0.5 s apart in the old band: thinned
    assert int(thinned[2]) > 0 and "MB ->" in out
    assert len(files) == len(rows)  # each thinned moment took its file along
    old = {name: (size, mtime) for name, size, mtime in before[0]}
    assert any(old[name] != (size, mtime) for name, size, mtime in files), "no frame was re-encoded"


def test_index_runs_retention(old_store, tmp_path):
    clip = tmp_path / "late.mp4"
    from support.clips import write_clip

    write_clip(clip, [int(i * 100) for i in range(20)], gop=10)
    n0 = len(_snapshot(old_store)[1])
    with Engine(old_store, {"ingest": {"fps": 1.0}}, device="cpu") as eng:
        eng.index_file(clip, camera_id="other")
        assert eng.writing and eng._life.retention is not None and eng._life.retention.running
        deadline = time.monotonic() + 30
        while eng._life.retention.passes == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert eng._life.retention.last_report.deleted > 0
    assert len(Engine(old_store, device="cpu").moments("cam")) < n0


def test_engine_retain_reports_what_it_did(old_store):
    n0 = len(_snapshot(old_store)[1])
    with Engine(old_store, device="cpu") as eng:
        rep = eng.retain()
        assert eng.writing
        assert rep.deleted > 0 and rep.bytes_after < rep.bytes_before
        assert len(eng.moments()) == n0 - rep.deleted
        assert eng.retain().deleted == 0  # a fixed point


# -- one writer per store -------------------------------------------------------------------
HOLDER = textwrap.dedent("""
    import sys, time
    from vam_engine.memory.writer_lock import WriterLock
    lock = WriterLock(sys.argv[1]).acquire()
    print("held", flush=True)
    sys.stdin.readline()
""")


def _holder(store):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(store)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_writer_is_refused_while_readers_work(old_store, monkeypatch, tmp_path):
    monkeypatch.setenv("VAM_RETENTION__ENABLED", "0")
    n0 = len(_snapshot(old_store)[1])
    proc = _holder(old_store)
    try:
        with Engine(old_store, device="cpu") as eng:
            assert len(eng.search(image=code_frame(3, seed=3), top_k=3).evidence) == 3  # a reader reads
            with pytest.raises(StoreError, match=rf"another process \(pid {proc.pid}\) is writing this store") as e:
                eng.push("cam", code_frame(7), 9000.0)
            assert str(old_store) in str(e.value)
            with pytest.raises(StoreError, match=str(proc.pid)):
                eng.delete(cameras="cam")
            with pytest.raises(StoreError, match=str(proc.pid)):
                eng.retain()
            assert len(eng.moments()) == n0
        clip = tmp_path / "c.mp4"
        from support.clips import write_clip

        write_clip(clip, [0, 100, 200])
        err = subprocess.run([sys.executable, "-m", "vam_engine.cli", "index", str(clip), "--store", str(old_store),
                              "--device", "cpu", "-q"], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert err.returncode == 2 and "Traceback" not in err.stderr
        assert f"another process (pid {proc.pid}) is writing this store" in err.stderr
        assert err.stderr.count("\n") == 1
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    with Engine(old_store, device="cpu") as eng:  # the holder is gone: the OS released its lock
        eng.push("cam", code_frame(7), 9000.0)
        assert eng.writing


def test_two_writers_in_one_process_conflict_and_close_releases(tmp_path):
    a = WriterLock(tmp_path).acquire()
    with pytest.raises(StoreError, match=f"pid {os.getpid()}"):
        WriterLock(tmp_path).acquire()
    a.release()
    with WriterLock(tmp_path) as b:
        assert b.held
    assert not b.held


# -- construction -----------------------------------------------------------------------------
def _store_fds(store) -> int:
    fds = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds += os.readlink(f"/proc/self/fd/{fd}").startswith(str(store))
        except OSError:
            pass
    return fds


def test_a_failed_construction_closes_what_it_opened(tmp_path):
    store = tmp_path / "s"
    Engine(store, device="cpu").close()
    threads = set(threading.enumerate())
    assert _store_fds(store) == 0
    # the store opens, then the writer's text embedder is found missing
    with pytest.raises(VamError, match="text embedder"):
        Engine(store, device="cpu", llm=ScriptedLLM(lambda req: "x"))
    with pytest.raises(VamError, match="invalid config"):
        Engine(store, {"gate": {"ssim_max": 7}}, device="cpu")
    assert _store_fds(store) == 0
    assert set(threading.enumerate()) <= threads
    with Engine(store, device="cpu") as eng:  # and nothing is held: a writer can start
        eng.push("cam", code_frame(1), 0.0)
        assert eng.flush(timeout=30)


def test_the_model_is_loaded_at_first_use(tmp_path):
    bad = {"llm": {"backend": "local", "model": str(tmp_path / "no-such-dir")}}
    with pytest.raises(VamError, match="not a directory"):  # checked at construction, loading nothing
        Engine(tmp_path / "s", bad, device="cpu")
    cfg = {"llm": {"backend": "openai", "url": "http://127.0.0.1:9/v1", "model": "m"}, "writer": {"enabled": False}}
    with Engine(tmp_path / "s", cfg, device="cpu") as eng:
        assert eng.info()["llm"] == "openai:http://127.0.0.1:9/v1#m"
        eng.search(image=code_frame(1))
        assert eng.built_llm() is None  # nothing so far needed the model
        assert eng.llm is not None and eng.llm.name == "openai:http://127.0.0.1:9/v1#m"


def test_a_reader_that_becomes_the_writer_loads_what_another_wrote_meanwhile(tmp_path):
    store = tmp_path / "s"
    cfg = {"ingest": {"fps": 1.0}}
    a = Engine(store, cfg, device="cpu")  # reads first: its vector indexes are loaded now (empty)
    try:
        with Engine(store, cfg, device="cpu") as b:  # another writer comes and goes
            for i in range(3):
                b.push("b", code_frame(i, seed=1), float(i))
        assert a.vectors.size("frame") == 0
        a.push("a", code_frame(50, seed=2), 0.0)
        assert a.flush(timeout=30)
        assert a.vectors.size("frame") == len(a.moments()) >= 4
    finally:
        a.close()
    with Engine(store, cfg, device="cpu") as c:  # and its snapshot holds them all
        assert c.vectors.size("frame") == len(c.moments())
