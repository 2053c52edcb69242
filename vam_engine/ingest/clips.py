"""MP4 clips (H.264, and AAC where there is sound) of an interval, with PyAV (FFmpeg's libx264 and
aac encoders in PyAV's own build: no ffmpeg binary needed).

Two ways, the caller picks (engine/clips.py): ``cut_file`` re-encodes [start_s, end_s] of a
video file, its frames at their own times and its first audio track trimmed to the sample;
``frames_clip`` builds the interval from still frames at their times (a camera's retained
JPEGs once its source is gone), at a constant ``FRAMES_FPS``, each frame shown until the next.
Both re-encode (a stream copy could start only at a keyframe) at ``crf`` and ``preset`` (VAM's
clips: veryfast, crf 28), no side over ``max_side``.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass
from fractions import Fraction

import av
import numpy as np

from ..errors import SourceError, VamError

FRAMES_FPS = 5  # a clip of still frames: ticks per second (the frames change far less often)
_MS = Fraction(1, 1000)


CLIP_MIN_S = 4.0  # a clip URL of an instant (a hit on one frame) spans this much around it
ALERT_CLIP_S = (10.0, 2.0)  # an alert's clip: the seconds before the frame that fired it, and after


def clip_url(camera_id: str, t0: float, t1: float) -> str | None:
    """The service's path of the clip of [t0, t1] on the camera's axis (``/api/clips``), widened
    to CLIP_MIN_S around an instant; None for a time JSON cannot carry or evidence over every
    camera (``*``). The records the service and the notifier send link to their clips with it."""
    from urllib.parse import quote

    if camera_id == "*" or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (t0, t1)):
        return None
    if t1 - t0 < CLIP_MIN_S:
        mid = (t0 + t1) / 2
        t0, t1 = mid - CLIP_MIN_S / 2, mid + CLIP_MIN_S / 2
    return f"/api/clips?camera={quote(camera_id, safe='')}&t0={t0:.3f}&t1={t1:.3f}"


def alert_clip_url(camera_id: str, t) -> str | None:
    """The clip of an alert fired at ``t``: what led up to it and a moment after."""
    if not isinstance(t, (int, float)):
        return None
    return clip_url(camera_id, t - ALERT_CLIP_S[0], t + ALERT_CLIP_S[1])


class ClipError(VamError):
    """A clip's request is malformed (the message says which part; the service answers 400)."""


class NoClip(ClipError):
    """The interval holds nothing to show: no retained frame of the camera (the service: 404)."""


class ClipBusy(VamError):
    """As many clips are being encoded as may be at once (the service answers 429)."""


@dataclass(frozen=True)
class Encoding:
    crf: int = 28
    preset: str = "veryfast"
    max_side: int = 1280  # a larger source is scaled down to fit (both sides even, as yuv420p needs)


