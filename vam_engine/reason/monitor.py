"""The monitor worker (StreamMind's Monitor Worker, seed 001 section 2.2 and appendix C.5):
each active monitor checks the latest ``frames`` frames of its cameras every ``every_s`` seconds
of stream time with a strict JSON verdict, and fires when it matches with enough confidence.

Where the work runs, so that watching never slows ingest or answers:

- ``on_frame`` is called by the present (``WorkingMemory``) on the ingest thread for every
  frame it keeps. It only decides that a check is due and snapshots the frames (references to
  the present's read-only arrays): no model call, no I/O.
- Checks run on a small thread pool, at most one in flight per (monitor, camera) so a camera's
  checks are judged in stream order. A check due while the previous one still runs waits in a
  short queue (``max_pending``); when the model cannot keep up the oldest waiting check is
  dropped and counted (``MonitorStats.dropped``), never ingest.
- The model request is tagged ``monitor``: frontend priority (llm/scheduler.py), never queued
  behind event documents or summaries; ``llm.roles.monitor`` may point it at a light model.

Firing: ``match`` and ``confidence >= min_confidence``. ``once`` ends the monitor with its
first alert (in the alert's own transaction); ``repeat`` fires again only after
``repeat_gap_s`` of stream time without a match. The alert's ``t`` is the time of the last
frame the check observed (recorded before delivery). A malformed or hostile verdict (not the
schema, extra keys, out-of-range confidence) never fires, never raises into ingest, and is
counted; the model is not asked to repair it (the next check comes within ``every_s``).

Speech (the audio path's transcripts, through the present's ``hear``). Each check's request
also shows the transcript segments of its camera heard since the previous check. A condition
that quotes words ("someone says 'help'") is checked against every new transcript batch as it
arrives, without a model call: the words found in order in what was heard fire at once
(confidence 1.0; the alert's ``t`` is how far the camera's audio had come when the words were
transcribed, so an utterance is caught once it ends: a pause of ``audio.min_silence_s``); words
not heard fire nothing there, and the frame checks go on as before. A condition about speech
without quoted words ("someone shouts for help") gets a model check, with the new lines, as
each batch arrives.
"""
from __future__ import annotations

import logging
import math
import queue
import re
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..llm import Image, LLMError, parse_monitor_verdict, prompts
from ..memory import CJK, Alert, Monitor, ObservedFrame, is_absolute_time, split_words
from .vigilance import ChangeTest, ConditionSimilarity, RecentRange

log = logging.getLogger(__name__)
_SLACK = 1e-6  # float stream times: 0.5 * 4 is not exactly 2.0
# quoted words in a condition: '...', "...", curly quotes, CJK corner brackets 「...」『...』 (an
# apostrophe inside a word is not a quote; Chinese and Japanese put quotes right after a
# character: 有人说“救命”)
_LATIN_WORD = rf"(?![{CJK}])\w"
_CJK_GAP = re.compile(rf"(?<=[{CJK}]) (?=[{CJK}])")
_QUOTED = re.compile(rf"""(?<!{_LATIN_WORD}|['’])['"‘“「『]([^'"‘’“”「」『』]+?)['"’”」』](?!{_LATIN_WORD})""")
_ABOUT_SPEECH = re.compile(r"\b(say|says|said|saying|speak|speaks|spoke|speaking|talk|talks|talking|shout|shouts|"
                           r"shouting|yell|yells|yelling|scream|screams|call|calls|calling|ask|asks|asking|hear|"
                           r"heard|voice|word|words|mention|mentions|speech)\b", re.IGNORECASE)


def words_of(text: str) -> list[str]:
    """Its words as the full-text index splits them (lower case; each CJK character a word)."""
    return split_words(text)


def shown_phrase(words: list[str]) -> str:
    """A phrase's words as text: spaces between words, none between CJK characters."""
    return _CJK_GAP.sub("", " ".join(words))


def quoted_phrases(condition: str) -> list[list[str]]:
    """The quoted phrases of a monitor's condition, each as its words (lower case)."""
    return [w for w in (words_of(q) for q in _QUOTED.findall(condition)) if w]


def about_speech(condition: str) -> bool:
    """Whether a condition is about something said or heard (its words say so)."""
    return bool(_ABOUT_SPEECH.search(condition))


def says(phrase: list[str], words: list[str]) -> bool:
    """Whether ``phrase`` occurs in ``words`` as consecutive words."""
    n = len(phrase)
    return any(words[i:i + n] == phrase for i in range(len(words) - n + 1))


