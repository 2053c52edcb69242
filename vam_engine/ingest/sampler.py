"""Which decoded frames become samples. Pure functions of timestamps, so every decoder body
(PyAV, DALI, PyNvVideoCodec) and a resumed run pick exactly the same frames; ``sample_frames``
is the loop all three bodies run. The present (the working memory) has its own TickSampler
over the same decoded frames: its picks never change the index's."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

TICK_EPS = 1e-9  # PTS-derived times are rationals turned into floats; ticks compare with slack


class TickSampler:
    """Ticks at k / fps seconds (k = 0, 1, ...); each tick takes the first frame at or after it.

    A frame that covers several ticks (a gap in a variable-rate stream) is taken once, and the
    next tick is the first one after it. ``resume_after(t)`` restarts as if every frame up to
    and including time t had been seen.
    """

    def __init__(self, fps: float):
        if not (fps > 0 and math.isfinite(fps)):
            raise ValueError(f"sampling fps must be a positive number, got {fps!r}")
        self.interval = 1.0 / fps
        self.next_tick = 0.0

    def accept(self, t: float) -> bool:
        if t + TICK_EPS < self.next_tick:
            return False
        self.resume_after(t)
        return True

    def resume_after(self, t: float) -> None:
        self.next_tick = self.tick_after(t)

    def tick_after(self, t: float) -> float:
        """The first tick after time t (the next tick once a frame at t is taken)."""
        return (math.floor(t / self.interval + TICK_EPS) + 1) * self.interval


class UnionTicks:
    """Several TickSamplers seen as one (the index's and the present's), for PyAV's GOP planner.

    A frame is taken by some sampler iff it is at or after the earliest next tick, and each
    sampler's next tick after a frame at t is its ``tick_after(t)`` whether it took the frame
    or not (a sampler that did not take it had its next tick after t already, and that tick is
    its first one after t). So the union behaves as one TickSampler whose ticks are both grids
    merged: planning against it decodes every frame either sampler takes.
    """

    def __init__(self, *samplers: TickSampler):
        self.samplers = samplers

    @property
    def next_tick(self) -> float:
        return min(s.next_tick for s in self.samplers)

    def tick_after(self, t: float) -> float:
        return min(s.tick_after(t) for s in self.samplers)


@dataclass(frozen=True)
class PresentOnly:
    """A payload only the present may take (keyframes-only mode decoding non-key frames for the
    present): the index sees it as ``None``, a frame that is never a sample."""

    payload: Any


class NearestKeyframeSampler:
    """Keyframe-aligned mode: fed only keyframes, takes for each tick the keyframe nearest to it.

    Needs one keyframe of lookahead: ``offer(t)`` returns the times (0 or 1 of them) of
    earlier keyframes now known to be the nearest to some tick; ``finish(end_t)`` flushes the
    last one. Each keyframe is taken at most once.
    """

    def __init__(self, fps: float):
        self._ticks = TickSampler(fps)
        self.interval = self._ticks.interval
        self.next_tick = 0.0
        self._prev: float | None = None  # last keyframe seen, not yet decided
        self._taken: float | None = None  # last keyframe taken

    def offer(self, t: float) -> list[float]:
        out = []
        prev = self._prev
        # Every tick in (prev, t] is decided now: it goes to whichever of prev, t is nearer.
        while self.next_tick <= t + TICK_EPS:
            tick = self.next_tick
            pick = t if prev is None or (t - tick) < (tick - prev) - TICK_EPS else prev
            if pick != self._taken:
                if pick == prev:
                    out.append(prev)
                    self._taken = prev
                else:
                    self._taken = t
                    out.append(t)
            self.next_tick += self.interval
        self._prev = t
        return out

    def finish(self, end_t: float | None = None) -> list[float]:
        """Ticks after the last keyframe (up to the stream's end) go to that keyframe."""
        if self._prev is None or self._prev == self._taken:
            return []
        end = self._prev if end_t is None else max(end_t, self._prev)
        if self.next_tick <= end + TICK_EPS:
            self._taken = self._prev
            return [self._prev]
        return []

    def resume_after(self, t: float) -> None:
        self._ticks.resume_after(t)
        self.next_tick = self._ticks.next_tick
        self._prev = t
        self._taken = t


def sample_frames(timed: Iterable[tuple[float | None, Any]], sampler: TickSampler | NearestKeyframeSampler, *,
                  keyframes_only: bool, resume_after: float | None, end_t: float | None,
                  make: Callable[[float, Any], Any], hold: Callable[[Any], Any] | None = None,
                  present: TickSampler | None = None, show: Callable[[float, Any], Any] | None = None
                  ) -> Iterator[Any]:
    """The sampling loop every decoder body runs over its decoded frames.

    ``timed`` yields ``(t_rel, payload)`` in presentation order. Frames with no time, or not
    after the last one (out of order after a broken packet), and frames at or before
    ``resume_after`` are dropped; a ``None`` payload keeps its place in the time order but is
    never a sample. ``hold(payload)`` keeps what a frame needs (payloads may be valid only until
    the next one is decoded) and is called only for candidates: taken ticks, and every keyframe
    in keyframes-only mode, which holds one keyframe of lookahead and flushes it with
    ``finish(end_t)``. ``make(t, held)`` builds each sample; nothing else is counted here.

    ``present`` (with ``show``): the present's own TickSampler over the same frames (a
    ``PresentOnly`` payload too); ``show(t, held)`` is yielded for each frame it takes, before
    that frame's sample if it is one as well (the frame is held once for both). The index's
    picks do not depend on it.
    """
    if resume_after is not None:
        sampler.resume_after(resume_after)
        if present is not None:
            present.resume_after(resume_after)
    done = resume_after if resume_after is not None else -math.inf
    last_t = -math.inf
    pending: dict[float, Any] = {}  # keyframes-only mode: one keyframe of lookahead
    for t, payload in timed:
        if t is None or t <= last_t:
            continue
        last_t = t
        if t <= done + TICK_EPS:
            continue
        held = _NONE
        if isinstance(payload, PresentOnly):
            seen, payload = payload.payload, None
        else:
            seen = payload
        if present is not None and seen is not None and present.accept(t):
            held = seen if hold is None else hold(seen)
            yield show(t, held)
        if payload is None:
            continue
        if keyframes_only:
            pending[t] = held if held is not _NONE else (payload if hold is None else hold(payload))
            for take in sampler.offer(t):
                yield make(take, pending[take])
            pending = {t: pending[t]}
        elif sampler.accept(t):
            yield make(t, held if held is not _NONE else (payload if hold is None else hold(payload)))
    if keyframes_only:
        for take in sampler.finish(end_t):
            yield make(take, pending[take])


_NONE = object()  # nothing held yet for this frame
