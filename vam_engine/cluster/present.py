"""The cameras' present for ``ask`` at the router: each camera's recent frames (its working
memory, reason/working.py) live in the engine of the shard that ingests it, so the router's
two-phase answerer reads them there, one call per camera and question.

FanoutPresent offers what TwoPhaseAnswerer reads of a WorkingMemory (``latest``, ``covers``,
``window``, ``heard`` and the spans). A shard that does not answer has no present here: the answerer
falls back to the store, whose reads then name the shard's cameras as missing.
"""
from __future__ import annotations

from ..reason import WorkingMemory

_SPANS = WorkingMemory(max_side=1)  # the defaults the shards' buffers are built with when no config says


class FanoutPresent:
    """Made per question: its windows are read once and kept for the answer's duration. ``ask``:
    the shards' ``AskConfig`` (their buffers' spans; None: the defaults)."""

    def __init__(self, router, ask=None):
        self._router = router
        spans = _SPANS if ask is None else ask
        self.short_s, self.short_fps = spans.short_s, spans.short_fps
        self.medium_s, self.medium_fps = spans.medium_s, spans.medium_fps
        self._windows: dict[tuple[str, float], tuple[bool, list, list]] = {}

    def _shard(self, camera_id: str) -> str | None:
        return self._router.catalogue.cameras().get(camera_id)

    def _ask(self, camera_id: str, method: str, *args):
        shard = self._shard(camera_id)
        if shard is None:
            return None
        out, _ = self._router.call_many({shard: (method, (camera_id, *args), {})})
        return out.get(shard)

    def latest(self, camera_id: str) -> float | None:
        return self._ask(camera_id, "present_latest")

    def _window(self, camera_id: str, now: float) -> tuple[bool, list, list]:
        key = (camera_id, float(now))
        if key not in self._windows:
            self._windows[key] = self._ask(camera_id, "present_window", float(now)) or (False, [], [])
        return self._windows[key]

    def covers(self, camera_id: str, now: float) -> bool:
        return self._window(camera_id, now)[0]

    def window(self, camera_id: str, now: float) -> tuple[list, list]:
        _, short, medium = self._window(camera_id, now)
        return short, medium

    def heard(self, camera_id: str, t0: float | None = None, t1: float | None = None) -> list:
        """The camera's recent transcript segments ending in (t0, t1] (its shard's ring)."""
        return self._ask(camera_id, "present_heard", t0, t1) or []
