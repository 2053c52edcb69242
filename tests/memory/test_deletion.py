"""Deletion as one protocol (vam_engine/memory/deletion.py): every table that keeps rows of a
camera's time is some registered part's to delete, and ``Store.delete`` really removes a whole
camera's rows from each of them while another camera's stay."""
import sqlite3

import pytest

from vam_engine.memory import Store
from vam_engine.memory.deletion import NOT_DELETED, DeleteRange, Deletes


def camera_tables(conn) -> set[str]:
    """The schema's tables with a camera_id column (derived, so a new one is counted)."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {t for t in names if "camera_id" in {c[1] for c in conn.execute(f"PRAGMA table_info({t})")}}


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store")
    yield s
    s.close()


def claimed(store) -> dict[str, str]:
    out = {}
    for part in store.deleters:
        assert isinstance(part, Deletes), part
        for table in part.tables:
            assert table not in out, f"{table} claimed by {out.get(table)} and {type(part).__name__}"
            out[table] = type(part).__name__
    return out


def test_every_camera_timed_table_is_a_registered_parts_or_kept_with_a_reason(store):
    tables = camera_tables(store.db.conn())
    assert {"moments", "events", "transcripts", "detections", "alerts"} <= tables  # the derivation finds them
    owners = claimed(store)
    assert not set(owners) & set(NOT_DELETED)
    assert set(owners) | set(NOT_DELETED) <= tables, "a part or NOT_DELETED names a table the schema lacks"
    forgotten = tables - set(owners) - set(NOT_DELETED)
    assert forgotten == set(), f"no part of Store.deleters deletes the rows of {sorted(forgotten)}"


def _fill(path, tables: set[str], cameras: list[str]) -> None:
    """One row per camera in each table, every column given a value of its declared type (foreign
    keys off: the rows stand alone). Distinct per camera, so unique keys hold."""
    conn = sqlite3.connect(path)
    try:
        for table in sorted(tables):
            cols = [(c[1], c[2].upper(), c[5]) for c in conn.execute(f"PRAGMA table_info({table})")]
            for k, cam in enumerate(cameras):
                values = {}
                for name, kind, pk in cols:
                    if name == "camera_id":
                        values[name] = cam
                    elif pk and kind == "INTEGER" and sum(p > 0 for _, _, p in cols) == 1:
                        continue  # the rowid: SQLite numbers it
                    elif kind == "INTEGER":
                        values[name] = k + 1
                    elif kind == "REAL":
                        values[name] = 5.0 + k
                    elif kind == "BLOB":
                        values[name] = b""
                    else:
                        values[name] = "[]"  # TEXT: JSON lists parse, names are just text
                conn.execute(f"INSERT INTO {table} ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                             list(values.values()))
        conn.commit()
    finally:
        conn.close()


def test_deleting_a_camera_empties_its_rows_in_every_registered_table(store):
    tables = set(claimed(store))
    _fill(store.db.path, tables, ["gone", "kept"])
    conn = store.db.conn()

    def rows(cam):
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t} WHERE camera_id=?", (cam,)).fetchone()[0] for t in tables}

    assert all(rows("gone").values()) and all(rows("kept").values())
    out = store.delete(["gone"])
    left = {t: n for t, n in rows("gone").items() if n}
    assert left == {}, f"Store.delete left rows of the deleted camera in {left}"
    assert all(rows("kept").values()), rows("kept")  # the other camera's rows stay
    assert out.moments == 1 and out.events == 1 and out.transcripts == 1 and out.alerts == 1
    assert out.detections == 1 and out.ocr_lines == 1 and "gone" in out.cameras and "kept" not in out.cameras


def test_a_range_selects_overlapping_rows_of_its_cameras():
    scope = DeleteRange(("a", "b"), 1.0, 2.0)
    assert scope.where("t_start", "t_end") == (" WHERE camera_id IN (?,?) AND t_end>=? AND t_start<=?",
                                               ["a", "b", 1.0, 2.0])
    assert scope.where("t0", "t1", every_camera_rows=True)[0].startswith(" WHERE (camera_id IS NULL OR camera_id IN")
    assert DeleteRange(None, None, 3.0).where("t") == (" WHERE t<=?", [3.0]) and not DeleteRange(None, None, 3.0).whole
    assert DeleteRange(None, None, None).where("t") == ("", []) and DeleteRange(None, None, None).whole
