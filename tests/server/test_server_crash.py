"""``kill -9`` of a serving process while it ingests, then ``vam-engine serve`` on the same store:
the store opens, every moment row has its frame (served by the API), nothing committed before
the kill is lost; a second writer on the store is refused with an error naming the holder; the
server stops cleanly on SIGTERM."""
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from support.net import free_port
from support.paths import REPO as ROOT
from support.waiting import wait_for
from vam_engine.memory.store import Store

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 240

INGESTING_SERVER = textwrap.dedent("""
    import sys, threading, time
    sys.path.insert(0, sys.argv[3])
    import uvicorn
    from support.clips import code_frame
    from vam_engine.engine import Engine
    from vam_engine.server import create_app

    eng = Engine(sys.argv[1], {"ingest": {"fps": 4.0}, "retention": {"enabled": False}}, device="cpu")

    def pump():  # a camera pushing 4 distinct frames per stream second, as fast as it can
        i = 0
        while True:
            eng.push("cam", code_frame(i % 256, seed=i // 256), i * 0.25)
            i += 1
            time.sleep(0.002)

    threading.Thread(target=pump, daemon=True).start()
    uvicorn.run(create_app(eng), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
""")


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), e.get("PYTHONPATH", "")])
    e["VAM_RETENTION__ENABLED"] = "0"
    return e


def stop(proc) -> None:
    """SIGTERM, then kill -9 if it has not exited 30 s later."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()


def wait_until(fn, timeout, what):
    """``fn()`` once it is truthy; a server that does not answer yet is not there yet."""
    return wait_for(what, fn, timeout, every=0.2, ignore=(httpx.HTTPError,))


def moments(url):
    out, cursor = [], None
    while True:
        r = httpx.get(f"{url}/api/moments", params={"limit": 500, **({"cursor": cursor} if cursor else {})}, timeout=10)
        r.raise_for_status()
        out += r.json()["items"]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return out


def test_kill_9_while_ingesting_then_serve_again(tmp_path):
    store = tmp_path / "store"
    script = tmp_path / "ingesting_server.py"
    script.write_text(INGESTING_SERVER)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    p = subprocess.Popen([sys.executable, str(script), str(store), str(port), str(ROOT / "tests")], env=env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        seen = wait_until(lambda: len(moments(url)) >= 40 and moments(url), 120, "40 committed moments")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    assert p.returncode == -signal.SIGKILL

    port2 = free_port()
    url2 = f"http://127.0.0.1:{port2}"
    serve = subprocess.Popen([sys.executable, "-m", "vam_engine.cli", "serve", "--store", str(store), "--port",
                              str(port2), "--device", "cpu", "--log-level", "warning"], env=env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: httpx.get(f"{url2}/api/health", timeout=5).json()["ok"], 120, "serve after the kill")
        after = moments(url2)
        ids = {m["moment_id"] for m in after}
        assert {m["moment_id"] for m in seen} <= ids  # nothing committed before the kill is gone
        for m in after:
            r = httpx.get(f"{url2}{m['frame']}", timeout=10)
            assert r.status_code == 200 and r.content[:2] == b"\xff\xd8", m  # a JPEG for every row
        st = Store(store, create=False)
        try:
            rows = st.moments.list()
            assert len(rows) == len(after) and all(Path(m.frame_path).is_file() for m in rows)
        finally:
            st.close()
        # serve owns the store's writes: a second writer is refused, naming why
        second = subprocess.run([sys.executable, "-m", "vam_engine.cli", "serve", "--store", str(store), "--port",
                                 str(free_port()), "--device", "cpu"], env=env(), capture_output=True, text=True,
                                timeout=120)
        assert second.returncode == 2 and "writ" in second.stderr and str(serve.pid) in second.stderr
    finally:
        stop(serve)
    assert serve.returncode == 0, serve.stderr.read()


def test_kill_9_of_serve_with_two_live_cameras_then_restart(tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    from support.clips import changing_clip

    cams = {name: changing_clip(tmp_path / f"{name}.mp4", 60.0, seed=k) for k, name in enumerate(("door", "yard"))}
    cameras = tmp_path / "cameras.toml"
    cameras.write_text("[defaults]\nfps = 2.0\nrealtime = true\n" + "".join(
        f'[cameras.{name}]\nurl = "{path}"\n' for name, path in cams.items()))
    store = tmp_path / "store"

    def serve(port):
        return subprocess.Popen([sys.executable, "-m", "vam_engine.cli", "serve", "--store", str(store), "--cameras",
                                 str(cameras), "--port", str(port), "--device", "cpu", "--log-level", "warning"],
                                env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def per_camera(url):
        got = {}
        for m in moments(url):
            got.setdefault(m["camera_id"], []).append(m)
        return got

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    p = serve(port)
    try:
        before = wait_until(lambda: (g := per_camera(url)) and all(len(g.get(c, [])) >= 3 for c in cams) and g,
                            120, "moments from both live cameras")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    p = serve(port)
    try:
        wait_until(lambda: {c["camera_id"]: (c["status"] or {}).get("state") for c in
                            httpx.get(f"{url}/api/cameras", timeout=5).json()["cameras"]}
                   == {"door": "online", "yard": "online"}, 120, "both cameras online again")
        after = wait_until(lambda: (g := per_camera(url)) and all(len(g[c]) > len(before[c]) for c in cams) and g,
                           60, "new moments from both cameras after the restart")
        for cam in cams:  # nothing committed before the kill is gone, and every row has its frame
            assert {m["moment_id"] for m in before[cam]} <= {m["moment_id"] for m in after[cam]}
            for m in after[cam]:
                r = httpx.get(f"{url}{m['frame']}", timeout=10)
                assert r.status_code == 200 and r.content[:2] == b"\xff\xd8", m
        # SIGHUP reloads the cameras file: yard removed, door untouched, no restart
        cameras.write_text(f'[defaults]\nfps = 2.0\nrealtime = true\n[cameras.door]\nurl = "{cams["door"]}"\n')
        p.send_signal(signal.SIGHUP)
        wait_until(lambda: {c["camera_id"]: (c["status"] or {}).get("state") for c in
                            httpx.get(f"{url}/api/cameras", timeout=5).json()["cameras"]}
                   == {"door": "online", "yard": None}, 30, "yard removed by the reload")
    finally:
        stop(p)
    assert p.returncode == 0, p.stderr.read()
