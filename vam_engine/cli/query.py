"""The commands that read a store or change what it holds: info, search, transcripts, summarize,
ask, delete, retain. Reading never changes a store (info, search, transcripts and ask start no
background work)."""
from __future__ import annotations

import json

from ..errors import VamError
from .common import check_store, fmt_t, make_engine


def cmd_info(args) -> int:
    from ..memory import Store

    store = Store(args.store, create=False)
    info = store.info()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"store {info['root']} (schema {info['schema_version']}): {info['moments']} moments, "
          f"{info['frame_bytes'] / 1e6:.1f} MB of frames")
    for cam, c in info["cameras"].items():
        print(f"  camera {cam}: {c['moments']} moments, t {c['t_first']:.2f} .. {c['t_last']:.2f} s")
    print("  samples: " + ", ".join(f"{k} {v}" for k, v in sorted(info["samples"].items())))
    print(f"  events: {info['events']} ({info['documented_events']} documented), summaries: {info['summaries']}; "
          "vectors: " + (", ".join(f"{k} {v}" for k, v in sorted(info["vectors"].items()))
                                                      or "none") + "; tiers: "
          + ", ".join(f"{k} {v}" for k, v in sorted(info["tiers"].items())))
    said = store.transcripts.counts()
    print(f"  transcripts: {info['transcripts']} segments" + (" (" + ", ".join(f"{c} {n}" for c, n in sorted(
        said.items())) + ")" if said else ""))
    for s in info["sources"]:
        state = "done" if s["done"] else f"in progress (committed up to t={s['progress_t']})"
        print(f"  source {s['source_id']} [{s['camera_id']}] {s['uri']} ({s['sampling']}): {state}")
    return 0


def cmd_transcripts(args) -> int:
    from ..memory import Store

    check_store(args.store)
    store = Store(args.store, create=False)
    try:
        segs = store.transcripts.list(args.camera, args.t0, args.t1, as_of=args.as_of, limit=args.limit)
    finally:
        store.close()
    if args.json:
        print(json.dumps([s.__dict__ for s in segs], indent=2, ensure_ascii=False))
        return 0
    if not segs:
        print("no transcript segments")
        return 0
    for s in segs:
        conf = "" if s.confidence is None else f" ({s.confidence:.2f})"
        print(f"[{s.camera_id}] {fmt_t(s.t_start)} .. {fmt_t(s.t_end)}{conf}: {s.text}")
    return 0


def cmd_search(args) -> int:
    if not args.text and not args.image:
        raise VamError("search needs a text query or --image PATH")
    with make_engine(args) as eng:
        res = eng.search(text=args.text, image=args.image, top_k=args.top_k, cameras=args.camera,
                         time_range=(args.t0, args.t1) if args.t0 is not None or args.t1 is not None else None,
                         as_of=args.as_of, labels=args.label)
    for note in res.notes:
        print(f"note: {note}")
    if not res.evidence:
        print("no results")
        return 0
    print(f"{'#':>3}  {'source':7}  {'camera':12}  {'from':>19}  {'to':>19}  {'score':>7}  frame")
    for i, ev in enumerate(res.evidence, 1):
        frame = ev.frame_paths[0] if ev.frame_paths else "-"
        print(f"{i:>3}  {ev.source:7}  {ev.camera_id[:12]:12}  {fmt_t(ev.t_start):>19}  {fmt_t(ev.t_end):>19}  "
              f"{ev.score:7.4f}  {frame}")
        if ev.source == "speech":
            print(f"     said: \"{ev.text}\"")
        if ev.source in ("ocr", "object") and ev.text:  # what was read or detected, and where on the frame
            box = next((b for b in ev.boxes if ev.moment_ids and b.moment_id == ev.moment_ids[0]), None)
            print(f"     {ev.text!r}" + (f" at box {[round(v) for v in box.box]}" if box else ""))
    return 0


def cmd_summarize(args) -> int:
    with make_engine(args) as eng:
        docs = eng.summarize((args.t0, args.t1), args.granularity, args.prompt, cameras=args.camera,
                             structure=args.structure)
    for d in docs:
        print(f"[{d.camera_id}] {fmt_t(d.t0)} .. {fmt_t(d.t1)}\n  " + d.text.replace("\n", "\n  "))
    print(f"{len(docs)} summary documents written")
    return 0


def cmd_ask(args) -> int:
    with make_engine(args) as eng:
        ans = eng.ask(args.question, as_of=args.as_of, camera=args.camera, mode=args.mode, max_turns=args.max_turns)
    if args.json:
        print(json.dumps({"text": ans.text, "found": ans.found, "mode": ans.mode,
                          "evidence": [e.__dict__ for e in ans.evidence], "trace": [t.to_dict() for t in ans.trace],
                          "tool_citations": [c.to_json() for c in ans.tool_citations],
                          "position": ans.position, "tokens": ans.tokens, "timings": ans.timings}, indent=2,
                         default=lambda o: o.to_json() if hasattr(o, "to_json") else str(o)))
        return 0 if ans.found else 1
    print(ans.text)
    for i, e in enumerate(ans.evidence[:args.citations]):
        frames = ", ".join(e.frame_paths[:3]) + (" ..." if len(e.frame_paths) > 3 else "")
        seen = f" seen at {e.pose.where()}" if e.pose is not None else ""
        print(f"  [{i + 1}] {e.camera_id} {fmt_t(e.t_start)} .. {fmt_t(e.t_end)} ({e.source}){seen} {frames}")
    for i, c in enumerate(ans.tool_citations):
        print(f"  [tool {i + 1}] {c.tool}: {c.title} <{c.url}>")
    stages = ", ".join(f"{k} {v:.2f} s" for k, v in ans.timings.items())
    print(f"{ans.mode}: {len(ans.trace)} turns; tokens {ans.tokens['prompt']} in ({ans.tokens['cached']} cached) / "
          f"{ans.tokens['completion']} out; {stages}")
    return 0 if ans.found else 1


