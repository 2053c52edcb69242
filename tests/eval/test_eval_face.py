"""The eval face (vam_engine/eval/__init__.py): its lazy names are the objects their modules
define, the names a type checker sees are the same list, and reading what the CLI's parser and
``--check`` need loads neither the driver nor the engine."""
import ast
import importlib
import subprocess
import sys

import pytest

import vam_engine.eval as face


def test_every_name_of_the_face_is_the_object_its_module_defines():
    assert sorted(face.__all__) == sorted(face._EXPORTS)
    for name, (module, attr) in face._EXPORTS.items():
        assert getattr(face, name) is getattr(importlib.import_module(module), attr), name
    assert face.check_records.__module__ == "vam_engine.eval.check"  # the function, not the submodule check
    assert face.load_suite.__module__ == "vam_engine.eval.loaders"


def test_the_type_checking_block_binds_the_same_names():
    tree = ast.parse(open(face.__file__).read())
    (block,) = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]
    bound = {a.asname or a.name for n in block.body for a in n.names}
    assert bound == set(face.__all__)


def test_an_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no_such_name"):
        face.no_such_name  # noqa: B018


def test_the_parsers_names_and_check_load_neither_the_driver_nor_the_engine():
    code = ("import sys\nfrom vam_engine.eval import BASELINES, FORMATS, SCORINGS, check_records\n"
            "print(sorted(m for m in ('vam_engine.eval.driver', 'vam_engine.engine', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
