"""The audio track of a file or live URL, decoded with PyAV and resampled to 16 kHz mono float32
(channels averaged).

The time axis. A sample's time is on the same axis as the video frames of its source: the
video decoder (ingest/pyav_decoder.py) times a frame ``(pts - video.start_time) * time_base``,
so its axis starts at the video stream's start PTS. An audio frame's time is its own PTS in
seconds (``frame.time``, which counts the audio stream's start offset) minus that same
origin: a file whose audio starts 0.7 s after its video gets audio times from 0.7 s. The
origin is ``axis_origin``: the video stream's ``start_time``, else (the container does not
say) the first video packet's PTS, which is the first frame's when the stream starts on a
keyframe; without a video stream (an audio-only source) the audio's own start. With
``start_time_abs`` (the video decoder's absolute start, when the engine has one) it is added,
so times land on the camera's absolute axis like its moments' ``t``.

Within a run of continuous audio times come from counting samples out of the resampler from
the first frame's PTS (no jitter from per-frame rounding); a frame whose PTS is more than
``RESYNC_S`` off that count (a gap in the track, a timestamp jump) restarts the count there.

Failures never reach the video path: a source without an audio track raises ``NoAudioTrack``
(not an error: the camera has no audio), a track that cannot be decoded raises
``AudioTrackError`` naming the source and the problem (after ``MAX_BAD_PACKETS`` undecodable
packets in a row, or a track that ends without a single decodable packet). ``AudioReader``
runs this on a camera's own thread and turns both into a status, never an exception.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Iterator

import av
import numpy as np

from ..errors import SourceError, VamError
from .priority import lower_thread_priority
from .records import SAMPLE_RATE, AudioBlock

RESYNC_S = 0.1  # a frame this far from where the sample count says it should be restarts the count
MAX_BAD_PACKETS = 50  # undecodable packets in a row: the track is broken
BLOCK_S = 0.5  # decoded audio is handed on in blocks of about this length
RESUME_PREROLL_S = 1.0  # audio read before a resume point: the VAD and ASR get context


class NoAudioTrack(VamError):
    """The source has no audio track: not an error, the camera simply has no audio."""


class AudioTrackError(SourceError):
    """The source's audio track cannot be decoded (the video may still be fine)."""


def _is_url(path: str) -> bool:
    return "://" in str(path)


def axis_origin(container, path: str) -> float:
    """Seconds to subtract from a stream's PTS time to land on the video's axis (module doc)."""
    video = container.streams.video[0] if container.streams.video else None
    if video is not None and video.start_time is not None:
        return float(video.start_time * video.time_base)
    if video is not None and not _is_url(path):
        try:  # the first video packet with a PTS, then back to the start
            for packet in container.demux(video):
                if packet.pts is not None:
                    return float(packet.pts * video.time_base)
        finally:
            container.seek(0)
    audio = container.streams.audio[0]
    if audio.start_time is not None:
        return float(audio.start_time * audio.time_base)
    return 0.0