def cmd_delete(args) -> int:
    if args.t0 is not None and args.t1 is not None and args.t0 > args.t1:
        raise VamError(f"delete: --t0 {args.t0:g} is after --t1 {args.t1:g}: give t0 <= t1")
    if not args.yes:
        raise VamError("delete removes frames, rows and vectors for good: add --yes to confirm")
    with make_engine(args) as eng:
        out = eng.delete(cameras=args.camera,
                         time_range=(args.t0, args.t1) if args.t0 is not None or args.t1 is not None else None)
    print(f"deleted {out.moments} moments, {out.events} events, {out.vectors} vectors")
    return 0


def _mb(nbytes: int | None) -> str:
    return "?" if nbytes is None else f"{nbytes / 1e6:.2f} MB"


def cmd_retain(args) -> int:
    from dataclasses import asdict

    from ..engine import retain_store

    check_store(args.store)
    rep = retain_store(args.store, args.config)
    if args.json:
        print(json.dumps(asdict(rep), indent=2))
        return 1 if rep.errors else 0
    print(f"retention: {rep.examined} moments examined over {rep.cameras_total} cameras; thinned {rep.deleted}, "
          f"re-encoded {rep.reencoded} ({rep.retiered} moved to an older tier); frames {_mb(rep.bytes_before)} -> "
          f"{_mb(rep.bytes_after)}; kept per tier: " + ", ".join(f"{k} {v}" for k, v in rep.kept_per_tier.items()))
    if rep.budget_met is False:
        print(f"  the disk budget ({_mb(rep.budget_bytes)}) is not met: only protected moments are left to thin")
    for e in rep.errors:
        print(f"  error: {e}")
    return 1 if rep.errors else 0


def register(sub, g) -> None:
    sp = sub.add_parser("info", parents=[g.store], help="summarize a store")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=cmd_info)

    sp = sub.add_parser("search", parents=[g.store, g.engine, g.texts, g.cameras],
                        help="search a store by text or image; prints evidence with times and frames")
    sp.add_argument("text", nargs="?")
    sp.add_argument("--image", help="query image file")
    sp.add_argument("--top-k", type=int, default=10)
    sp.add_argument("--t0", type=float, help="interval start (camera axis, seconds)")
    sp.add_argument("--t1", type=float, help="interval end")
    sp.add_argument("--as-of", type=float, help="nothing that ends after this time")
    sp.add_argument("--label", action="append", help="only hits showing a detected thing of this class (repeatable)")
    sp.set_defaults(func=cmd_search)

    sp = sub.add_parser("transcripts", parents=[g.store, g.cameras],
                        help="what was said: transcript segments by camera and time")
    sp.add_argument("--t0", type=float, help="interval start (camera axis, seconds)")
    sp.add_argument("--t1", type=float, help="interval end")
    sp.add_argument("--as-of", type=float, help="nothing that ends after this time")
    sp.add_argument("--limit", type=int, help="at most this many segments")
    sp.add_argument("--json", action="store_true", help="print JSON")
    sp.set_defaults(func=cmd_transcripts)

    sp = sub.add_parser("summarize", parents=[g.store, g.engine, g.model, g.texts, g.cameras],
                        help="write searchable summary documents per time window (needs --llm)")
    sp.add_argument("prompt", help="what the summaries should focus on")
    sp.add_argument("--t0", type=float, required=True, help="range start (camera axis, seconds)")
    sp.add_argument("--t1", type=float, required=True, help="range end")
    sp.add_argument("--granularity", type=float, default=60.0, help="window length in seconds (default 60)")
    sp.add_argument("--structure", help="a label stored with the summaries, for later filtering")
    sp.set_defaults(func=cmd_summarize)

    sp = sub.add_parser("ask", parents=[g.store, g.engine, g.model, g.texts, g.cameras, g.tools],
                        help="answer a question from the memory, with cited intervals and frames (needs --llm)")
    sp.add_argument("question")
    sp.add_argument("--as-of", type=float, help="answer as of this time: nothing later is seen")
    sp.add_argument("--mode", choices=("auto", "two_phase", "agentic"), default="auto")
    sp.add_argument("--max-turns", type=int, default=6, help="planner turns at most (agentic)")
    sp.add_argument("--citations", type=int, default=5, help="evidence lines to print")
    sp.add_argument("--json", action="store_true", help="print the whole answer (trace included) as JSON")
    sp.set_defaults(func=cmd_ask)

    sp = sub.add_parser("delete", parents=[g.store, g.engine, g.model, g.texts, g.cameras],
                        help="delete moments, frames and vectors of cameras / a time range")
    sp.add_argument("--t0", type=float, help="range start (camera axis, seconds)")
    sp.add_argument("--t1", type=float, help="range end (>= --t0)")
    sp.add_argument("--yes", action="store_true", help="confirm")
    sp.set_defaults(func=cmd_delete)

    sp = sub.add_parser("retain", parents=[g.store],
                        help="run one retention pass now: thin old moments, re-encode old frames, report")
    sp.add_argument("--config", help="JSON or TOML config file (its retention section applies)")
    sp.add_argument("--json", action="store_true", help="print the pass's report as JSON")
    sp.set_defaults(func=cmd_retain)
