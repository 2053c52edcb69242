"""The one loader of the compiled module ``vam_engine._C`` (csrc/: the gate kernel, the
descriptor's area resize, the pushed frames' gray conversion and strided copies).

One policy: the module is part of every install (the build backend, scikit-build-core, builds it), so a missing or broken
build is an error at the first use, saying how to build it; nothing falls back to numpy
silently. The numpy definitions beside each op (``gate/reference.py``,
``embed.descriptor.box_sums_reference``) are the references the tests hold the module to.
"""
from __future__ import annotations

import functools

from .errors import VamError


class NativeModuleMissing(VamError, ImportError):
    """``vam_engine._C`` is not built (or cannot load) in this install."""


@functools.lru_cache(maxsize=1)
def load():
    """The compiled module (imported once); NativeModuleMissing naming how to build it."""
    try:
        from . import _C
    except ImportError as e:
        raise NativeModuleMissing(
            f"vam_engine's compiled module (vam_engine._C) cannot be loaded ({e}): reinstall with "
            f"'pip install .', or in a source checkout 'pip install -e .' (which rebuilds it)") from None
    return _C


def gate_row_pass(frames, ref=None, *, lap: bool = True, hist: bool = True, tile: int = 16):
    """The gate kernel's row pass alone, one thread, no per-frame finish: the thumbnail always,
    the Laplacian sums with ``lap``, the histogram with ``hist``, sum |F - R| and its tiles with
    ``ref``. Returns (thumb f32[N, 64, 64], sum |F - R| i64[N]). For benchmarks' time breakdown."""
    return load().gate_rows(frames, ref, lap=lap, hist=hist, tile=tile)


def set_adaptive_threads(on: bool) -> None:
    """Whether gate calls may fall back to one thread when their calls with helpers have been
    slower (the default, True); False makes every call use the helpers. For tests and benchmarks."""
    load().set_adaptive_threads(bool(on))
