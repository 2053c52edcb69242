"""bench_gate.py's methods to compare the C++ body against: OpenCV frame by frame (the
baseline), the statistics vectorized in torch on the CPU, a copy of the same bytes (the ceiling),
and the agreement check against the numpy reference."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np


class OpenCVPerFrame:
    """One frame at a time, the way the VAM reference implementation did it. The frames are
    already gray (the reference converted BGR with cv2.cvtColor first; not counted here, as no
    other method converts colour either). The reference's thumbnail and histogram are computed
    once per batch (a cascade keeps them with the reference)."""

    def __init__(self, ref: np.ndarray):
        import cv2
        from skimage.metrics import structural_similarity

        self.cv2, self.ssim_fn = cv2, structural_similarity
        self.ref = ref
        self.tref = cv2.resize(ref, (64, 64))
        self.href = cv2.calcHist([ref], [0], None, [64], [0, 256])

    def __call__(self, frames: np.ndarray) -> dict:
        cv2 = self.cv2
        out = {k: [] for k in ("lap_var", "mad", "ssim", "hist_corr")}
        for g in frames:
            out["lap_var"].append(cv2.Laplacian(g, cv2.CV_64F).var())
            out["mad"].append(cv2.absdiff(g, self.ref).mean())
            t = cv2.resize(g, (64, 64))
            out["ssim"].append(self.ssim_fn(t, self.tref, data_range=255))
            h = cv2.calcHist([g], [0], None, [64], [0, 256])
            out["hist_corr"].append(cv2.compareHist(h, self.href, cv2.HISTCMP_CORREL))
        return {k: np.array(v, np.float64) for k, v in out.items()}


class TorchCPU:
    """The reference statistics vectorized over the batch with torch CPU ops (float32 pixels,
    float64 for the small thumbnail/histogram math). The Laplacian is four shifted adds of the
    reflect-padded batch; ``conv2d=True`` uses F.conv2d with the 3x3 kernel instead, which on
    CPU takes an im2col path for one input channel and is tens of times slower."""

    def __init__(self, h: int, w: int, *, conv2d: bool = False):
        import torch
        import torch.nn.functional as F

        from vam_engine.gate import reference as R

        self.torch, self.F = torch, F
        self.h, self.w = h, w
        self.conv2d = conv2d
        self.lap_k = torch.tensor([[0, 1, 0], [1, -4, 1], [0, 1, 0]], dtype=torch.float32).view(1, 1, 3, 3)
        self.rows = self._cells(h, R.cell_bounds(h))
        self.cols = self._cells(w, R.cell_bounds(w))
        self.c1 = (R.SSIM_K1 * R.SSIM_RANGE) ** 2
        self.c2 = (R.SSIM_K2 * R.SSIM_RANGE) ** 2
        self.win = R.SSIM_WIN

    def _cells(self, n: int, bounds):
        """How the 64 cells cover one side: an index per pixel (cells partition the side when
        n >= 64) or, for shorter sides, a 64 x n averaging matrix (cells overlap)."""
        torch = self.torch
        lo, hi = bounds
        counts = torch.tensor(hi - lo, dtype=torch.float32)
        if n >= 64:
            idx = torch.empty(n, dtype=torch.long)
            for i, (a, b) in enumerate(zip(lo, hi)):
                idx[a:b] = i
            return ("index", idx, counts)
        m = torch.zeros(64, n, dtype=torch.float32)
        for i, (a, b) in enumerate(zip(lo, hi)):
            m[i, a:b] = 1.0 / (b - a)
        return ("matrix", m, counts)

    def _reduce(self, x, spec, dim: int):
        kind, t, counts = spec
        torch = self.torch
        if kind == "index":
            shape = list(x.shape)
            shape[dim] = 64
            s = torch.zeros(shape, dtype=x.dtype).index_add_(dim, t, x)
            view = [1] * x.ndim
            view[dim] = 64
            return s / counts.view(view)
        return torch.movedim(torch.movedim(x, dim, -1) @ t.T, -1, dim)

    def thumbs(self, xf):  # xf: (N, H, W) float32 -> (N, 64, 64)
        return self._reduce(self._reduce(xf, self.rows, 1), self.cols, 2)

    def hists(self, x):  # x: (N, H, W) uint8 -> (N, 64) float64 counts of the counted rows
        torch = self.torch
        from vam_engine.gate.reference import HIST_ROW_STEP

        b = x[:, ::HIST_ROW_STEP] >> 2  # one uint8 pass; bincount then runs per frame (no int64 copy)
        return torch.stack([torch.bincount(f.reshape(-1), minlength=64) for f in b]).to(torch.float64)

    def ssim(self, a, b):  # (N, 64, 64) float64, (64, 64) -> (N,)
        torch, F = self.torch, self.F
        b = b.expand_as(a)
        x = torch.stack([a, b, a * a, b * b, a * b], 1)  # (N, 5, 64, 64)
        m = F.avg_pool2d(x, self.win, stride=1)
        ua, ub, aa, bb, ab = m.unbind(1)
        k = self.win * self.win
        cn = k / (k - 1.0)
        vaa, vbb, vab = cn * (aa - ua * ua), cn * (bb - ub * ub), cn * (ab - ua * ub)
        s = ((2 * ua * ub + self.c1) * (2 * vab + self.c2)) / ((ua * ua + ub * ub + self.c1) * (vaa + vbb + self.c2))
        return s.mean((1, 2))

    @staticmethod
    def corr(h, href):  # (N, 64), (64,) -> (N,)
        a = h - h.mean(1, keepdim=True)
        b = href - href.mean()
        num = (a * b).sum(1)
        den = ((a * a).sum(1) * (b * b).sum()).sqrt()
        safe = num / den.clamp_min(1e-300)
        eq = (h == href).all(1).to(h.dtype)
        return (den == 0).to(h.dtype) * eq + (den != 0).to(h.dtype) * safe

    def __call__(self, frames: np.ndarray, ref: np.ndarray) -> dict:
        torch, F = self.torch, self.F
        x = torch.from_numpy(frames)
        r = torch.from_numpy(ref)
        xf = x.to(torch.float32)
        npx = self.h * self.w
        # Laplacian values are integers, so float32 holds them and their squares exactly; the
        # variance comes from float64 sums (faster than Tensor.var's Welford pass on CPU).
        p = F.pad(xf.unsqueeze(1), (1, 1, 1, 1), mode="reflect")  # torch "reflect" == reflect-101
        if self.conv2d:
            lap = F.conv2d(p, self.lap_k).flatten(1)
        else:  # the same stencil as four shifted adds
            q = p[:, 0]
            lap = q[:, :-2, 1:-1] + q[:, 2:, 1:-1]
            lap += q[:, 1:-1, :-2]
            lap += q[:, 1:-1, 2:]
            lap.sub_(q[:, 1:-1, 1:-1], alpha=4.0)
        lap = lap.reshape(-1, self.h, self.w)
        # Row sums in float32 (exact for the integer Laplacian: |row sum| <= 1020 * W), the rest
        # in float64; reducing to float64 directly would first copy the batch to float64.
        s1 = lap.sum(2).to(torch.float64).sum(1)
        s2 = lap.square_().sum(2).to(torch.float64).sum(1)
        lap_var = s2 / npx - (s1 / npx) ** 2
        rf = r.to(torch.float32)
        mad = (xf - rf).abs_().sum(2).to(torch.float64).sum(1) / npx  # row sums <= 255 * W: exact
        th = self.thumbs(xf).to(torch.float64)
        tr = self.thumbs(rf.unsqueeze(0)).to(torch.float64)[0]
        hi = self.hists(x)
        hr = self.hists(r.unsqueeze(0))[0]
        return {"lap_var": lap_var.numpy(), "mad": mad.to(torch.float64).numpy(), "ssim": self.ssim(th, tr).numpy(),
                "hist_corr": self.corr(hi, hr).numpy(), "thumb": th.numpy(), "hist": hi.numpy()}


def stats_dict(st) -> dict:
    """A body's GateStats as the dict the other methods return."""
    return {"lap_var": st.lap_var, "mad": st.mad, "ssim": st.ssim, "hist_corr": st.hist_corr,
            "thumb": st.thumb, "hist": st.hist}


