"""The one place that decides what ``device`` means: every body (gate, decode, embed, vectors,
LLM) resolves its device string here, so "auto" and a missing CUDA read the same everywhere."""
from __future__ import annotations

from .errors import VamError

DEVICES = ("auto", "cpu", "cuda")


class DeviceError(VamError, ValueError):
    """A device value that is not a device, or one this machine (or install) cannot provide.
    A ValueError too: callers that check their arguments with ValueError keep doing so."""


def cuda_available() -> bool:
    """Whether torch is installed and sees a CUDA device. Imports torch only when installed."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def resolve_device(device: str | None) -> str:
    """``"auto"`` (or None) -> ``"cuda"`` when torch sees a GPU, else ``"cpu"``; ``"cpu"`` as
    is; ``"cuda"`` or ``"cuda:N"`` as is when CUDA is available, else DeviceError saying how
    to run without it. Anything else is a DeviceError naming the value."""
    if device is None or device == "auto":
        return "cuda" if cuda_available() else "cpu"
    if not isinstance(device, str):
        raise DeviceError(f"device must be one of {', '.join(DEVICES)} (or cuda:N), got {device!r}")
    if device == "cpu":
        return device
    if device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit()):
        if not cuda_available():
            import importlib.util

            why = ("torch is not installed" if importlib.util.find_spec("torch") is None
                   else "torch sees no CUDA device")
            raise DeviceError(f"device {device!r} asked for, but CUDA is not available ({why}): "
                              f"use device 'cpu' (--device cpu) or 'auto', or install a CUDA build of torch")
        return device
    raise DeviceError(f"device must be one of {', '.join(DEVICES)} (or cuda:N), got {device!r}")
