"""The image gates' section (``gate``)."""
from __future__ import annotations

from pydantic import Field

from .base import Section


class GateConfig(Section):
    """The image gates (gate/cascade.py: ``decide``). Blur is judged against the camera's own
    recent sharpness and per view (the span between two scene changes: blur_view_max_s); low
    change against the whole frame and against each tile of it."""

    blur_min_lap_var: float = Field(20.0, ge=0, description="blurred only below this Laplacian variance (the "
                                                            "seed's absolute rule), and only when blur_rel holds too")
    blur_rel: float = Field(0.5, ge=0, le=1, description="blurred only when the Laplacian variance is also below "
                                                         "this fraction of the median over the camera's last "
                                                         "blur_history kept frames; a camera without history (its "
                                                         "first frames) has nothing to be blurred against: kept")
    blur_history: int = Field(8, ge=1, le=256, description="kept frames whose Laplacian variance the camera's "
                                                           "sharpness median is taken over; a kept frame under "
                                                           "blur_rel of it (a new, low-texture view) restarts it")
    blur_view_ssim: float = Field(0.7, ge=-1, le=1, description="a frame whose thumbnail SSIM vs the last kept is "
                                                                "below this shows a new view (a scene cut), not "
                                                                "the old one blurred: never blurred (a defocus "
                                                                "keeps the 64x64 thumbnail: SSIM 0.8-1.0; a cut "
                                                                "to a low-texture view measures 0.1-0.5); the "
                                                                "view rule's scene change (vs the previous "
                                                                "sample, blur_view_max_s) is this test too")
    blur_coarse_lap_var: float = Field(12.0, ge=0, description="a new view under the blur thresholds is blurred "
                                                                "when its 64x64 thumbnail's Laplacian variance is "
                                                                "at least this (coarse structure without fine "
                                                                "detail: a defocused scene, 25 and more); a sharp "
                                                                "low-texture view has little of either (about 4)")
    blur_detail_ratio: float = Field(0.6, ge=0, description="... and when its detail ratio (cascade.detail_ratio: "
                                     "Laplacian variance above the uint8 rounding floor over the thumbnail's, times "
                                     "the pixels per thumbnail cell) is below this: a defocused view measures "
                                     "0.01-0.25 (180p to 1080p) without noise, a sharp low-texture view with coarse "
                                     "structure (the moon, fog, a retina) 1.2 and more; sensor or codec noise lifts a "
                                     "defocused 720p or 1080p frame to 1-2, which blur_coarse_sharpness catches")
    blur_coarse_sharpness: float = Field(0.3, ge=0, description="... or when its thumbnail is smooth itself: "
                                         "cascade.coarse_sharpness (the thumbnail's second-difference variance "
                                         "along the frame's shorter side over that of the thumbnail halved) below "
                                         "this. A view defocused by a thumbnail cell or more (sigma 6 px at 360p, 18 "
                                         "at 1080p) measures 0.20 and less at any frame size, whatever the noise "
                                         "(the cells average it away), by sigma 4.5 px 0.15-0.29; sharp views, "
                                         "low-texture ones included, 0.4 and more on the fidelity clips")
    blur_view_max_s: float = Field(10.0, gt=0, description="the view rule's bound on a hold (gate/cascade.py): a "
                                   "blurred sample that shows a new view is held, not dropped; a later sample of the "
                                   "view that passes the blur rule drops it (a view with a sharp sample keeps no "
                                   "blurred one); when the view ends (a scene change from the previous sample: "
                                   "blur_view_hist_corr; a sample that passed whose thumbnail SSIM vs the held one is "
                                   "under blur_view_ssim; a new frame size; the stream's end) or this many "
                                   "seconds after the hold began with no sample that passed, the view's sharpest "
                                   "blurred sample is kept, marked blurred, and restarts the sharpness history. So "
                                   "no view is left without a moment, a decision waits at most this long, and a "
                                   "defocus after a cut that lasts under this long keeps nothing")
    blur_view_hist_corr: float = Field(0.5, ge=-1, le=1, description="the view rule's scene change between two "
                                       "samples while one is held: thumbnail SSIM under blur_view_ssim and gray "
                                       "histogram correlation under this (a pan over defocused photographs keeps "
                                       "0.85-0.95 from sample to sample at 0.5 fps, a cut between views 0.06-0.6)")
    diff_min_mad: float = Field(20.0, ge=0, description="redundant when mean abs gray diff vs last kept is below "
                                                        "this and no tile changed locally (tile_min_mad)")
    diff_min_contrast_frac: float = Field(0.8, ge=0, description="under diff_min_mad, a wide change (more tiles "
                                          "than tile_max_frac changed) is not redundant when its MAD is at least "
                                          "this fraction of the view's contrast (gray std from the histograms, the "
                                          "larger of frame and last kept): a pan over fog or night (std 5-8) moves "
                                          "MAD by about its std and can never reach diff_min_mad; on views of std "
                                          "over diff_min_mad / this (25) it never applies; SSIM and the histogram "
                                          "still judge the frame after it")
    tile_size: int = Field(32, ge=2, le=2048, multiple_of=2, description="side in pixels of the local-change "
                                                                         "tiles; they overlap by half (a tile every "
                                                                         "tile_size / 2 pixels) and are clipped at "
                                                                         "the borders")
    tile_min_mad: float = Field(8.0, ge=0, description="a tile changed when its mean abs gray diff vs last kept is "
                                                       "at least this: 1.6x the tile mean of sensor noise of sigma "
                                                       "4 (4.9), above JPEG q20-90 and H.264 crf 23-40 artefacts "
                                                       "on still scenes (at most 6.8); a 12 px sprite gives 17 and "
                                                       "more, one segment of a 32 px digit 10 and more")
    tile_max_frac: float = Field(0.25, ge=0, le=1, description="a change is local (kept even under diff_min_mad, "
                                                               "and SSIM/histogram do not apply) when at least one "
                                                               "and at most this fraction of the tiles changed; "
                                                               "more is a global change (pan, exposure): redundant "
                                                               "under diff_min_mad as in the seed, unless "
                                                               "diff_min_contrast_frac holds")
    cut_max_ssim: float = Field(0.5, ge=-1, le=1, description="under diff_min_mad, a wide change (more tiles than "
                                "tile_max_frac changed) whose SSIM vs last kept is below this and whose histogram "
                                "correlation is below cut_max_hist_corr is a cut to a new view of similar "
                                "brightness: kept (lighting and exposure keep SSIM high, a pan the histogram)")
    cut_max_hist_corr: float = Field(0.9, ge=-1, le=1, description="see cut_max_ssim")
    ssim_max: float = Field(0.92, ge=-1, le=1, description="redundant when SSIM vs last kept is above this")
    hist_max_corr: float = Field(0.0, ge=0, le=1, description="redundant when histogram correlation >= this; 0 = off")
