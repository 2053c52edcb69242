"""Where things are, so no test counts its own folder's depth: the repository root, tests/ and
tests/data (stores written by earlier releases)."""
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
DATA = TESTS / "data"


def unpack_store(version: int, dest: Path, archive: str | None = None) -> Path:
    """The store a release of schema ``version`` wrote (tests/data/store_v<version>.tar.gz, or
    ``archive`` there), unpacked under ``dest``, checked to be that version; returns its directory."""
    import sqlite3
    import tarfile

    with tarfile.open(DATA / (archive or f"store_v{version}.tar.gz")) as tar:
        tar.extractall(dest, filter="data")
    root = Path(dest) / f"store_v{version}"
    with sqlite3.connect(root / "store.sqlite") as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(version),)
    return root
