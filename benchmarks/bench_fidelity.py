"""Fidelity: does the index keep the evidence? Generated clips with ground-truth segments, made of
real photographs (scikit-image's bundled pictures), through the engine and through the seed's
per-frame gates.

Clips (640x360 at 30 fps unless said; ``--quick``: 320x180 at 15 fps, shorter shots):

- ``pans_static``: photographs under slow pans, static stretches, cuts;
- ``defocus``: sharp views, the same views heavily out of focus (Gaussian blur), refocused;
- ``digits``: a still page with a counter display whose digits change every few seconds;
- ``sprite``: a 24x24 picture crossing a static scene (and once stopping in it);
- ``low_texture``: a normal view, then sharp low-texture scenes (the moon, fog, night);
- ``low_texture_only``: a camera that only ever sees low-texture scenes, with one defocus;
- ``vfr_1080p``: 1920x1080, variable frame rate (10-30 fps runs, jitter, stalls), PTS starting at
  t = 3600 s: a photo wall, its pan, a retina image, a sprite, a defocus.
- ``cut_defocus_360p``, ``cut_defocus_720p_vfr`` (1280x720), ``cut_defocus_1080p_vfr`` (1920x1080,
  both variable frame rate as above): cuts from a sharp view straight into another view heavily
  out of focus for 6 s, which then comes into focus.

Segments (clip-relative seconds, the engine's ``t_rel``): must-keep ``scene`` (a new view),
``pan`` (each stretch over which the view moved by half a frame), ``digits`` (each value shown),
``object`` (the sprite fully in view); ``low_texture`` (a new low-texture view, or its pan
stretches); ``blur`` (heavy defocus: nothing in it should be kept). A segment is recalled when at
least one kept moment lies inside it.

Methods, each clip in a fresh temp store / state:

- ``engine``: ``Engine(store, device="cpu")`` (default config) ``.index_file``; kept = ``moments()``;
  the gate log (``store.moments.gate_log()``) says which gate dropped each sample;
- ``seed``: the baseline, the seed's gates frame by frame (VAM): PyAV decode, sample at the same
  rate (first frame at or after each tick), RGB -> gray with OpenCV, drop blur if
  ``cv2.Laplacian(gray).var() < 20``, drop if mean |gray - last kept| < 20, drop if SSIM of 64x64
  thumbnails vs last kept > 0.92 (scikit-image).

- ``low_texture_motion_360p``, ``_720p``, ``_1080p`` (10 fps): sharp low-texture scenes under slow
  pans and zooms with light sensor noise, each after a normal view: a microscope's cells (45 s,
  smooth at the thumbnail's scale: the blur rule alone reads it as defocused), clouds, fog, a
  dark room with little contrast.

Views: the spans between cuts (each clip's shots say which start one); a view is all-blurred when
every segment in it is a heavy-blur one.

Targets (issues 12 and 27), for the engine: must-keep recall 1.0 (small objects and digit changes
included), low-texture recall >= 0.95, no blurred frame kept but for one marked (the gates' view
rule: the sharpest of a view none of whose samples passed the blur rule) per all-blurred view and
none in a view with a sharp part, no view of 4 s or more without a kept moment, every kept
timestamp a real frame PTS, and no more frames kept per minute than the seed on clips with no small
change and no low-texture scene (on those the seed keeps nothing by construction).

    python benchmarks/bench_fidelity.py              # all clips (~12 min of video), ~3-5 min on 2 cores
    python benchmarks/bench_fidelity.py --quick      # smoke run
    python benchmarks/bench_fidelity.py --clips digits,sprite --fps 1

Generated clips (benchmarks/_fidelity_clips.py) are cached under benchmarks/results/fidelity_clips/
keyed by their parameters and the generating code (``--cache-dir``; ``--no-cache`` writes to a
temp dir).
"""
from __future__ import annotations

import argparse
import bisect
import math
import os
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from _common import RESULTS_DIR, print_table, write_json
from _fidelity_clips import (BLUR, CLIPS, KINDS, LOW_TEXTURE, MUST_KEEP, PTS_TOL, SMALL, Clip, Params,  # noqa: F401
                             Segment, View, crossing, make_clip, pan, params_for)

SEED_BLUR, SEED_MAD, SEED_SSIM = 20.0, 20.0, 0.92  # the seed's gates (VAM), fixed here on purpose
MIN_VIEW_S = 4.0  # a view at least this long must keep a moment (issue 27)
LOW_TEXTURE_RECALL = 0.95


# -- metrics ------------------------------------------------------------------------------------------
@dataclass
class Recall:
    hit: int
    total: int

    @property
    def value(self) -> float | None:
        return self.hit / self.total if self.total else None


