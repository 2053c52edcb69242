"""DALI decoder body: ``fn.experimental.readers.video`` over the file, NVDEC on the GPU (or
libavcodec in a CPU pipeline for VP8/VP9/MJPEG).

How it maps onto the decoder contract:

- DALI decodes sequences of ``sequence_length`` frames per pipeline run (one sample per run)
  with ``enable_timestamps=True``. Those timestamps are the frame PTS times the stream time base,
  measured from the first frame (DALI subtracts the first PTS itself), so the raw PTS is
  ``first_pts + round(t / time_base)`` and ``t_rel`` uses the same origin as the PyAV body
  (the stream's ``start_time``, else the first PTS). Frame indices never enter a timestamp.
- ``pad_mode="constant"`` keeps the tail of the video that does not fill a whole sequence;
  ``enable_frame_num="sequence"`` marks those padding frames with index -1, and they are dropped.
- DALI outputs RGB (its CPU backend cannot output YCbCr). ``gray`` is the luma plane recovered
  from that RGB with fixed-point BT.601, the matrix DALI converts with (NVDEC path: BT.601 with
  the stream's range flag; CPU path: swscale defaults, full range only for yuvj* formats): the
  full-range rule ``(R*4899 + G*9617 + B*1868 + 8192) >> 14`` where DALI expanded full range
  (MJPEG), the studio-swing rule ``(R*4207 + G*8260 + B*1604 + (16 << 14) + 8192) >> 14``
  otherwise. So ``gray`` equals the decoded Y plane (what the PyAV and NVDEC bodies hand on) to
  about one level, instead of a contrast-stretched copy of it. It is computed, and RGB copied
  out of DALI's buffers, only for frames the sampler takes.
- ``keyframes_only`` and ``resume_after`` need the PTS of every frame: a demux-only PyAV pass
  (no decoding) lists them. DALI then reads a ``file_list`` in frame units: one one-frame entry
  per keyframe (DALI seeks to each, so only keyframes are decoded), or one entry that starts
  just before the resume point.

The DALI import is lazy: importing this module never fails without DALI.
"""
from __future__ import annotations

import bisect
import math
import os
import shutil
import statistics
import tempfile
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Iterator

import numpy as np

from ..device import DeviceError, cuda_index
from ..errors import SourceError
from .frame import Frame, StreamInfo
from .source import DecoderBody, check_local_file, is_url

PREFIX_PACKETS = 300  # packets demuxed at open when the full PTS list is not needed
KEYFRAME_BATCH = 8  # one-frame samples per pipeline run in keyframes_only mode

# Codecs each DALI backend decodes (DALI 2.4 docs of experimental.readers.video).
DALI_CPU_CODECS = frozenset({"vp8", "vp9", "mjpeg"})
DALI_GPU_CODECS = DALI_CPU_CODECS | {"h264", "hevc", "av1", "mpeg4"}

# Fixed-point (14-bit) BT.601 RGB -> Y: (kr, kg, kb, offset incl. rounding)
_LUMA_FULL = (4899, 9617, 1868, 8192)
_LUMA_LIMITED = (4207, 8260, 1604, (16 << 14) + 8192)


