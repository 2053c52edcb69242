"""What perception found, over HTTP: entities (with cursor pages), an entity's timeline and its
crop, last seen, and a moment's detections and OCR lines.

The same scopes as moments: a read token; a camera-limited token sees only its cameras (a
camera it names outside its limit is 403; an entity is in view when it was seen on one of its
cameras, and then only those cameras' sightings, times and crop are shown). An engine without
these reads answers 501.
"""
from __future__ import annotations

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import Response

from . import queries
from .auth import need
from .frames import jpeg_response
from .jsonify import entity_json, json_response, last_seen_json, perceived_json, timeline_json
from .tokens import Principal

router = APIRouter()


def _reads(request: Request):
    eng = request.app.state.engine
    if not hasattr(eng, "entities"):
        raise HTTPException(501, "this server's engine keeps no entities")
    return eng


def _lanes(request: Request):
    return request.app.state.lanes


@router.get("/api/entities", tags=["perception"])
async def entities(request: Request, camera: list[str] | None = Query(None), label: list[str] | None = Query(None),
                   t0: float | None = None, t1: float | None = None, as_of: float | None = None,
                   cursor: str | None = None, limit: int = 100, p: Principal = need("read")):
    """Entities seen on the cameras in [t0, t1] (overlap), of ``label``, as known at ``as_of``;
    by id, ``next_cursor`` for the next page."""
    queries.check_range(t0, t1, as_of)
    top = request.app.state.options.max_page
    if not 1 <= limit <= top:
        raise queries.BadQuery(f"limit must be in 1..{top}, got {limit}")
    after = queries.decode_cursor(cursor, (int,))
    cams = p.camera_scope(camera)
    eng = _reads(request)

    def work():
        got = eng.entities(label=label or None, camera=cams, time_range=(t0, t1) if t0 is not None or t1 is not None
                           else None, as_of=as_of, after=after[0] if after else None, limit=limit + 1)
        more = len(got) > limit
        got = got[:limit]
        return json_response({"items": [entity_json(e) for e in got],
                              "next_cursor": queries.encode_cursor((got[-1].entity_id,)) if more and got else None})

    return await _lanes(request).run("read", work, token_id=p.token_id)


@router.get("/api/entities/{entity_id}", tags=["perception"])
async def entity(request: Request, entity_id: int = Path(..., ge=0, le=queries.MAX_ID),
                 camera: list[str] | None = Query(None), as_of: float | None = None, p: Principal = need("read")):
    """An entity's timeline: its sightings on stored frames (boxes), tracks, look-alikes."""
    queries.check_range(None, None, as_of)
    cams = p.camera_scope(camera)
    eng = _reads(request)

    def work():
        line = eng.entity(entity_id, camera=cams, as_of=as_of)
        if line is None:
            raise HTTPException(404, f"no entity {entity_id} in view")
        return json_response(timeline_json(line))

    return await _lanes(request).run("read", work, token_id=p.token_id)


@router.get("/api/entities/{entity_id}/crop", tags=["perception"], response_class=Response,
            responses={200: {"content": {"image/jpeg": {}}}})
async def entity_crop(request: Request, entity_id: int = Path(..., ge=0, le=queries.MAX_ID), w: int | None = None,
                      p: Principal = need("read")):
    """An entity's representative crop (a JPEG), when it was cut on a camera the token sees."""
    _reads(request)

    def work():
        crop = request.app.state.backend.entity_crop(entity_id, p.camera_scope(None))
        if crop is None:
            raise HTTPException(404, f"entity {entity_id} has no crop in view")
        return jpeg_response(crop, w, request.app.state.thumbnails)

    return await _lanes(request).run("read", work, token_id=p.token_id)


@router.get("/api/last_seen", tags=["perception"])
async def last_seen(request: Request, q: str = Query(..., min_length=1, max_length=500),
                    camera: list[str] | None = Query(None), as_of: float | None = None, p: Principal = need("read")):
    """Where something matching ``q`` (a label, colour names, text read on it or on screen) was
    seen last: camera, time, frame and box (``found`` false when nothing matches)."""
    queries.check_range(None, None, as_of)
    cams = p.camera_scope(camera)
    eng = _reads(request)

    def work():
        return json_response(last_seen_json(eng.last_seen(q, camera=cams, as_of=as_of)))

    return await _lanes(request).run("read", work, token_id=p.token_id)


@router.get("/api/moments/{moment_id}/detections", tags=["perception"])
async def moment_detections(request: Request, moment_id: int = Path(..., ge=0, le=queries.MAX_ID),
                            p: Principal = need("read")):
    """A moment's detections and OCR lines (boxes in the frame's pixels as indexed, and
    normalised to [0, 1])."""
    eng = _reads(request)

    def work():
        m = request.app.state.backend.moment(moment_id)
        if m is None:
            raise HTTPException(404, f"no moment {moment_id}")
        if not p.sees(m.camera_id):
            raise HTTPException(403, f"moment {moment_id} belongs to a camera outside this token's limit")
        dets, lines = eng.perceived(moment_id)
        return json_response(perceived_json(m, dets, lines))

    return await _lanes(request).run("read", work, token_id=p.token_id)
