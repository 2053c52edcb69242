"""The ``vam-engine`` command: index, info, search, summarize, ask, watch, delete, retain, demo, eval,
serve, token."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from .errors import VamError

GATES = ("blur", "low_change", "ssim", "hist", "dedup")  # image gates, then semantic dedup


_LINE_EVERY_S = 5.0  # progress written to a file or pipe: one line this often, and one at the end


class _ProgressBar:
    """Progress over all sources: stream seconds covered, with decoded/kept and x realtime. A
    tqdm bar on a terminal; elsewhere (a log file, a pipe) a plain line every few seconds and
    one at the end, not a carriage-return update per frame."""

    def __init__(self, enabled: bool, stream=None):
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._bar = None
        self._lock = threading.Lock()
        self._state: dict[str, object] = {}
        self._start = None
        self._last_line = None  # monotonic time of the last plain line
        self._dirty = False

    def __call__(self, p) -> None:
        if not self.enabled:
            return
        with self._lock:
            now = time.monotonic()
            if self._start is None:
                self._start = now
            self._state[p.uri] = p
            done, total, wall = self._figures(now)
            if not self.tty:
                self._dirty = True
                if self._last_line is None or now - self._last_line >= _LINE_EVERY_S:
                    self._line(now)
                return
            if self._bar is None:
                from tqdm import tqdm

                self._bar = tqdm(total=0, unit="s", unit_scale=False, dynamic_ncols=True, file=self.stream,
                                 bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s [{elapsed}<{remaining}{postfix}]")
            self._bar.total = total
            self._bar.n = min(done, total)
            self._bar.set_postfix_str(self._counts(done, wall), refresh=False)
            self._bar.refresh()

    def _figures(self, now: float):
        total = sum((s.duration_s or s.t_rel) for s in self._state.values())
        done = sum((s.duration_s or s.t_rel) if s.done else s.t_rel for s in self._state.values())
        return done, total, max(now - self._start, 1e-6)

    def _counts(self, done: float, wall: float) -> str:
        speed = f", {done / wall:.1f}x realtime" if wall >= 0.5 else ""  # a first line's ratio means nothing
        return (f"decoded {sum(s.decoded for s in self._state.values())}, "
                f"kept {sum(s.kept for s in self._state.values())}{speed}")

    def _line(self, now: float) -> None:
        done, total, wall = self._figures(now)
        print(f"progress: {min(done, total):.0f}/{total:.0f} s of video, {self._counts(done, wall)}",
              file=self.stream, flush=True)
        self._last_line, self._dirty = now, False

    def close(self):
        with self._lock:
            if self._bar is not None:
                self._bar.close()
            elif self._dirty:  # the end: the last state, whenever the last line was
                self._line(time.monotonic())


def _summary(reports) -> str:
    lines = []
    tot = Counter()
    for r in reports:
        if r.already_done:
            lines.append(f"{r.camera_id}: {r.uri}: already indexed (nothing to do)")
            continue
        if r.failed and r.sampled == 0:
            lines.append(f"{r.camera_id}: {r.uri}: FAILED: {r.failed}")
            continue
        drops = ", ".join(f"{g} {r.dropped.get(g, 0)}" for g in GATES)
        resumed = f" (resumed after t={r.resumed_from:.2f}s)" if r.resumed_from is not None else ""
        lines.append(f"{r.camera_id}: {r.uri}{resumed}\n  decoded {r.decoded}, sampled {r.sampled}, kept {r.kept}; "
                     f"dropped: {drops}\n  {r.content_s:.1f} s of video in {r.wall_s:.2f} s wall = "
                     f"{r.x_realtime:.1f}x realtime")
        if r.failed:
            lines.append(f"  stopped early: {r.failed}")
        for e in r.errors:
            lines.append(f"  note: {e}")
        tot.update(sampled=r.sampled, kept=r.kept, content=r.content_s)
    if len(reports) > 1 and reports:
        wall = max(r.wall_s for r in reports)
        lines.append(f"total: sampled {tot['sampled']}, kept {tot['kept']}, {tot['content']:.1f} s of video "
                     f"in {wall:.2f} s = {tot['content'] / wall if wall else 0:.1f}x realtime")
    return "\n".join(lines)


def _engine(args, *, existing: bool = True):
    """The engine a command needs. ``existing``: the store must be there already (every
    command but index and demo: reading a path that is not a store must not create one)."""
    from .config import EngineConfig
    from .engine import Engine

    if existing:
        _check_store(args.store)
    over = {"ingest": {}}
    if getattr(args, "fps", None) is not None:
        over["ingest"]["fps"] = args.fps
    if getattr(args, "keyframes_only", False):
        over["ingest"]["keyframes_only"] = True
    if getattr(args, "llm", None):
        from .llm import parse_llm_spec

        over["llm"] = parse_llm_spec(args.llm)
    if getattr(args, "text_model", None):
        over["embed"] = {"text_model": args.text_model}
    cfg = EngineConfig.load(args.config, device=args.device, **over)
    if getattr(args, "documents_optional", False) and cfg.embed.text_model is None and cfg.embed.body == "descriptor":
        # watch: event documents need a text embedder; without one it watches and indexes only
        cfg = cfg.model_copy(update={"writer": cfg.writer.model_copy(update={"enabled": False})})
    return Engine(args.store, cfg)


def _check_store(store: str) -> None:
    from .errors import StoreError

    if not (Path(store) / "store.sqlite").is_file():
        raise StoreError(f"{store}: not a vam_engine store (no store.sqlite): index something into it first")


def _wait_for_documents(eng, quiet: bool) -> None:
    """After indexing with a model: show the writer draining its queue, then its figures."""
    if eng.writer is None:
        return
    from tqdm import tqdm

    start = eng.writer.stats()
    total = start.pending_events
    tty = sys.stderr.isatty()
    last = time.monotonic()
    with tqdm(total=total, unit="doc", desc="documents", disable=quiet or total == 0 or not tty) as bar:
        while not eng.wait_for_documents(timeout=0.5):
            s = eng.writer.stats()
            bar.n = max(0, total - s.pending_events)
            bar.set_postfix(stale_nodes=s.stale_nodes, failures=s.failures, refresh=False)
            bar.refresh()
            if not tty and not quiet and time.monotonic() - last >= _LINE_EVERY_S:
                last = time.monotonic()
                print(f"documents: {max(0, total - s.pending_events)}/{total}, stale nodes {s.stale_nodes}, "
                      f"failures {s.failures}", file=sys.stderr, flush=True)
        bar.n = total
    s = eng.writer.stats()
    print(f"writer: {s.documents} event documents, {s.merges} forest summaries, {s.failures} failed attempts "
          f"(retried), {s.model_s:.1f} s in the model, tokens {s.prompt_tokens} in ({s.cached_tokens} cached) / "
          f"{s.completion_tokens} out")


def cmd_index(args) -> int:
    if getattr(args, "live", False) or getattr(args, "realtime", False):  # demo reuses this without them
        from .live_cli import cmd_index_live

        return cmd_index_live(args)
    bar = _ProgressBar(not args.quiet)
    with _engine(args, existing=False) as eng:
        try:
            reports = eng.index_files(args.videos, args.camera or None, progress=bar, on_open_error="report")
        finally:
            bar.close()
        print(_summary(reports))
        _wait_for_documents(eng, args.quiet)
    for r in reports:
        if r.failed and r.sampled == 0 and not r.already_done:
            print(f"vam-engine: error: {r.uri}: {r.failed}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps([_report_dict(r) for r in reports], indent=2))
    return 1 if any(r.failed and r.sampled == 0 and not r.already_done for r in reports) else 0


def _report_dict(r) -> dict:
    d = dict(r.__dict__)
    d["dropped"] = dict(r.dropped)
    d["x_realtime"] = r.x_realtime
    return d


def cmd_info(args) -> int:
    from .memory.store import Store

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
    for s in info["sources"]:
        state = "done" if s["done"] else f"in progress (committed up to t={s['progress_t']})"
        print(f"  source {s['source_id']} [{s['camera_id']}] {s['uri']} ({s['sampling']}): {state}")
    return 0


def _fmt_t(t: float) -> str:
    from .memory.records import is_absolute_time

    if is_absolute_time(t):  # unix seconds
        import datetime as dt

        return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return f"{t:9.2f}s"


def cmd_search(args) -> int:
    if not args.text and not args.image:
        raise VamError("search needs a text query or --image PATH")
    with _engine(args) as eng:
        res = eng.search(text=args.text, image=args.image, top_k=args.top_k, cameras=args.camera,
                         time_range=(args.t0, args.t1) if args.t0 is not None or args.t1 is not None else None,
                         as_of=args.as_of)
    for note in res.notes:
        print(f"note: {note}")
    if not res.evidence:
        print("no results")
        return 0
    print(f"{'#':>3}  {'source':6}  {'camera':12}  {'from':>19}  {'to':>19}  {'score':>7}  frame")
    for i, ev in enumerate(res.evidence, 1):
        frame = ev.frame_paths[0] if ev.frame_paths else "-"
        print(f"{i:>3}  {ev.source:6}  {ev.camera_id[:12]:12}  {_fmt_t(ev.t_start):>19}  {_fmt_t(ev.t_end):>19}  "
              f"{ev.score:7.4f}  {frame}")
    return 0


def cmd_summarize(args) -> int:
    with _engine(args) as eng:
        docs = eng.summarize((args.t0, args.t1), args.granularity, args.prompt, cameras=args.camera,
                             structure=args.structure)
    for d in docs:
        print(f"[{d.camera_id}] {_fmt_t(d.t0)} .. {_fmt_t(d.t1)}\n  " + d.text.replace("\n", "\n  "))
    print(f"{len(docs)} summary documents written")
    return 0


def cmd_ask(args) -> int:
    with _engine(args) as eng:
        ans = eng.ask(args.question, as_of=args.as_of, camera=args.camera, mode=args.mode, max_turns=args.max_turns)
    if args.json:
        print(json.dumps({"text": ans.text, "found": ans.found, "mode": ans.mode,
                          "evidence": [e.__dict__ for e in ans.evidence], "trace": [t.to_dict() for t in ans.trace],
                          "tokens": ans.tokens, "timings": ans.timings}, indent=2, default=str))
        return 0 if ans.found else 1
    print(ans.text)
    for i, e in enumerate(ans.evidence[:args.citations]):
        frames = ", ".join(e.frame_paths[:3]) + (" ..." if len(e.frame_paths) > 3 else "")
        print(f"  [{i + 1}] {e.camera_id} {_fmt_t(e.t_start)} .. {_fmt_t(e.t_end)} ({e.source}) {frames}")
    stages = ", ".join(f"{k} {v:.2f} s" for k, v in ans.timings.items())
    print(f"{ans.mode}: {len(ans.trace)} turns; tokens {ans.tokens['prompt']} in ({ans.tokens['cached']} cached) / "
          f"{ans.tokens['completion']} out; {stages}")
    return 0 if ans.found else 1


def cmd_delete(args) -> int:
    if args.t0 is not None and args.t1 is not None and args.t0 > args.t1:
        raise VamError(f"delete: --t0 {args.t0:g} is after --t1 {args.t1:g}: give t0 <= t1")
    if not args.yes:
        raise VamError("delete removes frames, rows and vectors for good: add --yes to confirm")
    with _engine(args) as eng:
        out = eng.delete(cameras=args.camera,
                         time_range=(args.t0, args.t1) if args.t0 is not None or args.t1 is not None else None)
    print(f"deleted {out.moments} moments, {out.events} events, {out.vectors} vectors")
    return 0


def _mb(nbytes: int | None) -> str:
    return "?" if nbytes is None else f"{nbytes / 1e6:.2f} MB"


def cmd_retain(args) -> int:
    from dataclasses import asdict

    from .engine import retain_store

    _check_store(args.store)
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


def cmd_demo(args) -> int:
    from .synthetic.demo import make_demo_clip

    work = Path(args.dir or tempfile.mkdtemp(prefix="vam-demo-"))
    clip = make_demo_clip(work / "demo.mp4")
    print(f"demo clip: {clip['path']} ({clip['duration_s']:.0f} s, {clip['size'][0]}x{clip['size'][1]} "
          f"at {clip['fps']} fps); scenes: " + ", ".join(f"{k}@{t:.0f}s" for t, k in clip["scenes"]))
    args.store = args.store or str(work / "store")
    args.videos = [clip["path"]]
    args.camera = None
    args.json = None
    rc = cmd_index(args)
    print(f"store: {args.store}  (try: vam-engine info --store {args.store})")
    return rc


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vam-engine", description="Streaming visual-memory engine")
    sub = p.add_subparsers(dest="cmd", required=True)

    # option groups, each given only to the commands that use it
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument("--store", required=True, help="store directory")
    engine = argparse.ArgumentParser(add_help=False)
    engine.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    engine.add_argument("--config", help="JSON or TOML config file")
    ingest = argparse.ArgumentParser(add_help=False)
    ingest.add_argument("--fps", type=float, help="base sampling rate (default 0.5)")
    ingest.add_argument("--keyframes-only", action="store_true",
                        help="decode keyframes only, taking the nearest keyframe to each tick")
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument("-q", "--quiet", action="store_true", help="no progress")
    model = argparse.ArgumentParser(add_help=False)
    model.add_argument("--llm", help="the model: openai:URL#MODEL (an OpenAI-compatible server) or "
                                     "local:DIR (a Qwen-VL checkpoint directory)")
    texts = argparse.ArgumentParser(add_help=False)
    texts.add_argument("--text-model", help="text embedder for documents, e.g. 'minilm'")
    cameras = argparse.ArgumentParser(add_help=False)
    cameras.add_argument("--camera", action="append", help="only these cameras (repeatable)")

    sp = sub.add_parser("index", parents=[store, engine, ingest, model, texts, quiet],
                        help="index video files or stream URLs (concurrently, one camera each)")
    sp.add_argument("videos", nargs="+")
    sp.add_argument("--camera", action="append", help="camera id per video, in order (default: file stem)")
    sp.add_argument("--json", help="also write the per-source reports to this JSON file")
    sp.add_argument("--live", action="store_true", help="live cameras: reconnect on loss, until Ctrl-C")
    sp.add_argument("--realtime", action="store_true", help="live, files played at 1x (implies --live)")
    sp.add_argument("--stall-s", type=float, default=20.0, help="live: reconnect after this long without a frame")
    sp.add_argument("--max-retries", type=int, help="live: give up after this many failed reconnections")
    sp.add_argument("--duration", type=float, help="live: stop after this many seconds")
    sp.set_defaults(func=cmd_index)

    sp = sub.add_parser("info", parents=[store], help="summarize a store")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=cmd_info)

    sp = sub.add_parser("search", parents=[store, engine, texts, cameras],
                        help="search a store by text or image; prints evidence with times and frames")
    sp.add_argument("text", nargs="?")
    sp.add_argument("--image", help="query image file")
    sp.add_argument("--top-k", type=int, default=10)
    sp.add_argument("--t0", type=float, help="interval start (camera axis, seconds)")
    sp.add_argument("--t1", type=float, help="interval end")
    sp.add_argument("--as-of", type=float, help="nothing that ends after this time")
    sp.set_defaults(func=cmd_search)

    sp = sub.add_parser("summarize", parents=[store, engine, model, texts, cameras],
                        help="write searchable summary documents per time window (needs --llm)")
    sp.add_argument("prompt", help="what the summaries should focus on")
    sp.add_argument("--t0", type=float, required=True, help="range start (camera axis, seconds)")
    sp.add_argument("--t1", type=float, required=True, help="range end")
    sp.add_argument("--granularity", type=float, default=60.0, help="window length in seconds (default 60)")
    sp.add_argument("--structure", help="a label stored with the summaries, for later filtering")
    sp.set_defaults(func=cmd_summarize)

    sp = sub.add_parser("ask", parents=[store, engine, model, texts, cameras],
                        help="answer a question from the memory, with cited intervals and frames (needs --llm)")
    sp.add_argument("question")
    sp.add_argument("--as-of", type=float, help="answer as of this time: nothing later is seen")
    sp.add_argument("--mode", choices=("auto", "two_phase", "agentic"), default="auto")
    sp.add_argument("--max-turns", type=int, default=6, help="planner turns at most (agentic)")
    sp.add_argument("--citations", type=int, default=5, help="evidence lines to print")
    sp.add_argument("--json", action="store_true", help="print the whole answer (trace included) as JSON")
    sp.set_defaults(func=cmd_ask)

    from . import cli_watch

    cli_watch.add_parser(sub, [store, engine, ingest, model, texts, quiet])
    sub.choices["watch"].set_defaults(func=lambda a: cli_watch.cmd_watch(a, _engine))

    sp = sub.add_parser("delete", parents=[store, engine, model, texts, cameras],
                        help="delete moments, frames and vectors of cameras / a time range")
    sp.add_argument("--t0", type=float, help="range start (camera axis, seconds)")
    sp.add_argument("--t1", type=float, help="range end (>= --t0)")
    sp.add_argument("--yes", action="store_true", help="confirm")
    sp.set_defaults(func=cmd_delete)

    sp = sub.add_parser("retain", parents=[store],
                        help="run one retention pass now: thin old moments, re-encode old frames, report")
    sp.add_argument("--config", help="JSON or TOML config file (its retention section applies)")
    sp.add_argument("--json", action="store_true", help="print the pass's report as JSON")
    sp.set_defaults(func=cmd_retain)

    sp = sub.add_parser("demo", parents=[engine, ingest, model, texts, quiet],
                        help="generate a short clip with known scene changes, index it, summarize")
    sp.add_argument("--store", help="store directory (default: DIR/store)")
    sp.add_argument("--dir", help="where to write the clip and store (default: a new temp dir)")
    sp.set_defaults(func=cmd_demo)

    from .eval.cli import add_parser as add_eval_parser  # the evaluation harness (vam_engine/eval)

    add_eval_parser(sub, [engine, model, texts, quiet])
    from .server.cli import add_parsers as add_server_parsers  # serve, token

    add_server_parsers(sub, store=store, engine=engine, model=model, texts=texts)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (VamError, ValueError) as e:
        print(f"vam-engine: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vam-engine: interrupted; committed work is kept and the next run resumes", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
