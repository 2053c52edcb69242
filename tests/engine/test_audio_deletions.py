"""A deletion and the speech still in flight (engine/audio.py): segments heard before it are
dropped when they arrive; the tombstone lapses once that speech is transcribed, so later speech
(even on a camera whose clock restarted) is stored."""
import math

from vam_engine.audio import TranscriptSegment
from vam_engine.config import EngineConfig
from vam_engine.engine.audio import EngineAudio


class Hub:
    def __init__(self):
        self.heard, self.settled = {}, {}

    def heard_until(self, cam):
        return self.heard.get(cam)

    def settled_until(self, cam):
        return self.settled.get(cam)

    def cameras(self):
        return list(self.heard)


def _audio():
    a = EngineAudio(None, EngineConfig(), "cpu", lambda: None, lambda: None, None)
    a._hub, stored = Hub(), []
    a._writer = lambda segs: stored.extend(segs) or list(segs)
    return a, a._hub, stored


def seg(cam, t0, t1):
    return TranscriptSegment(cam, t0, t1, "words", "en", 0.9)


def test_speech_in_flight_at_a_deletion_is_dropped_and_later_speech_kept():
    a, hub, stored = _audio()
    hub.heard, hub.settled = {"door": 10.0, "yard": 10.0}, {"door": 6.0, "yard": math.inf}
    a.forget(["door", "yard"], 2.0, 8.0)
    assert [ts.heard for ts in a._tombstones] == [{"door": 10.0}]  # nothing of yard's was in flight
    a._on_segments([seg("door", 6.5, 7.5), seg("door", 9.0, 9.5), seg("yard", 6.0, 7.0)])
    assert [(s.camera_id, s.t_start) for s in stored] == [("door", 9.0), ("yard", 6.0)]  # outside / not in flight
    hub.heard["door"], hub.settled["door"] = 3.0, math.inf  # everything heard then is transcribed; clock restarted
    a._on_segments([seg("door", 2.5, 3.0)])
    assert stored[-1].t_start == 2.5 and not a._tombstones


def test_a_deletion_with_nothing_in_flight_leaves_no_tombstone():
    a, hub, stored = _audio()
    hub.heard, hub.settled = {"door": 10.0}, {"door": math.inf}
    a.forget(None, None, None)
    assert not a._tombstones
    a._on_segments([seg("door", 0.0, 1.0)])
    assert len(stored) == 1
