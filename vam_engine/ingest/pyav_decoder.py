"""CPU decoder body: PyAV (FFmpeg). Reads the luma plane in place, converts to RGB only on demand.

Decoding as little as possible:
- gray statistics read the Y plane of the decoded frame directly (no colour conversion);
- when samples are sparse (at least ``SPARSE_FRAMES`` frame intervals apart) the codec skips
  non-reference frames (B-frames), which nothing else depends on, and each GOP is planned at
  its keyframe against the sampler's next tick (``_plan_gop``): skipped whole when none of
  its frames can be a sample, its IDR keyframe decoded alone when that keyframe is the tick's
  sample and no other frame of the GOP can be the next one (samples at or sparser than the
  GOP: the default mode then decodes what keyframes_only decodes), else decoded, with the rest
  of the GOP dropped after a sample when the next keyframe comes by the next tick;
- ``keyframes_only`` sends only keyframes to the decoder (the others too before a non-IDR
  keyframe, which needs them) and takes, for each tick, the nearest keyframe;
- kept frames' RGB comes from OpenCV's I420 converter when installed (``rgb_array``).
Times are always the frames' own PTS.

The present (``want_present(fps)``: the working memory, 2 fps) needs a frame every 1/fps s,
which no GOP planned for sparse index samples gives. With it:
- the default mode plans GOPs against both samplers at once (``UnionTicks``): the index's
  samples stay exactly the same (the plan is exact for any tick rule), but at 2 fps every GOP
  of 0.5 s or longer holds a tick, so nothing is skipped but each GOP's tail after its last
  present tick (about a quarter of a 2 s GOP). Non-reference frames stay skipped as before
  (decided by the index rate, so the samples do not change): the present takes the first
  reference frame at or after its tick (a camera stream with B-frames has several per 0.5 s).
  The cost: the reference frames of the whole stream instead of about one keyframe per index
  tick. On bench_ingest's clip (30 fps, 2 s GOP, 2 B-frames; 600 frames in 20 s) that is 319
  frames decoded instead of 10 at 0.5 fps (at 2 fps the index alone decodes the same 319), or
  about decoding every frame in CPU time; ``--quick`` prints the x-realtime rows with and
  without (``decode_present``, ``pipeline_present``).
- ``keyframes_only`` sends the packets to the decoder (skipping non-reference frames when
  the present is sparse for the stream) and its index still takes only keyframes: the
  non-key frames reach the present only (``PresentOnly``). After each present frame the rest
  of the GOP is dropped when the next keyframe comes by the present's next tick
  (``_present_packets``: the default mode's tail rule; no keyframe is ever dropped): 319 of
  the 600 frames above, as the default mode (400 without it; ``skip_gops=False``).
"""
from __future__ import annotations

import datetime as _dt
import itertools
import threading
from collections import deque
from fractions import Fraction
from typing import Iterator

import av
import numpy as np
from av.video.reformatter import VideoReformatter

from ..errors import SourceError
from .buffers import BufferPool
from .frame import Frame, PresentFrame, StreamInfo
from .sampler import TICK_EPS, PresentOnly, UnionTicks
from .source import DecoderBody, check_local_file, is_url

MAX_SIDE = 16384  # larger than any real camera or codec level; anything above is a corrupt header
SPARSE_FRAMES = 4  # skip non-reference frames when samples are at least this many frames apart
LOOKAHEAD_PACKETS = 2048  # packets read ahead to find the next keyframe (a long GOP disables GOP skipping)
_LUMA_FORMATS = {"yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p", "yuvj444p", "nv12", "nv21",
                 "gray", "yuv410p", "yuv411p", "yuv440p", "yuvj440p"}
_DRAIN = object()  # in the packet plan: take every frame out of the decoder, then continue


def creation_time(container) -> float | None:
    value = (container.metadata or {}).get("creation_time")
    if not value:
        return None
    try:
        t = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    ts = t.timestamp()
    return ts if ts > 86400 else None  # mp4 writers leave 1904/1970 epochs in unset fields


