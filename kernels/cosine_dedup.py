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


@triton.jit
def _edge(i, step, lo, hi):
    """np.histogram's bin edge i of 64 over [lo, hi]: lo + i * step, the last one hi."""
    return tl.where(i == 64, hi, i.to(tl.float64) * step + lo)


@triton.jit
def _otsu(ring, count, WIN: tl.constexpr):
    """(found, threshold) of vam_engine/index/otsu.py over the first ``count`` lanes of ``ring``,
    operation for operation: the same float64 bins, then integer counts (exact in any order), then
    the same float64 division per split (fused multiply-adds off: enable_fp_fusion=False)."""
    lane = tl.arange(0, WIN)
    valid = lane < count
    lo = tl.min(tl.where(valid, ring, float("inf")), axis=0)
    hi = tl.max(tl.where(valid, ring, float("-inf")), axis=0)
    lo = tl.where(count > 0, lo, 0.0)
    hi = tl.where(count > 0, hi, 0.0)
    span = hi - lo
    found = (count >= 2) & (span > 1e-12 * tl.maximum(1.0, tl.abs(hi)))
    span = tl.where(found, span, 1.0)
    step = span / 64.0
    v = tl.where(valid, ring, lo)
    idx = tl.minimum(((v - lo) / span * 64.0).to(tl.int32), 63)
    idx = tl.where(v < _edge(idx, step, lo, hi), idx - 1, idx)
    idx = tl.where((v >= _edge(idx + 1, step, lo, hi)) & (idx != 63), idx + 1, idx)
    hist = tl.histogram(idx, 64, mask=valid).to(tl.int64)
    k = tl.arange(0, 64)
    n = count.to(tl.int64)
    h_k = tl.cumsum(hist, axis=0)
    s_all = tl.cumsum(hist * (2 * k + 1).to(tl.int64), axis=0)
    s_n = tl.sum(hist * (2 * k + 1).to(tl.int64), axis=0)
    ok = (h_k > 0) & (h_k < n) & (k < 63)
    a = (n * s_all - h_k * s_n).to(tl.float64)
    den = tl.where(ok, h_k.to(tl.float64) * (n - h_k).to(tl.float64), 1.0)
    between = tl.where(ok, a * a / den, 0.0)
    between = tl.where(k < 63, between, -1.0)  # splits after bins 0..62 only
    best = tl.max(between, axis=0)
    k0 = tl.min(tl.where(between == best, k, 64), axis=0)
    k1 = tl.min(tl.where((k > k0) & (between != best), k, 64), axis=0) - 1  # the tied run after k0
    tau = (_edge(k0 + 1, step, lo, hi) + _edge(k1 + 1, step, lo, hi)) / 2.0
    anyvalid = tl.max(ok.to(tl.int32), axis=0)
    return found & (anyvalid == 1), tau


@triton.jit
def _adaptive(ring, count, fallback, min_history, WIN: tl.constexpr):
    """OnlineCommitter._adaptive: Otsu clamped to [0.02, 0.5] once there is history, else the fallback."""
    found, tau = _otsu(ring, count, WIN)
    use = found & (count >= min_history)
    return tl.where(use, tl.minimum(tl.maximum(tau, 0.02), 0.5), fallback)


@triton.jit
def _append(ring, count, pos, d, window, WIN: tl.constexpr):
    """A deque(maxlen=window) append on a ring of lanes: (ring, count, next position)."""
    lane = tl.arange(0, WIN)
    ring = tl.where(lane == pos, d, ring)
    pos = tl.where(pos + 1 == window, 0, pos + 1)
    return ring, tl.minimum(count + 1, window), pos


