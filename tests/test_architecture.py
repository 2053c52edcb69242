"""The package's architecture as tests: imports run downward only (docs/design.md section 3), the import
graph has no circle, no module imports another's private name, and the reasoning layer reads
the memory through a view only (no SQL, no store, no connection).

Every import counts, module-level or inside a function: a lazy import still ties the layers."""
import ast
from pathlib import Path

import vam_engine

PKG = Path(vam_engine.__file__).parent
REASON = PKG / "reason"

# rank of each top-level module or subpackage: a module may import its own subpackage and any
# lower rank, never its own rank's other packages or a higher rank
LAYERS = {
    "lazy": 0, "urls": 0, "errors": 0, "config": 0, "device": 0, "numerics": 0, "native": 0, "kernels": 0,
    "ingest": 1, "gate": 1, "embed": 1, "llm": 1, "perception": 1, "audio": 1, "synthetic": 1, "tools": 1,
    "vectors": 1,
    "memory": 2,
    "reason": 3, "index": 3, "server": 3, "notify": 3,
    "engine": 4,
    "eval": 5, "cluster": 5,
    "cli": 6,
}
FOUNDATION_ORDER = ["lazy", "urls", "errors", "config", "device", "numerics", "native", "kernels"]  # each imports only earlier ones
# (importer, imported) pairs allowed across one rank: perception embeds crops with the image embedders
SAME_RANK_ALLOWED = {("perception", "embed")}
# (module, imported) exceptions, each with its reason
EXCEPTIONS = {
    # Engine.connect, deprecated for one release: forwards to vam_engine.connect through the package face
    ("vam_engine.engine.core", "vam_engine"),
    ("vam_engine.native", "vam_engine"),  # the one loader of the compiled module vam_engine._C
}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path = PKG) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every vam_engine import in ``path``."""
    name = _module_name(path, root)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == root.name:
                out += [(target, a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names if a.name.split(".")[0] == root.name]
    return out


def _unit(module: str) -> str:
    """The layer unit of a module: its top-level subpackage or module ("" for the package face)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def violations(path: Path, root: Path = PKG, modules: set[str] | None = None) -> list[str]:
    """What ``path`` breaks of the layer contract (``modules``: every module name under ``root``)."""
    modules = set(_all_modules(root)) if modules is None else modules
    me = _module_name(path, root)
    mine = _unit(me)
    out = []
    for target, name, line in imports_of(path, root):
        full = f"{target}.{name}" if name and f"{target}.{name}" in modules else target
        theirs = _unit(full)
        if name and name.startswith("_") and not name.startswith("__") and not (name == "_C" and me.endswith(".native")):
            out.append(f"line {line}: imports the private name {name} of {target}")
        if (me, full) in EXCEPTIONS or theirs == mine or mine == "":
            continue
        if theirs == "":
            out.append(f"line {line}: imports the package face {full} (a layer imports modules, not the face)")
        elif mine not in LAYERS or theirs not in LAYERS:
            out.append(f"line {line}: {me} or {full} is in no layer (add it to LAYERS)")
        elif LAYERS[theirs] > LAYERS[mine] or (LAYERS[theirs] == LAYERS[mine] and LAYERS[mine] > 0
                                               and (mine, theirs) not in SAME_RANK_ALLOWED):
            out.append(f"line {line}: {mine} (rank {LAYERS[mine]}) imports {theirs} (rank {LAYERS[theirs]})")
        elif LAYERS[mine] == 0 and FOUNDATION_ORDER.index(theirs) > FOUNDATION_ORDER.index(mine):
            out.append(f"line {line}: foundation module {mine} imports {theirs}, which comes after it")
    return out


def _all_modules(root: Path = PKG) -> dict[str, Path]:
    return {_module_name(p, root): p for p in root.rglob("*.py")}


