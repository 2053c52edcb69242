"""The ingest face (vam_engine/ingest/__init__.py): the way in for modules outside ingest. Its
lazy names are the objects their modules define, the names a type checker sees are the same
list, and importing the face loads no module it did not load before those names came through it."""
import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import vam_engine.ingest as face

LAZY_MODULES = ("clips", "live", "cameras_file", "poses", "pushed")


def test_every_lazy_name_is_the_object_its_module_defines():
    assert set(face._LAZY) <= set(face.__all__) and len(face.__all__) == len(set(face.__all__))
    for name, module in face._LAZY.items():
        assert getattr(face, name) is getattr(importlib.import_module(module), name), name
    assert face.Pose.__module__ == "vam_engine.ingest.poses" and face.ClipBusy.__module__ == "vam_engine.ingest.clips"
    for name in set(face.__all__) - set(face._LAZY):  # the eager names are bound at import
        assert name in vars(face), name


def test_the_type_checking_block_binds_the_lazy_names():
    tree = ast.parse(Path(face.__file__).read_text())
    (block,) = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]
    assert {a.asname or a.name for n in block.body for a in n.names} == set(face._LAZY)


def test_no_lazy_name_is_spelled_like_a_submodule():
    # importing a submodule binds its name on the package, which would shadow a lazy name so spelled
    submodules = {p.stem for p in Path(face.__file__).parent.glob("*.py")}
    assert submodules >= set(LAZY_MODULES) and not submodules & set(face._LAZY)


def test_an_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no_such_name"):
        face.no_such_name  # noqa: B018


def _loaded_after(statement: str) -> list[str]:
    code = (f"import sys\n{statement}\n"
            f"print(sorted(m for m in {LAZY_MODULES!r} if 'vam_engine.ingest.' + m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return eval(out.stdout.strip())


def test_importing_the_face_loads_the_lazy_modules_only_when_their_names_are_read():
    assert _loaded_after("import vam_engine.ingest") == []
    assert _loaded_after("from vam_engine.ingest import Pose, PresentFrame") == ["poses"]
