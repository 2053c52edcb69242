"""The replay of one stream into one engine camera: frames pushed in order at the protocol's
rate, each timed question asked before the first frame after its time (``as_of`` = its time),
questions asked at the end once the last frame is in (``as_of`` = the last frame's time),
proactive cases posed at their time as turns of the stream's session (proactive.py: the
engine's user-turn entry) and closed at their first reply or at the end of their window. With
an audio model configured (and the driver's ``audio`` on: ``--no-audio`` is the ablation), the
stream's sound is pushed in step with its frames (audio.py), and a paused clock (a paused
question, a drained monitor check) first waits until what was heard is transcribed."""
from __future__ import annotations

import math
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from . import baselines as B
from .audio import StreamAudio, engine_hears
from .forms import question_text
from .frames import frames_at, stream_frames
from .proactive import SessionProactive
from .protocol import POLL_PERIOD_S, answers_on_alert, case_end
from .records import ENGINE, EvalQuestion, EvalResult, camera_id
from .scorers import ref_at

_SETTLE_S = 600.0      # the longest a settle (or a closing case) waits for the engine
_CHECKS_DUE_S = 60.0   # a case whose window has passed: checks already due are judged first


@dataclass
class _Case:
    q: EvalQuestion
    handle: object
    ends_at: float


