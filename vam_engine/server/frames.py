"""Frames as HTTP responses: a stored JPEG as it is, or a thumbnail ``w`` pixels wide (made once,
kept in a bounded LRU cache). The routes find the frame (by moment or alert id, never by a
client's path: backend.py) and check the token may see its camera; this only serves it."""
from __future__ import annotations

import io
import threading
from collections import OrderedDict

from fastapi import HTTPException
from fastapi.responses import FileResponse, Response

from .backend import FrameData
from .queries import BadQuery

_thumbs: OrderedDict = OrderedDict()  # (FrameData.cache_key, width) -> JPEG bytes
_thumbs_lock = threading.Lock()
_THUMBS_MAX_BYTES = 64 << 20  # the thumbnail cache's size at most (least recently used go first)
_thumbs_bytes = [0]


def jpeg_response(frame: FrameData, w: int | None) -> Response:
    """The frame's JPEG, or a thumbnail ``w`` pixels wide (cached); 404 when its file is gone."""
    if frame.path is None and frame.data is None:
        raise HTTPException(404, "the frame's file is gone (retention or a deletion removed it)")
    headers = {"Cache-Control": "private, max-age=3600"}
    if w is None:
        if frame.path is not None:
            return FileResponse(frame.path, media_type="image/jpeg", headers=headers)
        return Response(frame.data, media_type="image/jpeg", headers=headers)
    if not 16 <= w <= 2048:
        raise BadQuery(f"w (thumbnail width) must be in 16..2048, got {w}")
    k = (frame.cache_key, w)
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
    return Response(data, media_type="image/jpeg", headers=headers)
