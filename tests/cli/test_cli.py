"""The ``vam-engine`` command as a user meets it: per-command options, one-line errors, progress
in log files, the package's public names."""
import os
import subprocess
import sys
import types

import pytest

from support.clips import code_frame, write_clip
from support.net import free_port
from support.paths import REPO
from vam_engine import Engine
from vam_engine.cli import build_parser, main
from vam_engine.cli.index import ProgressBar
from vam_engine.device import cuda_available
from vam_engine.errors import VamError
from vam_engine.index.pipeline import Progress

ENV = dict(os.environ, PYTHONPATH=str(REPO))


def _help(cmd: str) -> str:
    sub = build_parser()._subparsers._group_actions[0].choices[cmd]
    return sub.format_help()


def test_each_command_shows_only_its_options():
    assert "--fps" in _help("index") and "--keyframes-only" in _help("index") and "--llm" in _help("index")
    for cmd in ("search", "ask", "summarize", "delete", "info", "retain"):
        assert "--fps" not in _help(cmd) and "--keyframes-only" not in _help(cmd), cmd
        assert "--quiet" not in _help(cmd), cmd
    assert "--llm" not in _help("search") and "--text-model" in _help("search")
    assert "--device" not in _help("info") and "--device" not in _help("retain")
    assert "--llm" in _help("ask") and "--as-of" in _help("ask")


@pytest.mark.skipif(cuda_available(), reason="this machine has CUDA")
def test_index_on_cuda_without_cuda_is_a_one_line_error(tmp_path, capsys):
    write_clip(tmp_path / "a.mp4", [0, 100])
    rc = main(["index", str(tmp_path / "a.mp4"), "--store", str(tmp_path / "s"), "--device", "cuda", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith("vam-engine: error: device 'cuda'") and "CUDA is not available" in err
    assert "--device cpu" in err


def _store(path) -> None:
    with Engine(path, {"ingest": {"fps": 1.0}}, device="cpu") as eng:
        for i in range(3):
            eng.push("cam", code_frame(i), float(i))


def test_delete_refuses_a_range_that_ends_before_it_starts(tmp_path, capsys):
    _store(tmp_path / "s")
    rc = main(["delete", "--store", str(tmp_path / "s"), "--t0", "100", "--t1", "10", "--yes", "--device", "cpu"])
    assert rc == 2 and "--t0 100 is after --t1 10" in capsys.readouterr().err
    with Engine(tmp_path / "s", device="cpu") as eng:
        with pytest.raises(VamError, match=r"starts after it ends \(t0=100 > t1=10\)"):
            eng.delete(time_range=(100, 10))
        with pytest.raises(VamError, match="finite"):
            eng.delete(time_range=(float("nan"), 10))
        assert not eng.writing  # refused before claiming the store
        assert len(eng.moments()) == 3
        assert eng.delete(time_range=(1.0, 1.0)).moments == 1


def test_reading_a_path_that_is_not_a_store_creates_nothing(tmp_path, capsys):
    for argv in (["search", "x"], ["ask", "x"], ["retain"], ["info"]):
        assert main(argv + ["--store", str(tmp_path / "nothing")]) == 2
        assert "not a vam_engine store" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()


def test_ask_against_an_unreachable_server_fails_at_once(tmp_path, capsys, monkeypatch):
    from vam_engine.llm import openai_http

    slept = []
    fake = types.SimpleNamespace(**{k: getattr(openai_http.time, k) for k in ("perf_counter", "monotonic", "time")})
    fake.sleep = slept.append  # no real waiting; what the retries would have waited is recorded
    monkeypatch.setattr(openai_http, "time", fake)
    _store(tmp_path / "s")
    url = f"http://127.0.0.1:{free_port()}/v1"
    rc = main(["ask", "what is there?", "--store", str(tmp_path / "s"), "--device", "cpu",
               "--llm", f"openai:{url}#m", "--text-model", "minilm"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and err.startswith("vam-engine: error: ") and "cannot reach" in err and url in err
    assert sum(slept) <= 0.5 and len(slept) <= 1  # one quick retry, not a backoff of a minute


def test_progress_in_a_log_file_is_a_line_every_few_seconds(tmp_path):
    class Log:
        def __init__(self):
            self.text = ""

        def write(self, s):
            self.text += s

        def flush(self):
            pass

        def isatty(self):
            return False

    log = Log()
    bar = ProgressBar(True, stream=log)
    for i in range(2000):
        bar(Progress("cam", "a.mp4", t_rel=i * 0.05, duration_s=100.0, decoded=i, sampled=i, kept=i // 2))
    bar(Progress("cam", "a.mp4", t_rel=100.0, duration_s=100.0, decoded=2000, sampled=2000, kept=1000, done=True))
    bar.close()
    lines = log.text.splitlines()
    assert "\r" not in log.text and len(lines) == 2  # the first update, and the end
    assert lines[-1].startswith("progress: 100/100 s of video, decoded 2000, kept 1000")


def test_index_writes_plain_progress_lines_to_a_file(tmp_path):
    write_clip(tmp_path / "a.mp4", [i * 100 for i in range(50)], gop=10)
    with open(tmp_path / "err.log", "w") as err:
        out = subprocess.run([sys.executable, "-m", "vam_engine.cli", "index", str(tmp_path / "a.mp4"), "--store",
                              str(tmp_path / "s"), "--device", "cpu", "--fps", "5"], stdout=subprocess.PIPE,
                             stderr=err, text=True, timeout=120, env=ENV)
    assert out.returncode == 0 and "kept" in out.stdout
    text = (tmp_path / "err.log").read_text()
    progress = [line for line in text.splitlines() if line.startswith("progress:")]
    assert "\r" not in text and 1 <= len(progress) <= 3, text
    assert progress[-1].startswith("progress: 5/5 s of video")


def test_the_package_exports_its_api_without_importing_torch():
    code = ("import sys, vam_engine; assert 'torch' not in sys.modules and 'numpy' not in sys.modules; "
            "from vam_engine import Engine, EngineConfig, Evidence, SearchResult, Moment, Answer, SourceReport, "
            "VamError, StoreError, LLMError, retain_store; assert 'torch' not in sys.modules; print(Engine.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=ENV)
    assert out.returncode == 0 and out.stdout.strip() == "Engine", out.stderr
    import vam_engine

    assert all(getattr(vam_engine, name) is not None for name in vam_engine.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        vam_engine.Nope


def test_the_local_spec_asks_for_a_directory():
    from vam_engine.llm import parse_llm_spec

    with pytest.raises(ValueError, match="Qwen-VL model directory"):
        parse_llm_spec("local:")
    assert "local:DIR" in _help("ask") and "hub" not in _help("ask")
