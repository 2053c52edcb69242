"""Live sources: one camera's connection, watchdog and reconnect loop, on its own thread.

A ``LiveCamera`` opens its URL with PyAV (``rtsp://``, ``rtsps://``, ``rtmp://``, ``http(s)://``
carrying MPEG-TS, HLS or MJPEG, ``/dev/videoN`` through v4l2, or a file), decodes every frame,
samples on the camera's own axis and hands samples to its ``LiveSink`` (engine/live.py). It
never blocks on another camera: each has its own thread, its own connection timeouts, and
drops samples (counted) rather than wait long when the shared pipeline is behind.

Times. ``t_abs`` is the wall clock at the arrival of a connection's first frame, advanced by the
stream's own PTS (monotone, no jitter within a connection); a PTS discontinuity (a jump
backwards or far forwards, as when an encoder restarts) rebases it on the wall clock. A network
source is never read ahead of real time (a file served over HTTP plays at 1x); ``realtime``
paces a local file the same way. ``t_rel`` is ``t_abs`` minus the first frame's ``t_abs`` of
this run, so it continues across reconnections on the camera's axis, and the gap is real time.

Watchdog: an error, the end of a network stream, or no frame for ``stall_s`` (a read blocked
that long is interrupted by PyAV's read timeout; packets arriving without a decodable frame
are caught in the loop) ends the connection; the camera then reconnects after an exponential
backoff with jitter (``backoff_s`` doubling to ``backoff_max_s``, each wait drawn in [1/2, 1] of
its step), forever unless ``max_retries`` consecutive attempts fail. The loss is reported
once (``LiveSink.gap``) and its end with the first frame after it (``LiveSink.resumed``). A
local file is not retried: its end, or an error, ends the camera (``LiveSink.ended``).
Removing a camera returns at once; a reader blocked in a read exits when it times out.

Audio. With an ``AudioTap`` (engine/audio.py's LiveAudio), the connection's first audio track is
demuxed beside the video and decoded by the tap's decoder; its samples are timed on the camera's
axis by the same clock as the frames (``base + (t_stream - pts0)``: the video's first frame of
the connection fixes it, audio before that waits, at most ``AUDIO_PENDING_S``). A broken audio
track (``AUDIO_BAD_IN_ROW`` undecodable packets in a row, or a decoder that fails) is reported to
the tap once and ignored for the rest of the connection: the video never waits for or stops
because of it, and audio packets count neither as input frames nor against the stall watchdog.
"""
from __future__ import annotations

import math
import os
import random
import re
import threading
from collections import deque
import time
from dataclasses import asdict, dataclass
from typing import Callable, Iterator, Protocol

import av
from av.video.reformatter import VideoReformatter

from ..errors import SourceError
from .frame import DecodeStats, Frame
from .pyav_decoder import luma_plane, rgb_array, small_rgb_array, video_stream
from ..urls import redact
from .sampler import TickSampler
from .source import URL_SCHEMES

STATES = ("online", "connecting", "stalled", "offline")
# Demuxers whose timestamps are made up (MJPEG over HTTP: a nominal 25 fps whatever the camera
# sends): their frames are timed by arrival.
_UNTIMED_FORMATS = {"mpjpeg", "mjpeg", "jpeg_pipe", "image2pipe"}
_DISCONTINUITY_S = 10.0  # a PTS step forward beyond this (and beyond the wall time elapsed) rebases
AUDIO_BAD_IN_ROW = 50  # undecodable audio packets in a row: the connection's audio track is broken
AUDIO_PENDING_S = 10.0  # audio held until the connection's first video frame sets its clock, at most


