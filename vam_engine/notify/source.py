"""``Notifier(engine, sinks)``: the engine's alerts, replies, camera states and monitors, handed
to every sink (notify/mqtt.py, notify/webhook.py) as ``Event``s.

Alerts and replies arrive by the engine's subscriptions (``subscribe_alerts``,
``subscribe_turns``: called on the monitor's and the reply writer's threads), where the only
work is a non-blocking put into the notifier's bounded inbox, so no sink ever slows ingest, a
monitor or a reply. The notifier's one thread turns them into events in the order they came (a
reply after its alert) and offers each to the sinks, never waiting either. Camera states (``engine.status()``) and the active monitors
(``engine.monitors()``) are read every ``poll_s`` on the notifier's own thread, and a change
is an event: a camera's state, reconnects or error (a removed camera: state "removed"), a
monitor started or ended. The first read tells the sinks everything as it is."""
from __future__ import annotations

import collections
import logging
import threading
import time

from .events import Event, EventSink, alert_event, monitor_event, reply_event, state_event, state_key
from .outbox import Outbox

log = logging.getLogger(__name__)
REPLY_WAIT_S = 5.0
MAX_PARKED = 1000  # alerts with replies waiting for them


class Notifier:
    def __init__(self, engine, sinks: list[EventSink], *, poll_s: float = 1.0, inbox_max: int = 10_000):
        if poll_s <= 0:
            raise ValueError(f"poll_s must be > 0, got {poll_s!r}")
        self.engine = engine
        self.sinks = list(sinks)
        self.poll_s = poll_s
        self._subs = []
        # what the engine's threads hand over: alerts and replies, in the order they came (one
        # thread turns them into events, so a reply never overtakes its alert)
        self._inbox = Outbox(inbox_max)
        self._conditions: dict[str, str] = {}   # active monitor -> condition (the alert's message names it)
        self._states: dict[str, tuple] = {}     # camera -> state_key of what was told
        # the reply writer hears of an alert before the notifier may: a reply whose alert was not
        # told yet waits for it (at most REPLY_WAIT_S, then it goes alone)
        self._told_alerts: collections.deque = collections.deque(maxlen=1000)
        self._parked: dict[int, list] = {}      # alert id -> [(deadline, reply turn)]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "Notifier":
        for sink in self.sinks:
            sink.start()
        try:
            self.poll()  # everything as it is, first
        except Exception:  # noqa: BLE001 - the next poll tries again; serving goes on
            log.exception("reading camera states and monitors failed")
        if hasattr(self.engine, "subscribe_alerts"):
            self._subs.append(self.engine.subscribe_alerts(lambda a: self._inbox.put(("alert", a))))
        if hasattr(self.engine, "subscribe_turns"):
            self._subs.append(self.engine.subscribe_turns(self._on_turn))
        self._thread = threading.Thread(target=self._run, name="vam-notify", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        """Stop listening, hand over what came, then let each sink deliver what it holds
        (``timeout`` s each at most)."""
        for sub in self._subs:
            sub.close()
        self._subs = []
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for sink in self.sinks:
            try:
                sink.close(timeout)
            except Exception:  # noqa: BLE001 - one sink's failure must not keep the others open
                log.exception("closing %s failed", sink.name)

    def emit(self, event: Event) -> None:
        """``event`` to every sink that takes its kind; never waits."""
        for sink in self.sinks:
            if event.kind in sink.kinds:
                sink.offer(event)

    def _on_turn(self, turn) -> None:  # the reply writer's thread (and a turn's caller)
        if turn.kind == "reply" and turn.role == "engine":
            self._inbox.put(("reply", turn))

    # -- the notifier's thread ------------------------------------------------------------------
    def _run(self) -> None:
        next_poll = time.monotonic() + self.poll_s
        while True:
            item = self._inbox.get(timeout=min(0.1, self.poll_s))
            if item is None and self._stop.is_set():
                return self._release_parked(all_of_them=True)
            try:
                if item is not None:
                    self._handle(*item)
                self._release_parked()
                if time.monotonic() >= next_poll and not self._stop.is_set():
                    next_poll = time.monotonic() + self.poll_s
                    self.poll()
            except Exception:  # noqa: BLE001 - a busy store or a camera's odd status: try again next time
                log.exception("turning the engine's news into events failed")

    def _handle(self, kind: str, record) -> None:
        if kind == "alert":
            event, ended = self._alert(record)
            self.emit(event)
            if ended:  # a monitor that fired and ended between two polls: its entity goes too
                self.emit(monitor_event(record.monitor_id, event.body["condition"], False, time.time()))
            self._told_alerts.append(record.alert_id)
            for _, turn in self._parked.pop(record.alert_id, []):
                self.emit(reply_event(turn))
        elif record.alert_id is None or record.alert_id in self._told_alerts:
            self.emit(reply_event(record))
        else:
            if len(self._parked) >= MAX_PARKED:  # bounded: a flood of replies waits for nothing
                self._release_parked(all_of_them=True)
            self._parked.setdefault(record.alert_id, []).append((time.monotonic() + REPLY_WAIT_S, record))

    def _release_parked(self, all_of_them: bool = False) -> None:
        """Replies that waited REPLY_WAIT_S for their alert (dropped, or fired before start) go alone."""
        now = time.monotonic()
        for alert_id in [a for a, items in self._parked.items() if all_of_them or items[0][0] <= now]:
            for _, turn in self._parked.pop(alert_id):
                self.emit(reply_event(turn))

    def _alert(self, alert) -> tuple[Event, bool]:
        """The alert's event, naming its monitor's condition: a monitor newer than the last poll
        is looked up now (it is told of first), one that ended already among the ended ones
        (then True: the sinks are told it ended, after the alert)."""
        mid = alert.monitor_id
        if mid not in self._conditions:
            self.poll()
        condition, ended = self._conditions.get(mid), False
        if condition is None and hasattr(self.engine, "monitors"):
            condition = next((m.condition for m in self.engine.monitors(include_ended=True) if m.monitor_id == mid),
                             None)
            ended = True
        return alert_event(alert, condition), ended

    def poll(self) -> None:
        """One look at the monitors and camera states; each change becomes an event."""
        now = time.time()
        if hasattr(self.engine, "monitors"):
            active = {m.monitor_id: m for m in self.engine.monitors()}
            for mid, m in active.items():
                if mid not in self._conditions:
                    self._conditions[mid] = m.condition
                    self.emit(monitor_event(mid, m.condition, True, now, m.cameras))
            for mid in set(self._conditions) - set(active):
                self.emit(monitor_event(mid, self._conditions.pop(mid), False, now))
        if hasattr(self.engine, "status"):
            states = {s.camera_id: s.to_json() for s in self.engine.status()}
            for cam, st in states.items():
                key = state_key(st)
                if self._states.get(cam) != key:
                    self._states[cam] = key
                    self.emit(state_event(cam, st, now))
            for cam in set(self._states) - set(states):
                self._states.pop(cam)
                self.emit(state_event(cam, None, now))

    # -- what /metrics shows ------------------------------------------------------------------
    def metric_lines(self) -> list[str]:
        """Prometheus text lines of every sink's counts (labelled by sink name, never its address)."""
        stats = [(s.name, s.stats()) for s in self.sinks]
        families = (("vam_notify_sent_total", "counter", "events delivered", "sent"),
                    ("vam_notify_dropped_total", "counter", "events dropped: the sink's queue was full", "dropped"),
                    ("vam_notify_retries_total", "counter", "tries again after a failed delivery", "retries"),
                    ("vam_notify_dead_letters_total", "counter", "events given up after their tries", "dead_letters"),
                    ("vam_notify_queued", "gauge", "events waiting in the sink's queue", "queued"),
                    ("vam_notify_connections_total", "counter", "successful (re)connections", "connections"))
        out = []
        for name, kind, help_text, field in families:
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
            out += [f'{name}{{sink="{sink}"}} {getattr(st, field)}' for sink, st in stats]
        out += ["# HELP vam_notify_inbox_dropped_total alerts and replies dropped before any sink: the "
                "notifier's inbox was full", "# TYPE vam_notify_inbox_dropped_total counter",
                f"vam_notify_inbox_dropped_total {self._inbox.dropped}"]
        connected = [(sink, st.connected) for sink, st in stats if st.connected is not None]
        if connected:
            out += ["# HELP vam_notify_connected 1 while the sink is connected", "# TYPE vam_notify_connected gauge"]
            out += [f'vam_notify_connected{{sink="{sink}"}} {int(c)}' for sink, c in connected]
        return out
