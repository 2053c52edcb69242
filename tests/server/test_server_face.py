"""The server face (vam_engine/server/__init__.py): the way in for the CLI and the cluster. Each
name loads its module at first use: the names are the objects their modules define, a type
checker sees the same list, the records load without the web stack or the MCP SDK, and a
command whose extra is missing says which one to install."""
import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import vam_engine.server as face

WEB = ("fastapi", "starlette", "uvicorn", "mcp")


def test_every_name_of_the_face_is_the_object_its_module_defines():
    assert sorted(face.__all__) == sorted(face._EXPORTS)
    for name, (module, attr) in face._EXPORTS.items():
        assert getattr(face, name) is getattr(importlib.import_module(module), attr), name
    assert face.settle_heap is importlib.import_module("vam_engine.server.heap").settle


def test_the_type_checking_block_binds_the_same_names():
    tree = ast.parse(Path(face.__file__).read_text())
    (block,) = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]
    assert {a.asname or a.name for n in block.body for a in n.names} == set(face.__all__)


def test_no_name_is_spelled_like_a_submodule():
    submodules = {p.stem for p in Path(face.__file__).parent.glob("*.py")}
    assert {"app", "auth", "heap", "http", "mcp", "tokens"} <= submodules and not submodules & set(face.__all__)


def test_an_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no_such_name"):
        face.no_such_name  # noqa: B018


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_records_load_without_the_web_stack_or_the_mcp_sdk():
    code = ("import sys\nfrom vam_engine.server import (SCOPES, LocalBackend, Page, Principal, StoreStats, TokenStore,\n"
            "    check_id, metric_family, settle_heap)\n"
            f"print(sorted(m for m in {WEB!r} if m in sys.modules))")
    out = _run(code)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


# a finder that refuses the named top-level packages, as if their extra were not installed
_BLOCK = ("import sys\nclass Block:\n    def __init__(self, names): self.names = names\n"
          "    def find_spec(self, name, path=None, target=None):\n"
          "        if name.split('.')[0] in self.names: raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
          "sys.meta_path.insert(0, Block(NAMES))\n")


@pytest.mark.parametrize("missing, call, extra", [
    (("fastapi",), "from vam_engine.cli.serve import _web_stack; _web_stack()", "vam_engine[server]"),
    (("mcp",), "from vam_engine.cli.mcp import cmd_mcp; cmd_mcp(None)", "vam_engine[mcp]"),
])
def test_a_command_whose_extra_is_missing_names_the_extra(missing, call, extra):
    code = _BLOCK.replace("NAMES", repr(set(missing))) + (
        "from vam_engine.errors import VamError\ntry:\n    " + call + "\nexcept VamError as e:\n    print(e)\n")
    out = _run(code)
    assert out.returncode == 0 and missing[0] in out.stdout and extra in out.stdout, out.stdout + out.stderr
