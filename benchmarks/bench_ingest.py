"""Ingest throughput: decode-only against the full index pipeline on the same clip.

For one source and for N concurrent sources (default 4: hard links of the clip, indexed as N
cameras), at each sampling rate (default 0.5 and 2 fps), all in this process on the same file:

- ``decode_all``: PyAV decodes every frame (thread_type AUTO) and reads nothing: the baseline
  and the physical limit of CPU decoding for this clip;
- ``decode_sparse``: PyAVDecoder at the sampling rate (it skips non-reference frames when
  samples are sparse), iterating the sampled frames without gating;
- ``decode_keyframes``: PyAVDecoder(keyframes_only=True);
- ``pipeline``: Engine(fresh temp store, device="cpu").index_files(): decode, gates, JPEG, SQLite;
- ``pipeline_keyframes``: the same with keyframes_only;
- ``decode_present`` / ``pipeline_present`` (and ``pipeline_keyframes_present``): the same with
  the present fed from decode at 2 fps (what an engine with a model does: PyAVDecoder
  ``want_present(2.0)``, each present frame converted at 448 px; the pipeline rows run an Engine
  with a scripted model and the writer off). "present cost" lines: x realtime with and without.

N sources: N decode-only runs in N threads at once, against one Engine indexing N cameras.
Each row also records the process CPU seconds it used ("cpu s"; for pipeline rows, of
index_files alone, like its wall): on a shared machine the wall clock of one row can be hit by
other work, the CPU it needed is steadier. ``--repeats`` runs every row of a source count once
per round (A B C, A B C, ...), so a burst of load hits the rows compared alike; "wall s" is the
median (the verdicts' figure), "min wall s" the least disturbed run.
``--profile`` adds, per source count, the process CPU of one pipeline run split by stage
(``StageCpu``: gate statistics, RGB, embedding, present copy, JPEG, file writes, SQLite, the
decode threads' Python; the rest is libav's decoding threads) next to the decode-only CPU at
the same sampling, and the stack sampler's view per thread group.

Targets (issue 12), all from rows of this run:
- samples sparser than the GOP (0.5 fps, 2 s GOP): ``pipeline`` >= 0.6x the throughput of
  ``decode_keyframes`` (decoding only the frames it needs) on one source;
- ``pipeline_keyframes`` never slower than ``pipeline`` (same source count and rate), and
  ``pipeline_keyframes_present`` never slower than ``pipeline_present``;
- 4 sources: ``pipeline`` >= 0.8x ``decode_sparse`` at the same sampling.
VFR rows (``--vfr-seconds``, default 30; 0 skips them): a 1080p clip with a 10 s GOP and
variable frame intervals (20-125 ms, remuxed from a generated clip), one source at the first
sampling rate: what is skipped, and the pipeline against a decode of every frame.
Ratios: "vs decode_all" is throughput over decode_all's at the same source count;
"pipe/decode" is the pipeline's throughput over the decode-only run at the same sampling (the
target: pipeline at 0.5 fps >= 0.8x, i.e. everything but decoding costs under 20%);
"fewer decoded" is decode_all's decoded frames over the method's.

    python benchmarks/bench_ingest.py                    # default: 60 s 1280x720 clip, 1 and 4 sources
    python benchmarks/bench_ingest.py --quick            # 20 s clip, 1 and 2 sources
    python benchmarks/bench_ingest.py --clip my.mp4 --repeats 3 --sources 1,4,8
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from _common import RESULTS_DIR, add_device_args, print_table, require_cuda, write_json
from _ingest_cuda import cuda_main
from _ingest_profile import StackSampler, StageCpu

from vam_engine.synthetic import write_scene_clip

TARGET_PIPE_OVER_DECODE = 0.8  # 4 sources: pipeline at 0.5 fps vs decode-only at 0.5 fps
TARGET_PIPE_OVER_KEYFRAMES = 0.6  # samples sparser than the GOP: pipeline vs decoding the keyframes only


# -- the clip ----------------------------------------------------------------------------------------
CLIP_VERSION = 2  # part of the cached clip's name: bump when the content changes


def make_clip(path: Path, **kw) -> dict:
    """The generated clip (vam_engine.synthetic.write_scene_clip: panning, static and defocused
    scenes of 3-5 s, fixed GOP, B-frames); returns its scene list."""
    return {"scenes": write_scene_clip(path, **kw).scenes}


def clip_path(args) -> Path:
    name = (f"bench_ingest_v{CLIP_VERSION}_{args.width}x{args.height}_{args.seconds:g}s_{args.clip_fps}fps_"
            f"gop{args.gop:g}s_bf{args.bframes}.mp4")
    return RESULTS_DIR / "clips" / name


def make_vfr_clip(path: Path, seconds: float, seed: int = 11) -> dict:
    """1080p H.264, 10 s GOP, 2 B-frames, with variable frame intervals: a 30 fps generated
    clip remuxed with monotone warped timestamps (runs of 1-3 s at 8 to 50 fps), so every
    frame keeps its bytes and only its PTS/DTS change."""
    import av
    import numpy as np

    cfr = path.with_name(path.stem + ".cfr.mp4")
    write_scene_clip(cfr, width=1920, height=1080, fps=30, seconds=seconds, gop_s=10.0, bframes=2, seed=seed)
    rng = np.random.default_rng(seed)
    n = int(round(seconds * 30)) + 8
    steps, k = [], 0
    while k < n:  # per-frame intervals in ms, in runs of one rate
        run = int(rng.integers(30, 90))
        steps += [int(rng.choice([20, 33, 40, 66, 125]))] * run
        k += run
    t_ms = np.concatenate([[0], np.cumsum(steps)])
    with av.open(str(cfr)) as src, av.open(str(path) + ".tmp.mp4", "w") as out:
        s_in = src.streams.video[0]
        s_out = out.add_stream_from_template(s_in)
        s_out.time_base = s_in.time_base
        per_frame = 1 / (30 * s_in.time_base)  # input ticks per frame

        def warp(ts):
            k = ts / per_frame + 2  # dts start two frames early (B-frame delay)
            return int(round(float(t_ms[int(k)] / 1000 / s_in.time_base)))

        for pkt in src.demux(s_in):
            if pkt.dts is None:
                continue
            pkt.pts, pkt.dts = warp(pkt.pts), warp(pkt.dts)
            pkt.duration = None
            pkt.stream = s_out
            out.mux(pkt)
    os.replace(str(path) + ".tmp.mp4", path)
    cfr.unlink()
    return {"frames": int(round(seconds * 30)), "gop_s": 10.0}


# -- measurements ------------------------------------------------------------------------------------
_PICT = {0: "none", 1: "I", 2: "P", 3: "B", 4: "S", 5: "SI", 6: "SP", 7: "BI"}  # AVPictureType


def decode_all(path: str) -> dict:
    import av

    n = 0
    types: dict = {}
    with av.open(path) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        for f in c.decode(s):
            n += 1
            pt = _PICT.get(int(f.pict_type), str(f.pict_type))
            types[pt] = types.get(pt, 0) + 1
    return {"decoded": n, "sampled": None, "kept": None, "pict_types": types}


PRESENT_FPS, PRESENT_SIDE = 2.0, 448  # the working memory's short window rate, its default frame side


def decode_sampled(path: str, fps: float, keyframes_only: bool, present: bool = False) -> dict:
    from vam_engine.ingest import PyAVDecoder
    from vam_engine.ingest.frame import PresentFrame

    sampled = 0
    with PyAVDecoder(path, "bench", fps=fps, keyframes_only=keyframes_only) as dec:
        if present:
            dec.want_present(PRESENT_FPS)
        for f in dec:
            if isinstance(f, PresentFrame):
                f.rgb(PRESENT_SIDE)  # what the decode worker does with it
            else:
                sampled += 1
        return {"decoded": dec.stats.decoded, "sampled": sampled, "kept": None, "present": dec.stats.present}


def _cpu() -> float:
    """CPU seconds of this process so far (every thread: decoders, gates, encoders, SQLite)."""
    t = os.times()
    return t.user + t.system


def run_parallel(fn, paths: list[str]) -> tuple[float, list[dict]]:
    """fn(path) on every path at once, one thread each; (wall seconds, results)."""
    t0 = time.perf_counter()
    if len(paths) == 1:
        out = [fn(paths[0])]
    else:
        with ThreadPoolExecutor(len(paths)) as pool:
            out = list(pool.map(fn, paths))
    return time.perf_counter() - t0, out


def pipeline(paths: list[str], fps: float, keyframes_only: bool, sampler: StackSampler | None = None,
             present: bool = False, stages: StageCpu | None = None) -> tuple[float, dict]:
    """Engine(fresh temp store, device="cpu").index_files(paths) as N cameras: (wall seconds of
    index_files, its counts and CPU seconds). ``stages``: its gate thread's CPU is read before
    the engine closes."""
    from vam_engine.engine import Engine
    from vam_engine.llm import ScriptedLLM

    with tempfile.TemporaryDirectory(prefix="vam-bench-store-") as store:
        cfg = {"ingest": {"fps": fps, "keyframes_only": keyframes_only}}
        if present:  # a model makes the engine feed the present from decode; no documents written
            cfg["writer"] = {"enabled": False}
        eng = Engine(store, cfg, device="cpu", llm=ScriptedLLM(lambda req: "{}") if present else None)
        try:
            cams = [f"cam{i}" for i in range(len(paths))]
            t0, c0 = time.perf_counter(), _cpu()
            if sampler is not None:
                with sampler:
                    reports = eng.index_files(paths, cams)
            else:
                reports = eng.index_files(paths, cams)
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            if stages is not None:
                stages.gate_thread()
        finally:
            eng.close()
    dropped: dict = {}
    for r in reports:
        for k, v in r.dropped.items():
            dropped[k] = dropped.get(k, 0) + v
    failed = [r.failed for r in reports if r.failed]
    # cpu_s: of index_files alone, like its wall (the engine's opening and closing are not timed)
    return wall, {"cpu_s": cpu, "decoded": sum(r.decoded for r in reports), "sampled": sum(r.sampled for r in reports),
                  "kept": sum(r.kept for r in reports), "dropped": dropped, "failed": failed,
                  "content_s": sum(r.content_s for r in reports)}


def clip_info(path: str) -> dict:
    import av

    with av.open(path) as c:
        s = c.streams.video[0]
        dur = float(s.duration * s.time_base) if s.duration else c.duration / av.time_base
        return {"width": s.codec_context.width, "height": s.codec_context.height, "codec": s.codec_context.name,
                "fps": float(s.average_rate or s.guessed_rate or 0), "duration_s": dur, "frames": s.frames,
                "bytes": os.path.getsize(path)}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clip", help="use this video instead of the generated clip")
    ap.add_argument("--seconds", type=float, default=None, help="generated clip length (default 60; 20 with --quick)")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--clip-fps", type=int, default=30, help="generated clip frame rate (default 30)")
    ap.add_argument("--gop", type=float, default=2.0, help="keyframe interval of the generated clip, s (default 2)")
    ap.add_argument("--bframes", type=int, default=2, help="B-frames of the generated clip (default 2)")
    ap.add_argument("--fps", default="0.5,2", help="sampling rates (default 0.5,2)")
    ap.add_argument("--sources", default=None, help="concurrent source counts (default 1,4; 1,2 with --quick)")
    ap.add_argument("--repeats", type=int, default=1, help="timed repeats per row, median reported (default 1)")
    ap.add_argument("--no-keyframes", action="store_true", help="skip the keyframes_only rows")
    ap.add_argument("--vfr-seconds", type=float, default=None,
                    help="length of the 1080p variable-frame-rate clip with 10 s GOPs (default 30; 10 with --quick; "
                         "0: no vfr rows)")
    ap.add_argument("--profile", action="store_true",
                    help="after the timed rows, run the pipeline once more per source count at the first "
                         "sampling rate under a stack sampler and print where each thread spends its time")
    ap.add_argument("--no-present", action="store_true", help="skip the present-feed rows")
    ap.add_argument("--quick", action="store_true", help="smoke run: 20 s clip, sources 1 and 2")
    ap.add_argument("--name", default="bench_ingest", help="results file name (benchmarks/results/<name>.json)")
    ap.add_argument("--cuda-size", default="1920x1080", help="--device cuda: WxH of the generated clip")
    ap.add_argument("--streams", default="1,2,4,7", help="--device cuda: concurrent decode streams")
    ap.add_argument("--nvdec-engines", type=int, default=7,
                    help="--device cuda: NVDEC engines of the GPU, for the per-engine frames/s (default 7: an H200)")
    ap.add_argument("--decode-timeout", type=float, default=60.0, help="--device cuda: seconds per measurement")
    add_device_args(ap, default_budget=120.0)
    args = ap.parse_args(argv)
    if args.device == "cpu":
        if args.seconds is None:
            args.seconds = 20.0 if args.quick else 60.0
        if args.sources is None:
            args.sources = "1,2" if args.quick else "1,4"
        if args.vfr_seconds is None:
            args.vfr_seconds = 10.0 if args.quick else 30.0
    return args


# -- the CPU table: one job per row, timed in interleaved rounds --------------------------------------
@dataclass
class Job:
    """One row of the table: ``run()`` -> (wall seconds, counts), ``sources`` at ``fps``."""
    sources: int
    fps: float | None
    method: str
    run: Callable[[], tuple[float, dict]]
    clip: dict | None = None  # clip_info of the VFR clip; None: the main clip


def in_threads(fn, paths: list[str]) -> Callable[[], tuple[float, dict]]:
    """A decode-only row: fn(path) on every path at once; wall seconds and the summed counts."""
    def go():
        wall, outs = run_parallel(fn, paths)
        merged = {"decoded": sum(o["decoded"] for o in outs),
                  "sampled": None if outs[0]["sampled"] is None else sum(o["sampled"] for o in outs), "kept": None}
        if "pict_types" in outs[0]:
            merged["pict_types"] = outs[0]["pict_types"]
        return wall, merged
    return go


def alone(fn, path: str) -> Callable[[], tuple[float, dict]]:
    """A decode-only row of one path: wall seconds and fn's own counts."""
    def go():
        wall, outs = run_parallel(fn, [path])
        return wall, outs[0]
    return go


