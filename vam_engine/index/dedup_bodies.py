"""The one dispatch point of the cosine-dedup similarities: a reference, a CPU and a CUDA body
behind one signature, the device chosen once, when a body is made (like ``gate/bodies.py``).

Contract (every body):

``sims(rows) -> np.ndarray``
    rows: M x D float64, finite, non-zero (the committer passes unit vectors: the reference, the
    held frame and a batch of new frames, stacked). Returns the M x M float64 matrix of the
    cosine similarities of every pair of rows. The committer's sequential scan
    (``OnlineCommitter.push_batch``) reads the pairs its decisions need from it.
"""
from __future__ import annotations

import numpy as np


def _check_rows(rows) -> None:
    if getattr(rows, "ndim", None) != 2 or rows.shape[1] == 0:
        raise ValueError(f"dedup rows must be M x D with D > 0, got shape {tuple(getattr(rows, 'shape', ()))}")


class ReferenceBody:
    """numpy float64, pair by pair: the committer's own ``1 - dot(e, ref)`` on unit vectors.
    Defines correct; slow."""

    name = "reference"

    def sims(self, rows) -> np.ndarray:
        rows = np.asarray(rows, np.float64)
        _check_rows(rows)
        unit = rows / np.linalg.norm(rows, axis=1)[:, None]
        m = len(unit)
        out = np.empty((m, m), np.float64)
        for i in range(m):
            for j in range(m):
                out[i, j] = float(np.dot(unit[i], unit[j]))
        return out


class CpuBody:
    """One float64 matrix product."""

    name = "cpu"

    def sims(self, rows) -> np.ndarray:
        rows = np.asarray(rows, np.float64)
        _check_rows(rows)
        unit = rows / np.linalg.norm(rows, axis=1)[:, None]
        return unit @ unit.T


class CudaBody:
    """The Triton kernels (kernels/cosine_dedup.py): accepts numpy arrays (uploaded) or CUDA
    tensors (an embedder's output left on the device); returns numpy."""

    name = "cuda"

    def __init__(self, device: str = "cuda"):
        import torch

        from ..kernels import cosine_dedup as tk

        self._torch = torch
        self._tk = tk
        self.device = torch.device(device)

    def sims(self, rows) -> np.ndarray:
        t = self._torch
        x = rows if isinstance(rows, t.Tensor) else t.from_numpy(np.ascontiguousarray(rows, np.float64))
        _check_rows(x)
        x = x.to(self.device, t.float64, non_blocking=True)
        sims, _ = self._tk.cosine_sims(x)
        return sims.cpu().numpy()


def make_body(device: str = "auto"):
    """``auto`` takes CUDA when torch sees a GPU (vam_engine.device), else the CPU; ``reference``
    is the pair-by-pair definition. ``cuda`` without CUDA is a DeviceError."""
    if device == "reference":
        return ReferenceBody()
    from ..device import resolve_device

    dev = resolve_device(device)
    return CudaBody(dev) if dev.startswith("cuda") else CpuBody()
