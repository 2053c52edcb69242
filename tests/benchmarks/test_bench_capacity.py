"""benchmarks/bench_capacity.py: its --plumbing run end to end (live RTSP cameras into an engine
in its own process, the step-up, the memory probe, the JSON), and the pieces its figures rest on:
the stages' busy fractions from the contract's cumulative figures, the bound, a process tree's
CPU read from /proc, the stub model server's replies and slots, the clips served as encoded.
Not timed: what is asserted is what the figures are made of, never how large they are."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from support.paths import REPO

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 600
_PATH = REPO / "benchmarks" / "bench_capacity.py"


@pytest.fixture(scope="module")
def bc():
    sys.path.insert(0, str(_PATH.parent))
    spec = importlib.util.spec_from_file_location("bench_capacity", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_capacity"] = mod
    spec.loader.exec_module(mod)
    return mod


def _rtsp_or_skip(audio: bool = False):
    from vam_engine.synthetic.rtsp import rtsp_server_available

    why = rtsp_server_available(audio=audio)
    if why:
        pytest.skip(why)
    if shutil.which("ffmpeg") is None:
        pytest.skip("ffmpeg is not installed")


def test_busy_fraction_is_the_window_delta_over_wall_and_workers(bc):
    before = [{"name": "decode", "workers": 2, "busy_s": 10.0, "items": 100, "queue_depth": 0, "queue_capacity": 64,
               "dropped": 1},
              {"name": "embed", "workers": 1, "busy_s": 4.0, "items": 40, "queue_depth": 3, "queue_capacity": None,
               "dropped": 0}]
    after = [dict(before[0], busy_s=16.0, items=160, queue_depth=5, dropped=4),
             dict(before[1], busy_s=9.0, items=90, queue_depth=7),
             {"name": "commit", "workers": 1, "busy_s": 1.5, "items": 30, "queue_depth": 0, "queue_capacity": 8,
              "dropped": 0}]  # a stage that appeared during the window counts from zero
    rows = {r["stage"]: r for r in bc.stage_rows(before, after, wall=10.0)}
    assert rows["decode"]["busy_frac"] == pytest.approx(6.0 / (10.0 * 2))
    assert rows["embed"]["busy_frac"] == pytest.approx(0.5)
    assert rows["commit"]["busy_frac"] == pytest.approx(0.15)
    assert rows["decode"]["dropped"] == 3 and rows["decode"]["items_per_s"] == pytest.approx(6.0)
    assert rows["embed"]["queue_depth"] == 7 and rows["embed"]["queue_capacity"] is None
    assert bc.stage_rows(None, None, 10.0) is None  # an engine without the figures: "n/a" in the table


def test_the_bound_breaks_on_lag_on_a_drop_and_on_a_camera_offline(bc):
    assert bc.bound_broken(0.5, 0, 4, 4, 2.0) == []
    assert bc.bound_broken(2.5, 0, 4, 4, 2.0) == ["lag p99 2.50 s > 2 s"]
    assert bc.bound_broken(0.5, 1, 4, 4, 2.0) == ["1 samples dropped"]
    assert bc.bound_broken(0.5, 0, 3, 4, 2.0) == ["1 of 4 cameras not online"]
    assert bc.bound_broken(None, 0, 0, 1, 2.0)[0] == "no lag reported"
    assert bc.counts_up_to(12) == [1, 2, 4, 6, 8, 10, 12] and bc.counts_up_to(1) == [1]


def test_a_process_trees_cpu_includes_its_children(bc):
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ntime.sleep(300)"
    parent = subprocess.Popen([sys.executable, "-c",
                               f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {burn!r}]); "
                               "time.sleep(300)"])
    try:
        deadline = time.monotonic() + 120  # a loaded machine: the processes take their time
        while len(bc.tree(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = bc.tree(parent.pid)
        assert pids[0] == parent.pid and len(pids) == 2
        assert bc.rss_mb(pids) > bc.rss_mb(pids[:1]) > 0
        while bc.cpu_s(pids[1:]) < 0.3 and time.monotonic() < deadline:  # the child's burn, seen from outside
            time.sleep(0.1)
        assert bc.cpu_s(pids) >= bc.cpu_s(pids[1:]) >= 0.28
    finally:
        for p in reversed(bc.tree(parent.pid)):
            os.kill(p, 9)
        parent.wait(10)


def test_the_stub_model_server_answers_each_role_and_holds_its_slots(bc):
    import httpx

    from vam_engine.llm import prompts
    from vam_engine.llm.schemas import AnchorVerdict

    stub = bc.stub_model_server(base_s=0.3, per_image_s=0.0, slots=2)
    with stub:
        def ask(system, images=0):
            user = [{"type": "text", "text": "x"}] + [{"type": "image_url", "image_url": {"url": "data:,"}}] * images
            r = httpx.post(stub.url + "/chat/completions", timeout=30, json={
                "model": "stub", "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]})
            return r.json()["choices"][0]["message"]["content"]
        AnchorVerdict.model_validate_json(ask(prompts.MONITOR, images=4))  # a monitor check's verdict parses
        assert json.loads(ask(prompts.TURN_CLASSIFIER))["kind"] == "question"
        assert ask(prompts.EVENT_WRITER, images=8)  # a document: plain text
        threads = [threading.Thread(target=ask, args=(prompts.EVENT_WRITER,)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert stub.counts["requests"] == 6 and stub.counts["images"] == 12
    assert stub.counts["wait_s"] > 0.1  # 3 at once on 2 slots: one waited for a slot


def test_the_rtsp_launch_line_sends_the_clip_as_encoded():
    from vam_engine.synthetic import rtsp

    for launch in (line for line in rtsp.SERVER.splitlines() if "set_launch" in line or "f'" in line):
        assert "dec" not in launch and "enc" not in launch and "x264" not in launch, launch


def test_plumbing_runs_the_whole_path_and_writes_its_figures(tmp_path):
    _rtsp_or_skip()
    env = dict(os.environ, VAM_BENCH_RESULTS=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, str(_PATH), "--plumbing", "--device", "cuda", "--device-budget", "300"],
                       capture_output=True, text=True, timeout=500, cwd=REPO, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    doc = json.loads((tmp_path / "bench_capacity_plumbing.json").read_text())
    (res,) = doc["results"]
    assert res["profile"] == "video" and [s["cameras"] for s in res["steps"]] == [1, 2]
    for step in res["steps"]:
        assert step["holds"], step["broke"]
        assert step["online"] == step["cameras"] and step["lag_samples"] >= step["cameras"]
        assert step["sampled"] > 0 and step["dropped"] == 0
        assert step["engine_cores"] > 0 and step["server_cores"] >= 0 and step["rss_mb_end"] > 50
    assert res["knee"] == 2 and res["knee_is_lower_bound"]
    (mem,) = doc["memory"]
    after = mem["after_cameras"]
    assert after["tracing"] and after["traced_mb"] > 0 and after["top_sites"]
    assert after["rss"]["rss_mb"] >= after["rss"]["rss_anon_mb"] > 0
    assert "knee" in doc["table"] and "cores/camera" in doc["table"]
    assert "capacity" in r.stdout and "wrote" in r.stdout


def test_bad_sizes_are_named(bc):
    with pytest.raises(SystemExit):
        bc.parse_args(["--sizes", "1280x"])
    with pytest.raises(SystemExit):
        bc.parse_args(["--profiles", "video,everything"])
    args = bc.parse_args(["--quick"])
    assert args.sizes == ["1280x720"] and args.max_cameras == 4