def rate_jobs(n_src: int, fps: float, paths: list[str], args) -> list[Job]:
    """The rows of one source count at one sampling rate: decode-only against the pipeline, plain,
    keyframes only and with the present fed (unless switched off)."""
    def decode(keyframes: bool, present: bool = False):
        return in_threads(lambda p: decode_sampled(p, fps, keyframes, present=present), paths)

    def pipe(keyframes: bool, present: bool = False):
        return lambda: pipeline(paths, fps, keyframes, present=present)

    jobs = [Job(n_src, fps, "decode_sparse", decode(False)), Job(n_src, fps, "pipeline", pipe(False))]
    if not args.no_keyframes:
        jobs += [Job(n_src, fps, "decode_keyframes", decode(True)), Job(n_src, fps, "pipeline_keyframes", pipe(True))]
    if not args.no_present:
        jobs += [Job(n_src, fps, "decode_present", decode(False, True)),
                 Job(n_src, fps, "pipeline_present", pipe(False, True))]
        if not args.no_keyframes:
            jobs.append(Job(n_src, fps, "pipeline_keyframes_present", pipe(True, True)))
    return jobs


def source_count_jobs(n_src: int, paths: list[str], rates: list[float], args) -> list[Job]:
    """The rows of one source count: decoding every frame (the baseline), then each rate's rows."""
    jobs = [Job(n_src, None, "decode_all", in_threads(decode_all, paths))]
    for fps in rates:
        jobs += rate_jobs(n_src, fps, paths, args)
    return jobs


