"""``vam-engine index`` (files, or live sources with ``--live``/``--realtime``: live.py): progress
while indexing, a summary per source, then the document writer draining its queue when a model
writes documents. ``vam-engine demo`` (demo.py) indexes its clip through ``cmd_index``."""
from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from .common import audio_line, fmt_t, make_engine

GATES = ("blur", "low_change", "ssim", "hist", "dedup")  # image gates, then semantic dedup
LINE_EVERY_S = 5.0  # progress written to a file or pipe: one line this often, and one at the end


class ProgressBar:
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
                if self._last_line is None or now - self._last_line >= LINE_EVERY_S:
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


def summary_lines(reports) -> str:
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
        if r.audio is not None:
            lines.append("  " + audio_line(r.audio))
        for e in r.errors:
            lines.append(f"  note: {e}")
        tot.update(sampled=r.sampled, kept=r.kept, content=r.content_s)
    if len(reports) > 1 and reports:
        wall = max(r.wall_s for r in reports)
        lines.append(f"total: sampled {tot['sampled']}, kept {tot['kept']}, {tot['content']:.1f} s of video "
                     f"in {wall:.2f} s = {tot['content'] / wall if wall else 0:.1f}x realtime")
    return "\n".join(lines)


def wait_for_documents(eng, quiet: bool) -> None:
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
            if not tty and not quiet and time.monotonic() - last >= LINE_EVERY_S:
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
        from .live import cmd_index_live

        return cmd_index_live(args)
    bar = ProgressBar(not args.quiet)
    with make_engine(args, existing=False) as eng:
        try:
            reports = eng.index_files(args.videos, args.camera or None, progress=bar, on_open_error="report")
        finally:
            bar.close()
        print(summary_lines(reports))
        wait_for_documents(eng, args.quiet)
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


def register(sub, g) -> None:
    sp = sub.add_parser("index", parents=[g.store, g.engine, g.ingest, g.model, g.texts, g.audio, g.quiet,
                                          g.perception],
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