def _first_line(e: BaseException) -> str:
    """DALI errors carry a pipeline traceback; the cause is on the line after 'encountered:'."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("encountered:") and i + 1 < len(lines):
            return lines[i + 1]
    return lines[0] if lines else type(e).__name__


@dataclass
class ContainerProbe:
    """What a demux-only PyAV pass learns about a video file (nothing is decoded)."""

    codec: str
    width: int
    height: int
    fps: float | None
    duration_s: float | None
    time_base: Fraction
    start_pts: int | None  # the stream's start_time (PyAV body's t_rel origin), None if unknown
    creation_time: float | None
    pix_fmt: str
    full_range: bool  # JPEG range (yuvj*, MJPEG, or tagged full range) rather than studio swing
    bt709: bool  # tagged BT.709 matrix
    pts: list[int] = field(default_factory=list)  # sorted PTS of the scanned frames
    key_pts: list[int] = field(default_factory=list)  # sorted PTS of the scanned keyframes
    complete: bool = False  # True when every packet was scanned

    @property
    def first_pts(self) -> int | None:
        return self.pts[0] if self.pts else self.start_pts

    @property
    def origin_pts(self) -> int | None:
        return self.start_pts if self.start_pts is not None else self.first_pts

    def seconds(self, pts: int) -> float:
        return float((pts - (self.origin_pts or 0)) * self.time_base)

    def keyframe_interval_s(self) -> float | None:
        k = self.key_pts
        if len(k) < 2:
            return None
        return float(statistics.median(b - a for a, b in zip(k, k[1:])) * self.time_base)


def probe_container(path: str, *, full_scan: bool, max_packets: int = PREFIX_PACKETS) -> ContainerProbe:
    """Open ``path`` with PyAV, check it holds a usable video stream, and list packet PTS
    (all of them when ``full_scan``, else the first ``max_packets``)."""
    import av

    from .pyav_decoder import creation_time, video_stream

    try:
        container = av.open(path)
    except av.error.InvalidDataError as e:
        raise SourceError(path, f"not a video FFmpeg can read, or truncated/corrupt ({e.strerror or e})") from None
    except av.error.FFmpegError as e:
        raise SourceError(path, f"cannot be opened: {e.strerror or e}") from None
    with container:
        s = video_stream(container, path)
        cc = s.codec_context
        w, h = cc.width, cc.height
        tb = s.time_base or Fraction(1, 90000)
        if s.duration:
            duration = float(s.duration * tb)
        else:
            duration = container.duration / av.time_base if container.duration else None
        rate = s.average_rate or s.guessed_rate
        pix = cc.format.name if cc.format is not None else ""
        probe = ContainerProbe(
            codec=cc.name, width=w, height=h, fps=float(rate) if rate else None, duration_s=duration,
            time_base=tb, start_pts=s.start_time, creation_time=creation_time(container), pix_fmt=pix,
            full_range=pix.startswith("yuvj") or int(cc.color_range or 0) == 2,
            bt709=int(cc.colorspace or 0) == 1)
        pts, keys, n = [], [], 0
        complete = True
        try:
            for pkt in container.demux(s):
                if pkt.size == 0 or pkt.pts is None:
                    continue
                pts.append(int(pkt.pts))
                if pkt.is_keyframe:
                    keys.append(int(pkt.pts))
                n += 1
                if not full_scan and n >= max_packets:
                    complete = False
                    break
        except av.error.FFmpegError:
            complete = False  # broken tail: DALI's own index decides what is decodable
        probe.pts, probe.key_pts, probe.complete = sorted(set(pts)), sorted(set(keys)), complete
    return probe


def luma_from_rgb(rgb, full_range: bool):
    """H x W x 3 uint8 (numpy or torch) -> H x W uint8 luma, fixed-point BT.601."""
    kr, kg, kb, off = _LUMA_FULL if full_range else _LUMA_LIMITED
    if isinstance(rgb, np.ndarray):
        c = rgb.astype(np.int32)
        y = (c[..., 0] * kr + c[..., 1] * kg + c[..., 2] * kb + off) >> 14
        return np.clip(y, 0, 255).astype(np.uint8)
    import torch

    c = rgb.to(torch.int32)
    y = (c[..., 0] * kr + c[..., 1] * kg + c[..., 2] * kb + off) >> 14
    return y.clamp_(0, 255).to(torch.uint8)


def _import_dali(path: str):
    try:
        import nvidia.dali as dali  # noqa: F401
        import nvidia.dali.backend  # noqa: F401
        import nvidia.dali.fn  # noqa: F401
        import nvidia.dali.types  # noqa: F401
    except Exception as e:  # ImportError, or a broken install raising OSError at load
        raise SourceError(path, f"the DALI body needs NVIDIA DALI (pip install nvidia-dali-cuda130): {e}") from None
    return dali


class DaliDecoder(DecoderBody):
    name = "dali"
    options = frozenset({"dali_device", "sequence_length", "num_threads"})

    def __init__(self, path: str, camera_id: str, *, fps: float = 0.5, keyframes_only: bool = False,
                 start_time_abs: float | None = None, resume_after: float | None = None, device: str = "cuda",
                 dali_device: str = "gpu", sequence_length: int = 16, num_threads: int = 2):
        self._setup(path, camera_id, fps, keyframes_only, resume_after)
        # the device is decided by the caller (device.resolve_device: "cuda" or "cuda:N"); the
        # body only checks that DALI and torch have that GPU
        try:
            self.device_id = cuda_index(device)
        except DeviceError as e:
            raise ValueError(f"the dali decoder's device: {e}") from None
        if dali_device not in ("gpu", "cpu"):
            raise ValueError(f"dali_device must be 'gpu' or 'cpu', got {dali_device!r}")
        if sequence_length < 1:
            raise ValueError(f"sequence_length must be >= 1, got {sequence_length}")
        self.dali_device = dali_device
        self._seq_len = int(sequence_length)
        self._num_threads = max(1, int(num_threads))
        self._pipe = None
        self._tmpdir: str | None = None
        self._n_samples = 0
        self._batch = 1
        self._torch = None

        if is_url(self.path):
            raise SourceError(self.path, "the DALI body reads local files only; "
                                         "use the nvdec or pyav body for live streams")
        check_local_file(self.path)
        self._dali = _import_dali(self.path)
        if dali_device == "gpu":
            self._check_gpu()
        resuming = resume_after is not None and resume_after > 0
        self._probe = probe_container(self.path, full_scan=keyframes_only or resuming)
        p = self._probe
        supported = DALI_GPU_CODECS if dali_device == "gpu" else DALI_CPU_CODECS
        if p.codec not in supported:
            hint = " (DALI decodes it only on the GPU: dali_device='gpu')" if p.codec in DALI_GPU_CODECS else ""
            raise SourceError(self.path, f"codec {p.codec!r} is not supported by DALI's {dali_device.upper()} "
                                         f"video decoder (supports {', '.join(sorted(supported))}){hint}")
        if keyframes_only and not p.key_pts:
            raise SourceError(self.path, "keyframes_only: the container marks no keyframes")
        if start_time_abs is None:
            start_time_abs = p.creation_time
        # Which BT.601 range DALI's YUV->RGB used: its CPU path (swscale, source pix_fmt) expands
        # only yuvj* formats as full range; NVDEC follows the stream's full-range flag.
        self._rgb_full_range = p.pix_fmt.startswith("yuvj") if dali_device == "cpu" else p.full_range
        self.info = StreamInfo(path=self.path, codec=p.codec, width=p.width, height=p.height, fps=p.fps,
                               duration_s=p.duration_s, start_time_abs=start_time_abs,
                               keyframe_interval_s=p.keyframe_interval_s())
        try:
            self._build()
        except SourceError:
            self.close()
            raise
        except Exception as e:
            self.close()
            raise SourceError(self.path, f"DALI cannot decode it: {_first_line(e)}") from None

    # -- opening -------------------------------------------------------------------------------
    def _check_gpu(self) -> None:
        try:
            n = self._dali.backend.GetCUDADeviceCount()
        except Exception as e:
            raise SourceError(self.path, f"dali_device='gpu' but CUDA is unusable: {e}") from None
        if n <= 0:
            raise SourceError(self.path, "dali_device='gpu' but no CUDA GPU is visible (DALI sees 0 devices); "
                                         "use dali_device='cpu' (VP8/VP9/MJPEG only) or the pyav body")
        if not 0 <= self.device_id < n:
            raise SourceError(self.path, f"device_id={self.device_id} but DALI sees {n} GPU(s)")
        try:
            import torch
        except ImportError:
            raise SourceError(self.path, "dali_device='gpu' hands frames on as CUDA torch tensors: "
                                         "torch is not installed") from None
        if not 0 <= self.device_id < torch.cuda.device_count():
            raise SourceError(self.path, f"dali_device='gpu' hands frames on as CUDA torch tensors, but torch "
                                         f"{torch.__version__} has no CUDA device {self.device_id}")
        self._torch = torch

    def _frame_index_after(self, t: float) -> int:
        """Index (presentation order) of the last frame at or before time t, so decoding from it
        covers every frame after t."""
        times = [self._probe.seconds(x) for x in self._probe.pts]
        return max(0, bisect.bisect_right(times, t + 1e-9) - 1)

    def _file_list(self, entries: list[tuple[int, int]]) -> str:
        """A DALI file_list ('file label start end', frame units, end exclusive). The video is
        reached through a symlink with a plain name: the list is whitespace-separated."""
        self._tmpdir = tempfile.mkdtemp(prefix="vam_dali_")
        src = os.path.abspath(self.path)
        link = os.path.join(self._tmpdir, "src" + os.path.splitext(src)[1].lower())
        try:
            os.symlink(src, link)
        except OSError:
            if any(c.isspace() for c in src):
                raise SourceError(self.path, "cannot symlink the file and its path has whitespace, "
                                             "which a DALI file_list cannot hold") from None
            link = src
        lst = os.path.join(self._tmpdir, "files.txt")
        with open(lst, "w") as f:
            for start, end in entries:
                f.write(f"{link} 0 {start} {end}\n")
        return lst

    def _build(self) -> None:
        dali = self._dali
        fn, types = dali.fn, dali.types
        p = self._probe
        done = self.resume_after if self.resume_after is not None else -math.inf
        args: dict[str, Any] = dict(enable_timestamps=True, enable_frame_num="sequence", pad_mode="constant",
                                    image_type=types.DALIImageType.RGB, name="vam_reader")
        seq_len, batch = self._seq_len, 1
        if self.keyframes_only:
            index = {x: i for i, x in enumerate(p.pts)}
            keys = [k for k in p.key_pts if k in index and p.seconds(k) > done + 1e-9]
            if not keys:
                return  # nothing left to decode
            entries = [(index[k], index[k] + 1) for k in keys]
            args.update(file_list=self._file_list(entries), file_list_format="frames", file_list_include_end=False)
            seq_len, batch = 1, min(KEYFRAME_BATCH, len(entries))
        elif self.resume_after is not None and self.resume_after > 0 and p.complete and p.pts:
            start = self._frame_index_after(self.resume_after)
            if start > 0:
                args.update(file_list=self._file_list([(start, len(p.pts))]), file_list_format="frames",
                            file_list_include_end=False)
            else:
                args.update(filenames=[os.path.abspath(self.path)])
        else:
            args.update(filenames=[os.path.abspath(self.path)])
        pipe = dali.Pipeline(batch_size=batch, num_threads=self._num_threads,
                             device_id=self.device_id if self.dali_device == "gpu" else None,
                             prefetch_queue_depth=2)
        with pipe:
            outs = fn.experimental.readers.video(device=self.dali_device, sequence_length=seq_len, **args)
            pipe.set_outputs(*outs)
        pipe.build()
        self._pipe = pipe
        self._batch = batch
        self._n_samples = int(pipe.epoch_size("vam_reader"))

    # -- decoding ------------------------------------------------------------------------------
    def _sequences(self) -> Iterator[tuple[Any, np.ndarray, np.ndarray]]:
        """(frames F x H x W x 3 view, timestamps (F,), frame indices (F,)) per decoded sample.
        The view is valid only until the next pipeline run."""
        remaining = self._n_samples
        while self._pipe is not None and remaining > 0:
            try:
                outs = self._pipe.run()
            except Exception as e:  # a critical DALI error invalidates the pipeline: keep what we had
                self._note(f"DALI decoding stopped early: {_first_line(e)}")
                break
            video, frame_num, stamps = outs[0], outs[-2], outs[-1]
            if self.dali_device == "gpu":
                frame_num, stamps = frame_num.as_cpu(), stamps.as_cpu()
            for s in range(min(self._batch, remaining)):
                idx = np.array(frame_num[s]).reshape(-1)
                ts = np.array(stamps[s], dtype=np.float64).reshape(-1)
                if self.dali_device == "gpu":
                    with self._torch.cuda.device(self.device_id):
                        frames = self._torch.from_dlpack(video[s])
                else:
                    frames = np.asarray(video[s])  # a view on DALI's buffer, no copy
                yield frames, ts, idx
            remaining -= self._batch

    def _copy(self, frames, i: int):
        if isinstance(frames, np.ndarray):
            return np.array(frames[i])
        with self._torch.cuda.device(self.device_id):
            return frames[i].clone()

    def _time(self, t_dali: float) -> tuple[float, int | None]:
        p = self._probe
        first = p.first_pts
        if first is None:
            return float(t_dali), None
        pts = first + int(round(t_dali / p.time_base))
        return p.seconds(pts), pts

    def _make(self, t: float, held: tuple[int | None, Any]) -> Frame:
        pts, rgb = held
        with self._gpu_scope():
            gray = luma_from_rgb(rgb, self._rgb_full_range)
        to_rgb: Callable[[], Any] = lambda r=rgb: r  # noqa: E731 - RGB is already decoded; hand it over
        return self._frame(t, pts, gray, to_rgb)

    def _gpu_scope(self):
        if self._torch is not None:
            return self._torch.cuda.device(self.device_id)
        import contextlib

        return contextlib.nullcontext()

    def _timed(self) -> Iterator[tuple[float, tuple[int | None, Any, int]]]:
        """(t_rel, (pts, frames, index in frames)) of every decoded frame, padding left out."""
        for frames, stamps, idx in self._sequences():
            for i in range(len(stamps)):
                if idx[i] < 0:  # padding after the last frame
                    continue
                self.stats.decoded += 1
                t, pts = self._time(float(stamps[i]))
                yield t, (pts, frames, i)

    def _hold(self, payload: tuple[int | None, Any, int]) -> tuple[int | None, Any]:
        pts, frames, i = payload
        return pts, self._copy(frames, i)  # frames is a view valid until the next pipeline run

    def __iter__(self) -> Iterator[Frame]:
        yield from self._sample(self._timed(), self._make, self._hold)

    def close(self) -> None:
        self._pipe = None  # DALI stops its prefetch threads when the pipeline is collected
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
