"""The gate cascade: blur, then low change, SSIM and histogram against the camera's last kept frame.

The reference frame makes the cascade sequential: frame i is compared with the last frame kept
before it, which may be in the same batch. The batch is computed against the current reference
in one fused call (speculation); after a keep, only the reference-dependent statistics of the
frames after it are recomputed, in chunks that start small and double while no keep happens,
so the result equals a frame-by-frame run exactly and a keep costs little.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..config import GateConfig
from .records import GateRecord

_FIRST_CHUNK = 4


def decide(cfg: GateConfig, lap_var: float, mad: float, ssim: float, hist_corr: float,
           has_ref: bool) -> str | None:
    """The gate that drops a frame, or None to keep it."""
    if lap_var < cfg.blur_min_lap_var:
        return "blur"
    if not has_ref:
        return None
    if mad < cfg.diff_min_mad:
        return "low_change"
    if ssim > cfg.ssim_max:
        return "ssim"
    if cfg.hist_max_corr > 0 and hist_corr >= cfg.hist_max_corr:
        return "hist"
    return None


@dataclass
class _Ref:
    gray: Any  # H x W uint8 (numpy, or a torch tensor on the gate's device)
    thumb: Any
    hist: Any


def _stack(grays: Sequence[Any]):
    if hasattr(grays[0], "device") and not isinstance(grays[0], np.ndarray):
        import torch

        return torch.stack(list(grays))
    return np.stack(grays)


def _none_if_nan(x: float) -> float | None:
    return None if x != x else float(x)


class GateCascade:
    """Per-camera gate state over one statistics body (see gate.bodies)."""

    def __init__(self, body, cfg: GateConfig):
        self.body = body
        self.cfg = cfg
        self._refs: dict[str, _Ref] = {}

    def reference(self, camera_id: str):
        r = self._refs.get(camera_id)
        return None if r is None else r.gray

    def forget(self, cameras) -> None:
        """Drop cameras' references (their last kept frame was deleted)."""
        for cam in cameras:
            self._refs.pop(cam, None)

    def set_reference(self, camera_id: str, gray) -> None:
        """Adopt a kept frame (e.g. restored from the store) as the camera's reference."""
        s = self.body.stats(_stack([gray]), None)
        self._refs[camera_id] = _Ref(gray, s.thumb[0], s.hist[0])

    def run(self, camera_id: str, grays: Sequence[Any]) -> list[GateRecord]:
        """Gate frames of one camera in time order; returns one record per frame."""
        out: list[GateRecord] = []
        start = 0
        while start < len(grays):  # split where the frame size changes (a stream reconfigured)
            end = start + 1
            shape = tuple(grays[start].shape)
            while end < len(grays) and tuple(grays[end].shape) == shape:
                end += 1
            out += self._run_same_shape(camera_id, grays[start:end])
            start = end
        return out

    def _run_same_shape(self, camera_id: str, grays: Sequence[Any]) -> list[GateRecord]:
        frames = _stack(grays)
        n = len(grays)
        ref = self._refs.get(camera_id)
        if ref is not None and tuple(ref.gray.shape) != tuple(frames.shape[1:]):
            ref = None  # a new frame size: nothing comparable, the first sharp frame is kept
        st = self.body.stats(frames, None, None, None) if ref is None else \
            self.body.stats(frames, ref.gray, ref.thumb, ref.hist)
        mad, ssim, hcorr = (np.array(a, np.float64, copy=True) for a in (st.mad, st.ssim, st.hist_corr))
        valid_end = n  # stats of frames [i, valid_end) are against the current reference
        chunk = _FIRST_CHUNK
        records = []
        for i in range(n):
            if i >= valid_end:
                j = min(n, i + chunk)
                chunk *= 2
                mad[i:j], ssim[i:j], hcorr[i:j] = self.body.compare(
                    frames[i:j], st.thumb[i:j], st.hist[i:j], ref.gray, ref.thumb, ref.hist)
                valid_end = j
            dropped = decide(self.cfg, float(st.lap_var[i]), mad[i], ssim[i], hcorr[i], ref is not None)
            records.append(GateRecord(float(st.lap_var[i]), _none_if_nan(mad[i]), _none_if_nan(ssim[i]),
                                      _none_if_nan(hcorr[i]), dropped))
            if dropped is None:
                ref = _Ref(grays[i], st.thumb[i], st.hist[i])
                valid_end = i + 1
                chunk = _FIRST_CHUNK
        if ref is not None:
            self._refs[camera_id] = ref
        return records
