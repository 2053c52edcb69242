"""The streaming driver: each video replayed into the engine at the protocol's rate, each
question asked at its time (``as_of`` = that time, nothing later pushed yet), proactive
questions registered as monitors, baselines answered on the same model, every result appended
to results.jsonl as it finishes (a re-run resumes: finished videos are kept, unfinished ones
replayed from the start).

Reactive questions pause the stream clock while answered (``reactive="pause"``, StreamArena's
protocol) or race the stream (``"race"``: frames keep arriving at 1x real time while the answer
is computed). Proactive cases never pause the clock for an answer, but monitors check on
stream time off the ingest path, so an unpaced replay would outrun them: with
``proactive="drain"`` (the default) each frame pushed while a monitor waits is followed by
``Engine.wait_for_monitors`` (every check due is judged before the next frame, as if the model
kept up); with ``"realtime"`` the stream is paced at 1x real time and checks the model cannot
keep up with are dropped, as live. A case ends ``tail_s`` after its event.

A replay pushes frames faster than real time, so in pause mode the memory writer would fall
further behind than it ever would live; ``settle`` (the default) lets it, and the QA history of
earlier answers, catch up with the frames pushed so far before each question is asked (the
clock is stopped meanwhile; latency counts from the question). That also makes a replay with a
deterministic model give the same results every time. Race mode never waits.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import baselines as B
from .frames import frames_at, stream_frames
from .records import ENGINE, EvalQuestion, EvalResult, EvalVideo
from .scorers import extract_option, match_answer, ref_at, time_ok


@dataclass
class DriverConfig:
    fps: float = 2.0                 # the protocol's ingest rate (StreamArena: 2 fps)
    reactive: str = "pause"          # "pause" | "race"
    ask_mode: str = "auto"           # Engine.ask mode
    concurrency: int = 1             # videos at once
    tail_s: float = 30.0             # a proactive case ends this long after its event
    proactive: str = "drain"         # "drain" | "realtime": how the stream waits for monitor checks
    baselines: tuple = ()            # of baselines.BASELINES
    uniform_k: int = 32              # frames of the uniform baseline at most
    max_side: int = 640              # decoded frames are shrunk to this longest side
    settle: bool = True              # pause mode: memory catches up before each question (module doc)
    store: str = "per_run"           # "per_run" (one store, a fresh camera per video) | "per_video"
    # Engine.watch arguments: a check every second of stream time (the engine's default 2 s is
    # as wide as TimeOK's whole late margin)
    watch: dict = field(default_factory=lambda: {"every_s": 1.0})

    def __post_init__(self):
        if self.reactive not in ("pause", "race"):
            raise ValueError(f"reactive must be pause or race, got {self.reactive!r}")
        if self.proactive not in ("drain", "realtime"):
            raise ValueError(f"proactive must be drain or realtime, got {self.proactive!r}")
        if self.store not in ("per_run", "per_video"):
            raise ValueError(f"store must be per_run or per_video, got {self.store!r}")
        bad = [b for b in self.baselines if b not in B.BASELINES]
        if bad:
            raise ValueError(f"unknown baseline(s) {', '.join(bad)}: the baselines are {', '.join(B.BASELINES)}")
        if not (self.concurrency >= 1 and self.fps > 0 and self.uniform_k >= 1):
            raise ValueError("concurrency, fps and uniform_k must be positive")


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


def camera_id(video_id: str) -> str:
    cam = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(video_id).stem if "/" in video_id else video_id)
    return cam[:120] or "video"


class Progress:
    """One line on stderr per finished video and every few seconds: videos, questions, the
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
        parts = [f"eval: videos {self.done_videos}/{self.videos}, questions {asked}/{self.questions}"]
        for m in sorted(dict.fromkeys(r.method for r in self._res), key=lambda m: m != ENGINE):
            scored = [r for r in self._res if r.method == m and r.correct is not None]
            lat = [r.latency_s for r in self._res if r.method == m and r.latency_s is not None]
            if scored:
                acc = 100.0 * sum(r.correct for r in scored) / len(scored)
                parts.append(f"{m} acc {acc:.1f}%" + (f" lat {sum(lat) / len(lat):.2f}s" if lat else ""))
        print(", ".join(parts), file=self.stream, flush=True)