def vfr_jobs(seconds: float, fps: float) -> tuple[list[Job], dict]:
    """The VFR clip's rows (one source at the first rate; the clip is generated and cached once)."""
    vfr = RESULTS_DIR / "clips" / f"bench_ingest_vfr_v1_1920x1080_{seconds:g}s_gop10s_bf2.mp4"
    if not vfr.exists():
        print(f"generating {vfr.name} (cached for later runs) ...", flush=True)
        make_vfr_clip(vfr, seconds)
    info = clip_info(str(vfr))
    print(f"vfr clip: {vfr} ({info['width']}x{info['height']}, {info['frames']} frames in "
          f"{info['duration_s']:.1f} s, 10 s GOP)", flush=True)
    path = str(vfr)
    return [Job(1, None, "decode_all", alone(decode_all, path), info),
            Job(1, fps, "decode_sparse", alone(lambda p: decode_sampled(p, fps, False), path), info),
            Job(1, fps, "pipeline", lambda: pipeline([path], fps, False), info)], info


def run_jobs(jobs: list[Job], repeats: int, info: dict) -> list[dict]:
    """Every job once per round, ``repeats`` rounds: a burst of load from elsewhere on a shared
    machine hits the rows compared with each other alike (A B C, A B C, ...)."""
    runs = [[] for _ in jobs]
    for k in range(max(1, repeats)):
        for job, acc in zip(jobs, runs):
            c0 = _cpu()
            wall, out = job.run()
            acc.append((wall, out.pop("cpu_s", _cpu() - c0), out))
            print(f"  round {k + 1}: {job.sources} src  fps={job.fps if job.fps is not None else '-':<4} "
                  f"{job.method:26s} {wall:7.3f} s  decoded {out['decoded']}", flush=True)
    out = []
    for job, acc in zip(jobs, runs):
        walls = [w for w, _, _ in acc]
        wall = statistics.median(walls)
        content = (info if job.clip is None else job.clip)["duration_s"] * job.sources
        out.append({"sources": job.sources, "fps": job.fps, "method": job.method, "wall_s": wall, "walls": walls,
                    "min_wall_s": min(walls), "cpu_s": statistics.median(c for _, c, _ in acc),
                    "clip": "main" if job.clip is None else "vfr", "content_s": content,
                    "x_realtime": content / wall, **acc[-1][2]})
    return out