def recall(kept: list, segments: list, kinds) -> Recall:
    """Segments of ``kinds`` with at least one kept time inside them, of all segments of those kinds."""
    segs = [s for s in segments if s.kind in kinds]
    return Recall(sum(any(s.contains(t) for t in kept) for s in segs), len(segs))


def blurred_kept(kept: list, segments: list) -> int:
    """Kept times that lie inside a heavy-blur segment."""
    blur = [s for s in segments if s.kind == BLUR]
    return sum(any(s.contains(t) for s in blur) for t in kept)


def views_without_moment(kept: list, views: list, min_s: float = MIN_VIEW_S) -> list:
    """Views of at least ``min_s`` seconds with no kept time inside them."""
    return [v for v in views if v.t1 - v.t0 >= min_s and not any(v.contains(t) for t in kept)]


def marked_blur(marked: list, segments: list, views: list) -> dict:
    """Where the frames kept marked blurred (the gates' view rule) lie: inside heavy-blur
    segments of views with a sharp part (``in_sharp_views``: there should be none), and the
    most inside any one all-blurred view (``per_blurred_view``: at most one)."""
    blur = [s for s in segments if s.kind == BLUR]
    in_blur = [t for t in marked if any(s.contains(t) for s in blur)]
    sharp = [t for t in in_blur if not any(v.blurred and v.contains(t) for v in views)]
    per_view = [sum(v.contains(t) for t in marked) for v in views if v.blurred]
    return {"in_blur": len(in_blur), "in_sharp_views": len(sharp), "per_blurred_view": max(per_view, default=0)}


def kept_per_minute(n_kept: int, duration_s: float) -> float:
    if duration_s <= 0:
        raise ValueError(f"kept_per_minute: duration {duration_s} s must be positive")
    return n_kept * 60.0 / duration_s


def off_pts(kept: list, frame_times: list, tol: float = PTS_TOL) -> list:
    """Kept times that are not (within ``tol``) the time of one of the clip's frames."""
    ft = sorted(frame_times)
    bad = []
    for t in kept:
        i = bisect.bisect_left(ft, t - tol)
        if not (i < len(ft) and abs(ft[i] - t) <= tol):
            bad.append(t)
    return bad


@dataclass
class Sample:
    """One sampled frame and what the gates made of it (dropped_by None: kept)."""
    t: float
    lap_var: float
    mad: float | None
    ssim: float | None
    dropped_by: str | None


@dataclass
class Run:
    method: str
    kept: list
    samples: list
    seconds: float
    marked: list = field(default_factory=list)  # kept times marked blurred (the engine's view rule)


def score(clip: Clip, run: Run) -> dict:
    """The metrics of one method on one clip, and for each missed segment the gates that dropped
    the samples inside it."""
    k, segs = run.kept, clip.segments
    bad = off_pts(k, clip.frame_times)
    marked = set(run.marked)
    unmarked = [t for t in k if t not in marked]
    missed = []
    for s in segs:
        if s.kind == BLUR or any(s.contains(t) for t in k):
            continue
        inside = [x for x in run.samples if s.contains(x.t)]
        missed.append({"kind": s.kind, "t0": s.t0, "t1": s.t1, "note": s.note, "samples": len(inside),
                       "dropped_by": dict(Counter(x.dropped_by or "kept?" for x in inside)),
                       "lap_var": [round(x.lap_var, 2) for x in inside],
                       "mad": [None if x.mad is None else round(x.mad, 2) for x in inside]})
    per_kind = {kd: asdict(recall(k, segs, (kd,))) for kd in KINDS if kd != BLUR}
    per_segment = []
    for s in segs:  # every segment's outcome and statistics, for whoever tunes a gate on these clips
        inside = [x for x in run.samples if s.contains(x.t)]
        mads = [x.mad for x in inside if x.mad is not None]
        ssims = [x.ssim for x in inside if x.ssim is not None]
        per_segment.append({"kind": s.kind, "note": s.note, "t0": s.t0, "t1": s.t1,
                            "kept": sum(s.contains(t) for t in k), "samples": len(inside),
                            "lap_var_median": statistics.median([x.lap_var for x in inside]) if inside else None,
                            "mad_median": statistics.median(mads) if mads else None,
                            "ssim_median": statistics.median(ssims) if ssims else None})
    return {"must_keep": asdict(recall(k, segs, MUST_KEEP)), "small": asdict(recall(k, segs, SMALL)),
            "low_texture": asdict(recall(k, segs, (LOW_TEXTURE,))), "per_kind": per_kind,
            "blurred_kept": blurred_kept(unmarked, segs), "marked_blur": marked_blur(run.marked, segs, clip.views),
            "views": len(clip.views),
            "views_without_moment": [[v.t0, v.t1] for v in views_without_moment(k, clip.views)], "kept": len(k),
            "kept_per_min": kept_per_minute(len(k), clip.duration_s), "marked": len(run.marked),
            "kept_per_min_unmarked": kept_per_minute(len(unmarked), clip.duration_s), "sampled": len(run.samples),
            "off_pts": bad, "pts_ok": not bad, "seconds": run.seconds, "missed": missed, "segments": per_segment,
            "dropped_by": dict(Counter(x.dropped_by or "kept" for x in run.samples))}