class Scorer:
    """Scores a response: the option for multiple choice, the judge (or a text match without
    one) for open answers, TimeOK as well for proactive ones."""

    def __init__(self, judge=None):
        self.judge = judge

    def score(self, q: EvalQuestion, r: EvalResult) -> None:
        if r.response is None:
            r.correct = None if r.error and r.error.startswith("unsupported") else False
            r.scorer = "option" if q.options else ("judge" if self.judge else "match")
            if q.kind == "proactive":
                r.time_ok = False if r.correct is not None else None
            return
        if q.options:
            r.option = extract_option(r.response, q.options)
            r.correct, r.scorer = r.option is not None and r.option == q.gt_option, "option"
        elif self.judge is not None:
            r.correct, r.scorer = bool(self.judge(q.question, q.answer, r.response)), "judge"
        else:
            r.correct, r.scorer = match_answer(r.response, q.answer), "match"
        if q.kind == "proactive":
            r.time_ok = time_ok(r.t_pred, q.t_gt)
            r.correct = bool(r.correct and r.time_ok)


class _Borrowed:
    """The run's model as an engine sees it: everything delegated but ``close`` (an engine
    closes its model; the next video's engine and the baselines still need this one)."""

    def __init__(self, llm):
        self._llm = llm

    def __getattr__(self, name):
        return getattr(self._llm, name)

    def close(self) -> None:
        pass


class EngineHost:
    """Where each video's camera lives: one engine for the run (``per_run``) or a fresh
    engine in a fresh store per video (``per_video``)."""

    def __init__(self, root: Path, config, llm, per_video: bool):
        self.root, self.config, self.llm, self.per_video = Path(root), config, _Borrowed(llm), per_video
        self._shared = None
        self._lock = threading.Lock()

    def open(self, video_id: str, cam: str):
        from ..engine import Engine

        if self.per_video:
            d = self.root / cam
            shutil.rmtree(d, ignore_errors=True)  # a replayed video starts from an empty store
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
        self.scorer = Scorer(judge)
        self.progress = progress
        self.stop = stop or threading.Event()
        self.on_result = on_result
        self.methods = (ENGINE,) + tuple(config.baselines)

    # -- the run ---------------------------------------------------------------------------------
    def run(self, videos: dict, by_video: dict) -> RunOutcome:
        order = list(by_video)
        self._cams = {}
        for v in order:  # distinct cameras even for videos whose names sanitize alike
            base, k = camera_id(v), 1
            cam = base
            while cam in self._cams.values():
                k += 1
                cam = f"{base}-{k}"
            self._cams[v] = cam
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
        """Keep the results of finished videos; drop an unfinished video's (it is replayed from
        t = 0 in a fresh camera: its memory and dialogue must be rebuilt the same way)."""
        old = self.log.read()
        keep = [r for r in old if r.video in by_video and self._complete(r.video, by_video[r.video], old)]
        if len(keep) != len(old):
            self.log.rewrite(keep)
        return keep

    def _emit(self, r: EvalResult) -> None:
        self.log.append(r)
        if self.progress is not None:
            self.progress.result(r)
        if self.on_result is not None:
            self.on_result(r)

    # -- one video ---------------------------------------------------------------------------------
    def _video(self, video: EvalVideo, questions: list) -> None:
        eng = self.host.open(video.video_id, self._cams[video.video_id])
        try:
            _VideoRun(self, eng, video, questions).run()
        finally:
            self.host.release(eng)
        if not self.stop.is_set() and self.progress is not None:
            self.progress.video_done()