class TrackDecoder:
    """Decodes one PyAV audio stream packet by packet into 16 kHz mono float32, timed in the
    stream's own seconds (``frame.time``). Usable on its own by a reader that demuxes video
    and audio from one connection (a live camera): it hands audio packets here.

    ``decode(packet)`` returns ``[(t, samples), ...]``; ``flush()`` the resampler's tail.
    Undecodable packets are counted (``packets_bad``, ``bad_in_row``) and skipped."""

    def __init__(self, stream):
        self.stream = stream
        cc = stream.codec_context
        self.codec = cc.name
        self.input_rate = int(cc.sample_rate or 0) or None
        self.input_channels = int(cc.channels or 0) or None
        self.packets_bad = 0
        self.bad_in_row = 0
        self.frames = 0
        self.errors: list[str] = []
        self._resampler = None
        self._fmt = None  # (format, layout, rate) the resampler was built for
        self._anchor: float | None = None  # stream time of the first sample of this run
        self._in = 0  # input samples since the anchor (at the input rate)
        self._out = 0  # output samples since the anchor

    def decode(self, packet) -> list[tuple[float, np.ndarray]]:
        try:
            frames = packet.decode()
        except av.error.FFmpegError as e:
            self._bad(f"undecodable audio packet at pts={packet.pts}: {e.strerror or e}")
            return []
        if getattr(packet, "is_corrupt", False) and not frames:
            self._bad(f"damaged audio packet at pts={packet.pts}")
            return []
        self.bad_in_row = 0
        out: list[tuple[float, np.ndarray]] = []
        for frame in frames:
            self.frames += 1
            out += self._resample(frame)
        return out

    def flush(self) -> list[tuple[float, np.ndarray]]:
        if self._resampler is None or self._anchor is None:
            return []
        return self._emit(self._resampler.resample(None))

    def _bad(self, msg: str) -> None:
        self.packets_bad += 1
        self.bad_in_row += 1
        if len(self.errors) < 5:
            self.errors.append(msg)

    def _resample(self, frame) -> list[tuple[float, np.ndarray]]:
        out: list[tuple[float, np.ndarray]] = []
        fmt = (frame.format.name, frame.layout.name, frame.sample_rate)
        t = frame.time
        expected = None if self._anchor is None else self._anchor + self._in / max(self._fmt[2], 1)
        if fmt != self._fmt or (t is not None and expected is not None and abs(t - expected) > RESYNC_S):
            out += self.flush()  # the run ends: its tail keeps the old count
            if fmt != self._fmt:
                # planar, every channel kept: averaged here (FFmpeg's own downmix sums 5.1 past full scale)
                self._resampler = av.AudioResampler(format="fltp", rate=SAMPLE_RATE)
                self._fmt = fmt
            self._anchor, self._in, self._out = None, 0, 0
        if self._anchor is None:
            self._anchor = t if t is not None else 0.0
        self._in += frame.samples
        frame.pts = None  # timed by our count: the resampler must not insert or drop samples to follow PTS
        out += self._emit(self._resampler.resample(frame))
        return out

    def _emit(self, frames) -> list[tuple[float, np.ndarray]]:
        out = []
        for f in frames:
            x = f.to_ndarray()
            x = (x[0] if len(x) == 1 else x.mean(axis=0, dtype=np.float32)).astype(np.float32, copy=False)
            if len(x):
                out.append((self._anchor + self._out / SAMPLE_RATE, x))
                self._out += len(x)
        return out


def _open(path: str, timeout_s: float):
    url = _is_url(path)
    options = {"rw_timeout": str(int(timeout_s * 1e6))} if url else {}
    try:
        return av.open(path, options=options, timeout=timeout_s if url else None)
    except av.error.FFmpegError as e:
        raise AudioTrackError(path, f"cannot be opened for its audio: {e.strerror or e}") from None


def read_audio(path: str, camera_id: str, *, start_time_abs: float | None = None, realtime: bool = False,
               stop: threading.Event | None = None, timeout_s: float = 10.0, resume_after: float | None = None,
               on_open: Callable[[TrackDecoder], None] | None = None) -> Iterator[AudioBlock]:
    """The audio of ``path`` (a file or URL) as 16 kHz mono blocks on the video's axis (module
    doc). ``realtime`` paces a file at 1x (a network source is paced by its sender).
    ``resume_after`` (camera axis: where a crashed run's transcripts end) starts there, less
    ``RESUME_PREROLL_S`` of context (the store skips a segment it already has). Raises
    NoAudioTrack or AudioTrackError; stops early when ``stop`` is set."""
    path = str(path)
    container = _open(path, timeout_s)
    try:
        if not container.streams.audio:
            raise NoAudioTrack(f"{path}: has no audio track")
        stream = container.streams.audio[0]
        offset = (start_time_abs or 0.0) - axis_origin(container, path)
        dec = TrackDecoder(stream)
        if on_open is not None:
            on_open(dec)
        blocks = _blocks(container, stream, dec, path, camera_id, offset, realtime, stop)
        if resume_after is None:
            yield from blocks
            return
        start = resume_after - RESUME_PREROLL_S
        if not _is_url(path):  # seek near it (to a packet at or before it), then drop what comes before
            try:
                container.seek(max(0, int((start - offset) / stream.time_base)), stream=stream, backward=True)
            except av.error.FFmpegError:
                pass  # unseekable: decode from the start
        for block in blocks:
            if block.t_end > start:
                yield block
    finally:
        container.close()