@dataclass
class MonitorStats:
    """Counts since the worker started."""
    checks: int = 0              # checks due (each one: judged, skipped or dropped)
    model_calls: int = 0
    skipped_unchanged: int = 0   # vigilance: frames like the last judged ones
    skipped_dissimilar: int = 0  # vigilance: far below the condition's recent similarity range
    dropped: int = 0             # waited too long behind a slow model
    malformed: int = 0           # verdicts that did not parse: never fire
    errors: int = 0              # model failures
    alerts: int = 0


@dataclass
class _Check:
    monitor: Monitor
    camera_id: str
    t: float                     # the last observed frame's time (a speech check: how far the audio had come)
    frames: list                 # (array, t), oldest first
    speech: list = field(default_factory=list)  # transcript segments heard since the previous check


@dataclass
class _Watch:
    """One monitor on one camera."""
    next_due: float
    change: ChangeTest
    sims: RecentRange = field(default_factory=RecentRange)
    in_flight: bool = False
    pending: deque = field(default_factory=deque)
    last_positive_t: float | None = None  # the last check that matched (judged or taken over)
    last_verdict: bool = False            # what the model said at the last judged check
    heard_until: float = -math.inf        # end of the last transcript segment a check was shown


class AlertSubscription:
    """Alerts as they fire: iterate, or ``get(timeout)`` (without a callback); ``close`` to stop
    receiving."""

    def __init__(self, hub: "AlertHub", callback: Callable[[Alert], None] | None):
        self._queue: queue.Queue = queue.Queue()
        self._hub = hub
        self.callback = callback
        self.closed = False

    def _deliver(self, alert: Alert) -> None:
        if self.callback is None:
            self._queue.put(alert)
            return
        try:  # a callback subscriber reads nothing from the queue: it is not filled
            self.callback(alert)
        except Exception:  # a subscriber's bug must not stop the monitor
            log.exception("alert callback failed")

    def get(self, timeout: float | None = None) -> Alert | None:
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def __iter__(self):
        while not self.closed:
            alert = self.get(timeout=0.5)
            if alert is not None:
                yield alert

    def close(self) -> None:
        self.closed = True
        self._hub.unsubscribe(self)