# -- the two methods ---------------------------------------------------------------------------------
def _ticks(fps: float):
    """The engine's sampling rule: ticks at k / fps, each takes the first frame at or after it."""
    interval, nxt, eps = 1.0 / fps, [0.0], 1e-9

    def accept(t: float) -> bool:
        if t + eps < nxt[0]:
            return False
        nxt[0] = (math.floor(t / interval + eps) + 1) * interval
        return True
    return accept


def run_seed(path: str, fps: float) -> Run:
    """The seed's gates, frame by frame (see the module docstring)."""
    import av
    import cv2
    from skimage.metrics import structural_similarity

    t_start = time.perf_counter()
    accept = _ticks(fps)
    kept, samples, ref, ref_thumb = [], [], None, None
    with av.open(path) as c:
        s = c.streams.video[0]
        t0 = s.start_time
        for f in c.decode(s):
            if f.pts is None:
                continue
            if t0 is None:
                t0 = f.pts
            t = float((f.pts - t0) * s.time_base)
            if not accept(t):
                continue
            gray = cv2.cvtColor(f.to_ndarray(format="rgb24"), cv2.COLOR_RGB2GRAY)
            lap = float(cv2.Laplacian(gray, cv2.CV_64F).var())
            mad = ssim = None
            drop = "blur" if lap < SEED_BLUR else None
            if drop is None and ref is not None:
                mad = float(cv2.absdiff(gray, ref).mean())
                if mad < SEED_MAD:
                    drop = "low_change"
                else:
                    thumb = cv2.resize(gray, (64, 64))
                    ssim = float(structural_similarity(thumb, ref_thumb, data_range=255))
                    drop = "ssim" if ssim > SEED_SSIM else None
            samples.append(Sample(t, lap, mad, ssim, drop))
            if drop is None:
                kept.append(t)
                ref, ref_thumb = gray, cv2.resize(gray, (64, 64))
    return Run("seed", kept, samples, time.perf_counter() - t_start)


def run_engine(path: str, fps: float | None) -> Run:
    """The engine with its default config on the CPU, a fresh store; only the public API."""
    from vam_engine import Engine

    cfg = None if fps is None else {"ingest": {"fps": fps}}
    with tempfile.TemporaryDirectory(prefix="vam_fidelity_") as d:
        t_start = time.perf_counter()
        with Engine(Path(d) / "store", cfg, device="cpu") as eng:
            eng.index_file(path, camera_id="cam")
            moments = eng.moments("cam")
            kept = sorted(m.t_rel for m in moments)
            marked = sorted(m.t_rel for m in moments if getattr(m.gate, "blurred", False))  # older engines: none
            log = eng.store.moments.gate_log("cam")
        secs = time.perf_counter() - t_start
    samples = [Sample(g.t_rel, g.gate.lap_var, g.gate.mad, g.gate.ssim, g.gate.dropped_by) for g in log]
    return Run("engine", kept, samples, secs, marked)


# -- report -------------------------------------------------------------------------------------------
def _r(r: dict) -> str:
    return "-" if not r["total"] else f"{r['hit']}/{r['total']}"


