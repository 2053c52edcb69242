"""Images and clips as data URIs for servers that take them inline (OpenAI-style chat APIs).

Servers cap both the pixel size and the byte size of an image: a frame is resized to fit a
square, then JPEG quality is lowered, then the frame is shrunk further, until it fits.
"""
from __future__ import annotations

import base64
import io
from fractions import Fraction

import numpy as np
from PIL import Image as PILImage

from .base import Clip, Image

# Tried in order before shrinking the frame: quality 30 still reads fine for a model, and a
# smaller frame loses less than a blockier one below that.
_QUALITIES = (90, 80, 70, 60, 50, 40, 30)
_MIN_SIDE = 16  # smaller than this is no longer a picture worth sending


def _rgb_array(img: Image, what: str = "image") -> np.ndarray:
    try:
        a = img.array()
    except Exception as e:  # a missing or unreadable path
        raise ValueError(f"{what}: cannot read {img.data!r}: {e}") from None
    a = np.asarray(a)
    if a.ndim == 2:  # gray: the contract says RGB, but a gray frame has one obvious meaning
        a = np.repeat(a[:, :, None], 3, axis=2)
    if a.ndim != 3 or a.shape[2] != 3 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"{what}: expected an H x W x 3 array, got shape {a.shape}")
    if a.dtype != np.uint8:
        raise ValueError(f"{what}: expected uint8 pixels, got {a.dtype}")
    return np.ascontiguousarray(a)


def _fit(im: PILImage.Image, max_side: int) -> PILImage.Image:
    """Resize (keeping the aspect ratio) so both sides are at most max_side; never enlarges."""
    w, h = im.size
    scale = max_side / max(w, h)
    if scale >= 1:
        return im
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return im.resize(size, PILImage.LANCZOS)


def to_jpeg_bytes(img: Image, max_side: int = 1280, max_bytes: int = 5 << 20) -> bytes:
    """JPEG bytes of ``img`` at most max_side x max_side pixels and at most max_bytes long."""
    if max_side < _MIN_SIDE:
        raise ValueError(f"max_side must be at least {_MIN_SIDE}, got {max_side}")
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be positive, got {max_bytes}")
    im = _fit(PILImage.fromarray(_rgb_array(img)), max_side)
    while True:
        for q in _QUALITIES:
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=q)
            if buf.tell() <= max_bytes:
                return buf.getvalue()
        w, h = im.size
        if max(w, h) <= _MIN_SIDE:
            raise ValueError(f"image of {w}x{h} pixels cannot be JPEG-encoded under {max_bytes} bytes "
                             f"(smallest attempt: {buf.tell()} bytes at quality {_QUALITIES[-1]})")
        # Bytes grow roughly with the pixel count: aim a little under the limit, and shrink
        # by at least a quarter so the loop ends quickly.
        ratio = min(0.75, 0.9 * (max_bytes / buf.tell()) ** 0.5)
        im = _fit(im, max(_MIN_SIDE, int(max(w, h) * ratio)))


def to_jpeg_data_uri(img: Image, max_side: int = 1280, max_bytes: int = 5 << 20) -> str:
    """A ``data:image/jpeg;base64,...`` URI of ``img`` within max_side x max_side pixels.

    ``max_bytes`` bounds the JPEG itself; the base64 text is about 4/3 of that. Raises ValueError
    when the image is unreadable or cannot be made small enough."""
    data = to_jpeg_bytes(img, max_side, max_bytes)
    return "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii")


def _pick_codec() -> str:
    import av

    # libx264 is what servers decode best; PyAV wheels built without GPL codecs lack it.
    for name in ("libx264", "mpeg4"):
        try:
            av.codec.Codec(name, "w")
            return name
        except Exception:
            continue
    raise ValueError("PyAV has neither the libx264 nor the mpeg4 encoder: cannot encode a clip")


def clip_to_mp4_bytes(clip: Clip, fps: float | None = None, max_side: int = 1280) -> bytes:
    """The clip's frames as an mp4 (H.264, or MPEG-4 part 2 without libx264), in memory.

    Every frame is fitted to the first frame's size (at most max_side, both sides even, as
    yuv420p needs). Frames keep their own times as presentation times, so uneven spacing
    survives; ``fps`` only sets the nominal rate (default: the clip's mean rate)."""
    import av

    if not isinstance(clip, Clip):
        raise TypeError(f"expected a Clip, got {type(clip).__name__}")
    times = [float(t) for t in clip.times]
    if any(b <= a for a, b in zip(times, times[1:])):
        raise ValueError(f"clip times must increase strictly, got {times}")
    if fps is None:
        fps = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 1.0
    if not fps > 0:
        raise ValueError(f"fps must be positive, got {fps}")

    first = _fit(PILImage.fromarray(_rgb_array(clip.frames[0], "clip frame 0")), max_side)
    w, h = (max(2, first.size[0] // 2 * 2), max(2, first.size[1] // 2 * 2))
    codec = _pick_codec()
    # Milliseconds as the time base: exact enough for frame times, and within the 16-bit limit
    # the MPEG-4 encoder puts on its time base.
    time_base = Fraction(1, 1000)
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4") as out:
        stream = out.add_stream(codec, rate=Fraction(fps).limit_denominator(1000))
        stream.width, stream.height = w, h
        stream.pix_fmt = "yuv420p"
        stream.time_base = time_base
        stream.codec_context.time_base = time_base
        for i, (frame, t) in enumerate(zip(clip.frames, times)):
            im = PILImage.fromarray(_rgb_array(frame, f"clip frame {i}"))
            if im.size != (w, h):
                im = im.resize((w, h), PILImage.BICUBIC)
            vf = av.VideoFrame.from_ndarray(np.asarray(im), format="rgb24")
            vf.pts = round((t - times[0]) * 1000)
            vf.time_base = time_base
            for packet in stream.encode(vf):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


def clip_to_mp4_data_uri(clip: Clip, fps: float | None = None, max_side: int = 1280) -> str:
    """A ``data:video/mp4;base64,...`` URI of the clip (see ``clip_to_mp4_bytes``)."""
    data = clip_to_mp4_bytes(clip, fps, max_side)
    return "data:video/mp4;base64," + base64.b64encode(data).decode("ascii")
