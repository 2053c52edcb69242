"""The one dispatch point of the cosine-dedup similarities: a reference, a CPU and a CUDA body
behind one signature, the device chosen once, when a body is made (like ``gate/bodies.py``).

Contract (every body):

``sims(rows) -> np.ndarray``
    rows: M x D float64, finite, non-zero (the committer passes unit vectors: the reference, the
    held frame and a batch of new frames, stacked). Returns the M x M float64 matrix of the
    cosine similarities of every pair of rows. The committer's sequential scan
    (``OnlineCommitter.push_batch``) reads the pairs its decisions need from it.

A body with ``scans = True`` (CUDA) also has

``scan(rows, first, ts, keeps, state, cfg) -> ScanResult``
    The committer's sequential rules themselves over the frames ``first..`` of ``rows``, on the
    device, from the committer's ``ScanState`` (reference and held frame as rows, histories,
    event start): the decisions in order and the state after them. The committer's host scan
    over the same similarities is its truth, decision for decision and bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class ScanState:
    """The committer's state a scan reads and returns, with frames named by their row of the
    stacked matrix (``held_frame``: the held frame's index in the scanned batch, -1 when it was
    held before)."""
    ref_row: int
    held_row: int | None = None  # None: no frame is held
    held_frame: int = -1
    held_t: float = 0.0
    held_d: float = 0.0
    event_t0: float = 0.0
    prev_dk: float | None = None
    dedup_history: list = field(default_factory=list)  # oldest first, at most cfg.window
    event_history: list = field(default_factory=list)


@dataclass
class ScanResult:
    decisions: list  # (frame index in the batch or -1 for the held frame before it, kept, event_start, distance)
    state: ScanState


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

    def __init__(self, device: str = "cuda", scans: bool = True):
        """``scans``: the committer's rules run on the device too (``scan``); False leaves them
        to the committer's host scan over this body's similarities."""
        import torch

        from ..kernels import cosine_dedup as tk

        self._torch = torch
        self._tk = tk
        self.device = torch.device(device)
        self.scans = bool(scans)

    def _ring(self, values: list, window: int):
        """A history as the kernel's ring: (lanes, count, next position)."""
        t = self._torch
        ring = t.zeros((1 << (window - 1).bit_length(),), dtype=t.float64)  # the kernel's WIN lanes
        ring[: len(values)] = t.tensor(values, dtype=t.float64)
        return ring.to(self.device), len(values), len(values) % window

    @staticmethod
    def _unring(ring: np.ndarray, count: int, pos: int, window: int) -> list:
        return ring[:count].tolist() if count < window else np.roll(ring[:window], -pos).tolist()

    def scan(self, rows, first: int, ts, keeps, state: ScanState, cfg) -> ScanResult:
        t = self._torch
        x = t.from_numpy(np.ascontiguousarray(rows, np.float64)).to(self.device)
        _check_rows(x)
        sims, _ = self._tk.cosine_sims(x)
        w = int(cfg.window)
        dring, dcount, dpos = self._ring(state.dedup_history, w)
        ering, ecount, epos = self._ring(state.event_history, w)
        held = state.held_row is not None
        vec = [state.ref_row, float(held), state.held_row if held else 0, state.held_frame, state.held_t,
               state.held_d, state.event_t0, float(state.prev_dk is not None), state.prev_dk or 0.0,
               dcount, dpos, ecount, epos, 0, 0, 0]
        sv = t.tensor(vec, dtype=t.float64).to(self.device)
        tt = t.tensor(np.asarray(ts, np.float64)).to(self.device)
        kt = t.tensor(np.asarray(keeps, np.int32)).to(self.device)
        frame, kept, start, dist = (o.cpu().numpy() for o in self._tk.dedup_scan(
            sims, tt, kt, dring, ering, sv, first, w, int(cfg.min_history), 1.0 - float(cfg.dedup_fallback_sim),
            1.0 - float(cfg.event_fallback_sim), float(cfg.max_event_s)))
        v = sv.cpu().numpy()
        n = int(v[13])
        decisions = [(int(frame[j]), bool(kept[j]), bool(start[j]), float(dist[j])) for j in range(n)]
        held = v[1] != 0
        out = ScanState(ref_row=int(v[0]), held_row=int(v[2]) if held else None, held_frame=int(v[3]),
                        held_t=float(v[4]), held_d=float(v[5]), event_t0=float(v[6]),
                        prev_dk=float(v[8]) if v[7] != 0 else None,
                        dedup_history=self._unring(dring.cpu().numpy(), int(v[9]), int(v[10]), w),
                        event_history=self._unring(ering.cpu().numpy(), int(v[11]), int(v[12]), w))
        return ScanResult(decisions, out)

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