def _fit(w: int, h: int, max_side: int) -> tuple[int, int]:
    s = min(1.0, max_side / max(w, h))
    return max(2, int(w * s) // 2 * 2), max(2, int(h * s) // 2 * 2)


def _video_out(out, w: int, h: int, enc: Encoding, rate) -> av.VideoStream:
    vs = out.add_stream("libx264", rate=rate, options={"crf": str(enc.crf), "preset": enc.preset})
    vs.width, vs.height, vs.pix_fmt = w, h, "yuv420p"
    return vs


def cut_file(path: str, start_s: float, end_s: float, enc: Encoding = Encoding()) -> bytes:
    """[start_s, end_s] of the video file ``path`` (seconds from its first video frame, the
    index's ``t_rel``) as MP4 bytes: its frames re-encoded at their times, its first audio track
    (if any) as AAC, both starting at 0. SourceError when the file cannot be read or holds no
    frame in the interval."""
    try:
        inp = av.open(str(path))
    except (av.FFmpegError, OSError) as e:
        raise SourceError(path, f"cannot be opened ({e})") from None
    with inp:
        if not inp.streams.video:
            raise SourceError(path, "holds no video stream")
        vin = inp.streams.video[0]
        ain = inp.streams.audio[0] if inp.streams.audio else None
        origin = float(vin.start_time * vin.time_base) if vin.start_time is not None else 0.0
        t0, t1 = origin + start_s, origin + end_s
        inp.seek(max(0, int(t0 / vin.time_base)), stream=vin, backward=True)
        buf = io.BytesIO()
        with av.open(buf, "w", format="mp4") as out:
            w, h = _fit(vin.codec_context.width, vin.codec_context.height, enc.max_side)
            vs = _video_out(out, w, h, enc, vin.average_rate or 30)
            vs.codec_context.time_base = _MS
            audio = _AudioCut(out, ain, t0, t1) if ain is not None else None
            frames = 0
            for packet in inp.demux(*[s for s in (vin, ain) if s is not None]):
                for frame in _decoded(packet, path):
                    t = frame.time
                    if t is None:
                        continue
                    if packet.stream is ain:
                        audio.take(frame)
                    elif t0 - 1e-6 <= t <= t1 + 1e-6:
                        f = frame.reformat(width=w, height=h, format="yuv420p")
                        f.pts, f.time_base = round((t - t0) * 1000), _MS
                        out.mux(vs.encode(f))
                        frames += 1
                if packet.stream is vin and packet.pts is not None and float(packet.pts * vin.time_base) > t1 + 1 \
                        and (audio is None or audio.done):
                    break  # a second past the end (B-frames come out late): nothing more to take
            if frames == 0:
                raise SourceError(path, f"holds no frame in [{start_s:g}, {end_s:g}] s")
            out.mux(vs.encode(None))
            if audio is not None:
                audio.finish()
        return buf.getvalue()


def _decoded(packet, path):
    try:
        return packet.decode()
    except av.FFmpegError as e:
        raise SourceError(path, f"cannot be decoded ({e})") from None


class _AudioCut:
    """An audio track's samples in [t0, t1] (container seconds), trimmed to the sample, as AAC."""

    def __init__(self, out, ain, t0: float, t1: float):
        self.t0, self.t1 = t0, t1
        self.rate = ain.codec_context.sample_rate or 48000
        layout = "mono" if (ain.codec_context.channels or 1) == 1 else "stereo"
        self.resampler = av.AudioResampler(format="fltp", layout=layout, rate=self.rate)
        self.stream = out.add_stream("aac", rate=self.rate, layout=layout)
        self.stream.codec_context.time_base = Fraction(1, self.rate)
        self.out, self.layout, self.chunks, self.done = out, layout, [], False
        self.first: float | None = None

    def take(self, frame) -> None:
        t = frame.time
        for f in self.resampler.resample(frame):
            a = f.to_ndarray()  # channels x samples, float32
            start = t
            t += a.shape[1] / self.rate
            lo = max(0, int(round((self.t0 - start) * self.rate)))
            hi = min(a.shape[1], int(round((self.t1 - start) * self.rate)))
            if start > self.t1:
                self.done = True
            if hi > lo:
                if self.first is None:
                    self.first = max(0.0, start + lo / self.rate - self.t0)
                self.chunks.append(a[:, lo:hi])

    def finish(self) -> None:
        if not self.chunks:
            return
        samples = np.ascontiguousarray(np.concatenate(self.chunks, axis=1), dtype=np.float32)
        frame = av.AudioFrame.from_ndarray(samples, format="fltp", layout=self.layout)
        frame.sample_rate, frame.time_base = self.rate, Fraction(1, self.rate)
        frame.pts = round((self.first or 0.0) * self.rate)
        self.out.mux(self.stream.encode(frame))
        self.out.mux(self.stream.encode(None))


def frames_clip(frames, start_s: float, end_s: float, enc: Encoding = Encoding()) -> bytes:
    """MP4 bytes of [start_s, end_s] built from still frames: ``frames`` [(t, RGB array or JPEG
    path)] in time order (the first may be before ``start_s``: what showed then), each shown from
    its time until the next one's, ``FRAMES_FPS`` ticks per second. ValueError without frames."""
    if not frames:
        raise ValueError("a clip needs at least one frame")
    first = _rgb(frames[0][1])
    w, h = _fit(first.shape[1], first.shape[0], enc.max_side)
    buf = io.BytesIO()
    n = max(1, int(round((end_s - start_s) * FRAMES_FPS)))
    with av.open(buf, "w", format="mp4") as out:
        vs = _video_out(out, w, h, enc, FRAMES_FPS)
        k, shown, current = 0, None, None
        for i in range(n):
            t = start_s + i / FRAMES_FPS
            while k < len(frames) and frames[k][0] <= t + 1e-6:
                k += 1
            if k - 1 != current:  # a new frame is due: decode it once
                current = max(0, k - 1)
                rgb = first if current == 0 else _rgb(frames[current][1])
                shown = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(width=w, height=h, format="yuv420p")
            shown.pts = i
            out.mux(vs.encode(shown))
        out.mux(vs.encode(None))
    return buf.getvalue()


def _rgb(frame) -> np.ndarray:
    if isinstance(frame, np.ndarray):
        return frame
    from PIL import Image

    with Image.open(frame) as im:
        return np.asarray(im.convert("RGB"))