def test_imports_run_downward_and_no_private_name_is_imported():
    modules = _all_modules()
    assert len(modules) > 100
    found = {name: v for name, p in sorted(modules.items()) if (v := violations(p, modules=set(modules)))}
    assert found == {}, found


def test_the_import_graph_has_no_circle():
    modules = _all_modules()
    graph = {}
    for name, path in modules.items():
        deps = set()
        for target, imported, _ in imports_of(path):
            full = f"{target}.{imported}" if imported and f"{target}.{imported}" in modules else target
            if full in modules and full != name and (name, full) not in EXCEPTIONS:
                deps.add(full)
        graph[name] = deps
    state, stack, circles = {}, [], []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for d in sorted(graph[n]):
            if state.get(d) == "open":
                circles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[n] = "done"

    for n in sorted(graph):
        if n not in state:
            visit(n)
    assert circles == [], circles


def test_the_layer_check_catches_a_violating_module(tmp_path):
    pkg = tmp_path / "vam_engine"
    (pkg / "memory").mkdir(parents=True)
    (pkg / "server").mkdir()
    for d in (pkg, pkg / "memory", pkg / "server"):
        (d / "__init__.py").write_text("")
    bad = pkg / "memory" / "bad.py"
    bad.write_text("from ..engine.core import Engine\nfrom .search import _space\n\n"
                   "def later():\n    from vam_engine.cli import main\n    from .. import server\n")
    good = pkg / "server" / "fine.py"
    good.write_text("from ..memory.records import Moment\nfrom . import tokens\nfrom ..errors import VamError\n")
    got = violations(bad, pkg)
    assert any("memory (rank 2) imports engine (rank 4)" in v for v in got), got
    assert any("private name _space" in v for v in got), got
    assert any("imports cli (rank 6)" in v and v.startswith("line 5") for v in got), got  # lazy imports count
    assert any("imports server (rank 3)" in v for v in got), got
    assert violations(good, pkg) == []
    face = pkg / "server" / "face.py"
    face.write_text("import vam_engine\n")
    assert any("package face" in v for v in violations(face, pkg))


# -- a subpackage's face is the way in; no module touches another module's private attribute ---------
# subpackages whose face (__init__.py) is the only thing a module outside them imports (every
# subpackage); no module at all touches a private attribute its module does not define
FACES_ENFORCED = {"vam_engine.memory", "vam_engine.memory.forest", "vam_engine.vectors", "vam_engine.cluster",
                  "vam_engine.audio", "vam_engine.embed", "vam_engine.perception", "vam_engine.notify", "vam_engine.tools",
                  "vam_engine.gate", "vam_engine.index", "vam_engine.reason", "vam_engine.llm", "vam_engine.eval",
                  "vam_engine.synthetic", "vam_engine.ingest", "vam_engine.server", "vam_engine.engine", "vam_engine.cli",
                  "vam_engine.config", "vam_engine.eval.loaders", "vam_engine.eval.sample"}


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _face_names(face: str, modules: dict[str, Path]) -> set[str]:
    """The names a face binds by importing them (what it exports)."""
    tree = ast.parse(modules[face].read_text())
    return {a.asname or a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}


def face_violations(path: Path, root: Path = PKG, modules: dict[str, Path] | None = None,
                    enforced=FACES_ENFORCED) -> list[str]:
    """Imports of ``path`` that reach inside an enforced subpackage it is not part of."""
    modules = _all_modules(root) if modules is None else modules
    me = _module_name(path, root)
    out = []
    for target, name, line in imports_of(path, root):
        for face in sorted(enforced):
            if _inside(me, face) or face not in modules:
                continue
            # a submodule named through the face (``from pkg import store``) is inside it too,
            # unless the face exports a name spelled like it (``search``: memory's function)
            sub = f"{target}.{name}" if name and target == face and f"{face}.{name}" in modules else None
            if target.startswith(face + ".") or (sub and name not in _face_names(face, modules)):
                out.append(f"line {line}: imports {sub or target} from inside {face}: import from {face} itself")
    return out