@triton.jit
def _dedup_scan_kernel(
    sims_ptr, ts_ptr, keep_ptr,  # f64 [M, M], f64 [B], i32 [B]
    dring_ptr, ering_ptr,  # f64 [WIN] each: the histories (read, then written back)
    state_ptr,  # f64 [16]: the committer's scalars (read, then written back; see _STATE)
    out_frame_ptr, out_kept_ptr, out_start_ptr, out_dist_ptr,  # i32/i32/i32/f64 [B + 1]: the decisions
    B, M, FIRST, window, min_history, dedup_fb, event_fb, max_event_s,
    WIN: tl.constexpr,
):
    """The online rule over a batch, one program, in the committer's order (index/online.py)."""
    lane = tl.arange(0, WIN)
    dring = tl.load(dring_ptr + lane)
    ering = tl.load(ering_ptr + lane)
    ref_row = tl.load(state_ptr + 0).to(tl.int32)
    held = tl.load(state_ptr + 1).to(tl.int32)
    held_row = tl.load(state_ptr + 2).to(tl.int32)
    held_frame = tl.load(state_ptr + 3).to(tl.int32)
    held_t = tl.load(state_ptr + 4)
    held_d = tl.load(state_ptr + 5)
    event_t0 = tl.load(state_ptr + 6)
    has_prev = tl.load(state_ptr + 7).to(tl.int32)
    prev_dk = tl.load(state_ptr + 8)
    dcount = tl.load(state_ptr + 9).to(tl.int32)
    dpos = tl.load(state_ptr + 10).to(tl.int32)
    ecount = tl.load(state_ptr + 11).to(tl.int32)
    epos = tl.load(state_ptr + 12).to(tl.int32)
    n_out = tl.full([], 0, tl.int32)
    zero = tl.full([], 0, tl.int32)  # assignments below stay int32 tensors (the interpreter too)
    for i in range(B):
        row = FIRST + i
        t = tl.load(ts_ptr + i)
        keep = tl.load(keep_ptr + i) != 0
        tau_d = _adaptive(dring, dcount, dedup_fb, min_history, WIN)
        d = 1.0 - tl.load(sims_ptr + ref_row * M + row)
        forced = t - event_t0 > max_event_s
        if (~forced) & (~keep) & (d < tau_d):  # redundant: hold it, drop the held one
            if held == 1:
                tl.store(out_frame_ptr + n_out, held_frame)
                tl.store(out_kept_ptr + n_out, 0)
                tl.store(out_start_ptr + n_out, 0)
                tl.store(out_dist_ptr + n_out, held_d)
                n_out += 1
            held, held_row, held_frame, held_t, held_d = zero + 1, row + zero, i + zero, t, d
            dring, dcount, dpos = _append(dring, dcount, dpos, d, window, WIN)
        else:
            again = 0
            if held == 1:  # the run ends: keep its last frame, it becomes the reference
                tau_e = _adaptive(ering, ecount, event_fb, min_history, WIN)
                start = (held_d > tau_e) & ((has_prev == 0) | (held_d >= prev_dk))
                ering, ecount, epos = _append(ering, ecount, epos, held_d, window, WIN)
                has_prev, prev_dk = zero + 1, held_d
                event_t0 = tl.where(start, held_t, event_t0)
                tl.store(out_frame_ptr + n_out, held_frame)
                tl.store(out_kept_ptr + n_out, 1)
                tl.store(out_start_ptr + n_out, start.to(tl.int32))
                tl.store(out_dist_ptr + n_out, held_d)
                n_out += 1
                ref_row = held_row
                held = zero
                d = 1.0 - tl.load(sims_ptr + ref_row * M + row)
                forced = t - event_t0 > max_event_s
                if (~forced) & (~keep) & (d < tau_d):
                    held, held_row, held_frame, held_t, held_d = zero + 1, row + zero, i + zero, t, d
                    dring, dcount, dpos = _append(dring, dcount, dpos, d, window, WIN)
                    again = 1
            if again == 0:
                dring, dcount, dpos = _append(dring, dcount, dpos, d, window, WIN)
                tau_e = _adaptive(ering, ecount, event_fb, min_history, WIN)
                start = forced | ((d > tau_e) & ((has_prev == 0) | (d >= prev_dk)))
                ering, ecount, epos = _append(ering, ecount, epos, d, window, WIN)
                has_prev, prev_dk = zero + 1, d
                event_t0 = tl.where(start, t, event_t0)
                tl.store(out_frame_ptr + n_out, i)
                tl.store(out_kept_ptr + n_out, 1)
                tl.store(out_start_ptr + n_out, start.to(tl.int32))
                tl.store(out_dist_ptr + n_out, d)
                n_out += 1
                ref_row = row + zero
    tl.store(dring_ptr + lane, dring)
    tl.store(ering_ptr + lane, ering)
    tl.store(state_ptr + 0, ref_row.to(tl.float64))
    tl.store(state_ptr + 1, held.to(tl.float64))
    tl.store(state_ptr + 2, held_row.to(tl.float64))
    tl.store(state_ptr + 3, held_frame.to(tl.float64))
    tl.store(state_ptr + 4, held_t)
    tl.store(state_ptr + 5, held_d)
    tl.store(state_ptr + 6, event_t0)
    tl.store(state_ptr + 7, has_prev.to(tl.float64))
    tl.store(state_ptr + 8, prev_dk)
    tl.store(state_ptr + 9, dcount.to(tl.float64))
    tl.store(state_ptr + 10, dpos.to(tl.float64))
    tl.store(state_ptr + 11, ecount.to(tl.float64))
    tl.store(state_ptr + 12, epos.to(tl.float64))
    tl.store(state_ptr + 13, n_out.to(tl.float64))


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


