"""bench_ingest.py's ``--device cuda`` rows: NVDEC (PyNvVideoCodec) decode against PyAV on the
machine's CPUs, 1 to 7 concurrent streams of one generated H.264 clip."""
from __future__ import annotations

import dataclasses
import threading
import time

from _common import fmt, print_table, run_part

from vam_engine.synthetic import write_scene_clip


def run_streams(open_one, count_one, n: int, timeout: float) -> dict:
    """Open n decoders (not timed), then decode them in n threads at once; frames/s overall."""
    decs = [open_one() for _ in range(n)]
    counts, errors = [0] * n, []
    barrier = threading.Barrier(n + 1)

    def work(i):
        try:
            barrier.wait()
            counts[i] = count_one(decs[i])
        except Exception as e:  # noqa: BLE001
            errors.append(f"stream {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join(timeout=max(1.0, timeout - (time.perf_counter() - t0)))
    wall = time.perf_counter() - t0
    hung = sum(t.is_alive() for t in threads)
    for d in decs:
        try:
            d.close()
        except Exception:  # noqa: BLE001
            pass
    if hung:
        errors.append(f"{hung} stream(s) still running after {timeout:.0f} s")
    total = sum(counts)
    return {"streams": n, "frames": total, "per_stream": counts, "wall_s": wall,
            "fps": total / wall if wall > 0 else 0.0, "fps_per_stream": total / wall / n if wall > 0 else 0.0,
            "errors": errors}


def decode_rows(run, st) -> None:
    a = run.args
    w, h = (int(v) for v in a.cuda_size.lower().split("x"))
    w, h, secs = (640, 360, 4.0) if run.plumbing else (w, h, a.seconds or 20.0)
    clip = st.guard("make clip", write_scene_clip, run.tmp / f"clip_{w}x{h}.mp4", width=w, height=h, fps=30,
                    seconds=secs, gop_s=a.gop, bframes=a.bframes, seed=run.seed)
    if clip is None:
        return
    st.data["clip"] = dataclasses.asdict(clip)
    print(f"  clip: {w}x{h} {clip.seconds:g} s 30 fps, {clip.frames} frames, GOP {clip.gop_frames}, "
          f"{clip.bframes} B-frames", flush=True)
    path, expect = clip.path, clip.frames
    streams = [1, 2] if run.plumbing else [int(x) for x in a.streams.split(",")]
    rows = []
    bodies = []
    if run.cuda:
        from vam_engine.ingest.nvdec_decoder import NvdecDecoder

        import torch

        def nv_open():
            return NvdecDecoder(path, "cam", fps=1000.0)  # a tick per ms: every frame is sampled

        def nv_count(dec):  # the engine's path: decode, clone the Y plane out (torch), one Frame per frame
            n = sum(1 for _ in dec)
            torch.cuda.synchronize()
            return n

        def nv_raw_count(dec):  # decode only: the decoder's surfaces, nothing cloned
            return sum(1 for _ in dec.surfaces())

        bodies += [("nvdec", nv_open, nv_count), ("nvdec raw", nv_open, nv_raw_count)]
    else:
        st.skip("nvdec", "no CUDA")

    from vam_engine.ingest.pyav_decoder import PyAVDecoder

    def av_open():
        return PyAVDecoder(path, "cam", fps=1000.0)  # thread_type AUTO, FFmpeg's thread count

    def av_count(dec):
        return sum(1 for _ in dec)

    bodies.append(("pyav", av_open, av_count))
    for name, opener, counter in bodies:
        for n in streams:
            if run.left() < 5:
                st.skip(f"{name} x{n}", "out of time")
                continue
            r = st.guard(f"{name} x{n}", run_streams, opener, counter, n, a.decode_timeout)
            if r is None:
                continue
            r["body"] = name
            st.data.setdefault("runs", []).append(r)
            for e in r["errors"]:
                st.errors.append({"where": f"{name} x{n}", "error": e, "traceback": ""})
            ok = all(c == expect for c in r["per_stream"])
            st.check(f"{name} x{n} all frames", ok, f"per stream {r['per_stream']}, expected {expect}")
            # the streams share min(n, engines) NVDEC engines; PyAV's are CPU threads, no engine
            engines = min(n, a.nvdec_engines) if name.startswith("nvdec") else None
            r["fps_per_engine"] = r["fps"] / engines if engines else None
            r["streams_at_30fps"] = r["fps"] / 30.0
            rows.append([name, n, r["frames"], r["wall_s"], r["fps"], r["fps_per_stream"],
                         "-" if engines is None else r["fps_per_engine"], r["streams_at_30fps"]])
    if rows:
        print_table(["body", "streams", "frames", "wall s", "frames/s", "per stream", "per NVDEC engine",
                     "30 fps streams"], rows)
    by = {(r["body"], r["streams"]): r["fps"] for r in st.data.get("runs", [])}
    parts = []
    for name in ("nvdec", "nvdec raw", "pyav"):
        got = [f"{n}:{fmt(by[(name, n)])}" for n in streams if (name, n) in by]
        if got:
            parts.append(f"{name} " + " ".join(got))
    st.headline = f"{h}p fps by streams: " + "; ".join(parts)


def cuda_main(args) -> int:
    """1080p30 H.264 (20 s, keyframe every 2 s, 2 B-frames): NVDEC (PyNvVideoCodec) frames/s for
    1, 2, 4, 7 concurrent streams (the H200 has 7 NVDEC engines) against PyAV on the CPUs; frames/s
    per engine (the streams spread over min(streams, --nvdec-engines) engines) and how many 30 fps
    streams that decodes in real time.
    --plumbing: PyAV only, on a 4 s 640x360 clip."""
    return run_part("bench_ingest", "decode", decode_rows, args)