# -- ratios, targets and summaries, all against rows of this run ---------------------------------------
PAIRS = {"pipeline": "decode_sparse", "pipeline_keyframes": "decode_keyframes", "pipeline_present": "decode_present"}


def find(results: list[dict], n_src: int, fps, method: str, clip: str = "main") -> dict | None:
    for r in results:
        if r["sources"] == n_src and r["fps"] == fps and r["method"] == method and r["clip"] == clip:
            return r
    return None


def add_ratios(results: list[dict]) -> None:
    """vs decode_all, fewer decoded, and pipe/decode (median walls, min walls, CPU) per row."""
    for r in results:
        base = find(results, r["sources"], None, "decode_all", r["clip"])
        r["vs_decode_all"] = base["wall_s"] / r["wall_s"]
        r["fewer_decoded_x"] = base["decoded"] / r["decoded"] if r["decoded"] else None
        dec = find(results, r["sources"], r["fps"], PAIRS[r["method"]], r["clip"]) if r["method"] in PAIRS else None
        r["pipe_over_decode"] = dec["wall_s"] / r["wall_s"] if dec else None
        r["pipe_over_decode_min"] = dec["min_wall_s"] / r["min_wall_s"] if dec else None
        r["pipe_over_decode_cpu"] = dec["cpu_s"] / r["cpu_s"] if dec and r["cpu_s"] > 0 else None


