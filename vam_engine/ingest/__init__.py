"""Sources and decoders. ``open_decoder`` is the one place that picks a decoder body."""
from __future__ import annotations

from ..errors import SourceError
from .frame import DecodeStats, Frame, StreamInfo
from .pyav_decoder import PyAVDecoder
from .sampler import NearestKeyframeSampler, TickSampler
from .source import is_url

__all__ = ["DecodeStats", "Frame", "StreamInfo", "PyAVDecoder", "TickSampler", "NearestKeyframeSampler",
           "open_decoder", "is_url"]


def open_decoder(path: str, camera_id: str, *, device: str = "cpu", **kw):
    """PyAV on the CPU; on CUDA, PyNvVideoCodec (files and live URLs), else DALI (files)."""
    if device == "cpu":
        return PyAVDecoder(path, camera_id, **kw)
    if device != "cuda":
        raise ValueError(f"decoder device must be 'cpu' or 'cuda', got {device!r}")
    kw.pop("skip_nonref", None)
    kw.pop("skip_gops", None)
    kw.pop("threads", None)
    reasons = []
    from .nvdec_decoder import NvdecDecoder

    try:
        return NvdecDecoder(path, camera_id, **kw)
    except SourceError as e:
        reasons.append(f"PyNvVideoCodec: {e.problem}")
    if not is_url(path):
        from .dali_decoder import DaliDecoder

        try:
            return DaliDecoder(path, camera_id, **kw)
        except SourceError as e:
            reasons.append(f"DALI: {e.problem}")
    raise SourceError(path, "no GPU decoder could open it (" + "; ".join(reasons) + ")")
