"""The present (the working memory) as the pipeline feeds it: one way in for every frame the
pipeline shows it.

With ``present_fps`` set, decoders (files and live cameras) hand the present's own frames here
at that rate, beside the index samples: they never reach the queue, the gates, the embedder or
the store; perception may detect on them too (``detect_present``). Without it, the embed stage
offers the frames that passed the gates (as nothing reads the present without a model, nothing
extra is decoded for it). Pushed frames reach the working memory from ``Engine.push`` directly,
as that path is timed in microseconds.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ingest import fit_rgb
from ..memory import camera_time


class PresentFeed:
    def __init__(self, observe: Callable | None, *, fps: float | None, side: int, perception=None):
        """``observe(camera, t, rgb)``: the working memory's feed (None: no present).
        ``perception``: a PerceptionFeed; with its ``detect_present`` the present's frames are
        detected on (at full size) as well."""
        self.observe = observe
        self.fps = fps
        self.side = side
        self.perception = perception

    @property
    def from_decode(self) -> bool:
        """Whether decoders feed the present at its own rate (else the gated frames do)."""
        return self.fps is not None

    def decoded(self, camera_id: str, t: float, rgb: Callable[[int], np.ndarray]) -> None:
        """A present frame from a decoder, on its thread: ``rgb(max_side)`` converts it (call
        before the decoder's next frame: a body may reuse the payload). Raises what the
        conversion or the working memory raises (the decoder counts it; the index goes on)."""
        if self.perception is not None and self.perception.detect_present:
            self.perception.present(camera_id, t, rgb(1 << 16))  # full size
        self.observe(camera_id, t, rgb(self.side))

    def gated(self, camera_id: str, t_rel: float, t_abs: float | None, rgb) -> None:
        """A frame that passed the gates (only when decoders do not feed the present): a host
        array, or a GPU decoder's tensor, of which only the present's small copy comes over."""
        if self.observe is not None and not self.from_decode:
            if not isinstance(rgb, np.ndarray):
                rgb = fit_rgb(rgb, self.side)
            self.observe(camera_id, camera_time(t_rel, t_abs), rgb)
