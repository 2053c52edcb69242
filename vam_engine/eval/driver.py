"""The streaming driver: each stream replayed into the engine, each question asked at its time
(``as_of`` = that time, nothing later pushed yet), proactive questions registered at their
time and never prompted again, baselines answered on the same model, every result appended to
results.jsonl as it finishes (a re-run resumes: finished streams are kept, unfinished ones
replayed from the start). protocol.py has the defaults and why; replay.py replays one stream.

Per-stream isolation of question history does not rely on the engine scoping its QA history:
by default each stream gets a fresh engine in a fresh store (``store="per_video"``); the
baselines keep their dialogue per stream. ``per_run`` (one store, a camera per stream) is an
explicit option, for runs that want one store to inspect afterwards."""
from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import baselines as B
from .grade import Grader
from .protocol import CASE_TAIL_S, MONITOR_PERIOD_S
from .records import ENGINE, EvalResult, EvalVideo, camera_id


@dataclass
class DriverConfig:
    fps: float = 2.0                 # the rate frames are pushed at (the protocol's stream; StreamArena: 2 fps)
    reactive: str = "race"           # "race" (the clock keeps running while answering) | "pause"
    ask_mode: str = "auto"           # Engine.ask mode
    concurrency: int = 1             # streams at once
    tail_s: float = CASE_TAIL_S      # a monitored case ends this long after its event (StreamArena: 30 s)
    proactive: str = "realtime"      # "realtime" (1x while monitors wait) | "drain" (every due check judged)
    baselines: tuple = ()            # of baselines.BASELINES
    uniform_k: int = 32              # frames of the uniform baseline at most
    max_side: int | None = None      # None: frames as decoded; else shrunk to this longest side
    settle: bool = False             # pause mode: let memory catch up with the replay before each question
    store: str = "per_video"         # "per_video" (a fresh store per stream) | "per_run"
    monitor_every_s: float = MONITOR_PERIOD_S  # the monitors' check period (StreamingBench polls at its own 1 s)
    pace: str = "fast"               # "fast": unpaced between questions | "realtime": 1x throughout
    audio: bool = True               # push each stream's sound when the engine has an audio model (False: the ablation)

    def __post_init__(self):
        choices = {"reactive": ("pause", "race"), "proactive": ("drain", "realtime"),
                   "store": ("per_run", "per_video"), "pace": ("fast", "realtime")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        bad = [b for b in self.baselines if b not in B.BASELINES]
        if bad:
            raise ValueError(f"unknown baseline(s) {', '.join(bad)}: the baselines are {', '.join(B.BASELINES)}")
        if not (self.concurrency >= 1 and self.fps > 0 and self.uniform_k >= 1 and self.monitor_every_s > 0):
            raise ValueError("concurrency, fps, uniform_k and the monitor period must be positive")
        if self.max_side is not None and self.max_side < 16:
            raise ValueError(f"max_side must be at least 16 pixels, got {self.max_side}")


@dataclass
class RunOutcome:
    status: str                      # "completed" | "interrupted"
    results: list                    # of EvalResult (this run's and the resumed ones)
    videos_done: int
    videos_total: int


class ResultLog:
    """results.jsonl: one EvalResult a line, appended (and flushed) as each finishes."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    def read(self) -> list:
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(EvalResult.from_json(json.loads(line)))
            except (ValueError, TypeError):
                continue  # the torn last line of an interrupted run: that question is asked again
        return out

    def append(self, r: EvalResult) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
                f.flush()
                os.fsync(f.fileno())

    def rewrite(self, results) -> None:
        with self._lock:
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in results)
            os.replace(tmp, self.path)


class Progress:
    """One line on stderr per finished stream and every few seconds: streams, questions, the
    engine's running accuracy (and each baseline's) and mean latency."""

    def __init__(self, videos: int, questions: int, stream=None, every_s: float = 5.0, enabled: bool = True):
        self.videos, self.questions = videos, questions
        self.stream = stream if stream is not None else sys.stderr
        self.every_s, self.enabled = every_s, enabled
        self.done_videos = 0
        self._res: list = []
        self._last = 0.0
        self._lock = threading.Lock()

    def result(self, r: EvalResult) -> None:
        with self._lock:
            self._res.append(r)
            if time.monotonic() - self._last >= self.every_s:
                self._line()

    def video_done(self) -> None:
        with self._lock:
            self.done_videos += 1
            self._line()

    def _line(self) -> None:
        self._last = time.monotonic()
        if not self.enabled:
            return
        asked = len({(r.video, r.qid) for r in self._res})
        parts = [f"eval: streams {self.done_videos}/{self.videos}, questions {asked}/{self.questions}"]
        for m in sorted(dict.fromkeys(r.method for r in self._res), key=lambda m: m != ENGINE):
            scored = [r.score for r in self._res if r.method == m and r.score is not None]
            lat = [r.latency_s for r in self._res if r.method == m and r.latency_s is not None]
            if scored:
                acc = 100.0 * sum(scored) / len(scored)
                parts.append(f"{m} acc {acc:.1f}%" + (f" lat {sum(lat) / len(lat):.2f}s" if lat else ""))
        print(", ".join(parts), file=self.stream, flush=True)


class _Borrowed:
    """The run's model as an engine sees it: everything delegated but ``close`` (an engine
    closes its model; the next stream's engine and the baselines still need this one)."""

    def __init__(self, llm):
        self._llm = llm

    def __getattr__(self, name):
        return getattr(self._llm, name)

    def close(self) -> None:
        pass