def results_table(results: list[dict]) -> str:
    rows = []
    for r in results:
        kept = f"{r['kept']}/{r['sampled']}" if r.get("kept") is not None else (
            f"-/{r['sampled']}" if r.get("sampled") is not None else "-")
        rows.append([r["clip"], r["sources"], "-" if r["fps"] is None else f"{r['fps']:g}", r["method"],
                     r["decoded"], r["wall_s"], r["min_wall_s"], r["cpu_s"], r["x_realtime"], r["vs_decode_all"],
                     r["pipe_over_decode"], r["pipe_over_decode_min"], r["pipe_over_decode_cpu"],
                     r["fewer_decoded_x"], kept])
    print()
    return print_table(["clip", "sources", "fps", "method", "frames decoded", "wall s", "min wall s", "cpu s",
                        "x realtime", "vs decode_all", "pipe/decode", "pipe/decode min", "pipe/decode cpu",
                        "fewer decoded x", "kept/sampled"], rows)


def verdict(name: str, value, target: float, cpu_value=None, min_value=None) -> dict:
    """``value``: from median walls (the verdict); ``min_value``: from the fastest run of each
    row (the least disturbed by other work on a shared machine), for information."""
    ok = value is not None and value >= target
    extra = f"; from min walls {min_value:.2f}" if min_value is not None else ""
    cpu = f" (cpu-time ratio {cpu_value:.2f}{extra})" if cpu_value is not None else ""
    print(f"target {name} >= {target:g}: {'-' if value is None else f'{value:.2f}'}{cpu} -> "
          f"{'met' if ok else 'NOT met'}")
    return {"target": name, "value": value, "value_from_min_walls": min_value, "cpu_value": cpu_value,
            "min": target, "met": ok}


