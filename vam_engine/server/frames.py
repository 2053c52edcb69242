"""Frames as HTTP responses: a stored JPEG as it is, or a thumbnail ``w`` pixels wide (images.py
makes and caches it). The routes find the frame (by moment or alert id, never by a client's
path: backend.py) and check the token may see its camera; this only serves it."""
from __future__ import annotations

from fastapi import HTTPException
from fastapi.responses import FileResponse, Response

from .backend import FrameData
from .images import FrameGone, ThumbnailCache, frame_jpeg


def jpeg_response(frame: FrameData, w: int | None, thumbnails: ThumbnailCache) -> Response:
    """The frame's JPEG, or a thumbnail ``w`` pixels wide (kept in ``thumbnails``, the server's
    cache); 404 when its file is gone."""
    headers = {"Cache-Control": "private, max-age=3600"}
    if w is None and frame.path is not None:
        return FileResponse(frame.path, media_type="image/jpeg", headers=headers)
    try:
        data = frame_jpeg(frame, w, thumbnails)
    except FrameGone as e:
        raise HTTPException(404, str(e)) from None
    return Response(data, media_type="image/jpeg", headers=headers)