class EngineHost:
    """Where each stream's camera lives: a fresh engine in a fresh store per stream
    (``per_video``), or one engine for the run (``per_run``)."""

    def __init__(self, root: Path, config, llm, per_video: bool = True):
        self.root, self.config, self.llm, self.per_video = Path(root), config, _Borrowed(llm), per_video
        self._shared = None
        self._lock = threading.Lock()

    def open(self, video_id: str, cam: str):
        from ..engine import Engine

        if self.per_video:
            d = self.root / cam
            shutil.rmtree(d, ignore_errors=True)  # a replayed stream starts from an empty store
            return Engine(d, self.config, llm=self.llm)
        with self._lock:
            if self._shared is None:
                self._shared = Engine(self.root / "store", self.config, llm=self.llm)
            return self._shared

    def release(self, engine) -> None:
        if self.per_video:
            engine.close()

    def close(self) -> None:
        if self._shared is not None:
            self._shared.close()
            self._shared = None


class Driver:
    def __init__(self, host: EngineHost, llm, config: DriverConfig, results_path, *, judge=None,
                 progress: Progress | None = None, stop: threading.Event | None = None, on_result=None):
        self.host, self.llm, self.cfg = host, llm, config
        self.log = ResultLog(results_path)
        self.grade = Grader(judge)
        self.progress = progress
        self.stop = stop or threading.Event()
        self.on_result = on_result
        self.methods = (ENGINE,) + tuple(config.baselines)
        self.cams: dict = {}

    def run(self, videos: dict, by_video: dict) -> RunOutcome:
        order = list(by_video)
        for v in order:  # distinct cameras even for streams whose names sanitize alike
            base, k = camera_id(v), 1
            cam = base
            while cam in self.cams.values():
                k += 1
                cam = f"{base}-{k}"
            self.cams[v] = cam
        kept = self._resume(by_video)
        todo = [v for v in order if not self._complete(v, by_video[v], kept)]
        if self.progress is not None:
            self.progress.done_videos = len(order) - len(todo)
        if self.cfg.concurrency == 1:
            for v in todo:
                if self.stop.is_set():
                    break
                self._video(videos[v], by_video[v])
        else:
            with ThreadPoolExecutor(self.cfg.concurrency, thread_name_prefix="eval") as ex:
                for f in [ex.submit(self._video, videos[v], by_video[v]) for v in todo]:
                    f.result()
        results = self.log.read()
        done = sum(self._complete(v, by_video[v], results) for v in order)
        status = "completed" if done == len(order) else "interrupted"
        if status == "completed":  # canonical order: the same file however the run was split
            rank = {(v, q.qid): (i, j) for i, v in enumerate(order) for j, q in enumerate(by_video[v])}
            results = sorted(results, key=lambda r: (rank.get((r.video, r.qid), (1 << 30, 0)),
                                                     self.methods.index(r.method) if r.method in self.methods else 99))
            self.log.rewrite(results)
        return RunOutcome(status, results, done, len(order))

    def _complete(self, v: str, qs, results) -> bool:
        have = {r.key() for r in results if r.video == v}
        return all((v, q.qid, m) in have for q in qs for m in self.methods)

    def _resume(self, by_video: dict) -> list:
        """Keep the results of finished streams; drop an unfinished stream's (it is replayed from
        t = 0 in a fresh camera: its memory and dialogue must be rebuilt the same way)."""
        old = self.log.read()
        keep = [r for r in old if r.video in by_video and self._complete(r.video, by_video[r.video], old)]
        if len(keep) != len(old):
            self.log.rewrite(keep)
        return keep

    def emit(self, r: EvalResult) -> None:
        self.log.append(r)
        if self.progress is not None:
            self.progress.result(r)
        if self.on_result is not None:
            self.on_result(r)

    def _video(self, video: EvalVideo, questions: list) -> None:
        from .replay import StreamReplay

        eng = self.host.open(video.video_id, self.cams[video.video_id])
        try:
            StreamReplay(self, eng, video, questions).run()
        finally:
            self.host.release(eng)
        if not self.stop.is_set() and self.progress is not None:
            self.progress.video_done()
