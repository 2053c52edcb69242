"""The one reading of "a camera id or a list of them" (ingest/camera_ids.py: camera_list) and the
one check of an id, as every entry point that takes cameras sees them."""
import pytest

from vam_engine.errors import VamError
from vam_engine.ingest import CameraIdError, camera_list, check_camera_id


def test_one_id_a_list_a_tuple_and_a_generator_read_as_a_list_in_order():
    assert camera_list("lobby") == ["lobby"]
    assert camera_list(["b", "a", "b"]) == ["b", "a", "b"]  # order and repeats are the caller's
    assert camera_list(("x",)) == ["x"]
    assert camera_list(c for c in ("p", "q")) == ["p", "q"]
    assert camera_list({"only"}) == ["only"]


def test_none_is_no_scope_and_an_empty_list_is_kept_unless_refused():
    assert camera_list(None) is None
    assert camera_list([]) == []
    assert camera_list(None, nonempty=True) is None
    with pytest.raises(CameraIdError, match=r"^camera must be a camera id or a non-empty list"):
        camera_list([], "camera", nonempty=True)


@pytest.mark.parametrize("bad", ["", "   ", ["ok", ""], ["ok", 3], 7, b"cam", {"a": 1}, [None]])
def test_what_is_no_camera_id_is_an_error_naming_the_argument(bad):
    with pytest.raises(CameraIdError) as e:
        camera_list(bad, "watch: cameras")
    assert str(e.value).startswith("watch: cameras must be a camera id or a list of them")
    assert isinstance(e.value, ValueError) and isinstance(e.value, VamError)  # both kinds of caller catch it


def test_check_camera_id_names_camera_id_and_bounds_its_length():
    assert check_camera_id("c" * 256) == "c" * 256
    for bad in ("", " ", "c" * 257, None, 5):
        with pytest.raises(CameraIdError, match=r"^camera_id must be a non-empty string of at most 256"):
            check_camera_id(bad)