def keyframe_verdicts(results: list[dict], rates: list[float], counts: list[int], gop: float) -> list[dict]:
    """Samples sparser than the GOP: pipeline against decoding the keyframes only; and the
    keyframes_only pipelines never slower than the plain ones."""
    out = []
    for fps in rates:
        if 1 / fps < gop - 1e-9:
            continue  # samples denser than the GOP: not this target's case
        p, k = find(results, 1, fps, "pipeline"), find(results, 1, fps, "decode_keyframes")
        if p and k:
            out.append(verdict(f"pipeline / decode_keyframes throughput, 1 source, {fps:g} fps",
                               k["wall_s"] / p["wall_s"], TARGET_PIPE_OVER_KEYFRAMES, k["cpu_s"] / p["cpu_s"],
                               k["min_wall_s"] / p["min_wall_s"]))
    for n_src in counts:
        for fps in rates:
            for base, kf in (("pipeline", "pipeline_keyframes"), ("pipeline_present", "pipeline_keyframes_present")):
                p, q = find(results, n_src, fps, base), find(results, n_src, fps, kf)
                if p and q:
                    out.append(verdict(f"{kf} not slower than {base}, {n_src} source(s), {fps:g} fps "
                                       f"({base} wall / {kf} wall)", p["wall_s"] / q["wall_s"], 1.0,
                                       p["cpu_s"] / q["cpu_s"], p["min_wall_s"] / q["min_wall_s"]))
    return out


