"""The reasoning layer reads the memory through a view only: no SQL, no store, no connection."""
import ast
from pathlib import Path

import vam_engine

REASON = Path(vam_engine.__file__).parent / "reason"
FORBIDDEN_MODULES = {"sqlite3", "vam_engine.memory.store", "vam_engine.memory.db"}
FORBIDDEN_ATTRIBUTES = {"store", "_store", "db", "conn", "execute", "executemany", "reader", "transaction"}
SQL_WORDS = (  # as SQL is written here: upper case
    "SELECT ", "INSERT ", "UPDATE ", "DELETE FROM", "CREATE TABLE")


def _violations(path: Path) -> list[str]:
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
    found = {p.name: v for p in files if (v := _violations(p))}
    assert found == {}, found


def test_the_check_catches_a_module_that_queries_the_store(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import sqlite3\nfrom ..memory.store import Store\n\n"
                   "def latest(view):\n    return view.store.reader().execute('SELECT MAX(t) FROM moments')\n")
    got = _violations(bad)
    assert "imports sqlite3" in got and "imports vam_engine.memory.store" in got
    assert any(".store" in v for v in got) and any("SQL text" in v for v in got)
