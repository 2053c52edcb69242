"""The driver's one path to the engine's proactive machinery: a condition registered at its
question's time on the stream's camera, checked on stream time, its first alert read back.

Today this registers an engine monitor directly (``Engine.watch``); routing proactive
questions through a session entry replaces this class alone: the driver only calls ``start``,
``first_alert`` and ``stop``."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Alerted:
    t: float        # the trigger-observation time (stream axis)
    text: str       # what the engine says it observed


class MonitorProactive:
    """Proactive cases of one stream as engine monitors (mode "once": a case alerts once)."""

    def __init__(self, engine, camera: str):
        self.engine, self.camera = engine, camera

    def available(self) -> bool:
        return callable(getattr(self.engine, "watch", None))

    def start(self, condition: str, every_s: float):
        """Register ``condition``; returns the handle ``first_alert`` and ``stop`` take."""
        return self.engine.watch(condition, [self.camera], mode="once", every_s=every_s)

    def first_alert(self, handle, since_t: float, *, settle_s: float | None = None) -> Alerted | None:
        """The first alert of ``handle`` at or after stream time ``since_t`` (None: none yet).
        ``settle_s``: first wait up to that long for checks already due to be judged."""
        if settle_s is not None:
            self.engine.wait_for_monitors(timeout=settle_s)
        alerts = [a for a in self.engine.alerts(monitor_id=handle.monitor_id) if a.t >= since_t - 1e-9]
        if not alerts:
            return None
        a = min(alerts, key=lambda a: a.alert_id)
        return Alerted(a.t, a.observed or "alert")

    def stop(self, handle) -> None:
        self.engine.unwatch(handle.monitor_id)

    def drain(self) -> None:
        """Every check due so far judged (the ``drain`` protocol: ingest waits for monitors)."""
        self.engine.wait_for_monitors()
