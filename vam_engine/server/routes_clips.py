"""Clips of any interval: ``GET /api/clips?camera=&t0=&t1=`` answers an MP4 (H.264, with AAC where
the source had sound) of [t0, t1] on the camera's axis (the engine's ``clip``: cut from the
source file while it is there, else built from the retained frames; ``X-Clip-Made-From`` says
which). Camera-scoped as frames are: a camera outside the token's limit is 404, as a camera
with nothing retained there is. Bounded by the engine (config ``clips``): a range longer than
``max_s`` is 400 naming the limit; more than ``max_encodes`` encodes at once get 429, and so do
more than a token's share of them (``service.clips_per_token``)."""
from __future__ import annotations

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ..ingest import ClipBusy, NoClip
from .auth import need
from .tokens import Principal

router = APIRouter()


@router.get("/api/clips", tags=["memory"], response_class=Response, responses={200: {"content": {"video/mp4": {}}}})
async def clip(request: Request, camera: str = Query(..., min_length=1, max_length=256), t0: float = Query(...),
               t1: float = Query(...), p: Principal = need("read")):
    """An MP4 of [t0, t1] (seconds on the camera's axis, as moments and events give them)."""
    if not p.sees(camera):
        raise HTTPException(404, f"no clip of camera {camera[:64]!r} in view of this token")
    fn = getattr(request.app.state.engine, "clip", None)
    if fn is None:
        raise HTTPException(501, "this server's engine makes no clips (Engine.clip is not available here)")
    shares = request.app.state.clip_shares
    shares.take(p.token_id)  # 429 over the token's share of the encodes
    try:
        made = await run_in_threadpool(fn, camera, t0, t1)
    except NoClip as e:
        raise HTTPException(404, str(e)) from None
    except ClipBusy as e:
        raise HTTPException(429, str(e), headers={"Retry-After": "2"}) from None
    finally:
        shares.give(p.token_id)
    return Response(made.data, media_type="video/mp4", headers={
        "Cache-Control": "private, max-age=3600", "X-Clip-Made-From": made.made_from,
        "Content-Disposition": 'inline; filename="clip.mp4"'})
