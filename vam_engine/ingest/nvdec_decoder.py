"""NVDEC decoder body: PyNvVideoCodec's core demuxer + decoder (``CreateDemuxer`` /
``CreateDecoder`` / ``Decode``), written against PyNvVideoCodec 2.2.

- Sources: files and live URLs (rtsp/http/...): ``CreateDemuxer`` runs FFmpeg's demuxer, which
  opens both. Files are also probed with PyAV (demux only) for clear open errors, the stream's
  start time (the same ``t_rel`` origin as the PyAV body), colour range and creation time; a
  URL is opened once, by PyNvVideoCodec alone.
- Output: NV12 (the decoder's native format) in device memory. ``gray`` is the Y plane, cloned
  out of the decoder's surface (the decoder reuses its surfaces on later ``Decode`` calls)
  through DLPack as a CUDA torch tensor; no colour conversion. ``_to_rgb`` converts the cloned
  NV12 to RGB on the GPU with torch ops, on demand.
- Timestamps: ``PacketData.pts`` is in the stream time base (``GetTimebaseNum/Den``); decoded
  frames carry it back as ``DecodedFrame.timestamp``. Each frame's timestamp is checked against
  the PTS of the packets sent; when it is missing or unknown the smallest outstanding packet PTS
  is used (frames come out in display order).
- ``keyframes_only``: the decoder cannot be told to skip frames, but the demuxer flags keyframe
  packets (``PacketData.key``): only those are sent to NVDEC, so non-key frames are never decoded.
- ``resume_after`` on a file: a demux-only PyAV pass finds the last keyframe at or before the
  resume time; packets before it are not sent to the decoder.

Everything GPU-side is imported lazily; importing this module never fails.
"""
from __future__ import annotations

import collections
import heapq
import logging
from fractions import Fraction
from typing import Any, Iterator

from ..device import DeviceError, cuda_index
from ..errors import SourceError
from .dali_decoder import ContainerProbe, probe_container
from .frame import Frame, StreamInfo
from .source import DecoderBody, check_local_file, is_url

_NOPTS = -(2**62)  # below this a PTS is FFmpeg's AV_NOPTS_VALUE
_AVCOL_RANGE_JPEG = 2
_AVCOL_SPC_BT709 = 1
_nvc_import_error: str | None = None  # a failed import is remembered: it is slow and noisy


def _valid_pts(v) -> int | None:
    return int(v) if v is not None and int(v) > _NOPTS else None


def _import_nvc(path: str):
    """Import PyNvVideoCodec. Its __init__ loads the driver's NVENC library and raises
    RuntimeError (not ImportError) without one, logging troubleshooting text; keep that quiet
    and turn any failure into a SourceError."""
    global _nvc_import_error
    if _nvc_import_error is not None:
        raise SourceError(path, _nvc_import_error)
    log = logging.getLogger("PyNvVideoCodec")
    was_disabled = log.disabled
    log.disabled = True
    try:
        import PyNvVideoCodec as nvc
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        _nvc_import_error = (f"PyNvVideoCodec cannot be loaded ({first}); the nvdec body needs "
                             f"`pip install PyNvVideoCodec` and an NVIDIA GPU with its driver's video libraries")
        raise SourceError(path, _nvc_import_error) from None
    finally:
        log.disabled = was_disabled
    return nvc


def _pix_name(fmt) -> str:
    name = getattr(fmt, "name", None) or str(fmt)
    return str(name).rsplit(".", 1)[-1].upper()


def plane_layout(pix_name: str, rows: int, fallback_height: int) -> tuple[str, int]:
    """(chroma layout '420' | '422' | '444', luma height) of a decoded frame tensor with
    ``rows`` rows: NV12/P016 stack Y over interleaved UV at half height, NV16/P216 at full
    height, YUV444 stacks three full planes."""
    if pix_name.startswith(("YUV444",)):
        return "444", rows // 3
    if pix_name in ("NV16", "P216"):
        return "422", rows // 2
    if pix_name in ("NV12", "P016", "P010"):
        return "420", rows * 2 // 3
    if rows == fallback_height * 3:
        return "444", fallback_height
    if rows == fallback_height * 2:
        return "422", fallback_height
    return "420", fallback_height


