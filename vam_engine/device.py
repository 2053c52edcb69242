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


def section_device(section: str | None, engine: str | None) -> str:
    """The device a config section's part runs on, by the one rule every section with a
    ``device`` key (perception, audio) follows: the section's own value when it names one (not
    "auto" or None), else the engine's (itself "auto" when not given). Not resolved here: the
    perception bodies resolve it with ``resolve_device``, CTranslate2 with its own view of CUDA
    (it runs on a GPU without a CUDA torch)."""
    return section if section not in (None, "auto") else (engine or "auto")


def cuda_index(device: str) -> int:
    """The CUDA ordinal of a resolved CUDA device ("cuda" is 0, "cuda:N" is N): how a body that
    takes the device decision (the GPU decoders) finds its GPU. DeviceError for anything else."""
    if device == "cuda":
        return 0
    if isinstance(device, str) and device.startswith("cuda:") and device[5:].isdigit():
        return int(device[5:])
    raise DeviceError(f"a CUDA device ('cuda' or 'cuda:N') is needed here, got {device!r}")
