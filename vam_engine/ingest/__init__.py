"""Sources and decoders. ``open_decoder`` is the one place that picks a decoder body.

The names below are the way in for modules outside ingest. The decoders' names are imported
eagerly (as before); the others (clips, live cameras, the cameras file, poses, pushed frames) load
their module at first use, so importing this face costs what it did before they came through it.
No lazy name is spelled like a submodule: importing the submodule would bind its name on this
package and shadow the lazy name."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import SourceError, VamError
from ..lazy import lazy_names
from .camera_ids import CameraIdError, camera_list, check_camera_id, default_camera_ids
from .frame import DecodeStats, Frame, PresentFrame, StreamInfo, fit_rgb
from .pyav_decoder import PyAVDecoder
from ..urls import redact
from .sampler import NearestKeyframeSampler, TickSampler
from .source import COMMON_OPTIONS, is_url

# lazy name -> the module it lives in (under the same name)
_LAZY = {
    **dict.fromkeys(("ClipBusy", "ClipError", "Encoding", "NoClip", "alert_clip_url", "clip_url", "cut_file",
                     "frames_clip"), "vam_engine.ingest.clips"),
    **dict.fromkeys(("CameraStatus", "LiveCamera", "LiveSpec"), "vam_engine.ingest.live"),
    **dict.fromkeys(("CameraDiff", "CameraSpec", "check_gate", "diff_cameras", "load_cameras"),
                    "vam_engine.ingest.cameras_file"),
    **dict.fromkeys(("Pose", "PoseError", "check_pose", "make_pose_source", "pose_at"), "vam_engine.ingest.poses"),
    **dict.fromkeys(("gray_and_spare", "own_copy", "pushed_view"), "vam_engine.ingest.pushed"),
    "BufferPool": "vam_engine.ingest.buffers",
}

__all__ = [  # a literal list, for linters: the eager names, then the same names as _LAZY
    "DecodeStats", "Frame", "PresentFrame", "StreamInfo", "fit_rgb", "PyAVDecoder", "TickSampler",
    "NearestKeyframeSampler", "open_decoder", "decoder_options", "is_url", "CameraIdError", "camera_list",
    "check_camera_id", "default_camera_ids", "redact",
    "ClipBusy", "ClipError", "Encoding", "NoClip", "alert_clip_url", "clip_url", "cut_file", "frames_clip",
    "CameraStatus", "LiveCamera", "LiveSpec", "CameraDiff", "CameraSpec", "check_gate", "diff_cameras",
    "load_cameras", "Pose", "PoseError", "check_pose", "make_pose_source", "pose_at", "gray_and_spare",
    "own_copy", "pushed_view", "BufferPool",
]


__getattr__, __dir__ = lazy_names(__name__, globals(), {n: (m, n) for n, m in _LAZY.items()})

if TYPE_CHECKING:  # for type checkers, editors and the layer contract: the lazy names, imported eagerly
    from .buffers import BufferPool
    from .cameras_file import CameraDiff, CameraSpec, check_gate, diff_cameras, load_cameras
    from .clips import ClipBusy, ClipError, Encoding, NoClip, alert_clip_url, clip_url, cut_file, frames_clip
    from .live import CameraStatus, LiveCamera, LiveSpec
    from .poses import Pose, PoseError, check_pose, make_pose_source, pose_at
    from .pushed import gray_and_spare, own_copy, pushed_view


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