class _VideoRun:
    """The replay of one video into one camera."""

    def __init__(self, driver: Driver, engine, video: EvalVideo, questions: list):
        self.d, self.eng, self.video = driver, engine, video
        self.cfg = driver.cfg
        self.cam = driver._cams.get(video.video_id) or camera_id(video.video_id)
        self.pending = deque(questions)
        self.last4: deque = deque(maxlen=4)
        self.history: dict = {m: [] for m in driver.methods if m != ENGINE}  # baselines' dialogue
        self.watching: list = []   # (question, monitor)
        self.racing: list = []     # (question, future, t0)
        self._pool = ThreadPoolExecutor(2, thread_name_prefix="eval-ask") if self.cfg.reactive == "race" else None
        self._pace_anchor = None   # (stream t, wall) while paced
        self.t = -1.0              # the stream clock: time of the last frame pushed

    def run(self) -> None:
        try:
            for t, rgb in stream_frames(self.video, self.cfg.fps, self.cfg.max_side):
                if self.d.stop.is_set():
                    return
                while self.pending and self.pending[0].time < t:  # due before this frame
                    self._due(self.pending.popleft())
                self._end_watches(t)
                self._pace(t)
                self.eng.push(self.cam, rgb, t, t_abs=None if self.video.origin_abs is None else self.video.axis(t))
                self.t = t
                if self.watching and self.cfg.proactive == "drain":
                    self.eng.wait_for_monitors()
                self.last4.append((t, rgb))
                self._collect_races(block=False)
            if self.t >= 0:
                self.eng.end_push(self.cam)
            while self.pending and not self.d.stop.is_set():  # asked after the video's last frame
                self._due(self.pending.popleft())
            self._end_watches(float("inf"))
            self._collect_races(block=True)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)

    def _pace(self, t: float) -> None:
        speed = 1.0 if self.racing or (self.watching and self.cfg.proactive == "realtime") else 0.0
        if speed <= 0:
            self._pace_anchor = None
            return
        if self._pace_anchor is None:
            self._pace_anchor = (t, time.monotonic())
            return
        t0, w0 = self._pace_anchor
        wait = w0 + (t - t0) / speed - time.monotonic()
        if wait > 0:
            time.sleep(wait)

    # -- questions -----------------------------------------------------------------------------------
    def _result(self, q: EvalQuestion, method: str, **kw) -> EvalResult:
        return EvalResult(q.qid, q.video, method, q.kind, q.category, q.group, q.stratum, q.time, **kw)

    def _due(self, q: EvalQuestion) -> None:
        if q.kind == "proactive":
            self._watch(q)
        elif self.cfg.reactive == "race":
            self.racing.append((q, self._pool.submit(self._ask_engine, q), time.monotonic()))
        else:
            self.d._emit(self._finish(q, self._ask_engine(q)))
        for m in self.history:
            self.d._emit(self._baseline(q, m))

    def _ask_engine(self, q: EvalQuestion) -> EvalResult:
        if self.cfg.reactive == "pause" and self.cfg.settle:
            self.eng.flush()
            self.eng.wait_for_documents(timeout=600.0)
            self.eng.wait_for_answers(timeout=600.0)
        t0 = time.perf_counter()
        try:
            ans = self.eng.ask(B.question_text(q), as_of=self.video.axis(q.time), camera=self.cam,
                               mode=self.cfg.ask_mode, wait_for_ingest=self.cfg.reactive == "pause")
        except Exception as e:  # one failed answer is a wrong answer with its reason, not a failed run
            return self._result(q, ENGINE, error=f"{type(e).__name__}: {e}", latency_s=time.perf_counter() - t0)
        prefill = [v for k, v in ans.timings.items() if k.endswith("_prefill")]
        ev = [[e.t_start - (self.video.origin_abs or 0.0), e.t_end - (self.video.origin_abs or 0.0)]
              for e in ans.evidence if e.camera_id == self.cam]
        return self._result(q, ENGINE, response=ans.text, latency_s=ans.timings.get("response_s", time.perf_counter() - t0),
                            prefill_s=sum(prefill) if prefill else None, prompt_tokens=ans.tokens.get("prompt", 0),
                            completion_tokens=ans.tokens.get("completion", 0), evidence=ev)

    def _finish(self, q: EvalQuestion, r: EvalResult) -> EvalResult:
        self.d.scorer.score(q, r)
        if q.evidence and q.benchmark == "mmlifelong":
            shift = self.video.origin_abs or 0.0  # 5-minute bins on the absolute clock
            r.ref300 = ref_at([(a + shift, b + shift) for a, b in r.evidence[:1]],
                              [(e.t_start + shift, e.t_end + shift) for e in q.evidence])
        return r

    def _collect_races(self, block: bool) -> None:
        for item in list(self.racing):
            q, fut, _ = item
            if block or fut.done():
                self.racing.remove(item)
                self.d._emit(self._finish(q, fut.result()))

    def _baseline(self, q: EvalQuestion, method: str) -> EvalResult:
        if q.kind == "proactive":
            r = self._result(q, method, error="unsupported: a baseline answers only when asked")
            self.d.scorer.score(q, r)
            return r
        try:
            if method == "last4":
                frames = [f for f in self.last4 if f[0] <= q.time]
            else:
                frames = frames_at(self.video, B.uniform_times(q.time, self.cfg.uniform_k, self.cfg.fps),
                                   self.cfg.max_side)
            if not frames:
                raise ValueError(f"no frame of the video at or before t={q.time}")
            rep = B.ask_frames(self.d.llm, q, frames, self.history[method])
        except Exception as e:
            r = self._result(q, method, error=f"{type(e).__name__}: {e}")
            self.d.scorer.score(q, r)
            return r
        self.history[method].append((B.question_text(q), rep.text))
        return self._finish(q, self._result(q, method, response=rep.text, latency_s=rep.latency_s,
                                            prefill_s=rep.prefill_s or None, prompt_tokens=rep.prompt_tokens,
                                            completion_tokens=rep.completion_tokens))

    # -- proactive cases -------------------------------------------------------------------------------
    def _watch(self, q: EvalQuestion) -> None:
        watch = getattr(self.eng, "watch", None)
        if watch is None:
            r = self._result(q, ENGINE, error="this engine has no monitors (Engine.watch)")
            self.d._emit(self._finish(q, r))
            return
        try:
            m = watch(q.question, [self.cam], mode="once", **self.cfg.watch)
        except Exception as e:
            self.d._emit(self._finish(q, self._result(q, ENGINE, error=f"{type(e).__name__}: {e}")))
            return
        self.watching.append((q, m, time.perf_counter()))

    def _end_watches(self, t: float) -> None:
        """Cases whose window (t_gt + tail_s) the stream has passed: their first alert after
        the query is the response; the monitor is removed."""
        for item in list(self.watching):
            q, m, _ = item
            if t <= q.t_gt + self.cfg.tail_s:
                continue
            self.watching.remove(item)
            r = self._result(q, ENGINE)
            try:
                self.eng.wait_for_monitors(timeout=60.0)
                alerts = [a for a in self.eng.alerts(monitor_id=m.monitor_id)
                          if a.t >= self.video.axis(q.time) - 1e-9]
                self.eng.unwatch(m.monitor_id)
            except Exception as e:
                r.error = f"{type(e).__name__}: {e}"
                alerts = []
            if alerts:
                a = min(alerts, key=lambda a: a.alert_id)
                r.response = a.observed or "alert"
                r.t_pred = a.t - (self.video.origin_abs or 0.0)
                r.latency_s = None  # StreamArena times alerts by the observation, not by decoding
            elif r.error is None:
                r.error = "no alert"
            self.d._emit(self._finish(q, r))
