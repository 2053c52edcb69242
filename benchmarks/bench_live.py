"""Live cameras: what M cameras cost and whether ingest keeps up, and how fast a camera comes
back after its server restarts.

Each camera reads a 640x360 25 fps H.264 clip (a new scene every second) over RTSP from
tests/_servers/rtsp_server.py (GStreamer's RTSP server on the system Python, one process per
camera, played in real time), or, without GStreamer, the clip as a file played at 1x
(``realtime=True``). Per run: time from ``add_camera`` to the first frame, lag behind live
(``CameraStatus.lag_s``, sampled every 0.5 s) median and max, input fps, frames decoded /
sampled / kept / dropped, and the engine process's CPU per camera (cores). Then, over RTSP,
one server is killed and started again 1 s later: the time from its restart to the camera
online again, with the default backoff (1 s doubling) and with a short one.

    python benchmarks/bench_live.py            # 1 and 4 cameras, 30 s each
    python benchmarks/bench_live.py --quick    # 1 and 2 cameras, 10 s each
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import av  # noqa: E402
import numpy as np  # noqa: E402

from _common import print_table, write_json  # noqa: E402


def make_clip(path: Path, seconds: float, w: int = 640, h: int = 360, fps: int = 25) -> Path:
    from vam_engine.synthetic import scene_image

    scenes = [scene_image(k, h, w).astype(np.uint8) for k in range(int(seconds) + 1)]
    with av.open(str(path), "w") as out:
        s = out.add_stream("libx264", rate=fps)
        s.width, s.height, s.pix_fmt = w, h, "yuv420p"
        s.options = {"g": str(fps), "bf": "0", "preset": "ultrafast", "crf": "28"}
        for i in range(int(seconds * fps)):
            img = scenes[i // fps].copy()
            x = (i * 8) % (w - 40)
            img[h // 2 - 20:h // 2 + 20, x:x + 40] = 255  # a moving block: consecutive frames differ
            f = av.VideoFrame.from_ndarray(img, format="rgb24")
            f.pts, f.time_base = i, Fraction(1, fps)
            for p in s.encode(f):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return path


def run(n_cams: int, seconds: float, clip: Path, rtsp: bool, store: Path) -> dict:
    from support.live import RtspServer
    from vam_engine.engine import Engine

    servers = [RtspServer(clip).start() for _ in range(n_cams)] if rtsp else []
    try:
        with Engine(store, {"ingest": {"fps": 1.0}}, device="cpu") as eng:
            t_add = time.monotonic()
            cpu0 = os.times()
            for k in range(n_cams):
                eng.add_camera(f"cam{k}", servers[k].url if rtsp else str(clip), realtime=not rtsp)
            connect = {}
            lags, end = [], time.monotonic() + seconds
            while time.monotonic() < end:
                time.sleep(0.1)
                for s in eng.status():
                    if s.state == "online" and s.camera_id not in connect:
                        connect[s.camera_id] = time.monotonic() - t_add
                    if s.lag_s is not None and int(time.monotonic() * 10) % 5 == 0:
                        lags.append(s.lag_s)
            cpu1 = os.times()
            wall = time.monotonic() - t_add
            status = eng.status()
            for s in status:
                eng.remove_camera(s.camera_id)
    finally:
        for srv in servers:
            srv.kill()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {"cameras": n_cams, "source": "rtsp" if rtsp else "file 1x", "seconds": seconds,
            "connect_s_max": max(connect.values()) if connect else None,
            "lag_s_median": statistics.median(lags) if lags else None, "lag_s_max": max(lags) if lags else None,
            "input_fps": statistics.mean(s.input_fps for s in status),
            "decoded": sum(s.frames_decoded for s in status), "sampled": sum(s.frames_sampled for s in status),
            "kept": sum(s.frames_kept for s in status), "dropped": sum(s.frames_dropped for s in status),
            "cores_per_camera": cpu / wall / n_cams}


def reconnect(clip: Path, store: Path, backoff_s: float, backoff_max_s: float) -> dict:
    from support.live import RtspServer
    from vam_engine.engine import Engine

    srv = RtspServer(clip).start()
    try:
        with Engine(store, {"ingest": {"fps": 1.0}}, device="cpu") as eng:
            eng.add_camera("cam", srv.url, backoff_s=backoff_s, backoff_max_s=backoff_max_s)
            deadline = time.monotonic() + 20
            while eng.status("cam")[0].state != "online" and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(2.0)
            srv.kill()
            t_kill = time.monotonic()
            while eng.status("cam")[0].gaps == 0 and time.monotonic() < t_kill + 20:
                time.sleep(0.02)
            noticed = time.monotonic() - t_kill
            time.sleep(1.0)
            srv.start()
            t_up = time.monotonic()
            while eng.status("cam")[0].state != "online" and time.monotonic() < t_up + 60:
                time.sleep(0.02)
            back = time.monotonic() - t_up
            (gap,) = eng.gaps("cam")
            eng.remove_camera("cam")
    finally:
        srv.kill()
    return {"backoff": f"{backoff_s:g} s doubling to {backoff_max_s:g} s", "loss_noticed_s": noticed,
            "online_after_restart_s": back, "gap_s": (gap.t_end or 0) - gap.t_start}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    from support.live import rtsp_server_available

    why_not = rtsp_server_available()
    seconds, counts = (10.0, (1, 2)) if args.quick else (30.0, (1, 4))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        clip = make_clip(tmp / "clip.mp4", seconds + 15)  # longer than a run: the server never reaches its end
        rows = [run(n, seconds, clip, why_not is None, tmp / f"store{n}") for n in counts]
        rec = [reconnect(clip, tmp / f"rstore{k}", *b) for k, b in enumerate(((1.0, 60.0), (0.2, 1.0)))] \
            if why_not is None else []
    if why_not is not None:
        print(f"(no RTSP server: {why_not}; files played at 1x instead, no reconnection rows)")
    keys = list(rows[0])
    print_table(keys, [[r[k] for k in keys] for r in rows])
    if rec:
        print()
        keys = list(rec[0])
        print_table(keys, [[r[k] for k in keys] for r in rec])
    print("wrote", write_json("bench_live", {"quick": args.quick, "runs": rows, "reconnect": rec}))


if __name__ == "__main__":
    main()
