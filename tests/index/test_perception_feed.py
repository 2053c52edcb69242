"""The pipeline's perception feed with the real detector: the present's 2 fps frames detected
between kept frames when ``detect_present`` (a thing's last sighting lands between samples),
never on the caller's, gate or commit threads."""
import threading

import pytest

from support import perception_store as ps
from vam_engine.engine import Engine
from vam_engine.perception import PerceptionStage


def config(**perception) -> dict:
    cfg = ps.perception_config()
    cfg["perception"].update(ocr=False, **perception)
    return cfg


@pytest.fixture(scope="module")
def yard(tmp_path_factory):
    return ps.yard_clip(tmp_path_factory.mktemp("feed") / "yard.mp4")


@pytest.mark.needs("perception_models")
def test_present_frames_are_detected_between_kept_frames(yard, tmp_path, monkeypatch):
    threads = set()
    real = PerceptionStage._round

    def spy(self, items):
        threads.add(threading.current_thread().name)
        return real(self, items)
    monkeypatch.setattr(PerceptionStage, "_round", spy)
    seen = {}
    for present in (False, True):
        with Engine(tmp_path / f"s{present}", config(detect_present=present), device="cpu") as eng:
            eng.index_file(str(yard), "yard")
            cat = eng.entities(label="cat")[0]
            seen[present] = cat.seen["yard"]
            feed = eng.info()["perception"]["feed"]
            assert (feed["present_frames"] > 0) == present
            kept = {m.t for m in eng.moments("yard")}
    a, b = ps.CAT_ON_YARD  # shown in whole seconds a..b (until just before b + 1): the present sees more of it
    assert seen[False] == (a, b)
    assert seen[True][0] == a and b < seen[True][1] < b + 1 and seen[True][1] not in kept
    assert threads == {"perception"}  # never the caller's, the gate or the commit thread