def source_kind(url: str) -> str:
    """'rtsp' | 'rtmp' | 'http' | 'stream' (udp/tcp/srt) | 'device' (/dev/videoN) | 'file'."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme:
        if scheme not in URL_SCHEMES:
            raise ValueError(f"unsupported URL scheme {scheme!r} (use rtsp, rtsps, rtmp, http, https, udp, tcp, "
                             f"srt, a /dev/videoN device or a file path)")
        return URL_SCHEMES[scheme]
    if re.fullmatch(r"/dev/video\d+", url):
        return "device"
    return "file"


def _positive(camera_id: str, name: str, v, *, allow_none: bool = False, integer: bool = False):
    if v is None and allow_none:
        return None
    if integer:
        ok = isinstance(v, int) and not isinstance(v, bool) and v >= 0
    else:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    if not ok:
        kind = "a non-negative integer" if integer else "a positive number"
        raise ValueError(f"camera {camera_id!r}: {name} must be {kind}{' or None' if allow_none else ''}, got {v!r}")
    return v


@dataclass(frozen=True)
class LiveSpec:
    """How one live camera is read. Validated at construction (errors name camera and field)."""

    camera_id: str
    url: str
    fps: float = 0.5  # samples per second handed to the gates
    realtime: bool = False  # pace a local file at 1x (network sources are never read ahead of real time)
    stall_s: float = 20.0  # no frame for this long: reconnect
    max_retries: int | None = None  # consecutive failed attempts before giving up; None: forever
    backoff_s: float = 1.0  # first wait before a reconnection; doubles per failed attempt
    backoff_max_s: float = 60.0
    connect_timeout_s: float | None = None  # None: min(stall_s, 10 s)

    def __post_init__(self):
        cam = self.camera_id
        if not isinstance(self.url, str) or not self.url.strip():
            raise ValueError(f"camera {cam!r}: url must be a non-empty string, got {self.url!r}")
        try:
            kind = source_kind(self.url)
        except ValueError as e:
            raise ValueError(f"camera {cam!r}: url {redact(self.url)!r}: {e}") from None
        if kind == "file" and not os.path.isfile(self.url):
            raise ValueError(f"camera {cam!r}: url {self.url!r} is neither a supported URL nor an existing file")
        for name in ("fps", "stall_s", "backoff_s", "backoff_max_s"):
            _positive(cam, name, getattr(self, name))
        _positive(cam, "connect_timeout_s", self.connect_timeout_s, allow_none=True)
        _positive(cam, "max_retries", self.max_retries, allow_none=True, integer=True)
        if not isinstance(self.realtime, bool):
            raise ValueError(f"camera {cam!r}: realtime must be true or false, got {self.realtime!r}")
        if self.backoff_max_s < self.backoff_s:
            raise ValueError(f"camera {cam!r}: backoff_max_s ({self.backoff_max_s:g}) is below backoff_s "
                             f"({self.backoff_s:g})")

    @property
    def kind(self) -> str:
        return source_kind(self.url)

    @property
    def connect_timeout(self) -> float:
        return self.connect_timeout_s if self.connect_timeout_s is not None else min(self.stall_s, 10.0)


@dataclass
class CameraStatus:
    """A live camera now. Times: ``last_frame_t`` on the camera's axis (unix seconds),
    ``last_frame_wall`` the wall clock at its arrival; ``lag_s``: how far ingest is behind live
    (the last frame's age while the gates keep up, else the age of the last sample they gated:
    network, decoding and the pipeline's backlog; None unless online or stalled)."""

    camera_id: str
    url: str  # credentials redacted
    state: str  # 'online' | 'connecting' | 'stalled' | 'offline'
    input_fps: float = 0.0  # video packets per second over the last few seconds
    last_frame_t: float | None = None
    last_frame_wall: float | None = None
    reconnects: int = 0  # reconnection attempts after a loss
    lag_s: float | None = None
    frames_decoded: int = 0
    frames_dropped: int = 0  # samples not queued because the pipeline was behind
    gaps: int = 0  # losses of video in this run (and the time without video before it, engine/live.py)
    error: str | None = None  # the last connection's failure (kept while connecting again)
    frames_sampled: int = 0
    frames_kept: int = 0
    since: float | None = None  # wall clock of the last state change
    retry_in_s: float | None = None  # while waiting to reconnect
    # the audio path (engine/audio.py's audio_summary: state "no_audio" | "running" | "error" with
    # error | "behind" with seconds_dropped | "ended"); None when the engine transcribes no audio
    audio: dict | None = None

    def to_json(self) -> dict:
        return asdict(self)


class LiveSink(Protocol):
    """Where a LiveCamera's output goes; every call comes from the camera's own thread, in order."""

    def frame(self, frame: Frame) -> bool:  # False: dropped (the pipeline is behind)
        ...

    def gap(self, t_start: float, reason: str) -> None:  # video lost after t_start (camera axis)
        ...

    def resumed(self, t_end: float) -> None:  # the first frame after the gap
        ...

    def ended(self, error: str | None) -> None:  # a file's end (None), or gave up (why)
        ...


class AudioTap(Protocol):
    """Where a LiveCamera's audio goes (engine/audio.py's LiveAudio); calls come from the camera's
    thread. ``decoder(stream)``: a decoder for the connection's audio stream (None when it has
    none: the tap records "no audio"), with ``decode(packet) -> [(t_stream, samples)]``,
    ``flush()``, ``bad_in_row`` and ``errors``; ``samples(t, x)``: 16 kHz mono at camera-axis t;
    ``broken(reason)``: the track cannot be decoded; ``ended()``: the connection ended."""

    def decoder(self, stream):
        ...

    def samples(self, t: float, samples) -> None:
        ...

    def broken(self, reason: str) -> None:
        ...

    def ended(self) -> None:
        ...


class _Stall(Exception):
    pass


class LiveCamera:
    """One camera's reader thread. ``start()``; ``stop()`` returns at once (the thread ends at
    its next frame, or when a blocked read times out: at most ``stall_s``); ``status()``."""

    def __init__(self, spec: LiveSpec, sink: LiveSink, *, present: Callable | None = None,
                 present_fps: float | None = None, clock: Callable[[], float] = time.time,
                 audio: AudioTap | None = None):
        self.spec = spec
        self.sink = sink
        self.audio = audio
        self._audio_clock: tuple[float, float] | None = None  # (base, pts0) of this connection's frames
        self._audio_pending: list = []  # (t_stream, samples) before the connection's first frame
        self._audio_dead = False  # this connection's audio track is broken
        # present(camera_id, t_abs, rgb): the present (working memory), fed from decode at
        # present_fps as the index pipeline's decoders do (index/present.py); ``rgb(max_side)``
        # converts the frame fitted in max_side
        self.present = present if present_fps else None
        self.present_interval = 1.0 / present_fps if present_fps else math.inf
        self._scaler = VideoReformatter()  # keeps its swscale context from frame to frame
        self.clock = clock
        self.stats = DecodeStats()  # read by the pipeline's progress reports
        self._stop = threading.Event()
        self._sampler = TickSampler(spec.fps)
        self._state, self._since, self._error = "connecting", clock(), None
        self._retry_at: float | None = None
        self._epoch: float | None = None  # t_abs of this run's first frame (t_rel 0)
        self._last_t: float | None = None  # t_abs of the last decoded frame
        self._last_wall: float | None = None
        self._last_mono: float | None = None
        self.last_sent: float | None = None  # t_rel of the last sample the sink took
        self._in_gap = False
        self._started_wall = clock()
        self.reconnects = self.gaps = self.dropped = 0
        # monotonic arrival times of recent packets (input fps); a deque: status() reads it from
        # another thread while the reader appends
        self._rate: deque = deque(maxlen=512)
        self._next_present = -math.inf
        self._thread = threading.Thread(target=self._run, name=f"vam-live-{spec.camera_id}", daemon=True)

    # -- control -------------------------------------------------------------------------------
    def start(self) -> "LiveCamera":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def t_abs(self, t_rel: float) -> float | None:
        return None if self._epoch is None else self._epoch + t_rel

    def status(self) -> CameraStatus:
        now, mono = self.clock(), time.monotonic()
        state = self._state
        if state == "online" and self._last_mono is not None:
            fps = self._fps(mono)
            stalled_after = min(self.spec.stall_s / 2, max(2.0, 4.0 / fps if fps > 0 else 2.0))
            if mono - self._last_mono > stalled_after:
                state = "stalled"
        return CameraStatus(
            camera_id=self.spec.camera_id, url=redact(self.spec.url), state=state, input_fps=round(self._fps(mono), 3),
            last_frame_t=self._last_t, last_frame_wall=self._last_wall, reconnects=self.reconnects,
            frames_decoded=self.stats.decoded, frames_dropped=self.dropped, gaps=self.gaps, error=self._error,
            frames_sampled=self.stats.sampled, since=self._since,
            retry_in_s=None if self._retry_at is None else max(0.0, self._retry_at - now))

    def _fps(self, mono: float) -> float:
        r = [t for t in list(self._rate) if mono - t <= 5.0]
        if len(r) < 2 or mono - r[0] <= 0:
            return 0.0
        return (len(r) - 1) / max(mono - r[0], 1e-3)

    def _set_state(self, state: str, error: str | None = None, keep_error: bool = False) -> None:
        if state != self._state:
            self._state, self._since = state, self.clock()
        if not keep_error:
            self._error = error

    # -- the loop ------------------------------------------------------------------------------
    def _run(self) -> None:
        spec = self.spec
        failures = 0
        while not self._stop.is_set():
            self._set_state("connecting", keep_error=True)
            online_since, err = None, None
            try:
                for _ in self._connection():
                    if online_since is None:
                        online_since = time.monotonic()
                if self._stop.is_set():
                    break
                if spec.kind == "file":  # a file played as live is over at its end
                    self._set_state("offline")
                    self.sink.ended(None)
                    return
                err = "the stream ended (the server closed it)"
            except _Stall as e:
                err = str(e)
            except SourceError as e:
                err = e.problem
            except av.error.FFmpegError as e:
                err = _describe(e, spec)
            except Exception as e:  # noqa: BLE001 - any failure of one camera reconnects it, never kills the engine
                err = f"{type(e).__name__}: {e}"
            if self._stop.is_set():
                break
            if spec.kind == "file":  # a local file's error is not going away: replaying it would loop
                self._set_state("offline", err)
                self.sink.ended(err)
                return
            if not self._in_gap:
                self._in_gap = True
                self.gaps += 1
                self.sink.gap(self._last_t if self._last_t is not None else self._started_wall, err)
            if online_since is not None and time.monotonic() - online_since >= min(spec.backoff_max_s, 10.0):
                failures = 0  # it stayed up a while: this is a new outage, its backoff starts over
            failures += 1
            if spec.max_retries is not None and failures > spec.max_retries:
                why = f"gave up after {spec.max_retries} retries: {err}"
                self._set_state("offline", why)
                self.sink.ended(why)
                return
            step = spec.backoff_s * 2.0 ** min(failures - 1, 60)  # bounded: a week of retries must not overflow
            delay = min(spec.backoff_max_s, step) * random.uniform(0.5, 1.0)
            self._set_state("connecting", err)
            self._retry_at = self.clock() + delay
            self._stop.wait(delay)
            self._retry_at = None
            self.reconnects += 1
        self._set_state("offline", keep_error=True)

    def _open(self, quick: bool = True):
        """Connect. ``quick`` probes 32 KiB of the stream (connecting takes 0.5 s instead of
        3 s on RTSP); ``_connection`` probes again at FFmpeg's default when that was too little."""
        spec = self.spec
        kind = spec.kind
        us = str(int(spec.stall_s * 1e6))
        opts: dict[str, str] = {}
        fmt = None
        if kind == "rtsp":
            opts = {"rtsp_transport": "tcp", "timeout": us}  # TCP: no loss to UDP on a loaded link
        elif kind == "http":
            opts = {"rw_timeout": us, "timeout": us, "reconnect": "0"}  # reconnecting is ours, with a gap
        elif kind in ("rtmp", "stream"):
            opts = {"rw_timeout": us}
        elif kind == "device":
            fmt = "v4l2"
        if kind not in ("file", "device"):
            opts["analyzeduration"] = "1000000"  # not fflags=nobuffer: it drops the probed packets, a GOP
            if quick:
                opts["probesize"] = "32768"
        timeout = None if kind == "file" else (spec.connect_timeout, spec.stall_s)
        t0 = time.monotonic()
        try:
            return av.open(spec.url, format=fmt, options=opts, timeout=timeout)
        except av.error.FFmpegError as e:
            # PyAV's interrupt at the timeout surfaces as whatever the protocol makes of it (RTSP:
            # "invalid data"): an attempt that lasted the whole timeout timed out.
            late = timeout is not None and time.monotonic() - t0 >= 0.9 * spec.connect_timeout
            why = f"timed out (no answer within {spec.connect_timeout:g} s)" if late else _describe(e, spec)
            raise SourceError(redact(spec.url), f"cannot connect: {why}") from None

    def _connection(self) -> Iterator[None]:
        """One connection: yields after each decoded frame (the loop counts its life)."""
        container = self._open()
        try:
            try:
                stream = video_stream(container, redact(self.spec.url))
            except SourceError:
                if self.spec.kind in ("file", "device"):
                    raise
                container.close()
                container = self._open(quick=False)
                stream = video_stream(container, redact(self.spec.url))
            rate = stream.average_rate or stream.guessed_rate
            if rate and float(rate) / self.spec.fps >= 4:
                stream.codec_context.skip_frame = "NONREF"  # sparse samples: frames nothing refers to are not needed
            base = pts0 = prev = None  # this connection's clock: base + (t_stream - pts0)
            untimed = bool(set(container.format.name.split(",")) & _UNTIMED_FORMATS)
            audio = self._audio_open(container)
            for vf in self._frames(container, stream, audio):
                now = self.clock()
                ts = None if untimed else vf.time
                if ts is None:
                    t_abs = now if self._last_t is None else max(now, self._last_t + 1e-3)
                else:
                    jump = None if prev is None else ts - prev
                    if base is None or jump < -0.5 or (jump > _DISCONTINUITY_S and
                                                       base + (ts - pts0) > now + _DISCONTINUITY_S):
                        base = now if self._last_t is None else max(now, self._last_t + 1e-3)
                        pts0 = ts
                    elif jump <= 0:
                        continue  # out of order (a damaged packet's frame): times only go forward
                    prev = ts
                    if self._audio_clock != (base, pts0):
                        self._audio_clock = (base, pts0)
                        self._audio_release()
                    t_abs = base + (ts - pts0)
                    ahead = t_abs - now
                    if ahead > 0.005 and (self.spec.realtime or self.spec.kind not in ("file", "device")):
                        if self._stop.wait(ahead):  # never ahead of real time: a burst plays at 1x
                            return
                if self._stop.is_set():
                    return
                self._deliver(vf, t_abs)
                yield
        finally:
            self._audio_close(audio)
            container.close()

    def _frames(self, container, stream, audio=None) -> Iterator[av.VideoFrame]:
        stall = self.spec.stall_s
        last = time.monotonic()
        keyed = False  # a connection's packets before its first keyframe would decode as garbage
        streams = (stream,) if audio is None else (stream, audio[0])
        try:
            for packet in container.demux(*streams):
                if self._stop.is_set():
                    return
                if audio is not None and packet.stream_index == audio[0].index:
                    self._audio_packet(audio[1], packet)
                    continue
                mono = time.monotonic()
                if packet.size:
                    self._rate.append(mono)
                if mono - last > stall:
                    raise _Stall(f"no frame for {stall:g} s (data arrives but none of it decodes)")
                if not keyed:
                    if not packet.is_keyframe:
                        self.stats.skipped_packets += 1
                        continue
                    keyed = True
                try:
                    t0 = time.perf_counter()
                    frames = packet.decode()
                    self.stats.busy_s += time.perf_counter() - t0
                except av.error.FFmpegError as e:
                    self.stats.packets_bad += 1
                    if self.stats.packets_bad <= 5:
                        self.stats.errors.append(f"undecodable packet: {e.strerror or e}")
                    continue
                for vf in frames:
                    self.stats.decoded += 1
                    last = time.monotonic()
                    yield vf
        except av.error.ExitError:
            raise _Stall(f"no data for {stall:g} s") from None
        except av.error.EOFError:
            return
        except av.error.FFmpegError as e:
            raise SourceError(redact(self.spec.url), f"reading failed: {e.strerror or e}") from None

    # -- audio (module doc) ---------------------------------------------------------------------
    def _audio_open(self, container):
        """(stream, decoder) of the connection's audio for the tap, or None."""
        self._audio_clock, self._audio_pending, self._audio_dead = None, [], False
        if self.audio is None:
            return None
        stream = container.streams.audio[0] if container.streams.audio else None
        try:
            dec = self.audio.decoder(stream)
        except Exception as e:  # noqa: BLE001 - a track the tap cannot take: the video goes on
            self._audio_broken(f"audio track cannot be decoded: {type(e).__name__}: {e}")
            return None
        return None if dec is None or stream is None else (stream, dec)

    def _audio_packet(self, dec, packet) -> None:
        if self._audio_dead or not packet.size:
            return
        try:
            pieces = dec.decode(packet)
            if dec.bad_in_row >= AUDIO_BAD_IN_ROW:
                first = dec.errors[0] if dec.errors else "no detail"
                self._audio_broken(f"audio track broken: {dec.bad_in_row} undecodable packets in a row ({first})")
                return
            for t, x in pieces:
                self._audio_out(t, x)
        except Exception as e:  # noqa: BLE001 - the audio path's failure never ends the connection
            self._audio_broken(f"audio failed: {type(e).__name__}: {e}")

    def _audio_out(self, t_stream: float, x) -> None:
        clock = self._audio_clock
        if clock is None:  # before the first frame: held (the oldest dropped beyond AUDIO_PENDING_S)
            self._audio_pending.append((t_stream, x))
            while sum(len(p[1]) for p in self._audio_pending) > AUDIO_PENDING_S * 16_000:
                self._audio_pending.pop(0)
            return
        self.audio.samples(clock[0] + (t_stream - clock[1]), x)

    def _audio_release(self) -> None:
        pending, self._audio_pending = self._audio_pending, []
        try:
            for t, x in pending:
                self._audio_out(t, x)
        except Exception as e:  # noqa: BLE001
            self._audio_broken(f"audio failed: {type(e).__name__}: {e}")

    def _audio_broken(self, reason: str) -> None:
        self._audio_dead = True
        try:
            self.audio.broken(reason)
        except Exception as e:  # noqa: BLE001
            if len(self.stats.errors) < 5:
                self.stats.errors.append(f"the audio path failed: {type(e).__name__}: {e}")

    def _audio_close(self, audio) -> None:
        if audio is None:
            return
        try:
            if not self._audio_dead:
                for t, x in audio[1].flush():
                    self._audio_out(t, x)
            self.audio.ended()
        except Exception as e:  # noqa: BLE001
            self._audio_broken(f"audio failed: {type(e).__name__}: {e}")

    def _deliver(self, vf: av.VideoFrame, t_abs: float) -> None:
        mono = time.monotonic()
        if self._epoch is None:
            self._epoch = t_abs
        if self._in_gap:
            self._in_gap = False
            self.sink.resumed(t_abs)
        self._last_t, self._last_wall, self._last_mono = t_abs, self.clock(), mono
        self._set_state("online")
        cam = self.spec.camera_id
        if self.present is not None and t_abs >= self._next_present:  # on the stream's time, like the decoders
            self._next_present = t_abs + self.present_interval
            try:
                self.present(cam, t_abs, lambda side: small_rgb_array(vf, side, self._scaler))
            except Exception as e:  # noqa: BLE001 - the present is a reader's aid: never a reason to reconnect
                if len(self.stats.errors) < 5:
                    self.stats.errors.append(f"the present did not take a frame: {type(e).__name__}: {e}")
        t_rel = t_abs - self._epoch
        if not self._sampler.accept(t_rel):
            return
        self.stats.sampled += 1
        f = Frame(cam, t_rel, t_abs, vf.pts, luma_plane(vf), lambda v=vf: rgb_array(v))
        if self.sink.frame(f):
            self.last_sent = t_rel
        else:
            self.dropped += 1


def _describe(e: av.error.FFmpegError, spec: LiveSpec) -> str:
    """An FFmpeg error in words a camera's operator can act on (the URL is the caller's to name)."""
    msg = str(e.strerror or e).replace(spec.url, redact(spec.url))  # str(e) names the file: the URL
    if isinstance(e, av.error.ExitError):
        return f"timed out (no answer within {spec.connect_timeout:g} s)"
    return msg
