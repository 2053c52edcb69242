"""The memory's endpoints: moments, events, transcripts, frames, search, ask (JSON or SSE),
summarize, delete.

Every camera a request names is checked against its token's camera limit (403 when outside);
a request naming none gets the token's cameras. Frames are served by moment id only, and the
file served must lie under the store's ``frames/`` directory whatever the row says.
"""
from __future__ import annotations

import asyncio
import json
import threading
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator
from starlette.concurrency import run_in_threadpool

from ..errors import VamError
from ..ingest import camera_list
from ..memory import MAX_CORNERS
from . import model_tap, queries
from .auth import need
from .frames import jpeg_response
from .images import ImageTooLarge, decode_rgb
from .jsonify import (answer_json, event_json, evidence_json, json_response, moment_json, partial_json, summary_json,
                      transcript_json)
from .sse import sse_event
from .tokens import Principal

router = APIRouter()

Camera = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Cameras = Annotated[list[Camera], Field(max_length=1000)]


class RequestBody(BaseModel):
    """A JSON body: no key beyond its fields; ``cameras`` one id or a list."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("cameras", mode="before", check_fields=False)
    @classmethod
    def _one_or_many(cls, v):
        return camera_list(v)


Point = Annotated[list[float], Field(min_length=2, max_length=2)]


class SearchBody(RequestBody):
    text: str | None = Field(None, min_length=1, max_length=2000)
    top_k: int = Field(10, ge=1, le=200)
    cameras: Cameras | None = None
    t0: float | None = None
    t1: float | None = None
    as_of: float | None = None
    # None: every source but speech, and speech when the store holds transcripts
    sources: list[Literal["frame", "event", "summary", "ocr", "object", "speech"]] | None = Field(
        None, min_length=1, max_length=6)
    labels: list[Annotated[str, StringConstraints(min_length=1, max_length=64)]] | None = Field(None, max_length=100)
    # where the hits were taken (their moments' poses): a point and a radius in metres, a region
    # (a box [x0, y0, x1, y1] or a polygon [[x, y], ...]), a map frame
    near: Point | None = None
    radius: float | None = Field(None, gt=0)
    region: list[float] | list[Point] | None = Field(None, min_length=3, max_length=MAX_CORNERS)
    map_frame: str | None = Field(None, min_length=1, max_length=64)


class AskBody(RequestBody):
    question: str = Field(..., min_length=1, max_length=4000)
    cameras: Cameras | None = None
    as_of: float | None = None
    mode: Literal["auto", "two_phase", "agentic"] = "auto"
    max_turns: int = Field(6, ge=1, le=20)


class SummarizeBody(RequestBody):
    t0: float
    t1: float
    granularity_s: float = Field(60.0, gt=0, le=86400)
    prompt: str = Field(..., min_length=1, max_length=4000)
    cameras: Cameras | None = None
    structure: str | None = Field(None, max_length=200)


class DeleteBody(RequestBody):
    cameras: Cameras | None = None
    t0: float | None = None
    t1: float | None = None


def _engine(request: Request):
    return request.app.state.engine


def _limit(request: Request, limit: int) -> int:
    top = request.app.state.options.max_page
    if not 1 <= limit <= top:
        raise queries.BadQuery(f"limit must be in 1..{top}, got {limit}")
    return limit


# -- moments, events, frames -----------------------------------------------------------------------
def _lanes(request: Request):
    return request.app.state.lanes


@router.get("/api/moments", tags=["memory"])
async def moments(request: Request, camera: list[str] | None = Query(None), t0: float | None = None,
                  t1: float | None = None, as_of: float | None = None, cursor: str | None = None, limit: int = 200,
                  near: str | None = None, radius: float | None = None, region: str | None = None,
                  map_frame: str | None = None, p: Principal = need("read")):
    """Retained frames by camera and time (camera axis), ``as_of`` bound, keyset pages, each
    with its pose. Where they were taken: ``near=x,y`` with ``radius`` (metres), ``region``
    (a box ``x0,y0,x1,y1`` or a polygon ``x,y;x,y;x,y``), ``map_frame``."""
    place = _query_place(request, near, radius, region, map_frame)
    return await _page(request, "moments", moment_json, p.camera_scope(camera), t0, t1, as_of, cursor, limit, place,
                       token_id=p.token_id)


@router.get("/api/events", tags=["memory"])
async def events(request: Request, camera: list[str] | None = Query(None), t0: float | None = None,
                 t1: float | None = None, as_of: float | None = None, cursor: str | None = None, limit: int = 200,
                 near: str | None = None, radius: float | None = None, region: str | None = None,
                 map_frame: str | None = None, p: Principal = need("read")):
    """Events overlapping [t0, t1] that end by ``as_of``, with their documents and keyframes;
    ``near``/``radius``/``region``/``map_frame`` as for moments: events with a moment there."""
    place = _query_place(request, near, radius, region, map_frame)
    return await _page(request, "events", event_json, p.camera_scope(camera), t0, t1, as_of, cursor, limit, place,
                       token_id=p.token_id)


def _numbers(name: str, text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise queries.BadQuery(f"{name} must be comma-separated numbers, got {text[:60]!r}") from None


def _query_place(request: Request, near, radius, region, map_frame):
    """The place filter of query parameters: ``near=x,y``, ``region=x0,y0,x1,y1`` (a box) or
    ``x,y;x,y;...`` (a polygon); None when none is given. BadQuery (422) naming the bad one."""
    pt = None if near is None else _numbers("near", near)
    reg = None
    if region is not None:
        reg = [_numbers("region", c) for c in region.split(";")] if ";" in region else _numbers("region", region)
    return _place(request, pt, radius, reg, map_frame)


def _place(request: Request, near, radius, region, map_frame):
    return queries.place_filter(near, radius, region, map_frame)


@router.get("/api/transcripts", tags=["memory"])
async def transcripts(request: Request, camera: list[str] | None = Query(None), t0: float | None = None,
                      t1: float | None = None, as_of: float | None = None, cursor: str | None = None,
                      limit: int = 200, p: Principal = need("read")):
    """What was said: transcript segments (camera, interval, text, language, confidence)
    overlapping [t0, t1] that end by ``as_of``, by camera and start time, keyset pages."""
    return await _page(request, "transcripts", transcript_json, p.camera_scope(camera), t0, t1, as_of, cursor, limit,
                       token_id=p.token_id)


async def _page(request: Request, kind: str, to_json, cams, t0, t1, as_of, cursor, limit, place=None, *,
                token_id: str | None = None):
    backend, n = request.app.state.backend, _limit(request, limit)
    extra = {} if place is None else {"place": place}

    def work():
        page = backend.page(kind, cameras=cams, t0=t0, t1=t1, as_of=as_of, cursor=cursor, limit=n, **extra)
        return json_response({"items": [to_json(x) for x in page.items], "next_cursor": page.next_cursor,
                              **partial_json(page)})

    return await _lanes(request).run("read", work, token_id=token_id)


@router.get("/api/frames/{moment_id}", tags=["memory"], response_class=Response,
            responses={200: {"content": {"image/jpeg": {}}}})
async def frame(request: Request, moment_id: int = Path(..., ge=0, le=queries.MAX_ID), w: int | None = None,
                p: Principal = need("read")):
    """A moment's JPEG (``w``: a thumbnail that wide). The client names a moment, never a file."""
    backend = request.app.state.backend

    def work():
        f = backend.moment_frame(moment_id)
        if f is None:
            raise HTTPException(404, f"no moment {moment_id}")
        if not p.sees(f.camera_id):
            raise HTTPException(403, f"moment {moment_id} belongs to a camera outside this token's limit")
        return jpeg_response(f, w, request.app.state.thumbnails)

    return await _lanes(request).run("read", work, token_id=p.token_id)


