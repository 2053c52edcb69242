"""``vam-engine eval``: replay benchmark records (or the bundled sample suite) through the
engine and the baselines, score them each benchmark's way and print the papers' tables;
``--check`` reads and validates a records file without videos or a model.

Exit codes: 0 the run (or check) completed and every record was read (some perhaps with a
repair, listed); 3 it completed but some records could not be read (skipped, listed in
problems.jsonl); 130 interrupted (run the same command again to resume); 2 an error."""
from __future__ import annotations

import json
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

EXIT_COMPLETED = 0
EXIT_ERROR = 2
EXIT_UNREADABLE = 3
EXIT_INTERRUPTED = 130


def register(sub, g) -> None:
    from ..eval import BASELINES, FORMATS, SCORINGS

    sp = sub.add_parser("eval", parents=[g.engine, g.model, g.texts, g.audio, g.quiet],
                        help="run a benchmark's records (or 'sample') through the engine and baselines, print its tables")
    sp.add_argument("records", help="the records file, or 'sample' for the bundled sample suite")
    sp.add_argument("--format", choices=FORMATS, help="the records' layout (default: recognised from the file)")
    sp.add_argument("--check", action="store_true",
                    help="only read and validate the records: questions per task, every record skipped or repaired")
    sp.add_argument("--json", action="store_true", help="--check: print JSON")
    sp.add_argument("--videos", help="the folder with the benchmark's videos")
    sp.add_argument("--judge", help="the LLM judge for open answers: openai:URL#MODEL (default: a text match)")
    sp.add_argument("--baseline", default="", help=f"comma-separated baselines on the same model: {','.join(BASELINES)}")
    sp.add_argument("--scoring", choices=SCORINGS, default="official",
                    help="the benchmarks' official rules (default), the harness's robust extraction, or both")
    sp.add_argument("--limit", type=int, help="only the first N questions (in record order)")
    sp.add_argument("--out", default="eval-out", help="results, report and caches (default ./eval-out); a re-run resumes")
    proto = sp.add_argument_group("protocol (defaults: the benchmark's live protocol; see vam_engine/eval/protocol.py)")
    proto.add_argument("--fps", type=float, default=2.0, help="the rate frames are pushed at (default 2, StreamArena's)")
    proto.add_argument("--index-fps", type=float,
                       help="the engine's indexing rate (default: the engine's config, 0.5 fps; independent of --fps)")
    proto.add_argument("--reactive", choices=("auto", "pause", "race"), default="auto",
                       help="auto: pause the clock where the benchmark does (StreamArena), else keep it running")
    proto.add_argument("--proactive", choices=("realtime", "drain"), default="realtime",
                       help="realtime: 1x while monitors wait, checks the model misses are dropped; drain (easier): "
                            "every due check is judged before the next frame")
    proto.add_argument("--settle", action="store_true",
                       help="easier: with a paused clock, let memory catch up with the replay before each question")
    proto.add_argument("--pace", choices=("fast", "realtime"), default="fast",
                       help="fast: frames are pushed as fast as ingest takes them between questions; realtime: 1x")
    proto.add_argument("--monitor-every", type=float, default=2.0,
                       help="seconds of stream time between monitor checks (default 2, StreamMind's; StreamingBench "
                            "polls its proactive questions every 1 s, as its protocol does)")
    proto.add_argument("--max-side", type=int, help="shrink frames to this longest side (default: as decoded)")
    proto.add_argument("--store", choices=("per_video", "per_run"), default="per_video",
                       help="a fresh store per stream (default: no question history crosses streams), or one store")
    proto.add_argument("--no-audio", action="store_true",
                       help="the audio-off ablation: the streams' sound is not transcribed (with --audio-model, "
                            "the engine hears each stream's audio track in step with its frames)")
    sp.add_argument("--mode", choices=("auto", "two_phase", "agentic"), default="auto", help="Engine.ask mode")
    sp.add_argument("--concurrency", type=int, default=1, help="streams at once (default 1)")
    sp.add_argument("--uniform-k", type=int, default=32, help="frames of the uniform baseline at most (default 32)")
    sp.add_argument("--keep-stores", action="store_true", help="keep the engine's stores after a completed run")
    sp.set_defaults(func=cmd_eval)


def _model(spec: str, device: str):
    from ..config import EngineConfig
    from ..llm import make_llm, parse_llm_spec

    return make_llm(EngineConfig.load(None, device="cpu", llm=parse_llm_spec(spec)).llm, device=device)


def cmd_check(args) -> int:
    from ..eval import check_records

    rep = check_records(args.records, args.format)
    print(json.dumps(rep.to_json(), indent=2, ensure_ascii=False) if args.json else rep.text())
    return EXIT_UNREADABLE if rep.skipped else EXIT_COMPLETED