def video_stream(container, path: str):
    """The container's first video stream, once its dimensions are known to be sane."""
    streams = container.streams.video
    if not streams:
        kinds = sorted({s.type for s in container.streams}) or ["no streams"]
        raise SourceError(path, f"has no video stream (contains: {', '.join(kinds)})")
    stream = streams[0]
    w, h = stream.codec_context.width, stream.codec_context.height
    if w <= 0 or h <= 0 or w > MAX_SIDE or h > MAX_SIDE:
        raise SourceError(path, f"absurd video dimensions {w}x{h} (expected 1..{MAX_SIDE} per side)")
    if w < 2 or h < 2:
        raise SourceError(path, f"video too small to gate: {w}x{h}")
    return stream


def luma_plane(frame: av.VideoFrame) -> np.ndarray:
    if frame.format.name in _LUMA_FORMATS:
        plane = frame.planes[0]
        buf = np.frombuffer(plane, np.uint8).reshape(frame.height, plane.line_size)
        return buf[:, : frame.width]
    return frame.reformat(format="gray").to_ndarray()


def _nal_length_size(codec: str, extradata: bytes | None) -> int:
    """Bytes of each NAL unit's length prefix (avcC / hvcC extradata, as in MP4); 0: Annex B
    start codes (MPEG-TS, raw streams)."""
    if not extradata or extradata[0] != 1:
        return 0
    at = 4 if codec == "h264" else 21
    return (extradata[at] & 3) + 1 if len(extradata) > at else 0


def _first_slice_type(data: bytes, codec: str, length_size: int) -> int | None:
    """NAL unit type of the first coded slice in an H.264 / HEVC access unit."""
    i, n = 0, len(data)
    while i < n:
        if length_size:
            size = int.from_bytes(data[i:i + length_size], "big")
            start, i = i + length_size, i + length_size + size
        else:
            j = data.find(b"\x00\x00\x01", i)
            if j < 0:
                return None
            start = j + 3
            i = start
        if start >= n:
            return None
        if codec == "h264":
            t = data[start] & 0x1F
            if 1 <= t <= 5:
                return t
        else:
            t = (data[start] >> 1) & 0x3F
            if t <= 21:
                return t
    return None


try:  # optional: a SIMD I420 -> RGB converter about 4x faster than swscale's path through PyAV here
    import cv2 as _cv2
except ImportError:
    _cv2 = None
_BT601 = {2, 5, 6}  # AVColorSpace unspecified, BT470BG, SMPTE170M: what swscale assumes as well