def targets(clip: Clip, eng: dict, seed: dict) -> list:
    """(target, measured, met) rows for the engine on one clip."""
    kinds = {s.kind for s in clip.segments}
    out = []
    mk = eng["must_keep"]
    if mk["total"]:
        out.append(("must-keep recall = 1.0", _r(mk), mk["hit"] == mk["total"]))
    if eng["low_texture"]["total"]:
        v = eng["low_texture"]["hit"] / eng["low_texture"]["total"]
        out.append((f"low-texture recall >= {LOW_TEXTURE_RECALL}", f"{v:.2f}", v >= LOW_TEXTURE_RECALL))
    if BLUR in kinds:
        mb = eng["marked_blur"]
        out.append(("blurred kept = 0, but one marked per all-blurred view",
                    f"{eng['blurred_kept']} (+{mb['in_blur']} marked, {mb['in_sharp_views']} in sharp views)",
                    eng["blurred_kept"] == 0 and mb["in_sharp_views"] == 0 and mb["per_blurred_view"] <= 1))
    gaps = eng["views_without_moment"]
    out.append((f"no view >= {MIN_VIEW_S:g} s without a moment", f"{len(gaps)} of {eng['views']}", not gaps))
    if not kinds & set(SMALL) and LOW_TEXTURE not in kinds:
        # the frames the view rule keeps marked are apart: the seed's rule leaves those views empty
        out.append(("kept/min <= seed, marked blurred apart",
                    f"{eng['kept_per_min_unmarked']:.1f} (+{eng['marked']} marked) vs {seed['kept_per_min']:.1f}",
                    eng["kept_per_min_unmarked"] <= seed["kept_per_min"] + 1e-9))
    out.append(("every kept t is a frame PTS", "yes" if eng["pts_ok"] else f"{len(eng['off_pts'])} off", eng["pts_ok"]))
    return out


def construction_check(clip: Clip, seed_run: Run) -> list:
    """Segments whose frames are not what they claim by the seed's own statistic (a low-texture
    or blur segment at or over the blur threshold tests nothing): a note per offender."""
    notes = []
    for s in clip.segments:
        lv = [x.lap_var for x in seed_run.samples if s.contains(x.t)]
        if not lv:
            notes.append(f"{clip.name}: {s.kind} {s.note!r} [{s.t0:g}, {s.t1:g}) holds no sample")
        elif s.kind in (LOW_TEXTURE, BLUR) and statistics.median(lv) >= SEED_BLUR:
            notes.append(f"{clip.name}: {s.kind} {s.note!r} has median Laplacian variance {statistics.median(lv):.1f}")
    return notes


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: small frames, short shots")
    ap.add_argument("--clips", default=",".join(CLIPS), help=f"comma-separated subset of {','.join(CLIPS)}")
    ap.add_argument("--fps", type=float, default=None,
                    help="sampling rate for both methods (default: the engine's default config)")
    ap.add_argument("--cache-dir", type=Path, default=RESULTS_DIR / "fidelity_clips")
    ap.add_argument("--no-cache", action="store_true", help="generate the clips in a temp dir")
    ap.add_argument("--seed", type=int, default=0, help="content seed (digit values, sprite paths, VFR timing)")
    args = ap.parse_args(argv)
    for n in clip_names(args):
        if n not in CLIPS:
            ap.error(f"--clips: unknown clip {n!r}; clips: {', '.join(CLIPS)}")
    return args


def clip_names(args) -> list[str]:
    return [n.strip() for n in args.clips.split(",") if n.strip()]


