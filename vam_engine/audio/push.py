"""Audio pushed by a caller (a robot's microphone loop): any rate, mono or multi-channel, int16,
int32 or float, converted to 16 kHz mono float32.

Shapes: ``(n,)`` mono, or ``(n, channels)`` frames first (as sounddevice, PortAudio and most
drivers hand them); channels are averaged. Integer samples are scaled to [-1, 1]. Resampling
keeps its filter state between pushes of one camera (no clicks at block edges), and times are
counted in samples from the first push of a run: a push whose ``t`` is more than ``RESYNC_S``
off the count (a gap, a clock jump) or with another rate starts a new run at its ``t``.
"""
from __future__ import annotations

import av
import numpy as np

from ..errors import VamError
from ..numerics import finite_time
from .records import SAMPLE_RATE

RESYNC_S = 0.1
MAX_CHANNELS = 32
MAX_RATE = 384_000


class AudioInputError(VamError, ValueError):
    """Pushed audio with the wrong type, shape, dtype, rate or time."""


def to_mono_float(camera_id: str, samples, sample_rate) -> np.ndarray:
    """Validate pushed samples and make them mono float32 in [-1, 1] (no resampling)."""
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, np.integer)) or \
            not 1000 <= int(sample_rate) <= MAX_RATE:
        raise AudioInputError(f"camera {camera_id!r}: sample_rate must be an integer in 1000..{MAX_RATE} Hz, "
                              f"got {sample_rate!r}")
    if hasattr(samples, "detach"):  # a torch tensor
        samples = samples.detach().cpu().numpy()
    if not isinstance(samples, np.ndarray):
        raise AudioInputError(f"camera {camera_id!r}: pushed audio must be a numpy array, got {type(samples).__name__}")
    x = samples
    if x.ndim == 2:
        if x.shape[1] > MAX_CHANNELS:
            raise AudioInputError(f"camera {camera_id!r}: pushed audio must be (n,) or (n, channels) with at most "
                                  f"{MAX_CHANNELS} channels, got shape {x.shape} (channels first? pass its .T)")
    elif x.ndim != 1:
        raise AudioInputError(f"camera {camera_id!r}: pushed audio must be (n,) or (n, channels), got shape {x.shape}")
    if x.dtype == np.int16:
        x = x.astype(np.float32) / 32768.0
    elif x.dtype == np.int32:
        x = (x / 2147483648.0).astype(np.float32)
    elif x.dtype == np.uint8:  # 8-bit PCM is unsigned, centred on 128
        x = (x.astype(np.float32) - 128.0) / 128.0
    elif x.dtype in (np.float32, np.float64, np.float16):
        x = x.astype(np.float32, copy=False)
        if not np.isfinite(x).all():
            raise AudioInputError(f"camera {camera_id!r}: pushed audio holds NaN or infinite samples")
    else:
        raise AudioInputError(f"camera {camera_id!r}: pushed audio must be int16, int32, uint8 or float, "
                              f"got {x.dtype}")
    if x.ndim == 2:
        x = x.mean(axis=1, dtype=np.float32)
    return np.ascontiguousarray(x, np.float32)


class PushResampler:
    """One pushed camera's converter to 16 kHz mono: ``push(samples, rate, t)`` returns
    ``[(t, samples16k), ...]`` (possibly empty: the resampler holds a few samples back)."""

    def __init__(self, camera_id: str):
        self.camera_id = camera_id
        self._rate: int | None = None
        self._resampler = None
        self._anchor: float | None = None
        self._in = 0
        self._out = 0

    def push(self, samples, sample_rate, t) -> list[tuple[float, np.ndarray]]:
        x = to_mono_float(self.camera_id, samples, sample_rate)
        finite_time(t, f"camera {self.camera_id!r}: t", error=AudioInputError)
        rate, t = int(sample_rate), float(t)
        out: list[tuple[float, np.ndarray]] = []
        expected = None if self._anchor is None else self._anchor + self._in / self._rate
        if rate != self._rate or expected is None or abs(t - expected) > RESYNC_S:
            out += self.flush()
            self._rate, self._anchor, self._in, self._out = rate, t, 0, 0
            self._resampler = None if rate == SAMPLE_RATE else av.AudioResampler(format="flt", layout="mono",
                                                                                  rate=SAMPLE_RATE)
        if not len(x):
            return out
        self._in += len(x)
        if self._resampler is None:
            return out + self._emit([x])
        frame = av.AudioFrame.from_ndarray(x[None, :], format="flt", layout="mono")
        frame.sample_rate = rate
        return out + self._emit(f.to_ndarray().reshape(-1) for f in self._resampler.resample(frame))

    def flush(self) -> list[tuple[float, np.ndarray]]:
        """The resampler's tail (at the end of a run)."""
        if self._resampler is None or self._anchor is None:
            return []
        tail = self._emit(f.to_ndarray().reshape(-1) for f in self._resampler.resample(None))
        self._resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
        return tail

    def _emit(self, arrays) -> list[tuple[float, np.ndarray]]:
        out = []
        for x in arrays:
            if len(x):
                out.append((self._anchor + self._out / SAMPLE_RATE, np.ascontiguousarray(x, np.float32)))
                self._out += len(x)
        return out
