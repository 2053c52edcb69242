"""Shared helpers: spreading picks evenly, unit vectors, camera-axis time, and the gate record's home."""
import ast
import math

import numpy as np
import pytest

from support.paths import REPO
from vam_engine.memory.records import ABSOLUTE_TIME_MIN, camera_time, is_absolute_time
from vam_engine.numerics import spread_evenly, unit


# -- spread_evenly ---------------------------------------------------------------------------------
def test_spread_evenly_small_cases():
    assert spread_evenly(0, 1) == [] and spread_evenly(0, 0) == [] and spread_evenly(5, 0) == []
    assert spread_evenly(1, 1) == [0] and spread_evenly(7, 1) == [0]
    assert spread_evenly(3, 8) == [0, 1, 2] and spread_evenly(8, 8) == list(range(8))
    assert spread_evenly(9, 2) == [0, 8]
    assert spread_evenly(20, 8) == [0, 3, 5, 8, 11, 14, 16, 19]


@pytest.mark.parametrize("n", list(range(0, 40)) + [1000, 10_001])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 7, 8, 16, 33])
def test_spread_evenly_properties(n, k):
    got = spread_evenly(n, k)
    assert got == sorted(set(got)) and all(0 <= i < n for i in got)
    assert len(got) == min(n, k)
    if n and k >= 2:
        assert got[0] == 0 and got[-1] == n - 1
    if n > k >= 2:
        # evenly: consecutive gaps differ by at most one, and match numpy's rounded linspace
        gaps = np.diff(got)
        assert gaps.max() - gaps.min() <= 1
        assert got == np.linspace(0, n - 1, k).round().astype(int).tolist()


@pytest.mark.parametrize("n, k", [(-1, 2), (3, -1), (2.5, 2), (3, 1.0), (True, 2), ("4", 2)])
def test_spread_evenly_rejects_bad_counts(n, k):
    with pytest.raises(ValueError, match="spread_evenly: (n|k) must be an integer >= 0"):
        spread_evenly(n, k)


def test_spread_evenly_takes_numpy_integers():
    assert spread_evenly(np.int64(5), np.int32(3)) == [0, 2, 4]


# -- unit ------------------------------------------------------------------------------------------
def test_unit_normalises_to_float32():
    u = unit([3, 4], "probe")
    assert u.dtype == np.float32 and u.shape == (2,) and np.allclose(u, [0.6, 0.8])
    big = unit(np.array([3e37, 4e37], np.float32), "probe")  # the norm itself would overflow float32
    assert np.allclose(big, [0.6, 0.8]) and np.isfinite(big).all()
    src = np.array([1.0, 1.0], np.float32)
    out = unit(src, "probe")
    out[0] = 9.0
    assert src[0] == 1.0  # a new array, never the caller's


@pytest.mark.parametrize("v, problem", [
    ([], "empty"), ([1.0, float("nan")], "NaN or inf"), ([float("inf"), 0.0], "NaN or inf"),
    ([1e300, 1.0], "NaN or inf"),  # overflows float32
    (np.zeros(8), "zero vector"), ([[1.0, 2.0]], "must be 1-D"), (5.0, "must be 1-D"),
    (["a", "b"], "not a numeric vector"),
])
def test_unit_names_the_input_and_the_problem(v, problem):
    with pytest.raises(ValueError, match=f"^QA query: .*{problem}"):
        unit(v, "QA query")


def test_unit_checks_the_dimension():
    assert unit(np.ones(4), "q", dim=4).shape == (4,)
    with pytest.raises(ValueError, match="q: embedding has dimension 3, expected 4"):
        unit(np.ones(3), "q", dim=4)


def test_camera_time_prefers_the_absolute_time():
    assert camera_time(12.5, None) == 12.5 and camera_time(12.5, 1_700_000_012.5) == 1_700_000_012.5
    assert camera_time(3, 0.0) == 0.0  # a known t_abs of 0 is still the absolute time
    assert isinstance(camera_time(3, None), float)


def test_is_absolute_time_is_one_threshold():
    assert ABSOLUTE_TIME_MIN == 1e9
    assert is_absolute_time(1_700_000_000.0) and is_absolute_time(math.nextafter(1e9, math.inf))
    assert not is_absolute_time(1e9) and not is_absolute_time(0.0) and not is_absolute_time(86_400 * 365 * 30)


# -- data flows forward: the gates do not import the memory ----------------------------------------
def test_gate_package_does_not_import_memory():
    root = REPO / "vam_engine" / "gate"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = ("." * node.level) + (node.module or "")
                assert "memory" not in mod, f"{path.name} imports {mod}"
    from vam_engine.gate.records import GateRecord
    from vam_engine.memory.records import GateRecord as Stored
    assert Stored is GateRecord


# -- finite_time / time_range: the one check of a time a caller gives --------------------------------------
def test_finite_time_takes_real_numbers_numpy_scalars_included():
    from vam_engine.numerics import finite_time

    assert finite_time(3, "t") == 3.0 and isinstance(finite_time(3, "t"), float)
    assert finite_time(np.float32(1.5), "t") == 1.5 and finite_time(np.int64(-2), "t") == -2.0
    assert finite_time(None, "as_of", optional=True) is None


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), True, "1.0", None, [1.0], np.bool_(True)])
def test_finite_time_refuses_what_is_no_time_naming_the_argument(bad):
    from vam_engine.errors import VamError
    from vam_engine.numerics import TimeError, finite_time

    with pytest.raises(TimeError) as e:
        finite_time(bad, "camera 'c': t")
    assert str(e.value).startswith("camera 'c': t must be a finite time in seconds, got ")
    assert isinstance(e.value, ValueError) and isinstance(e.value, VamError)


def test_finite_time_raises_the_callers_own_error_kind():
    from vam_engine.errors import FrameError
    from vam_engine.numerics import finite_time

    with pytest.raises(FrameError, match="^t must be a finite time"):
        finite_time(float("nan"), "t", error=FrameError)


def test_time_range_checks_each_end_and_their_order():
    from vam_engine.numerics import TimeError, time_range

    assert time_range((1, 2)) == (1.0, 2.0) and time_range((2, 2)) == (2.0, 2.0)
    assert time_range(None, open_ends=True) == (None, None)
    assert time_range((None, 5), open_ends=True) == (None, 5.0)
    with pytest.raises(TimeError, match=r"^delete: the time range starts after it ends \(t0=5 > t1=1\)"):
        time_range((5, 1), "delete: the time range")
    with pytest.raises(TimeError, match=r"^time_range starts at or after it ends \(t0=2 >= t1=2\)"):
        time_range((2, 2), strict=True)
    with pytest.raises(TimeError, match=r"^time_range end must be a finite time"):
        time_range((1, float("nan")))
    with pytest.raises(TimeError, match=r"^time_range start must be a finite time"):
        time_range((None, 1))  # an open end only where the caller allows one
    for bad in (None, 5, (1, 2, 3)):
        with pytest.raises(TimeError, match=r"^range must be a pair \(t0, t1\)"):
            time_range(bad, "range")
    with pytest.raises(TimeError, match=r"^range start must be a finite time"):
        time_range("ab", "range")  # a pair of characters is a pair, of no times