STATE_SLOTS = 16  # _dedup_scan_kernel's state vector: see ScanState.to_vector
MAX_WINDOW = 4096  # the longest history the scan keeps in registers


def plan_dedup_scan(sims, ts, keeps, dring, ering, state, first: int, window: int, min_history: int,
                    dedup_fb: float, event_fb: float, max_event_s: float):
    """The online rule's scan over a batch on the device (``dedup_scan``); returns its decision
    buffers (frame i32 [B+1], kept i32, event start i32, distance f64) and the launch. ``dring``,
    ``ering`` (f64 [WIN], WIN = the power of two >= window) and ``state`` (f64 [16]) are read and
    written back in place."""
    m = sims.shape[0]
    b = ts.shape[0]
    win = triton.next_power_of_2(window)
    if not 1 <= window <= MAX_WINDOW:
        raise ValueError(f"the dedup scan keeps at most {MAX_WINDOW} distances of history, got a window of {window}")
    if tuple(dring.shape) != (win,) or tuple(ering.shape) != (win,) or tuple(state.shape) != (STATE_SLOTS,):
        raise ValueError(f"histories must be f64 [{win}] and the state f64 [{STATE_SLOTS}]")
    if not 0 <= first and first + b <= m:
        raise ValueError(f"{b} frames from row {first} do not fit a {m} x {m} similarity matrix")
    dev = sims.device
    outs = (torch.empty((b + 1,), dtype=torch.int32, device=dev), torch.empty((b + 1,), dtype=torch.int32, device=dev),
            torch.empty((b + 1,), dtype=torch.int32, device=dev), torch.empty((b + 1,), dtype=torch.float64, device=dev))
    launch = Launch(_dedup_scan_kernel, (1,),
                    (sims, ts, keeps, dring, ering, state, *outs, b, m, first, window, min_history, float(dedup_fb),
                     float(event_fb), float(max_event_s)),
                    dict(WIN=win, num_warps=4, enable_fp_fusion=False))
    return outs, [launch]


def dedup_scan(*args, **kw):
    """The online rule of vam_engine/index/online.py over B frames whose similarities are rows
    ``first..first+B`` of ``sims`` (f64 [M, M] from ``cosine_sims``), on the device; arguments as
    ``plan_dedup_scan``. Returns the decision buffers; the number of decisions is ``state[13]``."""
    outs, launches = plan_dedup_scan(*args, **kw)
    run_all(launches)
    return outs