def driver_config(args, benchmark: str):
    from ..eval import DriverConfig, reactive_for

    return DriverConfig(fps=args.fps, reactive=reactive_for(benchmark) if args.reactive == "auto" else args.reactive,
                        ask_mode=args.mode, concurrency=args.concurrency, proactive=args.proactive,
                        settle=args.settle, baselines=tuple(b for b in args.baseline.split(",") if b),
                        uniform_k=args.uniform_k, max_side=args.max_side, store=args.store,
                        monitor_every_s=args.monitor_every, pace=args.pace, audio=not getattr(args, "no_audio", False))


def _engine_config(args):
    """The engine's config: the model, and the indexing rate only when asked (the engine indexes
    at its own rate, whatever rate the stream is pushed at)."""
    from ..config import EngineConfig
    from ..llm import parse_llm_spec
    from .common import audio_overrides

    over = {"llm": parse_llm_spec(args.llm), **audio_overrides(args)}
    if getattr(args, "no_audio", False):  # the ablation: no audio path at all, whatever the config says
        over["audio"] = {**over.get("audio", {}), "enabled": False}
    if args.index_fps is not None:
        over["ingest"] = {"fps": args.index_fps}
    if args.text_model:
        over["embed"] = {"text_model": args.text_model}
    cfg = EngineConfig.load(args.config, device=args.device, **over)
    if cfg.embed.text_model is None and cfg.embed.body == "descriptor":  # documents need a text embedder
        cfg = EngineConfig.load(args.config, device=args.device, **over, embed={"text_model": "minilm"})
    return cfg


def cmd_eval(args) -> int:
    if args.check:
        return cmd_check(args)
    from ..eval import (Driver, EngineHost, Judge, Progress, build_report, dump_problems, load_suite, render_report,
                        write_report)

    if not args.llm:
        raise ValueError("eval needs --llm (openai:URL#MODEL or local:DIR): the engine and the baselines use it")
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be at least 1, got {args.limit}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records, fmt, videos = args.records, args.format, args.videos
    if records == "sample":
        from ..eval import SAMPLE_QUESTIONS, prepare_sample_videos

        records, fmt, videos = str(SAMPLE_QUESTIONS), "jsonl", str(prepare_sample_videos(out / "videos"))
    suite = load_suite(records, fmt, videos)
    if args.limit is not None:
        suite.questions = suite.questions[:args.limit]
    dump_problems(suite.problems, out / "problems.jsonl")
    for p in suite.problems:
        print(f"eval: record {p}", file=sys.stderr)
    if not suite.questions:
        print(f"eval: no question could be read from {records}", file=sys.stderr)
        return EXIT_UNREADABLE
    dcfg = driver_config(args, suite.benchmark)
    cfg = _engine_config(args)
    llm = _model(args.llm, cfg.device)
    judge = Judge(_model(args.judge, cfg.device), out / "judge_cache.jsonl") if args.judge else None
    by_video = suite.by_video()
    stop = threading.Event()
    stores = out / "stores" / time.strftime("%Y%m%dT%H%M%S")
    host = EngineHost(stores, cfg, llm, per_video=dcfg.store == "per_video")
    progress = Progress(len(by_video), len(suite.questions), enabled=not args.quiet)
    driver = Driver(host, llm, dcfg, out / "results.jsonl", judge=judge, progress=progress, stop=stop)

    def interrupt(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        print("eval: stopping after the current question (Ctrl-C again to stop now)", file=sys.stderr)
        stop.set()

    old = signal.signal(signal.SIGINT, interrupt) if threading.current_thread() is threading.main_thread() else None
    try:
        outcome = driver.run(suite.videos, by_video)
    except KeyboardInterrupt:
        stop.set()
        print(f"eval: interrupted; results so far in {out / 'results.jsonl'}; run again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)
        host.close()
        for m in {id(llm): llm, id(getattr(judge, "llm", None)): getattr(judge, "llm", None)}.values():
            if m is not None and hasattr(m, "close"):
                m.close()
    tables = build_report(outcome.results, suite.benchmark, args.scoring)
    extra = {"status": outcome.status, "videos": [outcome.videos_done, outcome.videos_total],
             "records": records, "format": suite.layout, "benchmark": suite.benchmark, "llm": args.llm,
             "judge": args.judge, "scoring": args.scoring, "protocol": {**vars(dcfg), "index_fps": cfg.ingest.fps},
             "problems": [p.to_json() for p in suite.problems], "notes": suite.notes}
    jp, cp = write_report(tables, out, extra)
    print(render_report(tables))
    print(f"\nresults: {out / 'results.jsonl'}; report: {jp}, {cp}")
    if outcome.status != "completed":
        print(f"eval: interrupted after {outcome.videos_done}/{outcome.videos_total} streams; run again to resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if not args.keep_stores:
        shutil.rmtree(stores, ignore_errors=True)
    if suite.skipped:
        print(f"eval: {len(suite.skipped)} record(s) could not be read (see {out / 'problems.jsonl'})", file=sys.stderr)
        return EXIT_UNREADABLE
    return EXIT_COMPLETED
