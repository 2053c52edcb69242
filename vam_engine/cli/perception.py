"""``vam-engine entities``: the entities perception found in a store (things detected, tracked
and linked across cameras), by label, camera and time; ``--last-seen QUERY``: where something
was seen last."""
from __future__ import annotations

import json

from .common import fmt_t, make_engine


def _entity_dict(e) -> dict:
    return {"entity_id": e.entity_id, "label": e.label, "colours": list(e.colours), "texts": list(e.texts),
            "first_t": e.first_t, "last_t": e.last_t,
            "seen": {cam: {"first_t": a, "last_t": b} for cam, (a, b) in e.seen.items()}, "crop": e.crop_path}


def cmd_entities(args) -> int:
    tr = (args.t0, args.t1) if args.t0 is not None or args.t1 is not None else None
    with make_engine(args) as eng:
        if args.last_seen:
            got = eng.last_seen(args.last_seen, camera=args.camera, as_of=args.as_of)
            if args.json:
                print(json.dumps(None if got is None else {
                    "source": got.source, "camera_id": got.camera_id, "t": got.t, "text": got.text,
                    "entity": _entity_dict(got.entity) if got.entity else None, "moment_id": got.moment_id,
                    "frame": got.frame_path, "box": list(got.box) if got.box else None}, indent=2))
            elif got is None:
                print("not seen")
            else:
                what = f"entity {got.entity.entity_id} ({got.entity.label})" if got.entity else f"text {got.text!r}"
                print(f"{what} last seen on {got.camera_id} at {fmt_t(got.t).strip()}: frame {got.frame_path or '-'}"
                      + (f", box {[round(v) for v in got.box]}" if got.box else ""))
            return 0
        ents = eng.entities(label=args.label, camera=args.camera, time_range=tr, as_of=args.as_of, limit=args.limit)
    if args.json:
        print(json.dumps([_entity_dict(e) for e in ents], indent=2))
        return 0
    if not ents:
        print("no entities")
        return 0
    print(f"{'id':>5}  {'label':12}  {'colours':16}  {'first seen':>19}  {'last seen':>19}  cameras / text")
    for e in ents:
        extra = ", ".join(e.cameras) + (f"  read: {'; '.join(e.texts[:3])}" if e.texts else "")
        print(f"{e.entity_id:>5}  {e.label[:12]:12}  {' '.join(e.colours)[:16]:16}  {fmt_t(e.first_t):>19}  "
              f"{fmt_t(e.last_t):>19}  {extra}")
    return 0


def register(sub, g) -> None:
    sp = sub.add_parser("entities", parents=[g.store, g.engine, g.cameras],
                        help="list the things perception detected and tracked (entities), or where one was last seen")
    sp.add_argument("--label", action="append", help="only this class (repeatable): person, car, ...")
    sp.add_argument("--t0", type=float, help="seen after this time (camera axis, seconds)")
    sp.add_argument("--t1", type=float, help="seen before this time")
    sp.add_argument("--as-of", type=float, help="as known at this time")
    sp.add_argument("--limit", type=int, default=200)
    sp.add_argument("--last-seen", metavar="QUERY", help="where something matching QUERY (a label, colours, text) "
                                                          "was seen last")
    sp.add_argument("--json", action="store_true", help="print JSON")
    sp.set_defaults(func=cmd_entities)
