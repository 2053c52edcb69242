"""For the gate tests of the C++ body: the row-kernel instruction sets this machine runs
(``_C._set_isa``), each checked against the reference, and a fixture that puts the body's
settings back after each test (import it into a test module to use it there)."""
import pytest

from vam_engine import _C


def available_isas() -> list[str]:
    out = []
    for name in ("base", "avx2"):
        try:
            _C._set_isa(name)
            out.append(name)
        except ValueError:
            pass
    _C._set_isa("auto")
    return out


ISAS = available_isas()


@pytest.fixture(autouse=True)
def restore_isa_and_threads():
    threads = _C.max_threads()
    _C.set_adaptive_threads(False)  # calls that can use the team do (else they may learn to run alone)
    yield
    _C.set_adaptive_threads(True)
    _C._set_isa("auto")
    _C._set_threads(threads)