class AlertHub:
    """Fans alerts out to subscribers (each with its own queue, so a slow reader delays nobody)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._subscribers: list[AlertSubscription] = []

    def subscribe(self, callback: Callable[[Alert], None] | None = None) -> AlertSubscription:
        sub = AlertSubscription(self, callback)
        with self._lock:
            self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: AlertSubscription) -> None:
        with self._lock:
            if sub in self._subscribers:
                self._subscribers.remove(sub)

    def publish(self, alert: Alert) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for s in subscribers:
            s._deliver(alert)


class MonitorWorker:
    """``repo``: memory/monitors.py's MonitorRepository (monitors, alerts, frame files).
    ``present``: the WorkingMemory frames come from. ``model``: the MLLM contract. ``embedder``:
    the image embedder for the similarity test (None: change test only). ``on_alert``: called
    with each alert once it is stored."""

    def __init__(self, repo, present, model, *, on_alert: Callable[[Alert], None] | None = None,
                 workers: int = 4, max_pending: int = 4, change_min_tile_mad: float = 8.0,
                 vigilance: bool = True, embedder=None):
        self.repo = repo
        self.present = present
        self.model = model
        self.max_pending = max_pending
        self.vigilance = vigilance
        self.change_min_tile_mad = change_min_tile_mad
        self.similarity = ConditionSimilarity(embedder) if embedder is not None and vigilance else None
        self.stats = MonitorStats()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = 0  # checks in flight or waiting
        self._active: dict[str, Monitor] = {}
        self._refs: dict[str, list[np.ndarray]] = {}
        self._vectors: dict[str, np.ndarray | None] = {}
        self._phrases: dict[str, list[list[str]]] = {}  # monitor -> its quoted phrases (module doc)
        self._watches: dict[tuple[str, str], _Watch] = {}
        self.on_alert = on_alert
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vam-monitor")
        self._closed = False
        for m in repo.list():
            self.add(m)
        present.add_listener(self.on_frame)
        present.add_speech_listener(self.on_speech)

    # -- monitors ------------------------------------------------------------------------------
    def add(self, monitor: Monitor) -> None:
        refs = []
        for p in self.repo.reference_images(monitor.monitor_id):
            try:
                refs.append(Image(p).array())
            except OSError as e:  # the monitor still runs on its text; ingest is never stopped by it
                log.warning("monitor %s: reference image %s unreadable: %s", monitor.monitor_id, p, e)
        vectors = None
        if self.similarity is not None:
            try:
                vectors = self.similarity.vectors(monitor.condition, refs)
            except Exception:  # no similarity test for this monitor, the change test still holds
                log.exception("monitor %s: condition embedding failed", monitor.monitor_id)
        with self._lock:
            self._active[monitor.monitor_id] = monitor
            self._refs[monitor.monitor_id] = refs
            self._vectors[monitor.monitor_id] = vectors
            self._phrases[monitor.monitor_id] = quoted_phrases(monitor.condition)

    def remove(self, monitor_id: str) -> None:
        with self._lock:
            self._active.pop(monitor_id, None)
            for key in [k for k in self._watches if k[0] == monitor_id]:
                w = self._watches.pop(key)
                self._busy -= len(w.pending)
                w.pending.clear()
            self._idle.notify_all()

    def active(self) -> list[Monitor]:
        with self._lock:
            return list(self._active.values())

    # -- the ingest side -----------------------------------------------------------------------
    def on_frame(self, camera_id: str, t: float) -> None:
        """A frame at ``t`` reached the camera's present: start the checks now due."""
        starts = []
        with self._lock:
            if self._closed:
                return
            for m in self._active.values():
                if not m.watches(camera_id):
                    continue
                w = self._watch(m, camera_id, t)
                if t < w.next_due - _SLACK:
                    continue
                # every every_s on a grid from the first check; after a gap, from this frame
                w.next_due = w.next_due + m.every_s if t - w.next_due < m.every_s else t + m.every_s
                check = _Check(m, camera_id, t, self._latest_frames(camera_id, t, m.frames),
                               self._heard_since(w, camera_id, t))
                self._enqueue(w, check, starts)
        self._start(starts)

    def _watch(self, m: Monitor, camera_id: str, t: float) -> _Watch:
        key = (m.monitor_id, camera_id)
        w = self._watches.get(key)
        if w is None:
            w = self._watches[key] = _Watch(t, ChangeTest(self.change_min_tile_mad))
        return w

    def _heard_since(self, w: _Watch, camera_id: str, t: float) -> list:
        """Under the lock: the camera's transcript segments heard since the watch's last check
        (ending by ``t``); they are shown to this check only."""
        lines = self.present.heard(camera_id, w.heard_until, t)
        if lines:
            w.heard_until = max(x.t_end for x in lines)
        return lines

    def _enqueue(self, w: _Watch, check: _Check, starts: list) -> None:
        """Under the lock: run the check now (added to ``starts``) or after the one in flight."""
        self.stats.checks += 1
        self._busy += 1
        if w.in_flight:
            if len(w.pending) >= self.max_pending:
                w.pending.popleft()
                self.stats.dropped += 1
                self._busy -= 1
            w.pending.append(check)
        else:
            w.in_flight = True
            starts.append((w, check))

    def _start(self, starts: list) -> None:
        for w, check in starts:
            try:
                self._pool.submit(self._run, w, check)
            except RuntimeError:  # closed meanwhile: the check is not run
                with self._lock:
                    self._busy -= 1
                    w.in_flight = False
                    self._idle.notify_all()

    def on_speech(self, camera_id: str, segments, now: float) -> None:
        """Transcript segments of a camera were just stored (on the ASR thread); ``now``: how
        far its audio had come. Quoted words are looked for at once; a condition about speech
        without quoted words gets a model check (module doc)."""
        heard = words_of(" ".join(x.text for x in segments))
        starts, fires = [], []
        with self._lock:
            if self._closed:
                return
            for m in list(self._active.values()):
                if not m.watches(camera_id):
                    continue
                phrases = self._phrases.get(m.monitor_id) or []
                if not phrases and not about_speech(m.condition):
                    continue
                w = self._watch(m, camera_id, now)
                frames = self._latest_frames(camera_id, now, m.frames)
                if phrases:
                    said = next((p for p in phrases if says(p, heard)), None)
                    if said is not None:
                        fires.append((w, _Check(m, camera_id, now, frames, list(segments)), shown_phrase(said)))
                    continue
                self._enqueue(w, _Check(m, camera_id, now, frames, self._heard_since(w, camera_id, now)), starts)
        self._start(starts)
        for w, check, phrase in fires:
            self._count("checks")
            self._heard(w, check, phrase)

    def _heard(self, w: _Watch, check: _Check, phrase: str) -> None:
        """Quoted words were heard: fire (once / repeat rules as for a model's match)."""
        if self._fires(w, check):
            seg = next((x for x in check.speech if says(words_of(phrase), words_of(x.text))), check.speech[-1])
            self._fire(check, 1.0, f'heard "{seg.text}" ({seg.t_start:.2f}-{seg.t_end:.2f} s): says "{phrase}"')

    def _fires(self, w: _Watch, check: _Check) -> bool:
        """A positive check: whether it fires (``repeat`` only after ``repeat_gap_s`` without a
        match; not once the monitor has ended)."""
        m = check.monitor
        quiet = w.last_positive_t is None or check.t - w.last_positive_t >= m.repeat_gap_s - _SLACK
        w.last_positive_t = check.t
        if m.mode == "repeat" and not quiet:
            return False
        with self._lock:  # unwatched, or a once monitor that fired on another camera
            return m.monitor_id in self._active

    def _latest_frames(self, camera_id: str, t: float, n: int) -> list:
        short, medium = self.present.window(camera_id, t)
        by_t = {ft: a for a, ft in medium}
        by_t.update({ft: a for a, ft in short})
        return [(by_t[ft], ft) for ft in sorted(by_t)[-n:]]

    def _count(self, name: str) -> None:
        with self._lock:
            setattr(self.stats, name, getattr(self.stats, name) + 1)

    # -- the check -----------------------------------------------------------------------------
    def _run(self, w: _Watch, check: _Check) -> None:
        while check is not None:
            try:
                self._judge(w, check)
            except Exception:  # never into the pool silently, never into ingest
                log.exception("monitor %s: check failed", check.monitor.monitor_id)
                self._count("errors")
            with self._lock:
                self._busy -= 1
                check = w.pending.popleft() if w.pending else None
                if check is None:
                    w.in_flight = False
                self._idle.notify_all()

    def _judge(self, w: _Watch, check: _Check) -> None:
        m = check.monitor
        arrays = [a for a, _ in check.frames]
        if not arrays and not check.speech:
            return
        # new speech is news whatever the frames do: vigilance skips only a check without it
        changed, thumbs = w.change.changed(arrays) if self.vigilance and arrays else (True, [])
        if not changed and not check.speech:
            self._count("skipped_unchanged")
            if w.last_verdict:  # the scene the model said matches is still there
                w.last_positive_t = check.t
            return
        vectors = self._vectors.get(m.monitor_id)
        if vectors is not None and arrays and not check.speech:
            score = self.similarity.score(vectors, arrays[-1])
            if w.sims.far_below(score):
                self._count("skipped_dissimilar")
                return
        request = prompts.monitor_check(m.condition, [(Image(a), t) for a, t in check.frames],
                                        [Image(r) for r in self._refs.get(m.monitor_id, [])],
                                        speech=[(x.t_start, x.t_end, x.text) for x in check.speech])
        self._count("model_calls")
        try:
            reply = self.model.generate([request])[0].text
        except LLMError as e:
            log.warning("monitor %s: model failed: %s", m.monitor_id, e)
            self._count("errors")
            return
        try:
            verdict = parse_monitor_verdict(reply if isinstance(reply, str) else "")
        except ValueError as e:
            log.info("monitor %s: unusable verdict: %s", m.monitor_id, e)
            self._count("malformed")
            return
        w.change.judged_now(thumbs)
        positive = verdict.match and verdict.confidence >= m.min_confidence
        w.last_verdict = positive
        if positive and self._fires(w, check):
            self._fire(check, verdict.confidence, verdict.observed_event or verdict.reason)

    def _fire(self, check: _Check, confidence: float, observed: str) -> None:
        m = check.monitor
        frames = [ObservedFrame(np.asarray(a), t) for a, t in check.frames]
        t_abs = check.t if is_absolute_time(check.t) else None
        alert = self.repo.fire(m, check.camera_id, check.t, t_abs, confidence, observed, frames,
                               end_monitor=m.mode == "once")
        if alert is None:
            return
        if m.mode == "once":
            self.remove(m.monitor_id)
        self._count("alerts")
        if self.on_alert is not None:
            self.on_alert(alert)

    # -- lifetime ------------------------------------------------------------------------------
    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every due check is judged (evaluation pauses the stream clock with it)."""
        with self._lock:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    def close(self) -> None:
        self.present.remove_listener(self.on_frame)
        self.present.remove_speech_listener(self.on_speech)
        with self._lock:
            self._closed = True
            for w in self._watches.values():
                self._busy -= len(w.pending)
                w.pending.clear()
        self._pool.shutdown(wait=True)