class StreamReplay:
    def __init__(self, driver, engine, video, questions: list):
        self.d, self.eng, self.video, self.cfg = driver, engine, video, driver.cfg
        self.cam = driver.cams.get(video.video_id) or camera_id(video.video_id)
        self.timed = deque(q for q in questions if not q.at_end)
        self.at_end = [q for q in questions if q.at_end]
        self.last4: deque = deque(maxlen=4)
        self.history: dict = {m: [] for m in driver.methods if m != ENGINE}  # baselines' dialogue, this stream's
        self.proactive = SessionProactive(engine, self.cam)
        self.cases: list = []
        self.racing: list = []     # (question, future, finish)
        self._pool = ThreadPoolExecutor(2, thread_name_prefix="eval-ask") if self.cfg.reactive == "race" else None
        self._pace_anchor = None   # (stream t, wall) while paced
        self.audio = StreamAudio(engine, self.cam, video) if self.cfg.audio and engine_hears(engine) else None
        self.t = -1.0              # the stream clock: time of the last frame pushed

    def run(self) -> None:
        try:
            for t, rgb in stream_frames(self.video, self.cfg.fps, self.cfg.max_side):
                if self.d.stop.is_set():
                    return
                while self.timed and self.timed[0].time < t:  # due before this frame
                    q = self.timed.popleft()
                    self._due(q, q.time, q.time)
                self._poll_cases(t)
                self._pace(t)
                if self.audio is not None:
                    self.audio.until(t)
                self.eng.push(self.cam, rgb, t)
                self.t = t
                if self.cases and self.cfg.proactive == "drain":
                    self._heard()
                    self.proactive.drain()
                self.last4.append((t, rgb))
                self._collect(block=False)
            if self.audio is not None:
                self.audio.finish()
            if self.t >= 0 or (self.audio is not None and self.audio.seconds):
                self.eng.end_push(self.cam)
            self._heard()
            end = max(self.t, 0.0)
            for q in list(self.timed) + self.at_end:  # asked after the stream's last frame
                if self.d.stop.is_set():
                    return
                self._due(q, end if q.at_end else q.time, end if q.at_end else q.time)
            self._poll_cases(math.inf)
            self._collect(block=True)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)

    def _heard(self) -> None:
        """With the clock paused: everything pushed so far is transcribed (a no-op without audio)."""
        if self.audio is not None:
            self.eng.wait_for_transcripts(timeout=_SETTLE_S)

    def _pace(self, t: float) -> None:
        paced = self.cfg.pace == "realtime" or self.racing or (self.cases and self.cfg.proactive == "realtime")
        if not paced:
            self._pace_anchor = None
            return
        if self._pace_anchor is None:
            self._pace_anchor = (t, time.monotonic())
            return
        t0, w0 = self._pace_anchor
        wait = w0 + (t - t0) - time.monotonic()
        if wait > 0:
            time.sleep(wait)

    # -- questions ---------------------------------------------------------------------------------
    def _result(self, q: EvalQuestion, method: str, t_query: float, **kw) -> EvalResult:
        return EvalResult(q.qid, q.video, method, q.kind, q.category, q.group, q.stratum, t_query, **kw)

    def _due(self, q: EvalQuestion, as_of: float, t_query: float) -> None:
        if q.kind == "proactive":
            self._watch(q)
        else:
            self._ask(q, as_of, t_query, question_text(q))
        for m in self.history:
            self.d.emit(self._baseline(q, m, min(as_of, self.t) if self.t >= 0 else as_of, t_query))

    def _ask(self, q: EvalQuestion, as_of: float, t_query: float, text: str, **extra) -> None:
        if self.cfg.reactive == "race":
            self.racing.append((q, self._pool.submit(self._ask_engine, q, as_of, t_query, text, extra), self._finish))
        else:
            self.d.emit(self._finish(q, self._ask_engine(q, as_of, t_query, text, extra)))

    def _ask_engine(self, q: EvalQuestion, as_of: float, t_query: float, text: str, extra: dict) -> EvalResult:
        if self.cfg.reactive == "pause":
            self._heard()
        if self.cfg.reactive == "pause" and self.cfg.settle:
            self.eng.flush()
            self.eng.wait_for_documents(timeout=_SETTLE_S)
            self.eng.wait_for_answers(timeout=_SETTLE_S)
        t0 = time.perf_counter()
        try:
            ans = self.eng.ask(text, as_of=as_of, camera=self.cam, mode=self.cfg.ask_mode,
                               wait_for_ingest=self.cfg.reactive == "pause")
        except Exception as e:  # one failed answer is a wrong answer with its reason, not a failed run
            return self._result(q, ENGINE, t_query, error=f"{type(e).__name__}: {e}",
                                latency_s=time.perf_counter() - t0, **extra)
        prefill = [v for k, v in ans.timings.items() if k.endswith("_prefill")]
        ev = [[e.t_start, e.t_end] for e in ans.evidence if e.camera_id == self.cam]
        return self._result(q, ENGINE, t_query, response=ans.text,
                            latency_s=ans.timings.get("response_s", time.perf_counter() - t0),
                            prefill_s=sum(prefill) if prefill else None, prompt_tokens=ans.tokens.get("prompt", 0),
                            completion_tokens=ans.tokens.get("completion", 0), evidence=ev, **extra)

    def _finish(self, q: EvalQuestion, r: EvalResult) -> EvalResult:
        self.d.grade(q, r)
        if q.evidence and q.benchmark == "mmlifelong":  # 5-minute bins on the stream's one axis
            r.ref300 = ref_at(r.evidence[:1], [(e.t_start, e.t_end) for e in q.evidence])
        return r

    def _collect(self, block: bool) -> None:
        for item in list(self.racing):
            q, fut, finish = item
            if block or fut.done():
                self.racing.remove(item)
                self.d.emit(finish(q, fut.result()))

    def _baseline(self, q: EvalQuestion, method: str, t: float, t_query: float) -> EvalResult:
        if q.kind == "proactive":
            r = self._result(q, method, t_query, error="unsupported: a baseline answers only when asked")
            self.d.grade(q, r)
            return r
        try:
            if method == "last4":
                frames = [f for f in self.last4 if f[0] <= t]
            else:
                frames = frames_at(self.video, B.uniform_times(t, self.cfg.uniform_k, self.cfg.fps), self.cfg.max_side)
            if not frames:
                raise ValueError(f"no frame of the stream at or before t={t}")
            rep = B.ask_frames(self.d.llm, question_text(q), frames, self.history[method])
        except Exception as e:
            r = self._result(q, method, t_query, error=f"{type(e).__name__}: {e}")
            self.d.grade(q, r)
            return r
        self.history[method].append((question_text(q), rep.text))
        return self._finish(q, self._result(q, method, t_query, response=rep.text, latency_s=rep.latency_s,
                                            prefill_s=rep.prefill_s or None, prompt_tokens=rep.prompt_tokens,
                                            completion_tokens=rep.completion_tokens))

    # -- proactive cases ---------------------------------------------------------------------------
    def _watch(self, q: EvalQuestion) -> None:
        if not self.proactive.available():
            self.d.emit(self._finish(q, self._result(q, ENGINE, q.time, error="this engine has no monitors")))
            return
        every = POLL_PERIOD_S.get(q.benchmark, self.cfg.monitor_every_s)
        try:
            h = self.proactive.start(question_text(q), every)
        except Exception as e:
            self.d.emit(self._finish(q, self._result(q, ENGINE, q.time, error=f"{type(e).__name__}: {e}")))
            return
        self.cases.append(_Case(q, h, case_end(q, self.cfg.tail_s)))

    def _poll_cases(self, t: float) -> None:
        """Close the cases that alerted (or whose window the stream has passed): a StreamArena
        case's response is its alert; a StreamingBench case asks the question itself at the
        alert's time, as its protocol answers at the first yes."""
        for case in list(self.cases):
            over = t > case.ends_at
            q = case.q
            try:
                a = self.proactive.first_alert(case.handle, q.time, settle_s=_CHECKS_DUE_S if over else None)
            except Exception as e:
                self.cases.remove(case)
                self.d.emit(self._finish(q, self._result(q, ENGINE, q.time, error=f"{type(e).__name__}: {e}")))
                continue
            if a is None and not over:
                continue
            self.cases.remove(case)
            try:
                self.proactive.stop(case.handle)
            except Exception:
                pass  # a once-monitor that alerted has ended itself
            if a is not None and a.t > case.ends_at + 1e-9:
                a = None  # after the case's window: no answer in time
            if a is None:
                self.d.emit(self._finish(q, self._result(q, ENGINE, q.time, error="no alert")))
            elif answers_on_alert(q):
                self._ask(q, a.t, q.time, q.question, t_pred=a.t)
            else:  # StreamArena times alerts by the observation, not by decoding
                self.d.emit(self._finish(q, self._result(q, ENGINE, q.time, response=a.text, t_pred=a.t)))