def max_errors(got: dict, want: dict) -> dict:
    """Largest relative error per statistic (absolute for ssim and hist_corr, which lie in [-1, 1])."""
    out = {}
    for k in ("lap_var", "mad", "ssim", "hist_corr", "thumb", "hist"):
        if k not in got:
            continue
        a = np.asarray(got[k], np.float64)
        b = np.asarray(want[k], np.float64)
        err = np.abs(a - b)
        if k in ("lap_var", "mad"):
            err = err / np.maximum(np.abs(b), 1e-12)
        out[k] = float(err.max())
    return out


class MemCopy:
    """The same bytes the statistics read (every frame, plus the reference once per frame),
    copied with np.copyto into preallocated buffers, split across ``threads``."""

    def __init__(self, frames: np.ndarray, ref: np.ndarray, threads: int):
        self.frames, self.ref, self.threads = frames, ref, threads
        self.dst = np.empty_like(frames)
        self.dst_ref = np.empty((max(1, threads),) + ref.shape, ref.dtype)
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def _part(self, k: int) -> None:
        n = len(self.frames)
        lo, hi = k * n // self.threads, (k + 1) * n // self.threads
        np.copyto(self.dst[lo:hi], self.frames[lo:hi])
        for _ in range(hi - lo):
            np.copyto(self.dst_ref[k], self.ref)

    def __call__(self) -> None:
        if self.pool is None:
            self._part(0)
        else:
            list(self.pool.map(self._part, range(self.threads)))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