def test_modules_outside_a_subpackage_import_only_its_face():
    modules = _all_modules()
    # every subpackage, a new one included: its face is the way in from the day it is added
    assert FACES_ENFORCED == {name for name, p in modules.items() if p.name == "__init__.py"} - {"vam_engine"}
    found = {name: v for name, p in sorted(modules.items()) if (v := face_violations(p, modules=modules))}
    assert found == {}, found


def private_attribute_violations(path: Path) -> list[str]:
    """``x._name`` (read or written) where ``x`` is not ``self`` or ``cls`` and no class of this
    module defines ``_name`` (a method, a class attribute or an attribute set on ``self``): a
    private attribute of another module's object."""
    tree = ast.parse(path.read_text(), str(path))
    own = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            own.add(node.attr)
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] \
                    if isinstance(stmt, ast.AnnAssign) else []
                own |= {t.id for t in targets if isinstance(t, ast.Name)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")) \
                and node.attr not in own:
            out.append(f"line {node.lineno}: {ast.unparse(node.value)[:40]}.{node.attr} is another module's private")
    return out


def test_no_module_touches_another_modules_private_attribute():
    """Every module, the enforced subpackages' and the rest (top-level modules such as native.py,
    whose compiled module's controls it calls are public)."""
    modules = _all_modules()
    assert {"vam_engine.native", "vam_engine.ingest.source", "vam_engine.llm.local_qwen"} <= set(modules)
    found = {str(p.relative_to(PKG)): v for p in sorted(modules.values()) if (v := private_attribute_violations(p))}
    assert found == {}, found


def test_the_face_and_private_checks_catch_violating_modules(tmp_path):
    pkg = tmp_path / "vam_engine"
    for d in ("memory", "memory/forest", "vectors", "server"):
        (pkg / d).mkdir(parents=True)
    for d in (pkg, pkg / "memory", pkg / "memory" / "forest", pkg / "vectors", pkg / "server"):
        (d / "__init__.py").write_text("")
    (pkg / "memory" / "__init__.py").write_text("from .store import Store\nfrom .search import search\n")
    for m in ("memory/store.py", "memory/search.py", "memory/view.py", "memory/forest/tree.py", "vectors/space.py"):
        (pkg / m).write_text("")
    bad = pkg / "server" / "bad.py"
    bad.write_text("from ..memory.store import Store\nfrom ..memory import view\nfrom ..memory import search, Store\n"
                   "from ..vectors import space\n\ndef later():\n    from vam_engine.memory.forest.tree import E\n")
    inner = pkg / "memory" / "view.py"
    inner.write_text("from .store import Store\nfrom .forest.tree import EventForest\nfrom .forest import EventForest\n")
    got = face_violations(bad, pkg)
    assert [v.split(":")[0] for v in got] == ["line 1", "line 2", "line 4", "line 7", "line 7"], got
    assert any("vam_engine.vectors.space from inside vam_engine.vectors" in v for v in got)
    assert [v.split(":")[0] for v in face_violations(inner, pkg)] == ["line 2"]  # memory is outside forest
    friend = pkg / "vectors" / "snapshot.py"
    friend.write_text("class Ann:\n    def grow(self):\n        self._bits = 1\n\n    @classmethod\n"
                      "    def make(cls):\n        a = cls()\n        a._bits = 2\n        return a\n\n"
                      "def save(space):\n    n = space._n\n    space._vecs = None\n    return space.dim\n\n"
                      "class Owner:\n    def info(self):\n        return len(self._cache._index), load()._rows(1)\n")
    got = private_attribute_violations(friend)
    # a private of what a call returns or of an object held in an attribute counts too
    assert [v.split(":")[0] for v in got] == ["line 12", "line 13", "line 18", "line 18"] and "space._n" in got[0], got
    assert any("self._cache._index" in v for v in got) and any("load()._rows" in v for v in got), got



def test_a_lazy_face_exports_the_names_its_type_checking_block_binds(tmp_path):
    """A face that loads its names at first use (module-level ``__getattr__``, as eval's) exports
    what its ``if TYPE_CHECKING:`` block imports: those names pass, its submodules do not."""
    pkg = tmp_path / "vam_engine"
    for d in ("eval", "cli"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "eval" / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n\ndef __getattr__(name):\n    ...\n\n"
        "if TYPE_CHECKING:\n    from .check import check as check_records\n")
    (pkg / "eval" / "check.py").write_text("def check(path):\n    return path\n")
    user = pkg / "cli" / "run.py"
    user.write_text("from ..eval import check_records\nfrom ..eval import check\nfrom ..eval.check import check\n")
    got = face_violations(user, pkg, enforced={"vam_engine.eval"})
    assert [v.split(":")[0] for v in got] == ["line 2", "line 3"], got

# -- no SQL outside the memory ------------------------------------------------------------------------
def _sql_violations(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [f"imports {a.name}" for a in node.names if a.name == "sqlite3"]
        elif isinstance(node, ast.ImportFrom) and node.module == "sqlite3":
            out.append("imports sqlite3")
        elif isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "executescript"):
            out.append(f"line {node.lineno}: calls .{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and any(w in node.value for w in SQL_WORDS):
            out.append(f"line {node.lineno}: SQL text {node.value[:40]!r}")
    return out


def test_sql_runs_only_inside_the_memory(tmp_path):
    modules = _all_modules()
    found = {name: v for name, p in sorted(modules.items()) if not _inside(name, "vam_engine.memory")
             and (v := _sql_violations(p))}
    assert found == {}, found
    bad = tmp_path / "queries.py"
    bad.write_text("def count(store):\n    return store.db.conn().execute('SELECT COUNT(*) FROM events')\n")
    assert _sql_violations(bad) == ["line 2: calls .execute", "line 2: SQL text 'SELECT COUNT(*) FROM events'"]


# -- the reasoning layer reads the memory through a view only ---------------------------------------
FORBIDDEN_MODULES = {"sqlite3", "vam_engine.memory.store", "vam_engine.memory.db"}
FORBIDDEN_ATTRIBUTES = {"store", "_store", "db", "conn", "execute", "executemany", "reader", "transaction"}
SQL_WORDS = (  # as SQL is written here: upper case
    "SELECT ", "INSERT ", "UPDATE ", "DELETE FROM", "CREATE TABLE")


def _reason_violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [f"imports {a.name}" for a in node.names if a.name in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom):
            mod = ("vam_engine." + (node.module or "").lstrip(".")) if node.level else (node.module or "")
            mod = mod.replace("vam_engine.reason.", "vam_engine.").replace("vam_engine..", "vam_engine.")
            names = {f"{mod}.{a.name}" for a in node.names} | {mod}
            out += [f"imports {n}" for n in names & FORBIDDEN_MODULES]
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            out.append(f"line {node.lineno}: touches .{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and any(
                w in node.value for w in SQL_WORDS):
            out.append(f"line {node.lineno}: SQL text {node.value[:40]!r}")
    return out


def test_reason_modules_hold_no_store_connection_or_sql():
    files = sorted(REASON.glob("*.py"))
    assert len(files) >= 5
    found = {p.name: v for p in files if (v := _reason_violations(p))}
    assert found == {}, found


def test_the_reason_check_catches_a_module_that_queries_the_store(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import sqlite3\nfrom ..memory.store import Store\n\n"
                   "def latest(view):\n    return view.store.reader().execute('SELECT MAX(t) FROM moments')\n")
    got = _reason_violations(bad)
    assert "imports sqlite3" in got and "imports vam_engine.memory.store" in got
    assert any(".store" in v for v in got) and any("SQL text" in v for v in got)
