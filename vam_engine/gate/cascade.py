"""The gate cascade: blur, then low change (global and per tile), SSIM and histogram against the
camera's last kept frame.

The reference frame makes the cascade sequential: frame i is compared with the last frame kept
before it, which may be in the same batch, and its blur test with the sharpness of the frames
kept before it. The batch is computed against the current reference in one fused call
(speculation); after a keep, only the reference-dependent statistics of the frames after it are
recomputed, in chunks that start small and double while no keep happens, so the result equals
a frame-by-frame run exactly and a keep costs little.

The view rule (``GateConfig.blur_view_max_s``): a view is the span between two scene changes.
A blurred sample that shows a new view (thumbnail SSIM under ``blur_view_ssim`` against the last
kept frame, or no comparable one) is held, not dropped; a sharper blurred sample of its view
replaces it. While one is held, each later sample first asks whether the view ended
(``view_end``: a cut from the previous sample, a new frame size, ``blur_view_max_s`` since the
hold began; ``end``: the stream's end; or a sample that passes the blur rule but shows another
view, ``shows_other_view``). A sample that passes the blur rule and shows the held view (a
refocus) drops the held one: a view with a sharp sample keeps no blurred one. A view that ends
with nothing but blurred samples keeps its sharpest (largest Laplacian variance) once, marked
``GateRecord.blurred``; it becomes the reference, and when the hold ended at the deadline (the
view goes on) it restarts the sharpness history too, as any kept view much less sharp than the
camera's history does, so the rest of the view is judged against it. Releases are reported by
``gate`` (``GateRun.released``) before the decision on the sample that ended the view.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from ..config import GateConfig
from .bodies import Tiles
from .reference import SSIM_K1, SSIM_K2, SSIM_RANGE, SSIM_WIN, hist_corr, laplacian_var
from .records import GateRecord, GateRun, Released

_FIRST_CHUNK = 4


@dataclass(frozen=True)
class FrameStats:
    """One frame's statistics as ``decide`` reads them (comparisons are NaN without a reference)."""

    lap_var: float
    mad: float
    ssim: float
    hist_corr: float
    tile_mad: float
    tiles_changed: int
    n_tiles: int
    thumb_lap_var: float = float("nan")  # Laplacian variance of the 64x64 thumbnail (coarse detail), when needed
    thumb_scale: float = 1.0  # frame pixels per thumbnail cell, (H / 64) * (W / 64)
    contrast: float = float("nan")  # gray std (from the histograms), the larger of frame and reference, when needed
    coarse_sharpness: float = float("nan")  # cascade.coarse_sharpness of the thumbnail, when needed


# Laplacian variance of uint8 rounding alone (var 1/12 per pixel times the kernel's sum of squares,
# 20): the floor under every frame's lap_var, however smooth, which no detail ratio should count
LAP_QUANT = 20.0 / 12.0


def detail_ratio(s: FrameStats) -> float:
    """Fine detail per coarse structure: the frame's Laplacian variance above the rounding floor
    over the thumbnail's, times the pixels per thumbnail cell. Smooth content (a view defocused
    beyond a few pixels) has a thumbnail Laplacian of about the frame's times the cell area, so a
    variance the area squared larger: its ratio falls as 1 / area (0.01-0.25 on the fidelity clips
    at 180p to 1080p); a steep edge contributes to both about alike, whatever its contrast: sharp
    views, however little texture they have, measure 1.2 and more (0.6 at 72x120, where the
    thumbnail is almost the frame and nothing separates them)."""
    if not s.thumb_lap_var > 0:
        return float("inf")
    return max(0.0, s.lap_var - LAP_QUANT) * s.thumb_scale / s.thumb_lap_var


