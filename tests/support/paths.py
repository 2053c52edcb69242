"""Where things are, so no test counts its own folder's depth: the repository root, tests/ and
tests/data (stores written by earlier releases)."""
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
DATA = TESTS / "data"
