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


class ThumbnailCache:
    """Thumbnails made from stored frames, (FrameData.cache_key, width) -> JPEG bytes, at most
    ``max_bytes`` in all (the least recently used go first; config ``service.thumbnail_cache_mb``).
    One per server: the HTTP routes and the MCP tools it serves share it."""

    def __init__(self, max_bytes: int = 64 << 20):
        if not (isinstance(max_bytes, int) and not isinstance(max_bytes, bool) and max_bytes >= 0):
            raise ValueError(f"ThumbnailCache: max_bytes must be an integer >= 0, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self._items: OrderedDict = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key) -> bytes | None:
        with self._lock:
            data = self._items.get(key)
            if data is not None:
                self._items.move_to_end(key)
            return data

    def put(self, key, data: bytes) -> None:
        with self._lock:
            if key not in self._items:
                self._items[key] = data
                self._bytes += len(data)
            while self._bytes > self.max_bytes:
                self._bytes -= len(self._items.popitem(last=False)[1])

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)


def check_width(w: int) -> int:
    if not 16 <= w <= 2048:
        raise BadQuery(f"w (thumbnail width) must be in 16..2048, got {w}")
    return w


def frame_jpeg(frame: FrameData, w: int | None = None, cache: ThumbnailCache | None = None) -> bytes:
    """The frame's JPEG, or a thumbnail ``w`` pixels wide (kept in ``cache`` when one is given).
    FrameGone when its file is gone; BadQuery for a width outside 16..2048."""
    if frame.path is None and frame.data is None:
        raise FrameGone("the frame's file is gone (retention or a deletion removed it)")
    if w is None:
        return frame.data if frame.data is not None else frame.path.read_bytes()
    k = (frame.cache_key, check_width(w))
    data = cache.get(k) if cache is not None else None
    if data is None:
        from PIL import Image

        with Image.open(frame.path if frame.path is not None else io.BytesIO(frame.data)) as im:
            im.draft("RGB", (w, w))  # JPEG: decode at a fraction of the size, much faster
            im = im.convert("RGB")
            im.thumbnail((w, w * 4))
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=80)
            data = buf.getvalue()
        if cache is not None:
            cache.put(k, data)
    return data