def coarse_sharpness(thumb, height: int, width: int) -> float:
    """Whether the thumbnail is itself sharp: the variance of its second differences along the
    frame's shorter side (where a thumbnail cell spans the fewest pixels) over that of the
    thumbnail halved (2 x 2 means, 32 x 32). Halving a picture with edges at the thumbnail's
    scale leaves it about the same (0.4 and more on the fidelity clips: photographs, the moon,
    fog, night, a retina); halving one smooth at that scale (defocused by a cell or more: sigma
    6 px at 360p, 18 at 1080p) divides it by up to 16 (0.20 and less; sigma 4.5 px: 0.15-0.29).
    Smooth sharp content reads low too (a brick wall's soft mortar zoomed in: 0.29). The cells
    average sensor and codec noise away and the thumbnail is the same picture at any frame size,
    so unlike detail_ratio it holds from 180p to 1080p; inf for a thumbnail without second
    differences along that side (a flat view)."""
    t = np.asarray(thumb, np.float64)
    half = t.reshape(t.shape[0] // 2, 2, t.shape[1] // 2, 2).mean(axis=(1, 3))
    axis = 0 if height <= width else 1
    coarse = float(np.diff(half, 2, axis=axis).var())
    return float(np.diff(t, 2, axis=axis).var()) / coarse if coarse > 0 else float("inf")


def hist_std(hist) -> float:
    """Gray standard deviation from a 64-bin histogram (bin b holds values 4b..4b+3)."""
    h = np.asarray(hist, np.float64)
    n = h.sum()
    if n <= 0:
        return 0.0
    c = np.arange(len(h), dtype=np.float64) * 4.0 + 1.5
    m = (h * c).sum() / n
    return float(np.sqrt(max(0.0, (h * (c - m) ** 2).sum() / n)))


def sharpness_median(history: Sequence[float]) -> float | None:
    return float(np.median(np.asarray(history, np.float64))) if len(history) else None


def is_blurred(cfg: GateConfig, s: FrameStats, history: Sequence[float], has_ref: bool) -> bool:
    """Blurred: under the absolute threshold and well under the camera's recent sharpness (the
    median of its last kept frames). A frame showing a new view (a cut) is blurred only if it has
    structure at the thumbnail's scale that is defocused: without the fine detail that goes with
    it (detail_ratio under blur_detail_ratio), or smooth itself (coarse_sharpness under
    blur_coarse_sharpness: the test sensor and codec noise cannot pass, which lift the detail
    ratio of a defocused 720p or 1080p frame to 1-2); a new view without coarse structure, or
    with sharp edges for the little it shows, is a sharp low-texture view."""
    if s.lap_var >= cfg.blur_min_lap_var:
        return False
    med = sharpness_median(history)
    if med is None or s.lap_var >= cfg.blur_rel * med:
        return False  # no history (a camera's first frames), or as sharp as this camera gets
    if has_ref and s.ssim < cfg.blur_view_ssim:
        return s.thumb_lap_var >= cfg.blur_coarse_lap_var and (
            detail_ratio(s) < cfg.blur_detail_ratio or s.coarse_sharpness < cfg.blur_coarse_sharpness)
    return True


def is_refocus(cfg: GateConfig, s: FrameStats, history: Sequence[float], has_ref: bool) -> bool:
    """The reference is blurred next to this frame (kept when the camera had nothing sharper,
    e.g. its first frames defocused): the view came into focus, which no redundancy gate hides.
    history[-1] is the reference's own Laplacian variance (the last kept frame)."""
    return (has_ref and len(history) > 0 and history[-1] < cfg.blur_min_lap_var
            and s.lap_var >= cfg.blur_min_lap_var and history[-1] < cfg.blur_rel * s.lap_var)


def decide(cfg: GateConfig, s: FrameStats, history: Sequence[float], has_ref: bool) -> str | None:
    """The gate that drops a frame, or None to keep it."""
    if is_blurred(cfg, s, history, has_ref):
        return "blur"
    if not has_ref or is_refocus(cfg, s, history, has_ref):
        return None
    if s.mad < cfg.diff_min_mad:
        changed = s.tile_mad >= cfg.tile_min_mad
        local = changed and s.tiles_changed <= cfg.tile_max_frac * s.n_tiles
        # a local change is kept: SSIM and the histogram average it away over the whole frame;
        # a wide change whose structure and histogram are both gone is a cut to a view of
        # similar brightness (lighting and exposure keep the structure; a pan keeps the histogram)
        cut = changed and not local and s.ssim < cfg.cut_max_ssim and s.hist_corr < cfg.cut_max_hist_corr
        if local or cut:
            return None
        # on a low-contrast view (fog, night) a pan moves pixels that vary by a few levels: MAD
        # cannot reach diff_min_mad, so a wide change as large as the view's contrast goes on to SSIM
        if not (changed and s.mad >= cfg.diff_min_contrast_frac * s.contrast):
            return "low_change"
    if s.ssim > cfg.ssim_max:
        return "ssim"
    if cfg.hist_max_corr > 0 and s.hist_corr >= cfg.hist_max_corr:
        return "hist"
    return None


def is_local_change(cfg: GateConfig, rec: GateRecord) -> bool:
    """Whether a kept frame passed the low-change gate only by a local change (its tiles), which a
    whole-frame embedding barely sees: later stages must not drop it as a duplicate."""
    return (rec.dropped_by is None and rec.mad is not None and rec.mad < cfg.diff_min_mad
            and rec.tile_mad is not None and rec.tile_mad >= cfg.tile_min_mad)


def update_history(cfg: GateConfig, history: Sequence[float], lap_var: float) -> tuple[float, ...]:
    """The camera's sharpness history after keeping a frame: a kept frame well under the median
    (a new view that is sharp for what it shows) restarts it; the last blur_history are kept."""
    med = sharpness_median(history)
    h = [] if med is not None and lap_var < cfg.blur_rel * med else list(history)
    h.append(float(lap_var))
    return tuple(h[-cfg.blur_history:])


@dataclass
class _Ref:
    gray: Any  # H x W uint8 (numpy, or a torch tensor on the gate's device)
    thumb: Any
    hist: Any


@dataclass
class _Held:
    """The current view's sharpest blurred sample, while none of the view's samples passed the
    blur rule (the view rule, module doc)."""

    key: Any
    frame: _Ref  # its gray, thumbnail and histogram: the reference once it is kept
    record: GateRecord  # as gated (dropped_by "blur")
    t0: float | None  # when the hold began (None without sample times: no deadline)
    first_key: Any  # the key of the sample the hold began with


@dataclass
class _Camera:
    ref: _Ref | None = None
    sharpness: tuple[float, ...] = field(default_factory=tuple)  # lap_var of its last kept frames
    held: _Held | None = None
    last: _Ref | None = None  # the previous sample (its thumbnail and histogram: the view-change test)


def view_end(cfg: GateConfig, held: _Held, last, thumb, hist, t: float | None) -> str | None:
    """Whether a sample ends the held sample's view before its own decision: "late" when
    blur_view_max_s passed since the hold began (the view goes on), "cut" at a scene change from
    the previous sample ``last`` (a _Ref of its thumbnail and histogram: both thumbnail SSIM
    under blur_view_ssim and histogram correlation under blur_view_hist_corr, as a cut changes
    both and a pan mostly keeps the histogram; or a new frame size); None while the view goes on."""
    if t is not None and held.t0 is not None and t - held.t0 >= cfg.blur_view_max_s:
        return "late"
    if last is None or tuple(last.thumb.shape) != tuple(thumb.shape):
        return "cut"
    cut = thumb_ssim(thumb, last.thumb) < cfg.blur_view_ssim and \
        hist_corr(np.asarray(hist, np.float64), np.asarray(last.hist, np.float64)) < cfg.blur_view_hist_corr
    return "cut" if cut else None


def shows_other_view(cfg: GateConfig, held: _Held, thumb) -> bool:
    """A sample that passed the blur rule shows another view than the held sample (a refocus
    keeps the thumbnail: SSIM 0.8-1.0 by blur_view_ssim's account)."""
    return thumb_ssim(thumb, held.frame.thumb) < cfg.blur_view_ssim


def thumb_ssim(a: np.ndarray, b: np.ndarray) -> float:
    """reference.ssim of two thumbnails, with its five window means as separable running sums
    over one stacked array: the reference's strided 7 x 7 mean took about 3 ms per pair on a
    64 x 64 thumbnail (a tenth of a sparse sample's gating, at every view test), this about
    0.05 ms. Same float64 formula; only the order of the window's additions differs (agrees
    with the reference to ~1e-15; tests/gate check it)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    k = SSIM_WIN
    h, w = a.shape[-2] - k + 1, a.shape[-1] - k + 1
    x = np.stack([a, b, a * a, b * b, a * b])
    rows = x[:, 0:h]
    for i in range(1, k):
        rows = rows + x[:, i:i + h]
    s = rows[:, :, 0:w]
    for j in range(1, k):
        s = s + rows[:, :, j:j + w]
    ua, ub, aa, bb, ab = s * (1.0 / (k * k))
    cov_norm = k * k / (k * k - 1.0)
    vaa = cov_norm * (aa - ua * ua)
    vbb = cov_norm * (bb - ub * ub)
    vab = cov_norm * (ab - ua * ub)
    c1 = (SSIM_K1 * SSIM_RANGE) ** 2
    c2 = (SSIM_K2 * SSIM_RANGE) ** 2
    return float((((2 * ua * ub + c1) * (2 * vab + c2)) / ((ua * ua + ub * ub + c1) * (vaa + vbb + c2))).mean())


def _stack(grays: Sequence[Any]):
    if hasattr(grays[0], "device") and not isinstance(grays[0], np.ndarray):
        import torch

        return torch.stack(list(grays))
    if len(grays) == 1:  # sparse samples come one at a time: a view, not a copy (nothing writes to it)
        return grays[0][None]
    return np.stack(grays)


def _rows(frames, i: int, j: int):
    """frames[i:j] of a numpy array or a torch tensor; a tensor by ``narrow``, which torch's fake
    CUDA tensors run on a CPU-only build (indexing does not: the device path's sync check)."""
    return frames[i:j] if isinstance(frames, np.ndarray) else frames.narrow(0, i, j - i)


def _none_if_nan(x: float) -> float | None:
    return None if x != x else float(x)


class _Batch:
    """One call's frames of one size and their statistics against the current reference,
    recomputed (reference-dependent ones only) from a frame on when the reference moves: in
    chunks that start small and double while it stays."""

    def __init__(self, cascade: "GateCascade", cfg: GateConfig, frames, ref: _Ref | None):
        self.body, self.tiles, self.cfg, self.frames = cascade.body, cascade.tiles, cfg, frames
        self.size = frames.shape[1:3]
        self.scale = (frames.shape[1] / 64.0) * (frames.shape[2] / 64.0)
        st = self.body.stats(frames, None, None, None, tiles=self.tiles) if ref is None else \
            self.body.stats(frames, ref.gray, ref.thumb, ref.hist, tiles=self.tiles)
        self.st = st
        self.mad, self.ssim, self.hcorr, self.tmad = (np.array(a, np.float64, copy=True) for a in (
            st.mad, st.ssim, st.hist_corr, st.tile_mad))
        self.tchg = np.array(st.tiles_changed, np.int64, copy=True)
        self.valid_end = len(frames)  # stats of frames [i, valid_end) are against the current reference
        self.chunk = _FIRST_CHUNK

    def rebase(self, i: int, ref: _Ref) -> _Ref:
        """The reference moved before frame i: frames from i on are compared with ``ref``."""
        self.valid_end, self.chunk = i, _FIRST_CHUNK
        return ref

    def frame(self, i: int, ref: _Ref | None) -> FrameStats:
        if i >= self.valid_end:
            j = min(len(self.frames), i + self.chunk)
            self.chunk *= 2
            st = self.st
            c = self.body.compare(_rows(self.frames, i, j), st.thumb[i:j], st.hist[i:j], ref.gray, ref.thumb, ref.hist,
                                  tiles=self.tiles)
            self.mad[i:j], self.ssim[i:j], self.hcorr[i:j], self.tmad[i:j], self.tchg[i:j] = \
                c.mad, c.ssim, c.hist_corr, c.tile_mad, c.tiles_changed
            self.valid_end = j
        return GateCascade._frame_stats(self.cfg, self.st, i, self.size, self.scale, ref, self.mad, self.ssim,
                                        self.hcorr, self.tmad, self.tchg)


class GateCascade:
    """Per-camera gate state over one statistics body (see gate.bodies)."""

    def __init__(self, body, cfg: GateConfig):
        self.body = body
        self.cfg = cfg
        self.camera_cfg: dict[str, GateConfig] = {}  # per-camera overrides (live cameras); tiles stay shared
        self.tiles = Tiles(cfg.tile_size, cfg.tile_min_mad)
        self._cams: dict[str, _Camera] = {}

    def reference(self, camera_id: str):
        c = self._cams.get(camera_id)
        return None if c is None or c.ref is None else c.ref.gray

    def sharpness(self, camera_id: str) -> tuple[float, ...]:
        """The Laplacian variances of the camera's last kept frames (what its blur test reads;
        committed with the reference so that a resumed run decides as an uninterrupted one)."""
        c = self._cams.get(camera_id)
        return () if c is None else c.sharpness

    def held_key(self, camera_id: str):
        """The key of the sample the camera holds (its view may still keep it), or None."""
        c = self._cams.get(camera_id)
        return None if c is None or c.held is None else c.held.key

    def hold_start(self, camera_id: str):
        """The key of the sample the camera's current hold began with, or None when it holds
        nothing. A hold is not committed: a resumed run must gate again from that sample on."""
        c = self._cams.get(camera_id)
        return None if c is None or c.held is None else c.held.first_key

    def forget(self, cameras) -> None:
        """Drop cameras' references, sharpness and held samples (their kept frames were deleted)."""
        for cam in cameras:
            self._cams.pop(cam, None)

    def set_reference(self, camera_id: str, gray, sharpness: Sequence[float] = ()) -> None:
        """Adopt a kept frame (e.g. restored from the store) as the camera's reference, with the
        camera's sharpness history as committed with it."""
        s = self.body.stats(_stack([gray]), None, tiles=self.tiles)
        hist = tuple(float(x) for x in sharpness)[-self.cfg.blur_history:]
        self._cams[camera_id] = _Camera(_Ref(gray, s.thumb[0], s.hist[0]), hist)

    def run(self, camera_id: str, grays: Sequence[Any], times: Sequence[float] | None = None) -> list[GateRecord]:
        """``gate`` without keys: the records alone (a held sample kept later is not reported)."""
        return self.gate(camera_id, grays, times).records

    def gate(self, camera_id: str, grays: Sequence[Any], times: Sequence[float] | None = None,
             keys: Sequence[Any] | None = None) -> GateRun:
        """Gate frames of one camera in time order: one record per frame, and the held samples
        the view rule kept (module doc). ``times``: the samples' seconds on the camera's axis
        (None: no deadline on a hold); ``keys``: the caller's handle of each frame, echoed in
        ``GateRun.released`` (default: the frame's index in the call)."""
        if times is not None and len(times) != len(grays):
            raise ValueError(f"GateCascade.gate: {len(times)} times for {len(grays)} frames")
        if keys is not None and len(keys) != len(grays):
            raise ValueError(f"GateCascade.gate: {len(keys)} keys for {len(grays)} frames")
        out, released = [], []
        start = 0
        while start < len(grays):  # split where the frame size changes (a stream reconfigured)
            end = start + 1
            shape = tuple(grays[start].shape)
            while end < len(grays) and tuple(grays[end].shape) == shape:
                end += 1
            part = slice(start, end)
            run = self._run_same_shape(camera_id, grays[part], None if times is None else times[part],
                                       range(start, end) if keys is None else keys[part])
            out += run.records
            released += [replace(r, before=r.before + start) for r in run.released]
            start = end
        return GateRun(out, released)

    def end(self, camera_id: str) -> list[Released]:
        """The camera's view ended with its stream (a source's end, a gap): its held sample, if
        any, is kept (``Released.before`` 0)."""
        cam = self._cams.get(camera_id)
        if cam is None or cam.held is None:
            return []
        out: list[Released] = []
        self._release(cam, self.camera_cfg.get(camera_id, self.cfg), out, 0, restart=False)
        cam.last = None
        return out

    def _release(self, cam: _Camera, cfg: GateConfig, out: list, before: int, restart: bool) -> _Ref:
        """Keep the held sample, marked: the camera's reference moves to it, and with ``restart``
        (its view goes on past blur_view_max_s) its sharpness restarts the history, so the rest
        of the view is judged against it."""
        h, cam.held = cam.held, None
        cam.ref = h.frame
        if restart:
            cam.sharpness = update_history(cfg, cam.sharpness, h.record.lap_var)
        out.append(Released(h.key, replace(h.record, dropped_by=None, blurred=True), before))
        return h.frame

    def _hold(self, cam: _Camera, cfg: GateConfig, rec: GateRecord, frame: _Ref, key, t, new_view: bool) -> None:
        """A blurred sample: the view's new sharpest held sample, or dropped (module doc)."""
        if cam.held is not None:  # the same view (a sample that ends it releases the held one first)
            if rec.lap_var > cam.held.record.lap_var:
                cam.held = _Held(key, frame, rec, cam.held.t0, cam.held.first_key)
        elif new_view:
            cam.held = _Held(key, frame, rec, t, key)

    def _run_same_shape(self, camera_id: str, grays: Sequence[Any], times, keys) -> GateRun:
        frames = _stack(grays)
        n = len(grays)
        cfg = self.camera_cfg.get(camera_id, self.cfg)
        cam = self._cams.setdefault(camera_id, _Camera())
        released: list[Released] = []
        if cam.held is not None and tuple(cam.held.frame.gray.shape) != tuple(frames.shape[1:]):
            self._release(cam, cfg, released, 0, restart=False)  # a new frame size: the held view ended
        ref = cam.ref
        if ref is not None and tuple(ref.gray.shape) != tuple(frames.shape[1:]):
            ref = None  # a new frame size: nothing comparable, the first sharp frame is kept
        b = _Batch(self, cfg, frames, ref)
        records = []
        for i in range(n):
            t = None if times is None else float(times[i])
            ended = None if cam.held is None else view_end(cfg, cam.held, cam.last, b.st.thumb[i], b.st.hist[i], t)
            if ended:
                ref = b.rebase(i, self._release(cam, cfg, released, i, restart=ended == "late"))
            fs = b.frame(i, ref)
            if cam.held is not None and not is_blurred(cfg, fs, cam.sharpness, ref is not None) \
                    and shows_other_view(cfg, cam.held, b.st.thumb[i]):
                ref = b.rebase(i, self._release(cam, cfg, released, i, restart=False))
                fs = b.frame(i, ref)
            dropped = decide(cfg, fs, cam.sharpness, ref is not None)
            rec = GateRecord(fs.lap_var, _none_if_nan(fs.mad), _none_if_nan(fs.ssim), _none_if_nan(fs.hist_corr),
                             dropped, _none_if_nan(fs.tile_mad), None if ref is None else fs.tiles_changed)
            records.append(rec)
            this = _Ref(grays[i], b.st.thumb[i], b.st.hist[i])
            cam.last = this
            if dropped == "blur":
                self._hold(cam, cfg, rec, this, keys[i], t, ref is None or fs.ssim < cfg.blur_view_ssim)
                continue
            cam.held = None  # the view has a sample that passed the blur rule: it keeps no blurred one
            if dropped is None:
                ref = b.rebase(i + 1, this)
                cam.sharpness = update_history(cfg, cam.sharpness, fs.lap_var)
        if ref is not None:
            cam.ref = ref
        return GateRun(records, released)

    @staticmethod
    def _frame_stats(cfg: GateConfig, st, i: int, size, scale: float, ref, mad, ssim, hcorr, tmad,
                     tchg) -> FrameStats:
        """Frame i's statistics as ``decide`` reads them."""
        lap = float(st.lap_var[i])
        # coarse detail and its sharpness, only read by the blur test of a frame under the
        # absolute threshold
        low = lap < cfg.blur_min_lap_var
        tlap = laplacian_var(st.thumb[i]) if low else float("nan")
        tsharp = coarse_sharpness(st.thumb[i], *size) if low else float("nan")
        # contrast, only read by the low-change test of a wide change under diff_min_mad
        contrast = max(hist_std(st.hist[i]), hist_std(ref.hist)) \
            if ref is not None and mad[i] < cfg.diff_min_mad else float("nan")
        return FrameStats(lap, float(mad[i]), float(ssim[i]), float(hcorr[i]), float(tmad[i]), int(tchg[i]),
                          st.n_tiles, tlap, scale, contrast, tsharp)