# -- search --------------------------------------------------------------------------------------------
def _validation(e: ValidationError, where: str = "body"):
    return RequestValidationError([{**err, "loc": (where, *err["loc"])} for err in e.errors()])


async def _search_request(request: Request) -> tuple[SearchBody, object]:
    """The query as JSON, or as multipart with an ``image`` file and the same fields."""
    ctype = request.headers.get("content-type", "")
    image = None
    if ctype.startswith("multipart/form-data"):
        limit = request.app.state.options.max_upload_bytes
        fields: dict = {}
        # the form's spooled files are closed on the way out, not left to the garbage collector
        async with request.form(max_files=1, max_fields=20, max_part_size=limit) as form:
            for k, v in form.multi_items():
                if k == "image":
                    if isinstance(v, str):
                        raise RequestValidationError([{"loc": ("body", "image"), "msg": "must be a file upload",
                                                       "type": "value_error"}])
                    image = await v.read()
                elif k in ("cameras", "sources", "labels"):
                    fields.setdefault(k, []).extend(x for x in v.split(",") if x)
                elif k in ("near", "region"):  # JSON, as in a JSON body: [x, y]; [x0, y0, x1, y1] or [[x, y], ...]
                    try:
                        fields[k] = json.loads(v)
                    except ValueError:
                        raise RequestValidationError([{"loc": ("body", k), "msg": "must be JSON (a list of numbers "
                                                       "or of [x, y] points)", "type": "value_error"}]) from None
                else:
                    fields[k] = v
        raw = fields
    else:
        try:
            raw = json.loads(await request.body() or b"null")
        except (ValueError, UnicodeDecodeError) as e:
            raise RequestValidationError([{"loc": ("body",), "msg": f"not valid JSON ({e})",
                                           "type": "json_invalid"}]) from None
        if not isinstance(raw, dict):
            raise RequestValidationError([{"loc": ("body",), "msg": "must be a JSON object", "type": "dict_type"}])
    try:
        body = SearchBody.model_validate(raw)
    except ValidationError as e:
        raise _validation(e) from None
    if body.text is None and image is None:
        raise RequestValidationError([{"loc": ("body", "text"), "msg": "give text, or upload an image (multipart "
                                                                        "field 'image')", "type": "missing"}])
    return body, image  # the image's bytes: decoded on the search lane's thread, not on the loop