def rgb_array(frame: av.VideoFrame) -> np.ndarray:
    """H x W x 3 RGB of a decoded frame. For limited-range BT.601 yuv420p (what cameras and
    encoders make by default) through OpenCV when installed: it differs from swscale by its
    chroma upsampling only (at most a few levels, below JPEG's own error); else PyAV (swscale)."""
    w, h = frame.width, frame.height
    if (_cv2 is None or frame.format.name != "yuv420p" or w % 2 or h % 2 or frame.colorspace not in _BT601
            or frame.color_range == 2):
        return frame.to_ndarray(format="rgb24")
    i420 = _scratch.get((h * 3 // 2, w))
    y, u, v = frame.planes
    i420[:h] = np.frombuffer(y, np.uint8).reshape(h, y.line_size)[:, :w]
    q = h // 4  # each chroma plane fills h/4 rows of width w in I420's layout
    i420[h:h + q] = np.frombuffer(u, np.uint8).reshape(h // 2, u.line_size)[:, : w // 2].reshape(q, w)
    i420[h + q:] = np.frombuffer(v, np.uint8).reshape(h // 2, v.line_size)[:, : w // 2].reshape(q, w)
    # Into a pooled array: a fresh one costs more in page faults than the conversion itself.
    return _cv2.cvtColor(i420, _cv2.COLOR_YUV2RGB_I420, dst=_RGB_POOL.take((h, w, 3), np.uint8))


def small_rgb_array(frame: av.VideoFrame, max_side: int, scaler: VideoReformatter) -> np.ndarray:
    """RGB of a decoded frame fitted within max_side x max_side (aspect kept, never enlarged),
    scaled and converted in one swscale pass (area averaging): about as fast as converting the
    full frame, and nothing full-sized is made. ``scaler`` keeps its swscale context from frame
    to frame (a frame's own ``reformat`` builds a new one each time: about 1 ms at 720p)."""
    w, h = frame.width, frame.height
    scale = max_side / max(w, h)
    if scale >= 1:
        return np.array(rgb_array(frame), copy=True)  # rgb_array may hand out a pooled buffer
    return scaler.reformat(frame, width=max(1, round(w * scale)), height=max(1, round(h * scale)),
                           format="rgb24", interpolation="AREA").to_ndarray()


class _Scratch(threading.local):
    """One I420 staging array per thread and size (read by OpenCV, never handed out)."""

    def __init__(self):
        self.arrays: dict = {}

    def get(self, shape: tuple) -> np.ndarray:
        a = self.arrays.get(shape)
        if a is None:
            self.arrays.clear()
            a = self.arrays[shape] = np.empty(shape, np.uint8)
        return a


_scratch = _Scratch()
_RGB_POOL = BufferPool(per_shape=8)  # kept frames' RGB, awaiting their embedding and JPEG


class PyAVDecoder(DecoderBody):
    name = "pyav"
    options = frozenset({"skip_nonref", "skip_gops", "threads"})

    def __init__(self, path: str, camera_id: str, *, fps: float = 0.5, keyframes_only: bool = False,
                 start_time_abs: float | None = None, resume_after: float | None = None,
                 skip_nonref: bool | None = None, skip_gops: bool | None = None,
                 threads: int = 0):
        self._setup(path, camera_id, fps, keyframes_only, resume_after)
        self._nal_len: int | None = None  # NAL length-prefix size, once known (_is_idr)
        self._pkt_end: int | None = None  # end (pts + duration) of the last packet demuxed
        self._bad_pts: set = set()  # PTS of packets the demuxer flagged damaged
        self._scaler: VideoReformatter | None = None  # the present's frames' scaler (_show)
        self._container = self._open()
        try:
            self._stream = video_stream(self._container, self.path)
            self.info = self._probe(start_time_abs)
            self._configure(fps, skip_nonref, skip_gops, threads)
        except BaseException:
            self._container.close()
            raise

    # -- opening -------------------------------------------------------------------------------
    def _open(self):
        if not is_url(self.path):
            check_local_file(self.path)
        options = {"rw_timeout": "10000000", "stimeout": "10000000"} if is_url(self.path) else {}
        try:
            return av.open(self.path, options=options, timeout=10.0 if is_url(self.path) else None)
        except av.error.InvalidDataError as e:
            raise SourceError(self.path, f"not a video FFmpeg can read, or truncated/corrupt ({self._why(e)})") from None
        except av.error.FFmpegError as e:
            raise SourceError(self.path, f"cannot be opened: {self._why(e)}") from None

    def _why(self, e: av.error.FFmpegError) -> str:
        """The error's text plus FFmpeg's own log line, which often says what is really wrong
        (e.g. "Picture size 100000x100000 is invalid" behind an unrelated errno). PyAV keeps
        FFmpeg's log off by default, so a local file is reopened once with it captured."""
        msg = str(e.strerror or e)
        log = getattr(e, "log", None)
        if not log and not is_url(self.path):
            import av.logging

            level, skip = av.logging.get_level(), av.logging.get_skip_repeated()
            try:
                av.logging.set_level(av.logging.ERROR)
                av.logging.set_skip_repeated(False)
                with av.logging.Capture(local=True):  # captured: kept off stderr
                    try:
                        av.open(self.path).close()
                    except av.error.FFmpegError as again:
                        log = again.log
            finally:
                av.logging.set_level(level)
                av.logging.set_skip_repeated(skip)
        detail = str(log[2]).strip() if log and len(log) > 2 and log[2] else ""
        return f"{msg}; FFmpeg: {detail}" if detail and detail.lower() not in msg.lower() else msg

    def _probe(self, start_time_abs: float | None) -> StreamInfo:
        s, c = self._stream, self._container
        tb = s.time_base or Fraction(1, 90000)
        self._time_base = tb
        self._tb_num, self._tb_den = tb.numerator, tb.denominator  # int / int: float(ticks * tb), exactly
        self._t0_pts = s.start_time  # None when the container does not say: the first frame's PTS
        if start_time_abs is None:
            start_time_abs = creation_time(c)
        if start_time_abs is None and (c.start_time_realtime or 0) > 0:  # live streams (RTCP)
            start_time_abs = c.start_time_realtime / 1e6
        duration = float(s.duration * tb) if s.duration else (c.duration / av.time_base if c.duration else None)
        rate = s.average_rate or s.guessed_rate
        return StreamInfo(path=self.path, codec=s.codec_context.name, width=s.codec_context.width,
                          height=s.codec_context.height, fps=float(rate) if rate else None,
                          duration_s=duration, start_time_abs=start_time_abs, keyframe_interval_s=None)

    def _configure(self, fps: float, skip_nonref: bool | None, skip_gops: bool | None, threads: int) -> None:
        cc = self._stream.codec_context
        cc.thread_type = "AUTO"
        cc.thread_count = threads
        src_fps = self.info.fps or 0.0
        sparse = src_fps > 0 and src_fps / fps >= SPARSE_FRAMES
        self._skip_nonref = skip_nonref
        self._skip_gops = not self.keyframes_only and (skip_gops if skip_gops is not None else sparse)
        self._skip_present_tails = skip_gops is not False  # keyframes_only with the present (_present_packets)
        self._ticks = self._sampler  # what GOP planning plans against (UnionTicks with the present)
        if self.keyframes_only:
            cc.skip_frame = "NONKEY"
        elif skip_nonref if skip_nonref is not None else sparse:
            cc.skip_frame = "NONREF"

    def _configure_present(self) -> None:
        """The present wants a frame every 1/fps s (module docstring: what that costs)."""
        if self.keyframes_only:
            src_fps = self.info.fps or 0.0
            sparse = src_fps > 0 and src_fps / (1.0 / self._present.interval) >= SPARSE_FRAMES
            # keyframes stay decoded either way (they are reference frames): the index's picks hold
            skip = self._skip_nonref if self._skip_nonref is not None else sparse
            self._stream.codec_context.skip_frame = "NONREF" if skip else "DEFAULT"
        else:
            self._ticks = UnionTicks(self._sampler, self._present)

    # -- decoding ------------------------------------------------------------------------------
    def _seek_for_resume(self) -> None:
        t = self.resume_after
        if t is None or t <= 0:
            return
        base = self._t0_pts or 0
        target = base + int(t / self._time_base)
        try:
            self._container.seek(target, stream=self._stream, backward=True, any_frame=False)
        except av.error.FFmpegError:
            pass  # unseekable input: decode from the start and skip what was done

    def _packets(self) -> Iterator[av.Packet]:
        it = self._container.demux(self._stream)
        while True:
            try:
                packet = next(it)
            except StopIteration:
                return
            except av.error.FFmpegError as e:  # a broken container past some point: keep what we had
                self._note(f"demuxing stopped early: {e.strerror or e}")
                return
            if packet.pts is not None:
                end = packet.pts + (packet.duration or 0)
                self._pkt_end = end if self._pkt_end is None else max(self._pkt_end, end)
            if packet.is_corrupt:  # the demuxer lost part of it (e.g. MPEG-TS continuity errors)
                self._bad_pts.add(packet.pts)
                self._bad_packet(f"damaged packet at pts={packet.pts} (data lost or corrupt): its frame is skipped")
            yield packet

    def _is_idr(self, packet: av.Packet) -> bool:
        """Whether a keyframe packet resets the decoder (H.264 / HEVC IDR): only such a keyframe
        decodes right after skipped packets. Non-IDR keyframes (open GOPs' recovery points)
        and other codecs: False, so their GOPs are fed as before."""
        codec = self.info.codec
        if codec not in ("h264", "hevc"):
            return False
        if self._nal_len is None:
            self._nal_len = _nal_length_size(codec, self._stream.codec_context.extradata)
        t = _first_slice_type(bytes(packet), codec, self._nal_len)
        return t == 5 if codec == "h264" else t in (19, 20)

    def _pkt_time(self, packet: av.Packet) -> float | None:
        if packet.pts is None or self._t0_pts is None:
            return None
        return (packet.pts - self._t0_pts) * self._tb_num / self._tb_den

    def _next_keyframe(self, ahead: deque, packets: Iterator[av.Packet]) -> int | None:
        """Index in ``ahead`` of the first keyframe after ``ahead[0]``, reading ahead as needed;
        ``len(ahead)`` when the stream ends first (or at the end-of-stream flush packet, which
        stays); None when it is further than LOOKAHEAD_PACKETS (long GOPs are not planned)."""
        i = 1
        while True:
            while len(ahead) <= i:
                if len(ahead) >= LOOKAHEAD_PACKETS:
                    return None
                p = next(packets, None)
                if p is None:
                    return len(ahead)
                ahead.append(p)
            p = ahead[i]
            if p.is_keyframe or not p.size:
                return i
            i += 1

    def _plan_gop(self, ahead: deque, packets: Iterator[av.Packet], tick: float) -> tuple[str, int]:
        """What to do with the GOP at ``ahead[0]`` (a keyframe) when the sampler's next tick is
        ``tick``: ("skip", n) drops its n packets (none of its frames can be a sample),
        ("alone", n) decodes its keyframe alone and drops the rest (the keyframe is the tick's
        sample and no other frame of the GOP can be the next one), ("decode", 0) decodes it.

        Frames of a GOP are shown before its successor keyframe (closed GOPs, as camera encoders
        and x264 make them); with open GOPs the next GOP's leading frames, which reference this
        one, are shown before that keyframe too, so both plans also require that keyframe to
        come at or before the tick that follows (then those frames cannot be samples either).
        """
        i = self._next_keyframe(ahead, packets)
        if i is None:
            return "decode", 0
        ts = [self._pkt_time(p) for p in itertools.islice(ahead, 0, i)]
        if any(t is None for t in ts):
            return "decode", 0
        t_next = self._pkt_time(ahead[i]) if i < len(ahead) and ahead[i].size else None
        if i < len(ahead) and ahead[i].size and t_next is None:
            return "decode", 0
        if (t_next is not None and t_next <= tick + TICK_EPS) or (t_next is None and max(ts) + TICK_EPS < tick):
            return "skip", i
        t_key = ts[0]
        after = self._ticks.tick_after(t_key)
        if (t_key + TICK_EPS >= tick and not ahead[0].is_corrupt
                and (t_next is None or t_next <= after + TICK_EPS)
                and self._is_idr(ahead[0]) and (t_next is None or self._is_idr(ahead[i]))
                and all(t + TICK_EPS < after and not (t + TICK_EPS >= tick and t < t_key) for t in ts[1:])):
            return "alone", i
        return "decode", 0

    def _taken(self) -> int:
        """Frames the samplers planned against have taken (the present's too, when it is on)."""
        return self.stats.sampled + (self.stats.present if self._ticks is not self._sampler else 0)

    def _drop(self, ahead: deque, n: int) -> None:
        for _ in range(n):
            ahead.popleft()
        self.stats.skipped_packets += n

    def _planned_packets(self) -> Iterator[av.Packet | object]:
        """The packets to decode in the default mode, in decode order, plus _DRAIN markers.

        With GOP skipping on, each GOP is planned at its keyframe (``_plan_gop``) against the
        sampler's next tick. The decoder holds frames back (frame threads, reordering), so the
        sampler lags behind the packets fed; the plan uses its own exact prediction while only
        skipped GOPs and lone keyframes went in, and after a GOP decoded in full it drains the
        decoder first (_DRAIN) when a lone-keyframe plan could follow. After each sample inside
        a decoded GOP, the rest of the GOP is dropped when the next keyframe comes at or before
        the next tick (its frames cannot be samples).
        """
        packets = self._packets()
        ahead: deque = deque()
        plan = self._skip_gops
        synced = True  # nothing inside the decoder can change the sampler's next tick but lone keyframes
        tick = self._ticks.next_tick  # the sampler's next tick once what is inside is out (while synced)
        seen = self._taken()
        while True:
            if not ahead:
                p = next(packets, None)
                if p is None:
                    return
                ahead.append(p)
            if plan and self._lost_alone:  # a lone keyframe failed to decode: the prediction is off
                self._lost_alone = False
                synced = False
            head = ahead[0]
            if plan and head.is_keyframe and head.size:
                if not synced:
                    what, n = self._plan_gop(ahead, packets, self._ticks.next_tick)  # a lower bound: safe
                    if what == "alone":  # could be, with the exact tick: drain to learn it
                        yield _DRAIN
                        synced, tick = True, self._ticks.next_tick
                if synced:
                    what, n = self._plan_gop(ahead, packets, tick)
                if what == "skip":
                    self._drop(ahead, n)
                    continue
                if what == "alone":
                    key = ahead.popleft()
                    self._alone.add(key.pts)
                    self._drop(ahead, n - 1)
                    tick = self._ticks.tick_after(self._pkt_time(key))
                    yield key
                    continue
                synced = False
            elif plan and self._taken() > seen and self._skip_rest(ahead, packets):
                synced, tick = not self._alone, self._ticks.next_tick
                seen = self._taken()
                continue
            seen = self._taken()
            yield ahead.popleft()

    def _skip_rest(self, ahead: deque, packets: Iterator[av.Packet]) -> bool:
        """After a sample inside a decoded GOP: drop the packets before the next keyframe when
        that keyframe comes at or before the next tick (every frame they hold is shown before
        it). Returns whether packets were dropped."""
        i = self._next_keyframe(ahead, packets)
        if i is None or i >= len(ahead) or not ahead[i].size:
            return False
        t = self._pkt_time(ahead[i])
        if t is None or t > self._ticks.next_tick + TICK_EPS:
            return False
        self._drop(ahead, i)
        if not self._alone:  # frames still inside are all before the tick (lone keyframes stay)
            self._stream.codec_context.flush_buffers()
        return True

    def _keyframe_packets(self) -> Iterator[av.Packet]:
        """keyframes_only: only keyframes (and the end-of-stream flush) reach the decoder when
        the next keyframe is an IDR; sending the others just to have the decoder discard them
        (skip_frame NONKEY) costs a thread hand-off each. Before a non-IDR keyframe the decoder
        needs them to keep its state, and gets them."""
        held: list = []  # non-key packets since the last keyframe: dropped only before an IDR
        for p in self._packets():
            if not p.is_keyframe and p.size:
                held.append(p)
                if len(held) < LOOKAHEAD_PACKETS:
                    continue
            elif held and (not p.size or self._is_idr(p)):  # an IDR, or the end: nothing needs them
                self.stats.skipped_packets += len(held)
                held = []
            yield from held
            held = []
            yield p

    def _present_packets(self) -> Iterator[av.Packet]:
        """keyframes_only with the present: every packet, except each GOP's tail after a present
        frame when the next keyframe comes at or before the present's next tick (every frame
        of that tail is shown before the keyframe, so none can be the present's; the index
        takes keyframes only, and no keyframe is dropped). The frames still inside the decoder
        are that tail's too, and are flushed with it, unless a keyframe sent is not out yet
        (``_keys_in``): then they come out as they would have."""
        packets = self._packets()
        ahead: deque = deque()
        seen = self.stats.present
        while True:
            if not ahead:
                p = next(packets, None)
                if p is None:
                    return
                ahead.append(p)
            if self.stats.present > seen and not ahead[0].is_keyframe:
                seen = self.stats.present
                i = self._next_keyframe(ahead, packets)
                if i is not None and i < len(ahead) and ahead[i].size:
                    t = self._pkt_time(ahead[i])
                    if t is not None and t <= self._present.next_tick + TICK_EPS:
                        self._drop(ahead, i)
                        if not self._keys_in:
                            self._stream.codec_context.flush_buffers()
                        continue
            p = ahead.popleft()
            if p.is_keyframe and p.size:
                self._keys_in.add(p.pts)
            yield p

    def _frames(self) -> Iterator[av.VideoFrame]:
        self._alone: set = set()  # PTS of lone keyframes fed (predicted samples) not yet out
        self._lost_alone = False
        self._keys_in: set = set()  # _present_packets: PTS of keyframes fed, not yet out
        if self.keyframes_only:  # the present needs the non-key frames too (_present_packets)
            feed = (self._keyframe_packets() if self._present is None
                    else self._present_packets() if self._skip_present_tails else self._packets())
        else:
            feed = self._planned_packets()
        cc = self._stream.codec_context
        bad_frames = 0
        for packet in feed:
            drain = packet is _DRAIN
            try:
                decoded = cc.decode(None) if drain else packet.decode()
            except av.error.FFmpegError as e:
                if not drain:
                    self._bad_packet(f"undecodable packet at pts={packet.pts}: {e.strerror or e}")
                    self._lost_alone = self._lost_alone or packet.pts in self._alone
                    self._alone.discard(packet.pts)
                    self._keys_in.discard(packet.pts)
                decoded = []
            if drain:
                cc.flush_buffers()  # out of its end-of-stream state: the next packet is a keyframe
            for frame in decoded:
                self.stats.decoded += 1
                if self._keys_in and frame.key_frame:
                    self._keys_in.discard(frame.pts)
                alone = False
                if self._alone and frame.pts is not None:
                    alone = frame.pts in self._alone
                    if any(p < frame.pts for p in self._alone):  # one never came out
                        self._lost_alone = True
                    self._alone = {p for p in self._alone if p > frame.pts}
                if frame.is_corrupt or (frame.pts is not None and frame.pts in self._bad_pts):
                    bad_frames += 1
                    self._lost_alone = self._lost_alone or alone
                    if bad_frames <= 5:
                        self._note(f"frame at pts={frame.pts} decoded with errors (damaged or cut data): skipped")
                    continue
                yield frame

    def _time(self, frame: av.VideoFrame) -> float | None:
        pts = frame.pts
        if pts is None:
            return None
        if self._t0_pts is None:
            self._t0_pts = pts
        return (pts - self._t0_pts) * self._tb_num / self._tb_den

    def _timed(self) -> Iterator[tuple[float | None, av.VideoFrame | PresentOnly | None]]:
        present = self._present is not None
        for frame in self._frames():
            # Some decoders (vp9) ignore skip_frame=NONKEY: a non-key frame is then never a sample.
            if not self.keyframes_only or frame.key_frame:
                yield self._time(frame), frame
            else:
                yield self._time(frame), (PresentOnly(frame) if present else None)

    def _make(self, t: float, frame: av.VideoFrame) -> Frame:
        return self._frame(t, frame.pts, luma_plane(frame), lambda f=frame: rgb_array(f))

    def _show(self, t: float, frame: av.VideoFrame, make) -> PresentFrame:
        if self._scaler is None:
            self._scaler = VideoReformatter()  # used on the decode thread only
        return PresentFrame(self.camera_id, t, self._t_abs(t),
                            lambda side, f=frame, s=self._scaler: small_rgb_array(f, side, s))

    def __iter__(self) -> Iterator[Frame]:
        self._seek_for_resume()
        yield from self._sample(self._timed(), self._make)
        self._check_complete()

    def _check_complete(self) -> None:
        """A container with a sample index (MP4/MOV) knows how long the stream is; data that
        ends well short of that means the file was cut (a copy or recording interrupted)."""
        s = self._stream
        if not s.frames or not s.duration or self._pkt_end is None:
            return
        end_t = float((self._pkt_end - (s.start_time or 0)) * self._time_base)
        length = float(s.duration * self._time_base)
        if end_t < length - max(1.0, 0.05 * length):
            raise SourceError(self.path, f"truncated: its data ends at t={end_t:.1f} s but its index says "
                                         f"{length:.1f} s (indexed up to where the data ends)")

    def close(self) -> None:
        self._container.close()