def sources_verdicts(results: list[dict], counts: list[int]) -> list[dict]:
    """4+ sources: the pipeline against decode-only at 0.5 fps; how many fewer frames the
    sparse decoders decode."""
    out = []
    for n_src in counts:
        r = find(results, n_src, 0.5, "pipeline")
        if r is not None and r["pipe_over_decode"] is not None and n_src >= 4:
            out.append(verdict(f"pipeline / decode_sparse throughput, {n_src} sources, 0.5 fps",
                               r["pipe_over_decode"], TARGET_PIPE_OVER_DECODE, r["pipe_over_decode_cpu"],
                               r["pipe_over_decode_min"]))
        for m in ("decode_sparse", "decode_keyframes"):
            q = find(results, n_src, 0.5, m)
            if q is not None and n_src == counts[0]:
                print(f"{m} at 0.5 fps decodes {q['fewer_decoded_x']:.1f}x fewer frames than decode_all")
    return out


def present_costs(results: list[dict], rates: list[float], counts: list[int]) -> list[dict]:
    """x realtime, frames decoded and CPU without and with the present fed from decode."""
    out = []
    for n_src in counts:
        for fps in rates:
            for base, fed in (("decode_sparse", "decode_present"), ("pipeline", "pipeline_present"),
                              ("pipeline_keyframes", "pipeline_keyframes_present")):
                a, b = find(results, n_src, fps, base), find(results, n_src, fps, fed)
                if not (a and b):
                    continue
                c = {"sources": n_src, "fps": fps, "without": base, "with": fed,
                     "x_realtime_without": a["x_realtime"], "x_realtime_with": b["x_realtime"],
                     "decoded_without": a["decoded"], "decoded_with": b["decoded"],
                     "cpu_ratio": b["cpu_s"] / a["cpu_s"] if a["cpu_s"] > 0 else None}
                out.append(c)
                print(f"present cost, {n_src} source(s), {fps:g} fps: {base} {a['x_realtime']:.1f}x realtime "
                      f"-> {fed} {b['x_realtime']:.1f}x ({a['decoded']} -> {b['decoded']} frames decoded, "
                      f"cpu x{c['cpu_ratio'] or 0:.2f})")
    return out


def print_vfr(results: list[dict], fps: float) -> None:
    d, p = find(results, 1, fps, "decode_sparse", "vfr"), find(results, 1, fps, "pipeline", "vfr")
    print(f"vfr 1080p, 10 s GOP, {fps:g} fps: decode_sparse decodes {d['decoded']} of "
          f"{find(results, 1, None, 'decode_all', 'vfr')['decoded']} frames; pipeline {p['vs_decode_all']:.2f}x "
          f"the throughput of decoding every frame, decode_sparse {d['vs_decode_all']:.2f}x")


def profile_runs(args, links: list[str], rates: list[float], counts: list[int]) -> list[dict]:
    """--profile: per source count, one pipeline run's CPU by stage (against decode-only at the
    same sampling), then the stack sampler's view of the pipeline (and its keyframes variant)."""
    profiles = []
    for n_src in counts:  # where the CPU goes, default mode at the first rate
        c0 = _cpu()
        run_parallel(lambda p: decode_sampled(p, rates[0], False), links[:n_src])
        decode_cpu = _cpu() - c0
        with StageCpu() as stages:
            _, out = pipeline(links[:n_src], rates[0], False, stages=stages)
        profiles.append(stages.report(f"pipeline, {n_src} source(s), fps={rates[0]:g}", out["cpu_s"],
                                      out["sampled"], out["kept"], decode_cpu))
    for n_src in counts:
        for kf in ((False, True) if not args.no_keyframes else (False,)):
            sampler = StackSampler()
            wall, _ = pipeline(links[:n_src], rates[0], kf, sampler)
            profiles.append(sampler.report(
                f"pipeline{'_keyframes' if kf else ''}, {n_src} source(s), fps={rates[0]:g}, "
                f"wall {wall:.2f} s (under the sampler)"))
    return profiles


