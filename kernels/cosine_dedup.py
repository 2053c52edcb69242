"""Triton body of the cosine-dedup similarities (see ``vam_engine/index/dedup_bodies.py``).

The online committer (``vam_engine/index/online.py``) compares each new frame's embedding with
the camera's last KEPT frame, and which frame that is depends on every decision before it. So a
batch is decided in two parts: here, on the device, the cosine similarity of every pair of the
batch's rows (the reference, the held frame and the new frames, stacked); on the host, the
committer's sequential scan looks up the pair each decision needs. Every pair the scan could need
is in the matrix, so the batched decisions are exactly the frame-by-frame ones.

``_row_norm_kernel``  grid (M,): the float64 L2 norm of each row.
``_cosine_sim_kernel`` grid (ceil(M / BLOCK_I), ceil(M / BLOCK_J)): program (bi, bj) owns a
    BLOCK_I x BLOCK_J tile of the similarity matrix: it walks the dimension in BLOCK_D slices,
    accumulating the float64 dot products, and divides by both norms.

Everything is float64, like the committer's own arithmetic: the matrix is M x M x D multiply-adds
(257 x 257 x 512 for a batch of 256 with reference and held frame, 34 M), and the rows are read
once per tile row, so the work is tiny next to the embedder's and precision costs nothing here.

Runs natively on CUDA tensors, and on CPU tensors under the Triton interpreter
(``TRITON_INTERPRET=1`` set before this module is imported).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import Launch, run_all

BLOCK_I = 16
BLOCK_J = 16


@triton.jit
def _row_norm_kernel(emb_ptr, norm_ptr, D, BLOCK_D: tl.constexpr):
    i = tl.program_id(0)
    offs = tl.arange(0, BLOCK_D)
    acc = tl.full([BLOCK_D], 0, tl.float64)
    base = emb_ptr + i.to(tl.int64) * D
    for d0 in range(0, D, BLOCK_D):
        x = tl.load(base + d0 + offs, mask=d0 + offs < D, other=0.0).to(tl.float64)
        acc += x * x
    tl.store(norm_ptr + i, tl.sqrt(tl.sum(acc, axis=0)))


@triton.jit
def _cosine_sim_kernel(emb_ptr, norm_ptr, sim_ptr, M, D,
                       BLOCK_I: tl.constexpr, BLOCK_J: tl.constexpr, BLOCK_D: tl.constexpr):
    bi = tl.program_id(0)
    bj = tl.program_id(1)
    ri = bi * BLOCK_I + tl.arange(0, BLOCK_I)
    rj = bj * BLOCK_J + tl.arange(0, BLOCK_J)
    mi = ri < M
    mj = rj < M
    kd = tl.arange(0, BLOCK_D)
    acc = tl.full([BLOCK_I, BLOCK_J], 0, tl.float64)
    for d0 in range(0, D, BLOCK_D):
        k = d0 + kd
        mk = k < D
        a = tl.load(emb_ptr + ri[:, None].to(tl.int64) * D + k[None, :], mask=mi[:, None] & mk[None, :],
                    other=0.0).to(tl.float64)
        b = tl.load(emb_ptr + rj[:, None].to(tl.int64) * D + k[None, :], mask=mj[:, None] & mk[None, :],
                    other=0.0).to(tl.float64)
        acc += tl.sum(a[:, None, :] * b[None, :, :], axis=2)
    ni = tl.load(norm_ptr + ri, mask=mi, other=1.0)
    nj = tl.load(norm_ptr + rj, mask=mj, other=1.0)
    sim = acc / (ni[:, None] * nj[None, :])
    tl.store(sim_ptr + ri[:, None] * M + rj[None, :], sim, mask=mi[:, None] & mj[None, :])


# --------------------------------------------------------------------------------------------
# host side
# --------------------------------------------------------------------------------------------

_INTERPRETED = type(_cosine_sim_kernel).__name__ == "InterpretedFunction"
MAX_DIM = 1 << 16
MAX_ROWS = 1 << 14


def _block_d(d: int) -> int:
    """Dimension slice per step: 16 keeps a 16 x 16 x 16 float64 product in registers on a GPU
    (32 values a thread at 4 warps); the interpreter, whose cost is per operation, takes 64."""
    return min(64 if _INTERPRETED else 16, triton.next_power_of_2(max(d, 1)))


def _check_rows(emb) -> torch.Tensor:
    if not isinstance(emb, torch.Tensor):
        raise ValueError(f"embeddings must be a torch.Tensor, got {type(emb).__name__}")
    if emb.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"embeddings must be float32 or float64, got {emb.dtype}")
    if emb.ndim != 2 or emb.shape[1] == 0:
        raise ValueError(f"embeddings must be M x D with D > 0, got shape {tuple(emb.shape)}")
    m, d = emb.shape
    if d > MAX_DIM or m > MAX_ROWS:
        raise ValueError(f"embeddings of {m} x {d} exceed the kernel's {MAX_ROWS} rows x {MAX_DIM} dimensions")
    if emb.device.type not in ("cuda", "meta") and not _INTERPRETED:  # meta: planned, never run
        raise ValueError(f"the Triton dedup kernel needs CUDA tensors (got {emb.device}); "
                         f"set TRITON_INTERPRET=1 before importing it to run on the CPU")
    # contiguous; under the interpreter a private copy (see gate_stats._own)
    return emb.clone(memory_format=torch.contiguous_format) if _INTERPRETED else emb.contiguous()


def plan_cosine_sims(emb: torch.Tensor):
    """``cosine_sims``'s outputs (allocated, not yet written) and the launches that write them."""
    emb = _check_rows(emb)
    m, d = emb.shape
    norms = torch.empty((m,), dtype=torch.float64, device=emb.device)
    sims = torch.empty((m, m), dtype=torch.float64, device=emb.device)
    block_d = _block_d(d)
    launches = [
        Launch(_row_norm_kernel, (m,), (emb, norms, d), dict(BLOCK_D=min(1024, triton.next_power_of_2(d)),
                                                            num_warps=4)),
        Launch(_cosine_sim_kernel, (triton.cdiv(m, BLOCK_I), triton.cdiv(m, BLOCK_J)), (emb, norms, sims, m, d),
               dict(BLOCK_I=BLOCK_I, BLOCK_J=BLOCK_J, BLOCK_D=block_d, num_warps=4)),
    ]
    return (sims, norms), launches


def cosine_sims(emb: torch.Tensor):
    """The cosine similarity of every pair of rows of ``emb`` (float32 or float64 [M, D]).

    Returns (sims f64 [M, M], norms f64 [M]); a row of zero norm gives NaN or inf in its row
    and column (callers check the norms first).
    """
    out, launches = plan_cosine_sims(emb)
    run_all(launches)
    return out
