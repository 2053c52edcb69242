"""vam_engine/lazy.py: a face's names loaded at first use."""
import types

import pytest

from vam_engine.lazy import lazy_names


def _face():
    face = types.ModuleType("vam_engine.fakeface")
    face.__all__ = ["join", "sep", "eager"]
    face.eager = 1
    face.__getattr__, face.__dir__ = lazy_names(face.__name__, vars(face),
                                                {"join": ("os.path", "join"), "sep": ("os", "sep")})
    return face


def test_a_lazy_name_is_its_modules_object_and_is_bound_once_read():
    import os

    face = _face()
    assert "join" not in vars(face)
    assert face.join is os.path.join and face.sep == os.sep
    assert vars(face)["join"] is os.path.join  # later reads do not reach __getattr__
    assert dir(face) == ["eager", "join", "sep"]


def test_a_name_that_is_no_export_is_an_attribute_error_naming_the_face_and_the_name():
    with pytest.raises(AttributeError, match=r"'vam_engine.fakeface' has no attribute 'nope'"):
        _face().nope  # noqa: B018
