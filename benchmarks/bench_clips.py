"""Clips of any interval (vam_engine/ingest/clips.py): what one costs to encode, cut from the source
file (every frame re-encoded, the sound trimmed to the sample) and built from retained frames,
against FFmpeg's own command line doing the same cut in the same run.

Input: a generated source (``--side`` 640x360, 30 fps, H.264 + AAC at 48 kHz: a moving bar over a
texture that changes every 4 s, a tone), ``--source-s`` long, and JPEGs of it every 2 s (what an
index at 0.5 fps retains). Rows, each the median of ``--repeats`` runs (after one warm-up):

- ``cut``: ``cut_file`` of a clip of each length from the middle of the source (libx264
  veryfast crf 28, AAC): wall seconds, CPU seconds of the process, and x realtime (clip seconds
  per wall second).
- ``frames``: ``frames_clip`` of the same interval from the JPEGs (5 fps, no sound).
- ``ffmpeg cut``: ``ffmpeg -ss A -t L -i src -c:v libx264 -preset veryfast -crf 28 -c:a aac``
  (the baseline; skipped without an ffmpeg binary); ``cut / ffmpeg`` is the ratio of walls.

    python benchmarks/bench_clips.py                 # clips of 5, 30 and 120 s from a 150 s source
    python benchmarks/bench_clips.py --quick         # 5 and 30 s from a 40 s source

Prints the table and writes benchmarks/results/bench_clips.json.
"""
from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

import av  # noqa: E402
import numpy as np  # noqa: E402

from _common import print_table, write_json  # noqa: E402
from vam_engine.ingest.clips import cut_file, frames_clip  # noqa: E402

FPS, RATE = 30, 48000


def make_source(path: Path, seconds: float, w: int, h: int, stills: Path) -> list[tuple[float, str]]:
    """The source video and its JPEGs every 2 s: [(t, path)]."""
    from PIL import Image

    rng = np.random.default_rng(0)
    shots = []
    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=FPS, options={"preset": "veryfast", "crf": "23"})
        vs.width, vs.height, vs.pix_fmt = w, h, "yuv420p"
        aus = out.add_stream("aac", rate=RATE, layout="mono")
        texture = None
        for i in range(int(seconds * FPS)):
            t = i / FPS
            if i % (4 * FPS) == 0:
                texture = np.repeat(np.repeat(rng.integers(30, 226, (h // 20 + 1, w // 20 + 1, 3), dtype=np.uint8),
                                              20, 0), 20, 1)[:h, :w]
            img = texture.copy()
            x = int((t * 80) % w)
            img[:, x:x + 12] = 255
            if i % (2 * FPS) == 0:
                p = stills / f"{i:06d}.jpg"
                Image.fromarray(img).save(p, quality=90)
                shots.append((t, str(p)))
            f = av.VideoFrame.from_ndarray(img, format="rgb24")
            f.pts = i
            out.mux(vs.encode(f))
        out.mux(vs.encode(None))
        n = int(seconds * RATE)
        tone = (0.2 * np.sin(2 * np.pi * 440 * np.arange(n) / RATE)).astype(np.float32)[None, :]
        af = av.AudioFrame.from_ndarray(tone, format="fltp", layout="mono")
        af.sample_rate, af.pts, af.time_base = RATE, 0, Fraction(1, RATE)
        out.mux(aus.encode(af))
        out.mux(aus.encode(None))
    return shots


def timed(fn, repeats: int) -> tuple[float, float]:
    """(median wall s, median CPU s of this process and its children) over ``repeats`` runs after one warm-up."""
    fn()
    walls, cpus = [], []
    for _ in range(repeats):
        r0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
        r1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
                    + c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime)
    return float(np.median(walls)), float(np.median(cpus))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--source-s", type=float)
    ap.add_argument("--lengths", type=float, nargs="+")
    ap.add_argument("--side", default="640x360")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default="bench_clips")
    args = ap.parse_args(argv)
    source_s = args.source_s or (40.0 if args.quick else 150.0)
    lengths = args.lengths or ([5.0, 30.0] if args.quick else [5.0, 30.0, 120.0])
    w, h = (int(v) for v in args.side.split("x"))
    ffmpeg = shutil.which("ffmpeg")
    rows, results = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "stills").mkdir()
        src = tmp / "source.mp4"
        shots = make_source(src, source_s, w, h, tmp / "stills")
        for length in lengths:
            a = max(0.0, (source_s - length) / 2)
            b = a + length
            cut = timed(lambda: cut_file(src, a, b), args.repeats)
            still = [(t, p) for t, p in shots if t <= b]
            still = [s for s in still if s[0] >= a] or still[-1:]
            frames = timed(lambda: frames_clip(still, a, b), args.repeats)
            base = None
            if ffmpeg:
                cmd = [ffmpeg, "-v", "error", "-y", "-ss", f"{a}", "-t", f"{length}", "-i", str(src), "-c:v", "libx264",
                       "-preset", "veryfast", "-crf", "28", "-c:a", "aac", str(tmp / "ff.mp4")]
                base = timed(lambda: subprocess.run(cmd, check=True), args.repeats)
            for way, (wall, cpu) in (("cut", cut), ("frames", frames), *((("ffmpeg cut", base),) if base else ())):
                ratio = wall / base[0] if base and way == "cut" else None
                rows.append([way, length, wall, cpu, length / wall, "" if ratio is None else f"{ratio:.2f}"])
                results.append({"way": way, "clip_s": length, "wall_s": wall, "cpu_s": cpu,
                                "x_realtime": length / wall, "vs_ffmpeg": ratio})
    print(f"source {w}x{h} {FPS} fps + AAC, {source_s:g} s; median of {args.repeats}")
    print_table(["way", "clip s", "wall s", "cpu s", "x realtime", "cut / ffmpeg"], rows)
    path = write_json(args.json, {"args": vars(args), "rows": results})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
