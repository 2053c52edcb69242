"""CPU decoder body: PyAV (FFmpeg). Reads the luma plane in place, converts to RGB only on demand.

Decoding as little as possible:
- gray statistics read the Y plane of the decoded frame directly (no colour conversion);
- when samples are sparse (at least ``SPARSE_FRAMES`` frame intervals apart) the codec skips
  non-reference frames (B-frames), which nothing else depends on, and whole GOPs are skipped
  when the next keyframe comes at or before the next tick (their frames cannot be samples);
- ``keyframes_only`` decodes keyframes alone and takes, for each tick, the nearest keyframe.
"""
from __future__ import annotations

import datetime as _dt
from collections import deque
from fractions import Fraction
from typing import Iterator

import av
import numpy as np

from ..errors import SourceError
from .frame import Frame, StreamInfo
from .source import DecoderBody, check_local_file, is_url

MAX_SIDE = 16384  # larger than any real camera or codec level; anything above is a corrupt header
SPARSE_FRAMES = 4  # skip non-reference frames when samples are at least this many frames apart
LOOKAHEAD_PACKETS = 2048  # packets read ahead to find the next keyframe (a long GOP disables GOP skipping)
_LUMA_FORMATS = {"yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p", "yuvj444p", "nv12", "nv21",
                 "gray", "yuv410p", "yuv411p", "yuv440p", "yuvj440p"}


def _creation_time(container) -> float | None:
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


def _luma(frame: av.VideoFrame) -> np.ndarray:
    if frame.format.name in _LUMA_FORMATS:
        plane = frame.planes[0]
        buf = np.frombuffer(plane, np.uint8).reshape(frame.height, plane.line_size)
        return buf[:, : frame.width]
    return frame.reformat(format="gray").to_ndarray()


class PyAVDecoder(DecoderBody):
    name = "pyav"
    options = frozenset({"skip_nonref", "skip_gops", "threads"})

    def __init__(self, path: str, camera_id: str, *, fps: float = 0.5, keyframes_only: bool = False,
                 start_time_abs: float | None = None, resume_after: float | None = None,
                 device_id: int = 0, skip_nonref: bool | None = None, skip_gops: bool | None = None,
                 threads: int = 0):
        self._setup(path, camera_id, fps, keyframes_only, resume_after)
        self._pkt_end: int | None = None  # end (pts + duration) of the last packet demuxed
        self._bad_pts: set = set()  # PTS of packets the demuxer flagged damaged
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
        self._t0_pts = s.start_time  # None when the container does not say: the first frame's PTS
        if start_time_abs is None:
            start_time_abs = _creation_time(c)
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
        self._skip_gops = not self.keyframes_only and (skip_gops if skip_gops is not None else sparse)
        if self.keyframes_only:
            cc.skip_frame = "NONKEY"
        elif skip_nonref if skip_nonref is not None else sparse:
            cc.skip_frame = "NONREF"

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

    def _skip_to_keyframe(self, ahead: deque, packets: Iterator[av.Packet]) -> bool:
        """Drop the packets before the next keyframe when every frame they hold is shown before
        the next tick: none of them can be a sample, and decoding restarts at the keyframe.

        Frames of a GOP are shown before the GOP's successor keyframe (closed GOPs, as camera
        encoders and x264 make them), so the next keyframe at or before the tick proves it.
        Returns whether packets were dropped.
        """
        if self._t0_pts is None:
            return False
        tick_pts = self._t0_pts + self._sampler.next_tick / self._time_base
        i = 1
        while True:
            while len(ahead) <= i:
                if len(ahead) >= LOOKAHEAD_PACKETS:
                    return False
                p = next(packets, None)
                if p is None:
                    return False
                ahead.append(p)
            p = ahead[i]
            if p.is_keyframe:
                break
            i += 1
        if p.pts is None or p.pts > tick_pts + 1e-9 / self._time_base:
            return False
        for _ in range(i):
            ahead.popleft()
        self.stats.skipped_packets += i
        self._stream.codec_context.flush_buffers()  # frames still inside are all before the tick
        return True

    def _frames(self) -> Iterator[av.VideoFrame]:
        packets = self._packets()
        ahead: deque = deque()  # packets read ahead to find the next keyframe
        check = self._skip_gops  # at the start, at each keyframe and after each sample
        bad_frames = 0
        while True:
            if check or (ahead and ahead[0].is_keyframe and self._skip_gops):
                while self._skip_to_keyframe(ahead, packets):
                    pass
                check = False
            packet = ahead.popleft() if ahead else next(packets, None)
            if packet is None:
                break
            try:
                decoded = packet.decode()
            except av.error.FFmpegError as e:
                self._bad_packet(f"undecodable packet at pts={packet.pts}: {e.strerror or e}")
                continue
            for frame in decoded:
                self.stats.decoded += 1
                if frame.is_corrupt or (frame.pts is not None and frame.pts in self._bad_pts):
                    bad_frames += 1
                    if bad_frames <= 5:
                        self._note(f"frame at pts={frame.pts} decoded with errors (damaged or cut data): skipped")
                    continue
                taken_before = self.stats.sampled
                yield frame
                check = check or (self._skip_gops and self.stats.sampled > taken_before)

    def _time(self, frame: av.VideoFrame) -> float | None:
        pts = frame.pts
        if pts is None:
            return None
        if self._t0_pts is None:
            self._t0_pts = pts
        return float((pts - self._t0_pts) * self._time_base)

    def _timed(self) -> Iterator[tuple[float | None, av.VideoFrame | None]]:
        for frame in self._frames():
            # Some decoders (vp9) ignore skip_frame=NONKEY: a non-key frame is then never a sample.
            yield self._time(frame), (frame if not self.keyframes_only or frame.key_frame else None)

    def _make(self, t: float, frame: av.VideoFrame) -> Frame:
        return self._frame(t, frame.pts, _luma(frame), lambda f=frame: f.to_ndarray(format="rgb24"))

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