# -- the input ---------------------------------------------------------------------------------------
def source_clip(args) -> tuple[Path, dict | None]:
    """--clip, or the generated clip (cached under results/clips); (path, what generating it took)."""
    if args.clip:
        return Path(args.clip), None
    src = clip_path(args)
    if src.exists():
        return src, None
    src.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    print(f"generating {src.name} (cached for later runs) ...", flush=True)
    meta = make_clip(src, width=args.width, height=args.height, fps=args.clip_fps, seconds=args.seconds,
                     gop_s=args.gop, bframes=args.bframes)
    gen = {"seconds": time.perf_counter() - t0, **meta}
    print(f"  generated in {gen['seconds']:.1f} s", flush=True)
    return src, gen


def link_sources(src: Path, n: int, work: Path) -> list[str]:
    """N sources = N hard links of the clip (copies where links fail), then an untimed warm-up:
    page cache, codec and store code paths."""
    from vam_engine.engine import Engine

    links = []
    for i in range(n):
        dst = work / f"cam{i}{src.suffix}"
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)
        links.append(str(dst))
    with tempfile.TemporaryDirectory() as d:
        Engine(d, {"ingest": {"fps": 0.5}}, device="cpu").close()
    decode_all(links[0])
    return links


def print_header(src: Path, info: dict, args) -> None:
    import av

    print(f"clip: {src} ({info['codec']} {info['width']}x{info['height']} {info['fps']:g} fps, "
          f"{info['duration_s']:.1f} s, {info['bytes'] / 1e6:.1f} MB); PyAV {av.__version__}; "
          f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"median of {args.repeats} run(s) per row; N sources = N hard links of the clip, decoded in N "
          f"threads or indexed by one Engine as N cameras")
    print(f"targets (information only): samples sparser than the GOP: pipeline >= {TARGET_PIPE_OVER_KEYFRAMES:g}x "
          f"decode_keyframes throughput; pipeline_keyframes never slower than pipeline; 4 sources: pipeline "
          f">= {TARGET_PIPE_OVER_DECODE:g}x decode_sparse at 0.5 fps")
    print(flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.device == "cuda":
        require_cuda("bench_ingest.py", args)
        return cuda_main(args)
    rates = [float(x) for x in args.fps.split(",")]
    counts = [int(x) for x in args.sources.split(",")]
    t_start = time.perf_counter()
    import vam_engine.engine  # noqa: F401  - imports (pydantic, PIL, sqlite) are not timed

    src, gen = source_clip(args)
    info = clip_info(str(src))
    work = Path(tempfile.mkdtemp(prefix="vam-bench-ingest-"))
    try:
        links = link_sources(src, max(counts), work)
        print_header(src, info, args)
        results = []
        for n_src in counts:  # rounds over one source count's rows at a time
            results += run_jobs(source_count_jobs(n_src, links[:n_src], rates, args), args.repeats, info)
        vfr_info = None
        if args.vfr_seconds > 0:
            jobs, vfr_info = vfr_jobs(args.vfr_seconds, rates[0])
            results += run_jobs(jobs, args.repeats, info)
        add_ratios(results)
        table = results_table(results)
        types = find(results, counts[0], None, "decode_all").get("pict_types", {})
        print(f"decode_all frame types (one source): {types}")
        verdicts = keyframe_verdicts(results, rates, counts, args.gop) + sources_verdicts(results, counts)
        present_cost = present_costs(results, rates, counts)
        if vfr_info is not None:
            print_vfr(results, rates[0])
        profiles = profile_runs(args, links, rates, counts) if args.profile else []
        for r in results:
            if r.get("failed"):
                print(f"NOTE: {r['method']} {r['sources']} src fps={r['fps']}: failures {r['failed']}")
        path = write_json(args.name, {"args": vars(args), "clip": {"path": str(src), **info}, "generated": gen,
                                      "vfr_clip": vfr_info, "results": results, "targets": verdicts,
                                      "profiles": profiles, "table": table, "present_cost": present_cost,
                                      "total_s": time.perf_counter() - t_start})
        print(f"wrote {path} ({time.perf_counter() - t_start:.0f} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
