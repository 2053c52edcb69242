"""``vam-engine index URL... --live``: index sources as live cameras (engine/live.py) until
Ctrl-C, ``--duration`` seconds, or until every camera is offline (files at their end, cameras
that gave up), with a status line per camera every few seconds."""
from __future__ import annotations

import sys
import time

from ..ingest import default_camera_ids
from .common import audio_line, make_engine

STATUS_EVERY_S = 5.0


def _line(s) -> str:
    lag = f", lag {s.lag_s:.1f} s" if s.lag_s is not None else ""
    err = f" ({s.error})" if s.error else ""
    audio = f"; {audio_line(s.audio)}" if s.audio is not None else ""
    return (f"{s.camera_id}: {s.state}{err}, {s.input_fps:.1f} fps in, sampled {s.frames_sampled}, kept "
            f"{s.frames_kept}, dropped {s.frames_dropped}{lag}, reconnects {s.reconnects}, gaps {s.gaps}{audio}")


def cmd_index_live(args) -> int:
    cams = args.camera or default_camera_ids(list(args.videos))
    if len(cams) != len(args.videos):
        raise ValueError(f"{len(args.videos)} sources but {len(cams)} camera ids")
    with make_engine(args, existing=False) as eng:
        for cam, url in zip(cams, args.videos):
            eng.add_camera(cam, url, realtime=args.realtime, stall_s=args.stall_s, max_retries=args.max_retries)
        t0 = time.monotonic()
        shown = t0
        try:
            while args.duration is None or time.monotonic() - t0 < args.duration:
                time.sleep(0.2)
                status = eng.status()
                if all(s.state == "offline" for s in status):
                    break
                if not args.quiet and time.monotonic() - shown >= STATUS_EVERY_S:
                    shown = time.monotonic()
                    for s in status:
                        print(_line(s), file=sys.stderr, flush=True)
        except KeyboardInterrupt:
            pass  # stop the cameras; what they queued is committed by close
        status = eng.status()
        for cam in cams:
            eng.remove_camera(cam)
        eng.flush()
    for s in status:
        print(_line(s))
    return 1 if any(s.state == "offline" and s.error for s in status) else 0
