"""Bounded thread lanes for the request handlers that cost CPU (pages, frames, search).

Why: FastAPI runs a sync handler on any of 40 threads, and under load 40 Python threads take
turns at one GIL in an order nobody chose: on a 2-core machine a page that needs 3 ms of CPU
waited behind dozens of others and the slowest requests took over a second while most took
40 ms. A lane admits only a few handlers at once (``threads``) and queues the rest on the
event loop in arrival order (anyio's CapacityLimiter is FIFO), so a request waits its turn
instead of being starved, the ingest threads and the event loop keep getting the GIL, and
throughput does not drop (the threads beyond two or three added no CPU, only switching).

Search has its own lane: a query embeds an image or a text, several times the cost of a page,
and a burst of them must not hold back the timeline's cheap requests. A lane is a pool every
token draws from: one token has at most ``per_token`` requests running or waiting in each
(429 beyond, naming ``service.lane_requests_per_token``), so it cannot queue the others out.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import anyio
import anyio.to_thread


@dataclass(frozen=True)
class LaneSizes:
    read: int = 2    # moments, events, frames, thumbnails
    search: int = 2  # search (an embedding per query)

    def __post_init__(self):
        for name in ("read", "search"):
            v = getattr(self, name)
            if not (isinstance(v, int) and 1 <= v <= 64):
                raise ValueError(f"lane size {name!r} must be an integer in 1..64, got {v!r}")


class Lanes:
    def __init__(self, sizes: LaneSizes, per_token: int = 16):
        from .ownership import TokenSlots

        self.sizes = sizes
        self._shares = {lane: TokenSlots(per_token, f"requests in the {lane} lane", "service.lane_requests_per_token")
                        for lane in ("read", "search")}
        # built on first use, inside the running loop, so anyio hands out its asyncio limiter directly
        self._limiters: dict[str, anyio.CapacityLimiter] = {}

    def _limiter(self, lane: str) -> anyio.CapacityLimiter:
        lim = self._limiters.get(lane)
        if lim is None:
            lim = self._limiters[lane] = anyio.CapacityLimiter(getattr(self.sizes, lane))
        return lim

    async def run(self, lane: str, fn, *args, token_id: str | None = None, **kwargs):
        """``fn(*args, **kwargs)`` on a worker thread once the lane has room; its result or error.
        ``token_id``: whose request it is (QuotaExceeded over the token's share of the lane)."""
        share = self._shares[lane]
        share.take(token_id)
        try:
            return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs), limiter=self._limiter(lane))
        finally:
            share.give(token_id)

    def waiting(self) -> dict[str, int]:
        """Requests queued per lane (a lane not used yet has none)."""
        return {k: (lim.statistics().tasks_waiting if (lim := self._limiters.get(k)) else 0)
                for k in ("read", "search")}

    def metric_lines(self) -> list[str]:
        from .metrics import metric_family

        out: list[str] = []
        metric_family(out, "vam_http_lane_waiting", "gauge", "requests waiting for a handler thread, by lane",
                [({"lane": k}, v) for k, v in self.waiting().items()])
        return out