def _decode_image(data: bytes, max_pixels: int):
    """The uploaded image as RGB (images.decode_rgb): 413 past the pixel bound, 422 unreadable."""
    try:
        return decode_rgb(data, max_pixels)
    except ImageTooLarge as e:
        raise HTTPException(413, str(e)) from None
    except queries.BadQuery as e:
        raise RequestValidationError([{"loc": ("body", "image"), "msg": str(e).removeprefix("image: "),
                                       "type": "value_error"}]) from None


@router.post("/api/search", tags=["memory"], openapi_extra={"requestBody": {"content": {
    "application/json": {"schema": SearchBody.model_json_schema()},
    "multipart/form-data": {"schema": {"type": "object", "properties": {
        "image": {"type": "string", "format": "binary"}, "text": {"type": "string"},
        "top_k": {"type": "integer"}, "cameras": {"type": "string", "description": "comma-separated"},
        "t0": {"type": "number"}, "t1": {"type": "number"}, "as_of": {"type": "number"},
        "sources": {"type": "string", "description": "comma-separated"}}}}}}})
async def search(request: Request, p: Principal = need("read")):
    """Evidence for a text query (JSON) or an uploaded image (multipart), fused over frames,
    events, summaries and speech (a speech hit carries what was said in ``text``); frames as URLs."""
    import time

    body, image = await _search_request(request)
    queries.check_range(body.t0, body.t1, body.as_of)
    place = _place(request, body.near, body.radius, body.region, body.map_frame)
    where = {} if place is None else {"near": body.near, "radius": body.radius, "region": body.region,
                                      "map_frame": body.map_frame}
    cams = p.camera_scope(body.cameras)
    eng = _engine(request)
    tr = (body.t0, body.t1) if body.t0 is not None or body.t1 is not None else None

    metrics = request.app.state.metrics
    max_pixels = request.app.state.options.max_image_pixels

    def run():
        pixels = _decode_image(image, max_pixels) if image is not None else None
        t0 = time.perf_counter()
        try:
            extra = {"labels": body.labels} if body.labels else {}  # (an engine without perception has no labels)
            res = eng.search(text=body.text, image=pixels, top_k=body.top_k, time_range=tr, cameras=cams,
                             sources=None if body.sources is None else tuple(body.sources), as_of=body.as_of,
                             **where, **extra)
        finally:
            metrics.search.observe(time.perf_counter() - t0)
        # a summary over every camera ("*") may describe cameras outside a limited token's view
        return json_response({"evidence": [evidence_json(e) for e in res.evidence if p.sees(e.camera_id)],
                              "notes": list(res.notes), **partial_json(res)})

    return await _lanes(request).run("search", run, token_id=p.token_id)


