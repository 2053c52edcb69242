"""``vam-engine clip``: an MP4 of any interval of a camera (Engine.clip: cut from the source file
while it is there, else built from the retained frames)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import VamError
from .common import make_engine


def cmd_clip(args) -> int:
    out = Path(args.output)
    if out.suffix.lower() != ".mp4":
        raise VamError(f"-o {args.output}: a clip is an MP4; name the file *.mp4")
    if not out.parent.is_dir():
        raise VamError(f"-o {args.output}: the directory {out.parent} does not exist")
    eng = make_engine(args)
    try:
        made = eng.clip(args.camera, args.t0, args.t1)
    finally:
        eng.close()
    tmp = out.with_name(out.name + ".part")
    tmp.write_bytes(made.data)
    os.replace(tmp, out)  # a reader never sees half a clip
    way = "cut from the source file" if made.made_from == "source" else "built from the retained frames"
    print(f"{out}: {made.t1 - made.t0:g} s of camera {made.camera_id} ({way}, {len(made.data)} bytes)",
          file=sys.stderr)
    return 0


def register(sub, g) -> None:
    sp = sub.add_parser("clip", parents=[g.store, g.engine], help="write an MP4 of an interval of a camera")
    sp.add_argument("--camera", required=True, help="the camera id")
    sp.add_argument("--t0", type=float, required=True, help="start, seconds on the camera's axis (as search prints)")
    sp.add_argument("--t1", type=float, required=True, help="end, seconds on the camera's axis")
    sp.add_argument("-o", "--output", required=True, help="the MP4 to write")
    sp.set_defaults(func=cmd_clip)