def _blocks(container, stream, dec: TrackDecoder, path, camera_id, offset, realtime, stop) -> Iterator[AudioBlock]:
    pending: list[np.ndarray] = []
    pending_t: float | None = None
    pending_n = 0
    clock: list[float] = []  # realtime: (wall, t) of the first block

    def take():
        nonlocal pending, pending_t, pending_n
        block = AudioBlock(camera_id, pending_t + offset, np.concatenate(pending))
        pending, pending_t, pending_n = [], None, 0
        return block

    def due(block) -> bool:
        """realtime: wait until the block's last sample is due (as a live source delivers it);
        False when stopped meanwhile."""
        if not realtime:
            return True
        if not clock:
            clock.extend((time.monotonic(), block.t))
        ahead = (block.t_end - clock[1]) - (time.monotonic() - clock[0])
        if ahead > 0.005:
            if stop is not None:
                return not stop.wait(ahead)
            time.sleep(ahead)
        return True

    def pieces():
        try:
            for packet in container.demux(stream):
                if stop is not None and stop.is_set():
                    return
                if packet.size == 0:
                    continue
                yield from dec.decode(packet)
                if dec.bad_in_row >= MAX_BAD_PACKETS:
                    raise AudioTrackError(path, f"audio track broken: {dec.bad_in_row} undecodable packets in a "
                                                f"row ({dec.errors[0] if dec.errors else 'no detail'})")
        except av.error.FFmpegError as e:
            if not dec.frames:
                raise AudioTrackError(path, f"audio demuxing failed: {e.strerror or e}") from None
            dec.errors.append(f"demuxing stopped early: {e.strerror or e}")
        yield from dec.flush()
        if not dec.frames and dec.packets_bad:
            raise AudioTrackError(path, f"audio track undecodable: none of its {dec.packets_bad} packets decoded "
                                        f"({dec.errors[0] if dec.errors else 'no detail'})")

    for t, x in pieces():
        if pending_t is not None and abs(pending_t + pending_n / SAMPLE_RATE - t) > 2.0 / SAMPLE_RATE:
            block = take()  # a new run: blocks never span a gap
            if not due(block):
                return
            yield block
        if pending_t is None:
            pending_t = t
        pending.append(x)
        pending_n += len(x)
        if pending_n >= BLOCK_S * SAMPLE_RATE:
            block = take()
            if not due(block):
                return
            yield block
    if pending_n:
        block = take()
        if due(block):
            yield block


class AudioReader:
    """One source's audio on its own thread: ``read_audio`` into ``sink`` (a callable taking
    AudioBlock; it runs on this thread). Never raises: ``state`` is "starting", "running",
    "ended", "no_audio", "stopped" or "error" (``error`` says why), and ``on_end(state)`` is
    called once when the thread finishes."""

    def __init__(self, path: str, camera_id: str, sink: Callable[[AudioBlock], None], *,
                 start_time_abs: float | None = None, realtime: bool = False, timeout_s: float = 10.0,
                 resume_after: float | None = None, on_end: Callable[[str], None] | None = None):
        self.path, self.camera_id = str(path), camera_id
        self.resume_after = resume_after
        self.sink, self.on_end = sink, on_end
        self.start_time_abs, self.realtime, self.timeout_s = start_time_abs, realtime, timeout_s
        self.state = "starting"
        self.error: str | None = None
        self.decoder: TrackDecoder | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"vam-audio-{camera_id}", daemon=True)

    def start(self) -> "AudioReader":
        self._thread.start()
        return self

    def _opened(self, dec: TrackDecoder) -> None:
        self.decoder = dec
        self.state = "running"

    def _run(self) -> None:
        lower_thread_priority()
        try:
            for block in read_audio(self.path, self.camera_id, start_time_abs=self.start_time_abs,
                                    realtime=self.realtime, stop=self._stop, timeout_s=self.timeout_s,
                                    resume_after=self.resume_after, on_open=self._opened):
                self.sink(block)
            self.state = "stopped" if self._stop.is_set() else "ended"
        except NoAudioTrack:
            self.state = "no_audio"
        except AudioTrackError as e:
            self.state, self.error = "error", str(e)
        except Exception as e:  # noqa: BLE001 - a reader thread reports, it never takes the process down
            self.state, self.error = "error", f"{self.path}: audio reader failed: {type(e).__name__}: {e}"
        finally:
            if self.on_end is not None:
                self.on_end(self.state)

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()
