"""The driver's one path to the engine's proactive machinery: the user-turn entry of a session
(``Engine.turn``), as a person would pose a proactive question. Each stream has its own session;
a proactive question is posed there as a turn taken as a request to be told later (the
benchmark says it is one: ``intent="watch"``, its text the condition, as the benchmark words
it), checked on stream time; the session's first reply turn to it is the answer, and the
reply's time (the observation that fired it) the prediction TimeOK scores.

The driver only calls ``start``, ``first_alert``, ``stop`` and ``drain``."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Alerted:
    t: float        # the trigger-observation time (stream axis)
    text: str       # what the engine told the user (the reply turn)


class SessionProactive:
    """Proactive cases of one stream as standing requests of one session (each fires once)."""

    def __init__(self, engine, camera: str, session: str | None = None):
        self.engine, self.camera = engine, camera
        self.session = session or f"eval/{camera}"
        self._seen = 0       # the newest turn id read: each poll reads only newer turns
        self._replies: dict = {}  # monitor id -> reply turns, oldest first

    def available(self) -> bool:
        return callable(getattr(self.engine, "turn", None))

    def start(self, question: str, every_s: float):
        """Pose ``question`` as a request to be told later; returns its monitor (the handle)."""
        r = self.engine.turn(question, session=self.session, camera=[self.camera], intent="watch",
                             condition=question, every_s=every_s)
        return r.monitor

    def first_alert(self, handle, since_t: float, *, settle_s: float | None = None) -> Alerted | None:
        """The first reply to ``handle`` about a time at or after ``since_t`` (None: none yet).
        ``settle_s``: first wait up to that long for checks already due to be judged and their
        replies written."""
        if settle_s is not None:
            self.engine.wait_for_monitors(timeout=settle_s)
            self.engine.wait_for_replies(timeout=settle_s)
        sess = self.engine.session(self.session, after=self._seen)
        for turn in sess.turns if sess is not None else ():
            self._seen = max(self._seen, turn.turn_id)
            if turn.kind == "reply":
                self._replies.setdefault(turn.monitor_id, []).append(turn)
        replies = [t for t in self._replies.get(handle.monitor_id, []) if t.t is not None and t.t >= since_t - 1e-9]
        return Alerted(replies[0].t, replies[0].text) if replies else None

    def stop(self, handle) -> None:
        """End the standing request (a spoken cancel naming it); one that fired ended itself."""
        if any(w.monitor_id == handle.monitor_id for w in self.engine.session(self.session, last=0).watches):
            self.engine.turn("stop watching for that", session=self.session, camera=[self.camera],
                             intent="cancel", target=handle.monitor_id)

    def drain(self) -> None:
        """Every check due so far judged and every reply written (the ``drain`` protocol)."""
        self.engine.wait_for_monitors()
        self.engine.wait_for_replies()
