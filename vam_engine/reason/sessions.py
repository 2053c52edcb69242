"""Session and dialogue policy: conversations durable in the store (memory/sessions.py), how a
user turn is read and acted on, and the replies written when a session's standing request fires
(reason/replies.py). The answering part (ask.py: ``Answering``) holds it.

A turn is sorted first (``read_turn``; reason/intent.py: the model at frontend priority with a
strict schema, the rules when its reply is unusable; or the kind the caller states), then:

- a question is answered now by the one ask body (``Answering``), recorded as a question turn
  and an answer turn with the answer's evidence (``record_exchange``);
- a request to be told later registers a monitor bound to the session, with the condition
  written from the request; it is acknowledged at once (a "watch" turn, not an alert);
- a cancel ends the session's standing request(s) it names (best effort: the named one, "all",
  else the most recent); a change ends them and registers the new one;
- when a bound monitor fires, the reply writer stores a "reply" turn written by the model.

Every stored turn is published to the turn subscribers (the service's session streams). A
session is bound at creation to the cameras its turns may name: a turn naming another camera
is refused (SessionError). ``ask`` in a session answers through the same bookkeeping without
sorting (a question is a question); ``turn`` is the entry for anything a user may say.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ..config import EngineConfig
from ..errors import VamError
from ..ingest import camera_list
from ..llm import INTENT_KINDS
from ..memory import (Monitor, MonitorSpec, NewTurn, Session, SessionError, SessionLimit, SessionRepository,
                      SessionTurn, WatchNotAllowed, check_session_id)
from .intent import TurnIntent, classify_by_model, classify_by_rules, given, pick_targets
from .monitor import AlertHub, AlertSubscription
from .replies import ReplyStats, ReplyWriter

if TYPE_CHECKING:
    from .answer import Answer

MAX_TURN_TEXT = 4000
MAX_CITED = 10  # evidence records an answer turn keeps


@dataclass
class TurnResult:
    """What ``Engine.turn`` did. ``kind``: "answer" (a question answered now), "watch" (a
    standing request registered and acknowledged) or "cancel" (standing requests ended);
    ``text``: what the engine says back; ``turns``: the user's turn and the engine's, as stored;
    ``intent``: how the turn was read (by the model, the rules, or as given)."""

    kind: str
    text: str
    session_id: str
    turns: tuple[SessionTurn, ...]
    intent: TurnIntent
    answer: "Answer | None" = None
    monitor: Monitor | None = None
    ended: tuple[str, ...] = ()
    timings: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TurnOptions:
    """What ``Engine.turn`` passes beside the text (checked there)."""

    camera: object = None
    as_of: float | None = None
    intent: str | None = None
    condition: str | None = None
    target: str | None = None
    every_s: float | None = None
    may_watch: bool = True
    watch_quota: Callable[[], None] | None = None  # raises when the caller may start no more monitors

    def __post_init__(self):
        if self.intent is not None and self.intent not in INTENT_KINDS:
            raise VamError(f"intent must be one of {', '.join(INTENT_KINDS)}, got {self.intent!r:.40}")
        for name in ("condition", "target"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, str) and 0 < len(v) <= MAX_TURN_TEXT):
                raise VamError(f"{name} must be a non-empty string of at most {MAX_TURN_TEXT} characters, got "
                               f"{v!r:.40}")
        if self.every_s is not None and not (isinstance(self.every_s, (int, float)) and not isinstance(
                self.every_s, bool) and 0 < self.every_s <= 3600):
            raise VamError(f"every_s must be a number in (0, 3600], got {self.every_s!r}")
        if not isinstance(self.may_watch, bool):
            raise VamError(f"may_watch must be True or False, got {self.may_watch!r}")


def _cams(camera) -> tuple[str, ...] | None:
    cams = camera_list(camera, "camera", nonempty=True)
    return None if cams is None else tuple(sorted(set(cams)))


def _where(cams) -> str:
    return "every camera" if cams is None else ("camera " + cams[0] if len(cams) == 1 else "cameras " + ", ".join(cams))


class Sessions:
    """``repo``: the session store; ``monitors``: where standing requests are registered and
    whose alerts are replied to; ``models``: the model (classifier and replies); ``views``:
    ``now(cameras)``, the newest frame of those cameras (a turn's time when no ``as_of``);
    ``remember(watch, reply)``: records a request and its reply in the session's question
    history."""

    def __init__(self, repo: SessionRepository, config: EngineConfig, monitors, models, views,
                 remember: Callable | None = None):
        self.repo = repo
        self._cfg = config.sessions
        self._monitors = monitors
        self._models = models
        self._views = views
        self.hub = AlertHub()  # the alerts' fan-out, carrying turns
        self._lock = threading.Lock()  # one standing-request change at a time (the per-session cap)
        self._replies = ReplyWriter(self.repo, lambda: models.llm, self._publish, keep=self._cfg.max_turns_kept,
                                    workers=self._cfg.reply_workers, remember=remember)
        # subscribed now: a store's standing requests resume with the first ingest and must be replied to
        self._alerts = monitors.subscribe(self._replies.on_alert)

    # -- sessions ------------------------------------------------------------------------------
    def create(self, session_id: str, cameras=None) -> Session:
        """A new session bound to ``cameras``; VamError when one of that id exists."""
        self._retain(check_session_id(session_id))
        sess, created = self.repo.ensure(session_id, _cams(cameras))
        if not created:
            raise SessionError(f"session {session_id!r} exists already")
        return sess

    def open(self, session_id: str, cameras=None) -> Session:
        """The session, created on first use (bound to ``cameras``); SessionError when ended."""
        sess, _ = self.repo.ensure(check_session_id(session_id), _cams(cameras))
        if not sess.open:
            raise SessionError(f"session {session_id!r} has ended; start another")
        return sess

    def get(self, session_id: str, *, after: int | None = None, last: int | None = None) -> Session | None:
        return self.repo.get(session_id, turns=last, after=after)

    def list(self, prefix: str | None = None, include_ended: bool = False) -> list[Session]:
        return self.repo.list(prefix=prefix, include_ended=include_ended)

    def end(self, session_id: str) -> bool:
        """End a session and its standing requests (its turns stay). False: none such was open."""
        for w in self.repo.watches(session_id):
            self._monitors.unwatch(w.monitor_id)
        ended = self.repo.end(session_id)
        self._retain(session_id)
        return ended

    def _retain(self, session_id: str) -> list[str]:
        """The retention of ended sessions (``sessions.ended_per_owner``, ``ended_max_age_s``):
        the owner of ``session_id`` keeps its newest ended ones, and none is kept past the age."""
        owner = session_id[:session_id.find("/") + 1]
        age = self._cfg.ended_max_age_s
        return self.repo.delete_ended(owner=owner, keep=self._cfg.ended_per_owner,
                                      ended_before=time.time() - age if age > 0 else None)

    @staticmethod
    def scope(sess: Session, camera) -> tuple[str, ...] | None:
        """The cameras a turn names (default: the session's), refused outside the session's."""
        cams = _cams(camera)
        if sess.cameras is None:
            return cams
        if cams is None:
            return sess.cameras
        outside = [c for c in cams if c not in sess.cameras]
        if outside:
            raise SessionError(f"session {sess.session_id!r} is bound to {_where(sess.cameras)}; "
                               f"{outside[0]!r} is outside it")
        return cams

    # -- turns ---------------------------------------------------------------------------------
    def record_exchange(self, session_id: str, question: str, answer: "Answer") -> list[SessionTurn]:
        """A question answered in the session becomes its question and answer turns."""
        return self._record(session_id, [NewTurn("user", "question", question, answer.asked_at),
                                         NewTurn("engine", "answer", answer.text, answer.asked_at,
                                                 tuple(answer.evidence[:MAX_CITED]))])

    def read_turn(self, text: str, session_id: str, opts: TurnOptions) -> tuple[Session, tuple | None, TurnIntent]:
        """(the session, the turn's cameras, how the turn reads): the first half of a turn (see
        the module docstring); a question goes to the ask body, anything else to ``act``."""
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TURN_TEXT:
            raise VamError(f"a turn needs a non-empty text of at most {MAX_TURN_TEXT} characters, got "
                           f"{text!r:.60}")
        text = text.strip()
        sess = self.open(session_id)
        cams = self.scope(sess, opts.camera)
        intent = self._read(text, sess, opts)
        if intent.kind in ("watch", "change") and not opts.may_watch:
            raise WatchNotAllowed("a request to be told later registers a monitor, which needs a write token; "
                                  "this token may only ask questions")
        return sess, cams, intent

    def act(self, text: str, sess: Session, cams, intent: TurnIntent, opts: TurnOptions) -> TurnResult:
        """The turn's standing-request change: a cancel, a new request, or a change of one."""
        text = text.strip()
        if intent.kind == "cancel":
            return self._cancel(text, sess, cams, intent, opts.as_of)
        return self._watch(text, sess, cams, intent, opts)

    def _read(self, text: str, sess: Session, opts: TurnOptions) -> TurnIntent:
        if opts.intent is not None:
            return given(opts.intent, text, opts.condition, opts.target)
        if self._cfg.classifier == "rules":
            t0 = time.perf_counter()
            r = classify_by_rules(text)
            r.timings["classify_s"] = time.perf_counter() - t0
            return r
        return classify_by_model(self._models.llm, text, sess.watches)

    def _watch(self, text: str, sess: Session, cams, intent: TurnIntent, opts: TurnOptions) -> TurnResult:
        sid = sess.session_id
        every_s = self._cfg.watch_every_s if opts.every_s is None else opts.every_s
        spec = MonitorSpec(intent.condition, cams, "repeat" if intent.repeat else "once",
                           self._cfg.watch_min_confidence, every_s)
        t = self._now(cams, opts.as_of)
        stored: list = []
        with self._lock:
            ended = self._end_targets(sid, intent) if intent.kind == "change" else []
            held = len(self.repo.watches(sid))
            if held >= self._cfg.max_watches:
                raise SessionLimit(f"session {sid!r} has {held} standing requests, at most {self._cfg.max_watches} "
                                   f"(sessions.max_watches): cancel one first")
            if opts.watch_quota is not None:
                opts.watch_quota()
            said = (f"OK, I'll tell you {'every time' if intent.repeat else 'when'} {intent.condition} "
                    f"(watching {_where(cams)}).")
            if ended:
                said = f"Replaced {len(ended)} standing request(s). " + said

            def bind(m: Monitor) -> None:  # before the monitor can fire: its reply follows these turns
                self.repo.bind(m.monitor_id, sid, text)
                stored.extend(self.repo.add_turns(sid, [NewTurn("user", "watch", text, t, monitor_id=m.monitor_id),
                                                        NewTurn("engine", "watch", said, t, monitor_id=m.monitor_id)],
                                                  self._cfg.max_turns_kept))

            monitor = self._monitors.watch(spec, bind=bind)
        for turn in stored:
            self._publish(turn)
        return TurnResult("watch", said, sid, tuple(stored), intent, monitor=monitor,
                          ended=tuple(w.monitor_id for w in ended))

    def _cancel(self, text: str, sess: Session, cams, intent: TurnIntent, as_of) -> TurnResult:
        sid = sess.session_id
        with self._lock:
            ended = self._end_targets(sid, intent)
        if ended:
            said = "OK, I stopped watching for: " + "; ".join(w.condition for w in ended) + "."
        else:
            said = "There is no standing request to cancel."
        first = ended[0].monitor_id if ended else None
        t = self._now(cams, as_of)
        stored = self._record(sid, [NewTurn("user", "cancel", text, t, monitor_id=first),
                                    NewTurn("engine", "cancel", said, t, monitor_id=first)])
        return TurnResult("cancel", said, sid, tuple(stored), intent, ended=tuple(w.monitor_id for w in ended))

    def _end_targets(self, sid: str, intent: TurnIntent) -> list:
        ended = []
        for w in pick_targets(intent, self.repo.watches(sid)):
            if self._monitors.unwatch(w.monitor_id):
                ended.append(w)
        return ended

    def _now(self, cams, as_of: float | None) -> float | None:
        """A turn's stream time: ``as_of``, else the newest frame of its cameras."""
        if as_of is not None:
            return float(as_of)
        return self._views.now(cams)

    def _record(self, sid: str, turns: list) -> list[SessionTurn]:
        stored = self.repo.add_turns(sid, turns, self._cfg.max_turns_kept)
        for turn in stored:
            self._publish(turn)
        return stored

    def _publish(self, turn: SessionTurn) -> None:
        self.hub.publish(turn)

    # -- streams and lifetime ------------------------------------------------------------------
    def subscribe(self, callback=None) -> AlertSubscription:
        """New turns of every session as they are stored (``turn.session_id`` says whose)."""
        return self.hub.subscribe(callback)

    def drain(self, timeout: float | None = None) -> bool:
        return self._replies.drain(timeout)

    def reply_stats(self) -> ReplyStats:
        return self._replies.stats

    def close(self) -> None:
        self._alerts.close()
        self._replies.close()
