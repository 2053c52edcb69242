"""Import a module of kernels/ so that its kernels run here: natively with a CUDA device, else
under the Triton interpreter on CPU tensors.

Triton reads TRITON_INTERPRET when it defines a kernel, its own library functions included, so
the variable is set before triton is imported; a triton imported earlier without it (torch._dynamo
imports it, for one) is imported afresh (its compiled extension triton._C stays loaded: it cannot
be initialised twice), and a kernel module defined before is reloaded.
"""
from __future__ import annotations

import importlib
import os
import sys

from .paths import REPO


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _interpreter_ready() -> bool:
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.standard.sum, InterpretedFunction)


def load_kernels(name: str, probe: str):
    """The module kernels/<name>.py as vam_engine.kernels.<name>; ``probe``: one of its kernels,
    checked to be interpreted when there is no CUDA device."""
    cuda = has_cuda()
    if not cuda:
        os.environ["TRITON_INTERPRET"] = "1"
        if not _interpreter_ready():
            for mod in [m for m in sys.modules if m == "triton" or m.startswith("triton.")]:
                if not mod.startswith("triton._C"):
                    del sys.modules[mod]
            assert _interpreter_ready()
    try:
        mod = importlib.import_module(f"vam_engine.kernels.{name}")
    except ModuleNotFoundError:  # before the package install maps kernels/ to vam_engine.kernels
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))
        mod = importlib.import_module(f"kernels.{name}")
    if not cuda:
        from triton.runtime.interpreter import InterpretedFunction

        stale = mod.triton is not sys.modules["triton"]
        if stale or not isinstance(getattr(mod, probe), InterpretedFunction):
            mod = importlib.reload(mod)
        assert isinstance(getattr(mod, probe), InterpretedFunction)
    return mod
