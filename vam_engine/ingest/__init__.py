"""Sources and decoders. ``open_decoder`` is the one place that picks a decoder body."""
from __future__ import annotations

from ..errors import SourceError, VamError
from .camera_ids import CameraIdError, camera_list, check_camera_id, default_camera_ids
from .frame import DecodeStats, Frame, StreamInfo
from .pyav_decoder import PyAVDecoder
from ..urls import redact
from .sampler import NearestKeyframeSampler, TickSampler
from .source import COMMON_OPTIONS, is_url

__all__ = ["DecodeStats", "Frame", "StreamInfo", "PyAVDecoder", "TickSampler", "NearestKeyframeSampler",
           "open_decoder", "decoder_options", "is_url", "CameraIdError", "camera_list", "check_camera_id",
           "default_camera_ids", "redact"]


# Values that mean "the decoder's choice": a body without the option honours them by default.
_DECODERS_CHOICE = {"skip_nonref": None, "skip_gops": None, "threads": 0}
_CONFIG_NAMES = {"threads": "decode_threads"}  # the IngestConfig field an option comes from


def decoder_options(body, kw: dict) -> dict:
    """The options ``body`` (a decoder class) takes from ``kw``. An option it does not declare
    (``COMMON_OPTIONS`` or ``body.options``) is a VamError naming the decoder and the option,
    unless its value is the decoder's choice (then it is not passed)."""
    out = {}
    for key, value in kw.items():
        if key in COMMON_OPTIONS or key in body.options:
            out[key] = value
        elif key in _DECODERS_CHOICE and value == _DECODERS_CHOICE[key]:
            continue
        else:
            takes = ", ".join(sorted(body.options)) or "none beyond the common ones"
            raise VamError(f"the {body.name} decoder does not support {key}={value!r} (its own options: {takes}); "
                           f"unset ingest.{_CONFIG_NAMES.get(key, key)} or decode on the CPU (--device cpu)")
    return out


def open_decoder(path: str, camera_id: str, *, device: str = "cpu", **kw):
    """PyAV on the CPU; on CUDA, PyNvVideoCodec (files and live URLs), else DALI (files).
    ``kw``: the decoder options; one the chosen body cannot honour is a VamError."""
    if device == "cpu":
        return PyAVDecoder(path, camera_id, **decoder_options(PyAVDecoder, kw))
    if device != "cuda" and not str(device).startswith("cuda:"):
        raise ValueError(f"decoder device must be 'cpu' or 'cuda', got {device!r}")
    from .dali_decoder import DaliDecoder
    from .nvdec_decoder import NvdecDecoder

    bodies = [NvdecDecoder] + ([] if is_url(path) else [DaliDecoder])
    chosen, refused = [], None
    for body in bodies:  # a body that cannot honour an option is not tried; none: the first refusal
        try:
            chosen.append((body, decoder_options(body, kw)))
        except VamError as e:
            refused = refused or e
    if not chosen:
        raise refused
    reasons = []
    for body, opts in chosen:
        try:
            return body(path, camera_id, device=device, **opts)  # the decision made, not made again
        except SourceError as e:
            reasons.append(f"{body.name}: {e.problem}")
    raise SourceError(path, "no GPU decoder could open it (" + "; ".join(reasons) + ")")
