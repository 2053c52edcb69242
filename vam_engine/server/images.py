"""Pictures in and out of the service, without the web stack (the HTTP routes and the MCP tools
both use these): a client's query image decoded within a pixel bound, and a stored frame's JPEG
as it is or as a thumbnail ``w`` pixels wide (made once, kept in a bounded LRU cache)."""
from __future__ import annotations

import io
import threading
from collections import OrderedDict

from .backend import FrameData
from .queries import BadQuery


class ImageTooLarge(ValueError):
    """An uploaded image has more pixels than the server takes (the API answers 413)."""


class FrameGone(LookupError):
    """A frame's file is gone: retention or a deletion removed it (the API answers 404)."""


def decode_rgb(data: bytes, max_pixels: int):
    """``data`` (an encoded image) as an H x W x 3 uint8 array; its size is read from its header
    before any pixel is decoded. ImageTooLarge past ``max_pixels``; BadQuery when unreadable."""
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.width * im.height > max_pixels:
                raise ImageTooLarge(f"the image is {im.width}x{im.height} pixels, over this server's limit of "
                                    f"{max_pixels} pixels")
            return np.asarray(im.convert("RGB"))
    except Image.DecompressionBombError:  # over twice PIL's own bound: refused before the check above
        raise ImageTooLarge(f"the image is over this server's limit of {max_pixels} pixels") from None
    except (OSError, UnidentifiedImageError, ValueError) as e:
        if isinstance(e, ImageTooLarge):
            raise
        raise BadQuery(f"image: not a readable image ({type(e).__name__})") from None


_thumbs: OrderedDict = OrderedDict()  # (FrameData.cache_key, width) -> JPEG bytes
_thumbs_lock = threading.Lock()
_THUMBS_MAX_BYTES = 64 << 20  # the thumbnail cache's size at most (least recently used go first)
_thumbs_bytes = [0]


def check_width(w: int) -> int:
    if not 16 <= w <= 2048:
        raise BadQuery(f"w (thumbnail width) must be in 16..2048, got {w}")
    return w


def frame_jpeg(frame: FrameData, w: int | None = None) -> bytes:
    """The frame's JPEG, or a thumbnail ``w`` pixels wide (cached). FrameGone when its file is
    gone; BadQuery for a width outside 16..2048."""
    if frame.path is None and frame.data is None:
        raise FrameGone("the frame's file is gone (retention or a deletion removed it)")
    if w is None:
        return frame.data if frame.data is not None else frame.path.read_bytes()
    k = (frame.cache_key, check_width(w))
    with _thumbs_lock:
        data = _thumbs.get(k)
        if data is not None:
            _thumbs.move_to_end(k)
    if data is None:
        from PIL import Image

        with Image.open(frame.path if frame.path is not None else io.BytesIO(frame.data)) as im:
            im.draft("RGB", (w, w))  # JPEG: decode at a fraction of the size, much faster
            im = im.convert("RGB")
            im.thumbnail((w, w * 4))
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=80)
            data = buf.getvalue()
        with _thumbs_lock:
            if k not in _thumbs:
                _thumbs[k] = data
                _thumbs_bytes[0] += len(data)
            while _thumbs_bytes[0] > _THUMBS_MAX_BYTES:
                _thumbs_bytes[0] -= len(_thumbs.popitem(last=False)[1])
    return data