class Report:
    """What the clips' runs add up to: the tables' rows, the engine's misses, the construction
    notes, per clip results and per segment kind totals."""

    def __init__(self):
        self.rows, self.trows, self.why, self.notes, self.results, self.by_kind = [], [], [], [], {}, {}

    def kind(self, kd: str) -> dict:
        return self.by_kind.setdefault(kd, {"engine": [0, 0], "seed": [0, 0], "drops": Counter()})

    def add(self, n: str, clip: Clip, gen_s: float, res: dict, eng_run: Run, seed_run: Run) -> None:
        self.notes += construction_check(clip, seed_run)
        size = f"{clip.width}x{clip.height}{' vfr' if clip.vfr else ''}"
        for m in ("engine", "seed"):
            r = res[m]
            self.rows.append([n if m == "engine" else "", size if m == "engine" else "", m,
                              round(clip.duration_s, 1), r["sampled"], _r(r["must_keep"]), _r(r["small"]),
                              _r(r["low_texture"]),
                              _blur_cell(r) if any(s.kind == BLUR for s in clip.segments) else "-",
                              len(r["views_without_moment"]),
                              round(r["kept_per_min"], 1), "yes" if r["pts_ok"] else f"NO ({len(r['off_pts'])})",
                              round(r["seconds"], 1)])
            for kd, rk in r["per_kind"].items():
                acc = self.kind(kd)[m]
                acc[0] += rk["hit"]
                acc[1] += rk["total"]
        tg = targets(clip, res["engine"], res["seed"])
        self.trows += [[n, t_, v, "met" if ok else "MISSED"] for t_, v, ok in tg]
        for mm in res["engine"]["missed"]:
            self.why.append([n, mm["kind"], mm["note"], f"{mm['t0']:g}-{mm['t1']:g}",
                             ", ".join(f"{k} {v}" for k, v in sorted(mm["dropped_by"].items())) or "no sample",
                             fmt_list(mm["lap_var"]), fmt_list(mm["mad"])])
            self.by_kind[mm["kind"]]["drops"].update(mm["dropped_by"])
        for sg in clip.segments:  # the engine's own statistic, to see where a blur rule can cut
            self.kind(sg.kind).setdefault("lap_var", []).extend(x.lap_var for x in eng_run.samples if sg.contains(x.t))
        self.results[n] = {"clip": {"path": clip.path, "width": clip.width, "height": clip.height,
                                    "duration_s": clip.duration_s, "frames": clip.frames, "vfr": clip.vfr,
                                    "first_pts_s": clip.start_s, "generate_s": gen_s,
                                    "segments": [asdict(s) for s in clip.segments]},
                           **res, "targets": [{"target": a, "measured": b, "met": c} for a, b, c in tg]}

    def print(self) -> None:
        print()
        print_table(["clip", "size", "method", "clip s", "sampled", "must-keep", "small", "low-tex",
                     "blur kept (+marked)", "views w/o moment", "kept/min", "real PTS", "run s"], self.rows)
        print("\ntargets (engine):")
        print_table(["clip", "target", "measured", "result"], self.trows)
        kind_rows = [[kd, f"{a['engine'][0]}/{a['engine'][1]}" if a["engine"][1] else "-",
                      f"{a['seed'][0]}/{a['seed'][1]}" if a["seed"][1] else "-", _spread(a.get("lap_var", [])),
                      ", ".join(f"{g} {c}" for g, c in a["drops"].most_common()) or "-"]
                     for kd, a in self.by_kind.items()]
        print("\nby segment kind, all clips: recall, the engine's lap_var of the samples inside (min/median/max), and "
              "the gates that dropped the engine's samples in missed segments:")
        print_table(["kind", "engine", "seed", "engine lap_var", "dropped by (missed)"], kind_rows)
        if self.why:
            print("\nwhat the engine missed, and which gate dropped the samples inside (lap_var, mad per sample):")
            print_table(["clip", "kind", "segment", "t", "dropped by", "lap_var", "mad"], self.why)
        for line in self.notes:
            print(f"  note: {line}")

    def by_kind_json(self) -> dict:
        return {k: {"engine": v["engine"], "seed": v["seed"], "engine_missed_dropped_by": dict(v["drops"]),
                    "engine_lap_var": _spread(v.get("lap_var", []))} for k, v in self.by_kind.items()}


def main(argv=None) -> int:
    args = parse_args(argv)
    from vam_engine.config import IngestConfig

    fps = args.fps or IngestConfig().fps
    tmp = tempfile.TemporaryDirectory(prefix="vam_fidelity_clips_") if args.no_cache else None
    cache = Path(tmp.name) if tmp else args.cache_dir
    load0 = os.getloadavg()
    print(f"bench_fidelity: {'quick' if args.quick else 'full'} clips, sampling {fps:g} fps, engine default "
          f"config on the CPU vs the seed's gates; load {load0[0]:.2f}", flush=True)
    report = Report()
    for n in clip_names(args):
        t = time.perf_counter()
        clip = make_clip(params_for(n, args.quick, args.seed), cache)
        gen_s = time.perf_counter() - t
        seed_run, eng_run = run_seed(clip.path, fps), run_engine(clip.path, args.fps)
        report.add(n, clip, gen_s, {"seed": score(clip, seed_run), "engine": score(clip, eng_run)}, eng_run, seed_run)
    report.print()
    path = write_json("bench_fidelity_quick" if args.quick else "bench_fidelity",
                      {"args": {k: str(v) for k, v in vars(args).items()}, "fps": fps,
                       "seed_gates": {"blur_min_lap_var": SEED_BLUR, "diff_min_mad": SEED_MAD, "ssim_max": SEED_SSIM},
                       "loadavg_at_start": list(load0), "clips": report.results, "by_kind": report.by_kind_json(),
                       "construction_notes": report.notes})
    print(f"wrote {path}")
    if tmp:
        tmp.cleanup()
    return 0


def _blur_cell(r: dict) -> str:
    m = r["marked_blur"]["in_blur"]
    return f"{r['blurred_kept']}" + (f" (+{m})" if m else "")


def _spread(xs) -> str:
    return f"{min(xs):.3g} / {statistics.median(xs):.3g} / {max(xs):.3g}" if xs else "-"


def fmt_list(xs) -> str:
    return " ".join("-" if x is None else f"{x:.3g}" for x in xs[:6]) + (" ..." if len(xs) > 6 else "")


if __name__ == "__main__":
    raise SystemExit(main())
