"""``vam-engine eval``: replay benchmark records (or the bundled sample suite) through the
engine and the baselines, score them and print the seeds' tables.

Exit codes: 0 the run completed and every record was read; 3 it completed but some records
could not be read (skipped, listed in problems.jsonl); 130 interrupted (run the same command
again to resume); 2 an error before or during the run."""
from __future__ import annotations

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
    from ..eval.baselines import BASELINES
    from ..eval.loaders import FORMATS

    sp = sub.add_parser("eval", parents=[g.engine, g.model, g.texts, g.quiet],
                        help="run a benchmark's records (or 'sample') through the engine and baselines, print its tables")
    sp.add_argument("records", help="the records file, or 'sample' for the bundled sample suite")
    sp.add_argument("--format", choices=FORMATS, default="jsonl", help="the records' layout (default jsonl)")
    sp.add_argument("--videos", help="the folder with the benchmark's videos")
    sp.add_argument("--judge", help="the LLM judge for open answers: openai:URL#MODEL (default: a text match)")
    sp.add_argument("--baseline", default="", help=f"comma-separated baselines on the same model: {','.join(BASELINES)}")
    sp.add_argument("--limit", type=int, help="only the first N questions (in record order)")
    sp.add_argument("--out", default="eval-out", help="results, report and caches (default ./eval-out); a re-run resumes")
    sp.add_argument("--fps", type=float, default=2.0, help="the protocol's ingest rate (default 2, StreamArena's)")
    sp.add_argument("--reactive", choices=("pause", "race"), default="pause",
                    help="pause the stream clock while a question is answered, or let the answer race ingest")
    sp.add_argument("--proactive", choices=("drain", "realtime"), default="drain",
                    help="monitors judge every due check before the next frame (drain), or the stream runs at 1x")
    sp.add_argument("--no-settle", action="store_true",
                    help="pause mode: ask at once, without letting the memory writer catch up with the replay first")
    sp.add_argument("--mode", choices=("auto", "two_phase", "agentic"), default="auto", help="Engine.ask mode")
    sp.add_argument("--concurrency", type=int, default=1, help="videos at once (default 1)")
    sp.add_argument("--store", choices=("per_run", "per_video"), default="per_run",
                    help="one store with a fresh camera per video, or a fresh store per video")
    sp.add_argument("--uniform-k", type=int, default=32, help="frames of the uniform baseline at most (default 32)")
    sp.add_argument("--keep-stores", action="store_true", help="keep the engine's stores after a completed run")
    sp.set_defaults(func=cmd_eval)


def _model(spec: str, device: str):
    from ..config import EngineConfig
    from ..llm import make_llm, parse_llm_spec

    return make_llm(EngineConfig.load(None, device="cpu", llm=parse_llm_spec(spec)).llm, device=device)


def cmd_eval(args) -> int:
    from ..config import EngineConfig
    from ..llm import parse_llm_spec
    from ..eval import loaders, report
    from ..eval.driver import Driver, DriverConfig, EngineHost, Progress
    from ..eval.scorers import Judge

    if not args.llm:
        raise ValueError("eval needs --llm (openai:URL#MODEL or local:DIR): the engine and the baselines use it")
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be at least 1, got {args.limit}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records, fmt, videos = args.records, args.format, args.videos
    if records == "sample":
        from ..eval.sample import QUESTIONS, prepare_videos

        records, fmt, videos = str(QUESTIONS), "jsonl", str(prepare_videos(out / "videos"))
    suite = loaders.load(records, fmt, videos)
    if args.limit is not None:
        suite.questions = suite.questions[:args.limit]
    loaders.dump_problems(suite.problems, out / "problems.jsonl")
    for p in suite.problems:
        print(f"eval: skipped record: {p}", file=sys.stderr)
    if not suite.questions:
        print(f"eval: no question could be read from {records}", file=sys.stderr)
        return EXIT_UNREADABLE

    over = {"ingest": {"fps": args.fps}, "llm": parse_llm_spec(args.llm)}
    if args.text_model:
        over["embed"] = {"text_model": args.text_model}
    cfg = EngineConfig.load(args.config, device=args.device, **over)
    if cfg.embed.text_model is None and cfg.embed.body == "descriptor":  # documents need a text embedder
        cfg = EngineConfig.load(args.config, device=args.device, **over, embed={"text_model": "minilm"})
    llm = _model(args.llm, cfg.device)
    judge = Judge(_model(args.judge, cfg.device), out / "judge_cache.jsonl") if args.judge else None
    dcfg = DriverConfig(fps=args.fps, reactive=args.reactive, ask_mode=args.mode, concurrency=args.concurrency,
                        proactive=args.proactive, settle=not args.no_settle,
                        baselines=tuple(b for b in args.baseline.split(",") if b), uniform_k=args.uniform_k,
                        store=args.store)
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
    tables = report.build(outcome.results, suite.benchmark)
    extra = {"status": outcome.status, "videos": [outcome.videos_done, outcome.videos_total],
             "records": records, "format": fmt, "llm": args.llm, "judge": args.judge,
             "problems": [str(p) for p in suite.problems]}
    jp, cp = report.write(tables, out, extra)
    print(report.render(tables))
    print(f"\nresults: {out / 'results.jsonl'}; report: {jp}, {cp}")
    if outcome.status != "completed":
        print(f"eval: interrupted after {outcome.videos_done}/{outcome.videos_total} videos; run again to resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if not args.keep_stores:
        shutil.rmtree(stores, ignore_errors=True)
    if suite.problems:
        print(f"eval: {len(suite.problems)} record(s) could not be read (see {out / 'problems.jsonl'})", file=sys.stderr)
        return EXIT_UNREADABLE
    return EXIT_COMPLETED
