"""The row-kernel instruction sets this machine runs (``_C._set_isa``), for the gate tests that
check each one against the reference."""
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
