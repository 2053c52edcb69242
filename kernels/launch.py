"""One kernel launch as a record: which Triton kernel, its grid, its arguments and its
compile-time parameters.

The host functions of the kernel modules first *plan* their launches (``plan_*``: buffers
allocated, configuration chosen) and then run them. The plan is the one place a launch
configuration is chosen, so ``compile_report`` compiles exactly what the host functions launch:
it plans on tensors of the ``meta`` device (shapes and dtypes, no memory) and compiles each
planned launch ahead of time instead of running it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Launch:
    kernel: Any  # a triton JITFunction (an InterpretedFunction under TRITON_INTERPRET=1)
    grid: tuple
    args: tuple  # the runtime arguments, in the kernel's order: tensors and scalars
    params: dict = field(default_factory=dict)  # constexpr arguments and compile options (num_warps, ...)

    @property
    def name(self) -> str:
        return getattr(self.kernel, "__name__", None) or self.kernel.fn.__name__

    def run(self) -> None:
        if all(g > 0 for g in self.grid):
            self.kernel[self.grid](*self.args, **self.params)


def run_all(launches) -> None:
    for launch in launches:
        launch.run()
