"""Replies to fired standing requests: when a monitor bound to a session alerts, the model writes
the reply to the person who asked (role ``watch_reply``: frontend priority; the alert's frames,
what its check observed and the original request in the prompt), stored as a turn of kind
"reply" with the alert's evidence and handed to ``publish`` (the session's streams).

``on_alert`` is called on the monitor's thread: it only queues the alert. A small pool writes
the replies; alerts of monitors no session started are skipped there. A reply is never lost to
the model: a failure, a blank or runaway reply still stores a reply turn, with the alert's own
observation as its text (``ReplyStats.fallbacks``). ``drain`` waits until every queued alert
has its reply (evaluation pauses the stream clock with it)."""
from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from ..llm import Image, prompts
from ..memory import Alert, Evidence, NewTurn, SessionRepository, SessionTurn, SessionWatch

log = logging.getLogger(__name__)
MAX_REPLY_CHARS = 1000


@dataclass
class ReplyStats:
    """Counts since the writer started; ``latency_s``: alert stored -> reply stored, per reply."""
    replies: int = 0
    fallbacks: int = 0           # the model failed or its reply was unusable: the observation was sent
    skipped: int = 0             # alerts of monitors no session started
    latency_s: list = field(default_factory=list)


def alert_evidence(alert: Alert) -> Evidence:
    """What a reply cites: the frames the firing check saw, over its observed span."""
    return Evidence(alert.camera_id, alert.t, alert.t, alert.moment_ids, alert.frame_paths, alert.confidence,
                    "frame", alert.observed or None)


def fallback_text(watch: SessionWatch, alert: Alert) -> str:
    """The reply without the model: the check's own observation, with camera and time."""
    seen = alert.observed.strip() or watch.condition
    return f"{seen} (camera {alert.camera_id}, t={alert.t:.2f}s)"[:MAX_REPLY_CHARS]


class ReplyWriter:
    """``sessions``: the store's sessions; ``llm()``: the model (built at first use);
    ``publish(turn)``: hands each stored reply to the session's streams; ``remember(watch,
    reply)``: records the request and its reply in the session's question history (so a
    follow-up such as "what colour was it?" sees them); ``keep``: turns a session keeps."""

    def __init__(self, sessions: SessionRepository, llm: Callable, publish: Callable[[SessionTurn], None], *,
                 keep: int, workers: int = 2, remember: Callable | None = None):
        self.sessions = sessions
        self._llm = llm
        self._publish = publish
        self._remember = remember
        self.keep = keep
        self.stats = ReplyStats()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vam-reply")
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = 0
        self._closed = False

    def on_alert(self, alert: Alert) -> None:
        """An alert fired (on the monitor's thread): queue its reply."""
        with self._lock:
            if self._closed:
                return
            self._busy += 1
        try:
            self._pool.submit(self._run, alert)
        except RuntimeError:  # closed meanwhile
            self._done()

    def _done(self) -> None:
        with self._lock:
            self._busy -= 1
            self._idle.notify_all()

    def _run(self, alert: Alert) -> None:
        try:
            watch = self.sessions.watch_of(alert.monitor_id)
            if watch is None:
                with self._lock:
                    self.stats.skipped += 1
                return
            turn = self.reply(watch, alert)
            self._publish(turn)
            if self._remember is not None:
                self._remember(watch, turn)
        except Exception:  # a store failure: logged, never raised into the monitor
            log.exception("reply to alert %s failed", alert.alert_id)
        finally:
            self._done()

    def reply(self, watch: SessionWatch, alert: Alert) -> SessionTurn:
        """Write and store the reply to ``alert`` in ``watch``'s session."""
        text, used_model = self._write(watch, alert)
        (turn,) = self.sessions.add_turns(watch.session_id, [NewTurn(
            "engine", "reply", text, alert.t, (alert_evidence(alert),), alert.monitor_id, alert.alert_id)], self.keep)
        with self._lock:
            self.stats.replies += 1
            self.stats.fallbacks += not used_model
            self.stats.latency_s.append(max(0.0, turn.wall - alert.created_at))
        return turn

    def _write(self, watch: SessionWatch, alert: Alert) -> tuple[str, bool]:
        request = prompts.watch_reply(watch.request, watch.condition, alert.observed, alert.camera_id, alert.t,
                                      [Image(p) for p in alert.frame_paths])
        try:
            reply = self._llm().generate([request])[0].text
        except Exception as e:  # noqa: BLE001 - LLMError, an alert frame deleted meanwhile, a body's bug:
            # the person still hears that it happened
            log.warning("reply to alert %s: the model failed: %s: %s", alert.alert_id, type(e).__name__, e)
            return fallback_text(watch, alert), False
        text = " ".join(reply.split()) if isinstance(reply, str) else ""
        if not text or len(text) > 4 * MAX_REPLY_CHARS:  # blank, or a runaway: not a reply to send
            return fallback_text(watch, alert), False
        return text[:MAX_REPLY_CHARS], True

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued alert has its reply stored; False on timeout."""
        with self._lock:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True)