# -- ask -----------------------------------------------------------------------------------------------
@router.post("/api/ask", tags=["answers"])
async def ask(request: Request, body: AskBody, p: Principal = need("read")):
    """An answer with cited intervals. With ``Accept: text/event-stream``: SSE events ``stage``
    (each model call and reply as it happens), then ``answer`` (or ``error``)."""
    queries.check_range(None, None, body.as_of)
    cams = p.camera_scope(body.cameras)
    eng = _engine(request)
    release = ask_slot(request.app.state, p)

    def run(listener=None):
        try:
            with model_tap.listening(listener):
                return eng.ask(body.question, as_of=body.as_of, camera=cams, mode=body.mode,
                               max_turns=body.max_turns, session=p.history(), read_only=not p.allows("write"))
        finally:
            release()

    if "text/event-stream" not in request.headers.get("accept", ""):
        return answer_json(await run_in_threadpool(run))
    return StreamingResponse(_ask_events(run, release), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def ask_slot(state, p: Principal):
    """One of the questions answered at once (429 when the server answers ``max_asks`` already,
    or the token its share, ``service.asks_per_token``); returns what gives it back."""
    state.ask_shares.take(p.token_id)
    if not state.asks.acquire(blocking=False):
        state.ask_shares.give(p.token_id)
        raise HTTPException(429, "too many questions are being answered; retry shortly", headers={"Retry-After": "1"})

    def release():
        state.asks.release()
        state.ask_shares.give(p.token_id)
    return release


async def _ask_events(run, release):
    """``run`` releases the ask's slot when it ends; ``release`` is for a stream that ends (the
    client left) before ``run`` started."""
    loop = asyncio.get_running_loop()
    q: asyncio.Queue = asyncio.Queue()

    def listener(kind, data):
        loop.call_soon_threadsafe(q.put_nowait, ("stage", {"kind": kind, **data}))

    def work():
        try:
            out = ("answer", answer_json(run(listener)))
        except VamError as e:
            out = ("error", {"detail": str(e), "status": 400})
        except Exception as e:  # noqa: BLE001 - the stream says what failed instead of hanging
            out = ("error", {"detail": f"{type(e).__name__}: {e}", "status": 500})
        loop.call_soon_threadsafe(q.put_nowait, out)

    started = False
    try:
        yield sse_event({"kind": "started"}, event="stage")
        threading.Thread(target=work, name="vam-ask-sse", daemon=True).start()
        started = True
    finally:
        if not started:
            release()
    while True:
        kind, data = await q.get()
        yield sse_event(data, event=kind)
        if kind != "stage":
            return


# -- summarize, delete ------------------------------------------------------------------------------
@router.post("/api/summarize", tags=["answers"])
async def summarize(request: Request, body: SummarizeBody, p: Principal = need("write")):
    """Write searchable summary documents, one per camera per window of ``granularity_s``."""
    cams = p.camera_scope(body.cameras)
    eng = _engine(request)
    state = request.app.state
    slots = state.summaries
    state.summary_shares.take(p.token_id)  # 429 over the token's share (service.summaries_per_token)
    if not slots.acquire(blocking=False):  # each call runs many model calls: a few at once
        state.summary_shares.give(p.token_id)
        raise HTTPException(429, "too many summaries are being written; retry shortly", headers={"Retry-After": "5"})
    try:
        docs = await run_in_threadpool(eng.summarize, (body.t0, body.t1), body.granularity_s, body.prompt,
                                       cameras=cams, structure=body.structure)
    finally:
        slots.release()
        state.summary_shares.give(p.token_id)
    return {"summaries": [summary_json(d) for d in docs]}


@router.post("/api/delete", tags=["memory"])
async def delete(request: Request, body: DeleteBody, p: Principal = need("admin")):
    """Remove the moments (rows, frames, vectors), events and summaries of cameras / a range."""
    queries.check_range(body.t0, body.t1, None)
    cams = p.camera_scope(body.cameras)
    tr = (body.t0, body.t1) if body.t0 is not None or body.t1 is not None else None
    out = await run_in_threadpool(_engine(request).delete, cameras=cams, time_range=tr)
    return {"moments": out.moments, "events": out.events, "summaries": out.summaries, "vectors": out.vectors,
            "cameras": list(out.cameras)}
