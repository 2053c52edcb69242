"""benchmarks/bench_scale.py's request rows on a generated 64-camera store (pushed frames, no
video) against the loopback counting model server: a question about a thing seen on one camera
sends no more images or estimated tokens than the budget, from the store and live, shows that
camera first, summarises every other camera in one line, and the fine stage stays within its own
budget; without the budget (every present whole) the same question sends far more. Not timed."""
from __future__ import annotations

import importlib.util
import sys

import pytest

from support.paths import REPO

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 600
_PATH = REPO / "benchmarks" / "bench_scale.py"
N = 64


@pytest.fixture(scope="module")
def bs():
    sys.path.insert(0, str(_PATH.parent))
    spec = importlib.util.spec_from_file_location("bench_scale", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def store(bs, tmp_path_factory):
    import _scale_store

    return _scale_store.build_store(tmp_path_factory.mktemp("scale"), N, seconds=1.0)


@pytest.mark.parametrize("live", [False, True], ids=["store", "live"])
def test_a_64_camera_question_stays_within_the_budget_and_shows_the_planted_camera_first(bs, store, live):
    row = bs.ask_once(store, N, live=live, budget=True)
    assert row["coarse_images"] <= row["max_images"] == 16
    assert row["coarse_tokens"] <= row["max_tokens"] == 12_000
    assert row["fine_added_images"] <= 32 and row["fine_added_tokens"] <= 12_000
    # the camera where the asked-about thing was seen comes first, chosen for its matching documents
    assert row["planted_position"] == 1 and "matches" in row["planted_reasons"]
    # the others: a few shown, every other one in one line (nothing silently dropped)
    assert row["shown"] == 4 and row["shown"] + row["summarised"] == N and row["unlisted"] == 0
    assert row["fine_evidence"] and row["fine_evidence_on_planted"] == row["fine_evidence"]
    if live:  # each live camera's present is 40 frames: the budget thinned them
        assert row["coarse_images"] == 16


def test_without_the_budget_the_request_grows_with_the_cameras(bs, store):
    row = bs.ask_once(store, N, live=True, budget=False)
    assert row["shown"] == N and row["coarse_images"] == 40 * N and row["coarse_tokens"] > 12_000
