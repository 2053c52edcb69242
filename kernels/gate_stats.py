"""Triton body of the fused gate statistics (see ``vam_engine/gate/reference.py``).

A batch of N gray uint8 frames is processed per launch:

``_gate_pass_kernel``  grid (N [+1 for the reference frame], 64): program (n, i) owns thumbnail
    row i of frame n. It walks the rows of that thumbnail band in column blocks, reading each
    pixel once (the row above/below are carried in registers, the left/right neighbours come
    from the L1 cache), and writes the band's partial sums: Laplacian sum and sum of squares
    (int32 per block, int64 per band: exact), |F - R| sum, a 64-bin histogram, and the finished
    64 thumbnail cells of row i. Bands partition the rows (rows [i*H//64, (i+1)*H//64)), so every
    pixel is counted once; for H < 64 the thumbnail row is the nearest-sampled row instead.
``_gate_finish_kernel`` grid (N,): reduces the 64 band partials of each frame (Laplacian
    variance, mean abs diff, histogram), then SSIM of the thumbnails (7x7 box sums in float64)
    and the Pearson correlation of the histograms against the reference.
``_mad_kernel``        grid (N, 64): the |F - R| partial sums alone, for ``gate_compare``.
``_tile_kernel``       grid (N, TR, TC): program (n, i, j) sums |F - R| over tile (i, j) of the
    local-change grid (tiles of T x T pixels, clipped at the borders) in 2-D blocks; one
    program per tile, so every grid entry is written once (no atomics).

``gate_stats`` is two launches (three with a reference) and ``gate_compare`` three, whatever N. Every buffer the
kernels write is written in full (no zero-filled buffers, no atomics), which the tests check by
allocating through ``_empty`` poisoned with garbage.

Runs natively on CUDA tensors, and on CPU tensors under the Triton interpreter
(``TRITON_INTERPRET=1`` set before this module is imported).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import Launch, run_all

THUMB = 64
HIST_BINS = 64
# the histogram counts the rows y with y % HIST_ROW_STEP == 0 (vam_engine/gate/reference.py)
HIST_ROW_STEP = 4
MIN_SIDE = 2  # reflect-101 borders need two pixels per side
# SSIM (in _gate_finish_kernel as literals): 7x7 window, 49 / 48 sample covariance, valid
# positions 58 x 58 = 3364, C1 = (0.01 * 255)^2 = 6.5025, C2 = (0.03 * 255)^2 = 58.5225.


def _empty(shape, dtype, device):
    """Every buffer of this module is allocated here (tests swap in a poisoned allocator)."""
    return torch.empty(shape, dtype=dtype, device=device)


# --------------------------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------------------------


@triton.jit
def _gate_pass_kernel(
    frames_ptr, ref_ptr,  # u8 [N, H, W], u8 [H, W] (any valid pointer when not HAS_REF)
    thumb_ptr,  # f32 [NB, 64, 64]  (NB = N + 1 with a reference: row N is the reference's)
    hist_part_ptr,  # i32 [NB, 64, 64]  per band histograms
    s1_ptr, s2_ptr, ad_ptr,  # i64 [NB, 64] per band: sum lap, sum lap^2, sum |F - R|
    N, H, W,
    HAS_REF: tl.constexpr, BLOCK_W: tl.constexpr, CELLS: tl.constexpr, HIST_STEP: tl.constexpr,
):
    n = tl.program_id(0)
    i = tl.program_id(1)
    # thumbnail rows of band i (reference.cell_bounds) and the rows it counts for the
    # full-resolution statistics (a partition of [0, H); a subset of [r0, r1)).
    r0 = i * H // 64
    r1 = tl.maximum(r0 + 1, (i + 1) * H // 64)
    p1 = (i + 1) * H // 64
    if n < N:
        base = frames_ptr + n.to(tl.int64) * H * W
    else:  # the reference frame itself, for its thumbnail and histogram
        base = ref_ptr + 0

    offs = tl.arange(0, BLOCK_W)
    j64 = tl.arange(0, 64)
    kc = tl.arange(0, CELLS)
    acc_thumb = tl.full([64], 0, tl.int32)
    acc_hist = tl.full([64], 0, tl.int32)
    # per-lane int64 accumulators over the column blocks (int32 within a block: exact)
    s1 = tl.full([BLOCK_W], 0, tl.int64)
    s2 = tl.full([BLOCK_W], 0, tl.int64)
    ad = tl.full([BLOCK_W], 0, tl.int64)

    rp = r0 - 1
    rp = tl.where(rp < 0, 1, rp)  # reflect-101
    for cb in range(0, W, BLOCK_W):
        cols = cb + offs
        cm = cols < W
        dl = tl.where(cols == 0, 1, -1)  # left/right neighbours, reflect-101
        dr = tl.where(cols == W - 1, -1, 1)
        up = tl.load(base + rp * W + cols, mask=cm, other=0).to(tl.int32)
        cur = tl.load(base + r0 * W + cols, mask=cm, other=0).to(tl.int32)
        colsum = tl.full([BLOCK_W], 0, tl.int32)
        v1 = tl.full([BLOCK_W], 0, tl.int32)
        v2 = tl.full([BLOCK_W], 0, tl.int32)
        va = tl.full([BLOCK_W], 0, tl.int32)
        for r in range(r0, r1):
            rn = r + 1
            rn = tl.where(rn >= H, H - 2, rn)  # reflect-101 (rn == H only)
            prow = base + r * W + cols
            down = tl.load(base + rn * W + cols, mask=cm, other=0).to(tl.int32)
            left = tl.load(prow + dl, mask=cm, other=0).to(tl.int32)
            right = tl.load(prow + dr, mask=cm, other=0).to(tl.int32)
            colsum += cur
            live = cm & (r < p1)
            lap = tl.where(live, up + down + left + right - 4 * cur, 0)
            v1 += lap
            v2 += lap * lap
            # every HIST_STEP-th row only (reference.histogram)
            acc_hist += tl.histogram(cur >> 2, 64, mask=live & (r % HIST_STEP == 0))
            if HAS_REF:
                rv = tl.load(ref_ptr + r * W + cols, mask=cm, other=0).to(tl.int32)
                va += tl.where(live, tl.abs(cur - rv), 0)
            up = cur
            cur = down
        s1 += v1.to(tl.int64)
        s2 += v2.to(tl.int64)
        if HAS_REF:
            ad += va.to(tl.int64)
        # column sums -> thumbnail cells
        if CELLS == 64:  # every cell of the row (narrow frames)
            c0 = j64 * W // 64
            c1 = tl.maximum(c0 + 1, (j64 + 1) * W // 64)
            inside = (cols[None, :] >= c0[:, None]) & (cols[None, :] < c1[:, None])
            acc_thumb += tl.sum(tl.where(inside, colsum[None, :], 0), axis=1)
        else:  # W >= 64: the CELLS cells from the one holding column cb, scattered into the row
            ks = (64 * cb + 63) // W + kc
            c0 = ks * W // 64
            c1 = tl.maximum(c0 + 1, (ks + 1) * W // 64)
            inside = (cols[None, :] >= c0[:, None]) & (cols[None, :] < c1[:, None])
            part = tl.sum(tl.where(inside, colsum[None, :], 0), axis=1)
            acc_thumb += tl.sum(tl.where(j64[:, None] == ks[None, :], part[None, :], 0), axis=1)

    c0 = j64 * W // 64
    c1 = tl.maximum(c0 + 1, (j64 + 1) * W // 64)
    count = ((c1 - c0) * (r1 - r0)).to(tl.float64)
    row = n * 64 + i
    tl.store(thumb_ptr + row * 64 + j64, (acc_thumb.to(tl.float64) / count).to(tl.float32))
    tl.store(hist_part_ptr + row * 64 + j64, acc_hist)
    tl.store(s1_ptr + row, tl.sum(s1, axis=0))
    tl.store(s2_ptr + row, tl.sum(s2, axis=0))
    tl.store(ad_ptr + row, tl.sum(ad, axis=0))


@triton.jit
def _mad_kernel(frames_ptr, ref_ptr, ad_ptr, HW, BLOCK: tl.constexpr):
    """ad[n, i] = sum |F_n - R| over the flat pixels [i*HW//64, (i+1)*HW//64)."""
    n = tl.program_id(0)
    i = tl.program_id(1)
    hw = HW.to(tl.int64)
    lo = i * hw // 64
    hi = (i + 1) * hw // 64
    base = frames_ptr + n.to(tl.int64) * hw
    offs = tl.arange(0, BLOCK)
    acc = tl.full([BLOCK], 0, tl.int32)
    for start in range(lo, hi, BLOCK):
        o = start + offs
        m = o < hi
        a = tl.load(base + o, mask=m, other=0).to(tl.int32)
        b = tl.load(ref_ptr + o, mask=m, other=0).to(tl.int32)
        acc += tl.abs(a - b)
    tl.store(ad_ptr + n * 64 + i, tl.sum(acc.to(tl.int64), axis=0))


@triton.jit
def _tile_kernel(frames_ptr, ref_ptr, out_ptr, H, W, TR, TC, T,
                 BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """out[n, i, j] = sum |F_n - R| over rows [i*T, min(H, (i+1)*T)), columns [j*T, min(W, (j+1)*T))."""
    n = tl.program_id(0)
    i = tl.program_id(1)
    j = tl.program_id(2)
    y0 = i * T
    y1 = tl.minimum(H, y0 + T)
    x0 = j * T
    x1 = tl.minimum(W, x0 + T)
    base = frames_ptr + n.to(tl.int64) * H * W
    rr = tl.arange(0, BLOCK_R)
    cc = tl.arange(0, BLOCK_C)
    acc = tl.full([BLOCK_R, BLOCK_C], 0, tl.int32)  # at most T * T * 255 / (BLOCK_R * BLOCK_C) per lane
    for ys in range(y0, y1, BLOCK_R):
        rows = ys + rr
        for xs in range(x0, x1, BLOCK_C):
            cols = xs + cc
            m = (rows[:, None] < y1) & (cols[None, :] < x1)
            off = rows[:, None] * W + cols[None, :]
            a = tl.load(base + off, mask=m, other=0).to(tl.int32)
            b = tl.load(ref_ptr + off, mask=m, other=0).to(tl.int32)
            acc += tl.abs(a - b)
    total = tl.sum(tl.sum(acc.to(tl.int64), axis=1), axis=0)
    tl.store(out_ptr + (n * TR + i) * TC + j, total)


@triton.jit
def _gate_finish_kernel(
    thumb_ptr, ref_thumb_ptr,  # f32 [N, 64, 64], f32 [64, 64]
    hist_ptr, ref_hist_ptr,  # REDUCE_HIST: i32 [N, 64, 64] / [64, 64] band partials; else f32 [N, 64] / [64]
    s1_ptr, s2_ptr, ad_ptr,  # i64 [N, 64]
    lap_out, mad_out, ssim_out, corr_out,  # f64 [N]
    hist_out,  # f32 [N, 64] (REDUCE_HIST)
    npix,  # H * W, as a float
    REDUCE_HIST: tl.constexpr, HAS_REF: tl.constexpr, TY: tl.constexpr,
):
    n = tl.program_id(0)
    j = tl.arange(0, 64)
    if REDUCE_HIST:
        band = tl.arange(0, 64)
        h = tl.sum(tl.load(hist_ptr + n * 4096 + band[:, None] * 64 + j[None, :]), axis=0)
        tl.store(hist_out + n * 64 + j, h.to(tl.float32))
        hf = h.to(tl.float64)
        s1 = tl.sum(tl.load(s1_ptr + n * 64 + j), axis=0).to(tl.float64)
        s2 = tl.sum(tl.load(s2_ptr + n * 64 + j), axis=0).to(tl.float64)
        mean = s1 / npix
        tl.store(lap_out + n, tl.maximum(s2 / npix - mean * mean, 0.0))
    else:
        hf = tl.load(hist_ptr + n * 64 + j).to(tl.float64)

    if HAS_REF:
        ad = tl.sum(tl.load(ad_ptr + n * 64 + j), axis=0).to(tl.float64)
        tl.store(mad_out + n, ad / npix)

        # Pearson correlation of the histograms (OpenCV HISTCMP_CORREL)
        if REDUCE_HIST:
            band2 = tl.arange(0, 64)
            hr = tl.sum(tl.load(ref_hist_ptr + band2[:, None] * 64 + j[None, :]), axis=0).to(tl.float64)
        else:
            hr = tl.load(ref_hist_ptr + j).to(tl.float64)
        a = hf - tl.sum(hf, axis=0) / 64.0
        b = hr - tl.sum(hr, axis=0) / 64.0
        num = tl.sum(a * b, axis=0)
        den = tl.sqrt(tl.sum(a * a, axis=0) * tl.sum(b * b, axis=0))
        same = tl.sum((hf != hr).to(tl.int32), axis=0) == 0
        degenerate = tl.where(same, 1.0, 0.0).to(tl.float64)
        safe = tl.where(den == 0.0, 1.0, den)
        tl.store(corr_out + n, tl.where(den == 0.0, degenerate, num / safe))

        # SSIM of the thumbnails: 7x7 uniform window, sample covariance, valid 58x58 positions
        x = tl.arange(0, 64)
        tbase = thumb_ptr + n * 4096
        total = tl.full([], 0, tl.float64)
        for y0 in range(0, 64, TY):
            y = y0 + tl.arange(0, TY)
            valid = (y[:, None] < 58) & (x[None, :] < 58)
            sa = tl.full([TY, 64], 0, tl.float64)
            sb = tl.full([TY, 64], 0, tl.float64)
            saa = tl.full([TY, 64], 0, tl.float64)
            sbb = tl.full([TY, 64], 0, tl.float64)
            sab = tl.full([TY, 64], 0, tl.float64)
            for k in range(49):
                off = (y[:, None] + k // 7) * 64 + (x[None, :] + k % 7)
                va = tl.load(tbase + off, mask=valid, other=0.0).to(tl.float64)
                vb = tl.load(ref_thumb_ptr + off, mask=valid, other=0.0).to(tl.float64)
                sa += va
                sb += vb
                saa += va * va
                sbb += vb * vb
                sab += va * vb
            ua = sa / 49.0
            ub = sb / 49.0
            cov = 49.0 / 48.0
            vaa = cov * (saa / 49.0 - ua * ua)
            vbb = cov * (sbb / 49.0 - ub * ub)
            vab = cov * (sab / 49.0 - ua * ub)
            s = ((2.0 * ua * ub + 6.5025) * (2.0 * vab + 58.5225)) / \
                ((ua * ua + ub * ub + 6.5025) * (vaa + vbb + 58.5225))
            total += tl.sum(tl.sum(tl.where(valid, s, 0.0), axis=1), axis=0)
        tl.store(ssim_out + n, total / 3364.0)
    else:
        nan = tl.full([], float("nan"), tl.float64)
        tl.store(mad_out + n, nan)
        tl.store(ssim_out + n, nan)
        tl.store(corr_out + n, nan)


# --------------------------------------------------------------------------------------------
# host side
# --------------------------------------------------------------------------------------------

# Whether the kernels above were defined under the Triton interpreter (TRITON_INTERPRET=1 when
# this module was imported): then they run on CPU tensors.
_INTERPRETED = type(_gate_pass_kernel).__name__ == "InterpretedFunction"
_MAX_BLOCK_W = 256  # columns per block of the full-resolution pass (tests lower it)


def _check_tensor(name, t, dtype, shape=None, ndim=None):
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise ValueError(f"{name} must be {dtype}, got {t.dtype}")
    if ndim is not None and t.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(t.shape)}")
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")


def _check_device(device, **named):
    for name, t in named.items():
        if t.device != device:
            raise ValueError(f"{name} is on {t.device}, but the frames are on {device}")
    if device.type not in ("cuda", "meta") and not _INTERPRETED:  # meta: planned, never run
        raise ValueError(f"the Triton gate kernels need CUDA tensors (got {device}); "
                         f"set TRITON_INTERPRET=1 before importing them to run on the CPU")


def _check_frames(frames):
    _check_tensor("frames", frames, torch.uint8, ndim=3)
    _, h, w = frames.shape
    if h < MIN_SIDE or w < MIN_SIDE:
        raise ValueError(f"frames must be at least {MIN_SIDE}x{MIN_SIDE} pixels, got {h}x{w}")
    if h * w >= 2 ** 31:
        raise ValueError(f"frames of {h}x{w} pixels are too large for the gate kernels")
    return _own(frames)


def _own(t: torch.Tensor) -> torch.Tensor:
    """Contiguous; under the interpreter also a private copy. The interpreter copies every tensor
    argument to the host by its storage's address, so two tensors made by torch.from_numpy over
    overlapping memory (a frame and a view of it, as CudaBody passes on a CPU) would clash."""
    return t.clone(memory_format=torch.contiguous_format) if _INTERPRETED else t.contiguous()


def _ty() -> int:
    """SSIM rows per tile: 16 keeps the float64 tiles in registers on a GPU; the interpreter,
    whose cost is per operation, takes the whole 64-row thumbnail at once."""
    return 64 if _INTERPRETED else 16


def _block_w(w: int) -> int:
    return max(64, min(_MAX_BLOCK_W, triton.next_power_of_2(w)))


def _cells(w: int, block_w: int) -> int:
    """How many thumbnail cells a column block of block_w pixels can touch."""
    if w < THUMB:
        return THUMB
    m = w // THUMB  # the narrowest cell
    need = 1 + (block_w - 1 + m - 1) // m
    return min(THUMB, triton.next_power_of_2(need))


MAX_TILE = 1024


def _check_tile(tile: int) -> int:
    if not isinstance(tile, int) or not 1 <= tile <= MAX_TILE:
        raise ValueError(f"tile must be an int of 1..{MAX_TILE} pixels, got {tile!r}")
    return tile


def _tile_launch(frames, ref, out, tile: int) -> Launch:
    """The launch filling out (int64 [N, TR, TC]) with the sums of |F - R| per tile (see _tile_kernel)."""
    nfr, h, w = frames.shape
    _, tr, tc = out.shape
    br = min(32, triton.next_power_of_2(tile))
    bc = min(64, triton.next_power_of_2(tile))
    return Launch(_tile_kernel, (nfr, tr, tc), (frames, ref, out, h, w, tr, tc, tile),
                  dict(BLOCK_R=br, BLOCK_C=bc, num_warps=4))


def plan_gate_stats(frames: torch.Tensor, ref: torch.Tensor | None, tile: int = 16):
    """``gate_stats``'s outputs (allocated, not yet written) and the launches that write them.
    On tensors of the ``meta`` device this allocates nothing: compile_report plans with it."""
    _check_tile(tile)
    frames = _check_frames(frames)
    nfr, h, w = frames.shape
    dev = frames.device
    if ref is not None:
        _check_tensor("ref", ref, torch.uint8, shape=(h, w))
        _check_device(dev, ref=ref)
        ref = _own(ref)
    else:
        _check_device(dev)
    has_ref = ref is not None
    f64 = torch.float64
    lap, mad, ssim, corr = (_empty((nfr,), f64, dev) for _ in range(4))
    hist = _empty((nfr, HIST_BINS), torch.float32, dev)
    grid_shape = (nfr, -(-h // tile), -(-w // tile))
    launches = []
    if has_ref:
        tiles = _empty(grid_shape, torch.int64, dev)
        launches.append(_tile_launch(frames, ref, tiles, tile))
    else:
        tiles = torch.zeros(grid_shape, dtype=torch.int64, device=dev)
    if nfr == 0:
        thumb = _empty((0, THUMB, THUMB), torch.float32, dev)
        return (lap, mad, ssim, corr, thumb, hist, tiles), launches

    nb = nfr + 1 if has_ref else nfr
    thumb_all = _empty((nb, THUMB, THUMB), torch.float32, dev)
    hist_part = _empty((nb, THUMB, HIST_BINS), torch.int32, dev)
    s1, s2, ad = (_empty((nb, THUMB), torch.int64, dev) for _ in range(3))
    block_w = _block_w(w)
    launches.append(Launch(
        _gate_pass_kernel, (nb, THUMB),
        (frames, ref if has_ref else frames, thumb_all, hist_part, s1, s2, ad, nfr, h, w),
        dict(HAS_REF=has_ref, BLOCK_W=block_w, CELLS=_cells(w, block_w), HIST_STEP=HIST_ROW_STEP, num_warps=4,
             enable_fp_fusion=False)))
    ref_thumb = thumb_all[nfr] if has_ref else thumb_all
    ref_hist = hist_part[nfr] if has_ref else hist_part
    launches.append(Launch(
        _gate_finish_kernel, (nfr,),
        (thumb_all, ref_thumb, hist_part, ref_hist, s1, s2, ad, lap, mad, ssim, corr, hist, float(h * w)),
        dict(REDUCE_HIST=True, HAS_REF=has_ref, TY=_ty(), num_warps=4, enable_fp_fusion=False)))
    return (lap, mad, ssim, corr, thumb_all[:nfr], hist, tiles), launches


def gate_stats(frames: torch.Tensor, ref: torch.Tensor | None, tile: int = 16):
    """All gate statistics of N frames against one reference frame (or None).

    frames: uint8 [N, H, W]; ref: uint8 [H, W] or None, on the frames' device; tile: side of the
    local-change grid's cells (1..1024 pixels; the cascade's tiles are 2 x 2 cells).
    Returns (lap_var f64[N], mad f64[N], ssim f64[N], hist_corr f64[N], thumb f32[N, 64, 64],
    hist f32[N, 64], tile_sums i64[N, ceil(H/tile), ceil(W/tile)]); mad, ssim and hist_corr are
    NaN and tile_sums zero without a reference.
    """
    out, launches = plan_gate_stats(frames, ref, tile)
    run_all(launches)
    return out


def plan_gate_compare(frames, thumbs, hists, ref, ref_thumb, ref_hist, tile: int = 16):
    """``gate_compare``'s outputs (allocated, not yet written) and the launches that write them."""
    _check_tile(tile)
    frames = _check_frames(frames)
    nfr, h, w = frames.shape
    dev = frames.device
    _check_tensor("thumbs", thumbs, torch.float32, shape=(nfr, THUMB, THUMB))
    _check_tensor("hists", hists, torch.float32, shape=(nfr, HIST_BINS))
    _check_tensor("ref", ref, torch.uint8, shape=(h, w))
    _check_tensor("ref_thumb", ref_thumb, torch.float32, shape=(THUMB, THUMB))
    _check_tensor("ref_hist", ref_hist, torch.float32, shape=(HIST_BINS,))
    _check_device(dev, thumbs=thumbs, hists=hists, ref=ref, ref_thumb=ref_thumb, ref_hist=ref_hist)
    thumbs, hists, ref, ref_thumb, ref_hist = map(_own, (thumbs, hists, ref, ref_thumb, ref_hist))
    f64 = torch.float64
    mad, ssim, corr = (_empty((nfr,), f64, dev) for _ in range(3))
    tiles = _empty((nfr, -(-h // tile), -(-w // tile)), torch.int64, dev)
    launches = [_tile_launch(frames, ref, tiles, tile)]
    if nfr == 0:
        return (mad, ssim, corr, tiles), launches
    ad = _empty((nfr, THUMB), torch.int64, dev)
    launches.append(Launch(_mad_kernel, (nfr, THUMB), (frames, ref, ad, h * w),
                           dict(BLOCK=1024, num_warps=4, enable_fp_fusion=False)))
    launches.append(Launch(
        _gate_finish_kernel, (nfr,),
        (thumbs, ref_thumb, hists, ref_hist, ad, ad, ad, mad, mad, ssim, corr, hists, float(h * w)),
        dict(REDUCE_HIST=False, HAS_REF=True, TY=_ty(), num_warps=4, enable_fp_fusion=False)))
    return (mad, ssim, corr, tiles), launches


def gate_compare(frames, thumbs, hists, ref, ref_thumb, ref_hist, tile: int = 16):
    """The reference-dependent statistics only, reusing the frames' thumbnails and histograms.

    frames: uint8 [N, H, W]; thumbs: f32 [N, 64, 64]; hists: f32 [N, 64]; ref: uint8 [H, W];
    ref_thumb: f32 [64, 64]; ref_hist: f32 [64]; tile as for gate_stats. Returns (mad, ssim,
    hist_corr, tile_sums): f64 [N] each and i64 [N, ceil(H/tile), ceil(W/tile)].
    """
    out, launches = plan_gate_compare(frames, thumbs, hists, ref, ref_thumb, ref_hist, tile)
    run_all(launches)
    return out