def yuv_to_rgb(planes, height: int, layout: str, *, full_range: bool, bt709: bool):
    """Decoded YUV tensor (Y rows then chroma rows, uint8 or uint16) -> H x W x 3 uint8 RGB,
    with torch ops on whatever device ``planes`` lives on."""
    import torch

    if planes.dtype == torch.uint8:
        x = planes.float()
    else:  # 16-bit containers (P016, YUV444_16Bit): MSB-aligned samples
        x = planes.to(torch.int32).float() / 256.0
    h, w = height, planes.shape[1]
    y = x[:h]
    if layout == "444":
        u, v = x[h:2 * h], x[2 * h:3 * h]
    else:
        ch = h // 2 if layout == "420" else h
        uv = x[h:h + ch].reshape(ch, w // 2, 2)
        u, v = uv[..., 0], uv[..., 1]
        u = u.repeat_interleave(2, dim=1)
        v = v.repeat_interleave(2, dim=1)
        if layout == "420":
            u = u.repeat_interleave(2, dim=0)
            v = v.repeat_interleave(2, dim=0)
        u, v = u[:h, :w], v[:h, :w]
    if full_range:
        yf, uf, vf = y, u - 128.0, v - 128.0
    else:
        yf, uf, vf = (y - 16.0) * (255.0 / 219.0), (u - 128.0) * (255.0 / 224.0), (v - 128.0) * (255.0 / 224.0)
    kr, kb = (0.2126, 0.0722) if bt709 else (0.299, 0.114)
    kg = 1.0 - kr - kb
    r = yf + 2.0 * (1.0 - kr) * vf
    b = yf + 2.0 * (1.0 - kb) * uf
    g = (yf - kr * r - kb * b) / kg
    return torch.stack((r, g, b), dim=-1).round_().clamp_(0, 255).to(torch.uint8)


class _PtsQueue:
    """PTS of packets sent to the decoder and not yet returned as frames."""

    def __init__(self):
        self._heap: list[int] = []
        self._left: collections.Counter = collections.Counter()

    def push(self, pts: int) -> None:
        heapq.heappush(self._heap, pts)
        self._left[pts] += 1

    def take(self, pts: int | None) -> int | None:
        """The frame's own PTS when it is one that was sent, else the smallest outstanding one."""
        if pts is not None and self._left[pts] > 0:
            self._left[pts] -= 1
            return pts
        while self._heap:
            p = heapq.heappop(self._heap)
            if self._left[p] > 0:
                self._left[p] -= 1
                return p
        return None


class NvdecDecoder(DecoderBody):
    name = "nvdec"
    options = frozenset()  # only COMMON_OPTIONS

    def __init__(self, path: str, camera_id: str, *, fps: float = 0.5, keyframes_only: bool = False,
                 start_time_abs: float | None = None, resume_after: float | None = None, device: str = "cuda"):
        self._setup(path, camera_id, fps, keyframes_only, resume_after)
        # the device is decided by the caller (device.resolve_device: "cuda" or "cuda:N"); the
        # body only checks that torch has that GPU
        try:
            self.device_id = cuda_index(device)
        except DeviceError as e:
            raise ValueError(f"the nvdec decoder's device: {e}") from None
        self._demux = None
        self._dec = None
        self._url = is_url(self.path)
        if not self._url:
            check_local_file(self.path)
        self._torch = self._check_gpu()
        self._nvc = _import_nvc(self.path)
        resuming = resume_after is not None and resume_after > 0
        self._probe: ContainerProbe | None = None
        if not self._url:
            self._probe = probe_container(self.path, full_scan=resuming)
        try:
            self._open(start_time_abs)
        except SourceError:
            self.close()
            raise
        except Exception as e:
            self.close()
            raise SourceError(self.path, f"PyNvVideoCodec cannot decode it: {e}") from None

    # -- opening -------------------------------------------------------------------------------
    def _check_gpu(self):
        try:
            import torch
        except ImportError:
            raise SourceError(self.path, "the nvdec body hands frames on as CUDA torch tensors: "
                                         "torch is not installed") from None
        n = torch.cuda.device_count()
        if not 0 <= self.device_id < n:
            raise SourceError(self.path, f"GPU {self.device_id} asked for but torch {torch.__version__} sees {n} CUDA "
                                         f"device(s); the nvdec body needs an NVIDIA GPU: use the pyav body without one")
        return torch

    def _open(self, start_time_abs: float | None) -> None:
        nvc, p = self._nvc, self._probe
        try:
            self._demux = nvc.CreateDemuxer(filename=self.path)
        except Exception as e:
            raise SourceError(self.path, f"PyNvVideoCodec cannot open it: {e}") from None
        dmx = self._demux
        try:
            codec_id = dmx.GetNvCodecId()
        except Exception as e:
            raise SourceError(self.path, f"codec not supported by NVDEC: {e}") from None
        codec_name = p.codec if p is not None else str(codec_id).rsplit(".", 1)[-1].lower()
        try:
            self._dec = nvc.CreateDecoder(gpuid=self.device_id, codec=codec_id, cudacontext=0, cudastream=0,
                                          usedevicememory=True)
        except Exception as e:
            raise SourceError(self.path, f"NVDEC on GPU {self.device_id} cannot decode {codec_name}: {e}") from None

        # Stream time base: PacketData.pts/dts are in GetTimebaseNum()/GetTimebaseDen() units.
        tb = None
        if hasattr(dmx, "GetTimebaseNum") and hasattr(dmx, "GetTimebaseDen"):
            num, den = int(dmx.GetTimebaseNum()), int(dmx.GetTimebaseDen())
            if num > 0 and den > 0:
                tb = Fraction(num, den)
        if tb is None and p is not None:
            tb = p.time_base
            self._note("PyNvVideoCodec gives no time base: using the container's from PyAV")
        if tb is None:
            tb = Fraction(1, 1000)  # Video Codec SDK demuxer convention: PTS in milliseconds
            self._note("PyNvVideoCodec gives no time base: assuming PTS in milliseconds")
        self._time_base = tb
        self._t0_pts = p.origin_pts if p is not None else None  # None: the first frame's PTS

        if p is not None:
            full_range, bt709 = p.full_range, p.bt709
            width, height, fps, duration = p.width, p.height, p.fps, p.duration_s
            if start_time_abs is None:
                start_time_abs = p.creation_time
        else:
            full_range = self._demux_int("ColorRange") == _AVCOL_RANGE_JPEG
            bt709 = self._demux_int("ColorSpace") == _AVCOL_SPC_BT709
            width, height = self._demux_int("Width") or 0, self._demux_int("Height") or 0
            rate = self._demux_float("FrameRate")
            fps, duration = (rate if rate and rate > 0 else None), None
        self._full_range, self._bt709 = full_range, bt709
        self.info = StreamInfo(path=self.path, codec=codec_name, width=width, height=height, fps=fps,
                               duration_s=duration, start_time_abs=start_time_abs,
                               keyframe_interval_s=p.keyframe_interval_s() if p is not None else None)
        self._resume_key_t = self._resume_keyframe_time()

    def _demux_int(self, name: str) -> int | None:
        try:
            return int(getattr(self._demux, name)())
        except Exception:
            return None

    def _demux_float(self, name: str) -> float | None:
        try:
            return float(getattr(self._demux, name)())
        except Exception:
            return None

    def _resume_keyframe_time(self) -> float | None:
        """Time of the last keyframe at or before resume_after: decoding starts there."""
        r, p = self.resume_after, self._probe
        if r is None or r <= 0 or p is None or not p.complete:
            return None
        before = [k for k in p.key_pts if p.seconds(k) <= r + 1e-9]
        return p.seconds(before[-1]) if before else None

    # -- decoding ------------------------------------------------------------------------------
    def _seconds(self, pts: int) -> float:
        if self._t0_pts is None:
            self._t0_pts = pts
        return float((pts - self._t0_pts) * self._time_base)

    def _eos_packet(self):
        nvc = self._nvc
        pkt = nvc.PacketData()
        pkt.bsl = 0
        pkt.bsl_data = 0
        pkt.decode_flag = int(nvc.VideoPacketFlag.ENDOFSTREAM)
        return pkt

    def _decoded(self) -> Iterator[tuple[Any, int | None]]:
        """(decoded frame, PTS) in display order. A frame is valid until the next Decode call."""
        queue = _PtsQueue()
        started = self._resume_key_t is None
        flushed = False
        mismatch_noted = False
        it = iter(self._demux)
        while True:
            try:
                packet = next(it)
            except StopIteration:
                break
            except Exception as e:  # a broken container or a dropped stream: keep what we had
                self._note(f"demuxing stopped early: {e}")
                break
            if packet is None:
                continue
            size = int(getattr(packet, "bsl", 0) or 0)
            pts = _valid_pts(getattr(packet, "pts", None))
            if size > 0:
                key = bool(getattr(packet, "key", 0))
                if not started:  # resume: wait for the keyframe the resume point depends on
                    if not key or pts is None or self._seconds(pts) < self._resume_key_t - 1e-6:
                        continue
                    started = True
                if self.keyframes_only and not key:
                    continue  # NVDEC has no skip-frame mode: non-key packets are never sent
                if pts is not None:
                    queue.push(pts)
            else:
                flushed = True  # the demuxer's end-of-stream packet flushes the decoder
            try:
                frames = self._dec.Decode(packet)
            except Exception as e:
                self._bad_packet(f"undecodable packet at pts={pts}: {e}")
                continue
            for f in frames:
                ts = _valid_pts(getattr(f, "timestamp", None))
                got = queue.take(ts)
                if ts is not None and got != ts and not mismatch_noted:
                    mismatch_noted = True
                    self._note("decoded frame timestamps do not match packet PTS: using packet PTS in display order")
                yield f, got
            if size == 0:
                break
        if not flushed:
            try:
                frames = self._dec.Decode(self._eos_packet())
            except Exception as e:
                self._note(f"flushing the decoder failed: {e}")
                frames = []
            for f in frames:
                yield f, queue.take(_valid_pts(getattr(f, "timestamp", None)))

    def _grab(self, frame) -> tuple[Any, Any]:
        """Clone the decoded surface (NV12 by default) into torch memory: (gray view, planes)."""
        torch = self._torch
        with self._device_scope():
            planes = torch.from_dlpack(frame).clone()
        rows = int(planes.shape[0])
        layout, h = plane_layout(_pix_name(getattr(frame, "format", "")), rows, self.info.height or rows * 2 // 3)
        gray = planes[:h]
        if gray.dtype != torch.uint8:  # P016 / YUV444_16Bit: MSB-aligned 16-bit samples
            gray = (gray.to(torch.int32) >> 8).to(torch.uint8)
        return gray, (planes, h, layout)

    def _device_scope(self):
        return self._torch.cuda.device(self.device_id)

    def _make(self, t: float, held) -> Frame:
        pts, (gray, (planes, h, layout)) = held
        full, bt709, scope = self._full_range, self._bt709, self._device_scope

        def to_rgb():
            with scope():
                return yuv_to_rgb(planes, h, layout, full_range=full, bt709=bt709)

        return self._frame(t, pts, gray, to_rgb)

    def _timed(self) -> Iterator[tuple[float | None, tuple[Any, int]]]:
        for frame, pts in self._decoded():
            self.stats.decoded += 1
            yield (None if pts is None else self._seconds(pts)), (frame, pts)

    def _hold(self, payload: tuple[Any, int]):
        frame, pts = payload
        return pts, self._grab(frame)  # the decoder reuses its surface on the next Decode call

    def __iter__(self) -> Iterator[Frame]:
        yield from self._sample(self._timed(), self._make, self._hold)

    def surfaces(self) -> Iterator[tuple[Any, int | None]]:
        """Every decoded frame as the decoder's own surface with its PTS, in display order:
        nothing sampled, cloned or counted (a surface is valid until the next Decode call).
        The raw decode rate, for benchmarks."""
        return self._decoded()

    def close(self) -> None:
        self._dec = None
        self._demux = None
