"""``vam-engine watch CONDITION``: index the given sources (or follow a store another process
indexes) and print each alert as it fires, a line each (``--json``: JSON lines)."""
from __future__ import annotations

import json
import sys
import threading
import time

from .common import make_engine


def alert_line(a, as_json: bool) -> str:
    if as_json:
        return json.dumps(a.to_json())
    when = f"t={a.t:.2f}s" + (f" ({time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(a.t_abs))})" if a.t_abs else "")
    return f"ALERT {when} camera={a.camera_id} confidence={a.confidence:.2f} monitor={a.monitor_id}: {a.observed}"


def cmd_watch(args) -> int:
    from ..engine import StoreFollower

    with make_engine(args, existing=not args.videos, documents=False) as eng:
        # with sources, --camera names their cameras (one each); without, the cameras to watch
        m = eng.watch(args.condition, cameras=None if args.videos else args.camera or None, images=args.image or None,
                      mode=args.mode, min_confidence=args.min_confidence, every_s=args.every, frames=args.frames)
        print(f"watching for {m.condition!r} (monitor {m.monitor_id}, {m.mode})", file=sys.stderr, flush=True)
        lock = threading.Lock()

        def show(a):  # on the monitor thread that fired, as it fires
            with lock:
                print(alert_line(a, args.json), flush=True)
        sub = eng.subscribe_alerts(callback=show)
        follower = None
        try:
            if args.videos:
                eng.index_files(args.videos, args.camera or None, on_open_error="report")
                eng.flush()
                eng.wait_for_monitors()
            else:
                follower = StoreFollower(eng.store, eng.working).start()
                deadline = None if args.duration is None else time.monotonic() + args.duration
                while deadline is None or time.monotonic() < deadline:
                    time.sleep(0.2)
                    if not eng.store.monitors.get(m.monitor_id).active:
                        break  # a once monitor fired (or another client ended it)
                eng.wait_for_monitors(30)
        finally:
            if follower is not None:
                follower.stop()
            sub.close()
            st = eng.monitor_stats()
            print(f"monitor: {st.checks} checks, {st.model_calls} model calls, {st.skipped_unchanged} skipped "
                  f"unchanged, {st.skipped_dissimilar} skipped dissimilar, {st.dropped} dropped behind the model, "
                  f"{st.malformed} unusable verdicts, {st.alerts} alerts", file=sys.stderr, flush=True)
            eng.unwatch(m.monitor_id)  # the command's monitor ends with it (its alerts stay)
    return 0


def register(sub, g) -> None:
    sp = sub.add_parser("watch", parents=[g.store, g.engine, g.ingest, g.model, g.texts, g.audio, g.quiet,
                                          g.perception],
                        help="watch for a condition and print each alert (needs --llm); indexes the given "
                             "sources, or follows a store another process is indexing")
    sp.add_argument("condition", help="what to watch for, e.g. 'a person at the door'")
    sp.add_argument("videos", nargs="*", help="sources to index while watching (none: follow the store)")
    sp.add_argument("--camera", action="append", help="camera id per source, in order; without sources: "
                                                      "only watch these cameras (repeatable)")
    sp.add_argument("--image", action="append", help="a reference image of the condition (repeatable)")
    sp.add_argument("--mode", choices=("once", "repeat"), default="repeat")
    sp.add_argument("--min-confidence", type=float, default=0.6)
    sp.add_argument("--every", type=float, default=2.0, help="seconds of stream time between checks")
    sp.add_argument("--frames", type=int, default=4, help="latest frames each check looks at")
    sp.add_argument("--duration", type=float, help="following a store: stop after this many seconds")
    sp.add_argument("--json", action="store_true", help="JSON lines")
    sp.set_defaults(func=cmd_watch)
