"""Handler lanes (server/lanes.py), the JSON responses of the hot endpoints, and the heap settle."""
from __future__ import annotations

import asyncio
import gc
import json
import threading
import time

import pytest

from vam_engine.server.heap import settle
from vam_engine.server.jsonify import json_response
from vam_engine.server.lanes import Lanes, LaneSizes


def test_a_lane_runs_at_most_its_size_at_once_in_arrival_order():
    lanes = Lanes(LaneSizes(read=2, search=1))
    lock = threading.Lock()
    running, peak, order = [0], [0], []

    def job(k):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
            order.append(k)
        return k * 10

    async def main():
        tasks = []
        for k in range(8):
            tasks.append(asyncio.create_task(lanes.run("search", job, k)))
            await asyncio.sleep(0)  # each queued before the next arrives
        waiting = lanes.waiting()
        return await asyncio.gather(*tasks), waiting

    results, waiting = asyncio.run(main())
    assert results == [k * 10 for k in range(8)]
    assert peak[0] == 1 and order == list(range(8))  # one at a time, first come first served
    assert waiting["search"] >= 6 and waiting["read"] == 0

    peak[0] = 0

    async def wide():
        return await asyncio.gather(*(lanes.run("read", job, k) for k in range(6)))

    asyncio.run(wide())
    assert peak[0] == 2


def test_a_lane_passes_the_handlers_error_on():
    lanes = Lanes(LaneSizes())

    def bad():
        raise KeyError("gone")

    with pytest.raises(KeyError, match="gone"):
        asyncio.run(lanes.run("read", bad))
    assert "vam_http_lane_waiting" in "\n".join(lanes.metric_lines())


@pytest.mark.parametrize("kw", [{"read": 0}, {"search": 65}, {"read": 1.5}])
def test_lane_sizes_are_checked(kw):
    with pytest.raises(ValueError, match="lane size"):
        LaneSizes(**kw)


def test_json_response_is_compact_utf8_and_refuses_nan():
    r = json_response({"a": [1, 2.5, None], "name": "café"})
    assert r.media_type == "application/json"
    assert r.body == '{"a":[1,2.5,null],"name":"café"}'.encode()
    assert json.loads(r.body) == {"a": [1, 2.5, None], "name": "café"}
    with pytest.raises(ValueError):
        json_response({"x": float("nan")})


def test_settle_freezes_what_is_alive_and_garbage_is_still_collected():
    try:
        frozen = settle()
        # a frozen object that a running thread then frees leaves the permanent generation
        assert frozen > 1000 and 0.99 * frozen <= gc.get_freeze_count() <= frozen

        class Cycle:
            pass

        a, b = Cycle(), Cycle()
        a.other, b.other = b, a
        del a, b
        assert gc.collect() >= 2  # made after the freeze: collected as before
    finally:
        gc.unfreeze()
