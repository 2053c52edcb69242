"""Live endpoints: cameras (added and removed at run time), monitors, alerts (JSON, an SSE
stream resumable with Last-Event-ID) and the WebSocket carrying alerts and camera status.

They call the engine's live API (``add_camera``/``remove_camera``/``status``) and its monitors
(``watch``/``monitors``/``unwatch``/``alerts``/``subscribe_alerts``); an engine without one of
them answers 501 saying so. A camera-limited token sees only monitors entirely within its
cameras and only alerts of its cameras.

The WebSocket authenticates with the ``Authorization`` header, or - browsers cannot set headers
on a WebSocket - with a first message ``{"type": "auth", "token": "..."}`` within 10 s (a token
in the URL would land in access logs).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from starlette.concurrency import run_in_threadpool

from ..ingest import camera_list
from .auth import authenticate, bearer, need
from .frames import jpeg_response
from .jsonify import alert_json, gap_json, partial_json, status_json
from .ownership import QuotaExceeded, check_monitor_share, monitor_visible
from .queries import MAX_ID, BadQuery, check_range
from .routes_sessions import SessionSocket
from .sse import SSE_KEEPALIVE, sse_event
from .tokens import Principal

router = APIRouter()
_CAMERA_SCHEMES = ("rtsp://", "rtsps://", "rtmp://", "rtmps://", "http://", "https://")


def _engine(request):
    return request.app.state.engine


def _backend(request):
    return request.app.state.backend


def _api(engine, name: str, what: str):
    fn = getattr(engine, name, None)
    if fn is None:
        raise HTTPException(501, f"this engine has no {what} (Engine.{name} is not available in this build)")
    return fn


class CameraBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    camera_id: str = Field(..., min_length=1, max_length=256)
    url: str = Field(..., min_length=1, max_length=4096)
    fps: float | None = Field(None, gt=0, le=120)
    realtime: bool = False
    stall_s: float = Field(20.0, gt=0, le=3600)
    max_retries: int | None = Field(None, ge=0, le=1_000_000)
    gate: dict[str, float] | None = Field(None, max_length=64)


class MonitorBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    condition: str = Field(..., min_length=1, max_length=2000)
    cameras: list[Annotated[str, StringConstraints(min_length=1, max_length=256)]] | None = Field(None, max_length=1000)
    mode: str = "once"
    min_confidence: float = Field(0.6, ge=0, le=1)
    every_s: float = Field(2.0, gt=0, le=3600)
    frames: int = Field(4, ge=1, le=16)
    repeat_gap_s: float = Field(3.0, ge=0, le=86400)

    @field_validator("cameras", mode="before")
    @classmethod
    def _one_or_many(cls, v):
        return camera_list(v)


# -- cameras -------------------------------------------------------------------------------------------
def _statuses(engine) -> dict:
    fn = getattr(engine, "status", None)
    return {s.camera_id: status_json(s) for s in fn()} if fn is not None else {}


@router.get("/api/cameras", tags=["cameras"])
def cameras(request: Request, p: Principal = need("read")):
    """Every camera the store or the running ingest knows: extent, events, live status."""
    eng = _engine(request)
    stats = _backend(request).store_stats()
    ext, evs = stats.extents, stats.events
    live = _statuses(eng)
    out = []
    for cam in sorted(set(ext) | set(live)):
        if not p.sees(cam):
            continue
        e = ext.get(cam, {"moments": 0, "t_first": None, "t_last": None, "absolute": False})
        out.append({"camera_id": cam, **e, "events": evs.get(cam, 0), "status": live.get(cam)})
    return {"cameras": out, **partial_json(stats)}


@router.post("/api/cameras", tags=["cameras"], status_code=201)
async def add_camera(request: Request, body: CameraBody, p: Principal = need("write")):
    """Start ingesting a live source (rtsp/rtmp/http/device/file) while the others run. A write
    token may add camera streams (rtsp, rtsps, rtmp, rtmps, http, https); a path on this
    machine (a file, /dev/videoN) or a raw udp/tcp/srt socket needs an admin token."""
    p.camera_scope([body.camera_id])
    if not body.url.lower().startswith(_CAMERA_SCHEMES) and not p.allows("admin"):
        raise HTTPException(403, "a local file, capture device or raw socket source needs an admin token; "
                                 "a write token may add rtsp/rtmp/http(s) camera streams")
    fn = _api(_engine(request), "add_camera", "live cameras")
    owned = request.app.state.owned
    owned.claim("camera", p.token_id, body.camera_id)  # 429 when the token holds its share already
    try:
        st = await run_in_threadpool(lambda: fn(body.camera_id, body.url, fps=body.fps, realtime=body.realtime,
                                                stall_s=body.stall_s, max_retries=body.max_retries, gate=body.gate))
    except BaseException:
        owned.release("camera", body.camera_id)
        raise
    return status_json(st)


@router.delete("/api/cameras/{camera_id}", tags=["cameras"])
async def remove_camera(request: Request, camera_id: str, p: Principal = need("write")):
    """Stop a live camera's ingest (what it committed stays)."""
    p.camera_scope([camera_id])
    eng = _engine(request)
    fn = _api(eng, "remove_camera", "live cameras")
    if camera_id not in _statuses(eng):
        raise HTTPException(404, f"no live camera {camera_id!r}")
    await run_in_threadpool(fn, camera_id)
    request.app.state.owned.release("camera", camera_id)
    return {"removed": camera_id}


@router.get("/api/cameras/{camera_id}/status", tags=["cameras"])
def camera_status(request: Request, camera_id: str, p: Principal = need("read")):
    p.camera_scope([camera_id])
    eng = _engine(request)
    _api(eng, "status", "live cameras")
    st = _statuses(eng).get(camera_id)
    if st is None:
        raise HTTPException(404, f"no live camera {camera_id!r}")
    return st


@router.get("/api/cameras/{camera_id}/gaps", tags=["cameras"])
def camera_gaps(request: Request, camera_id: str, t0: float | None = None, t1: float | None = None,
                p: Principal = need("read")):
    """The camera's intervals without video overlapping [t0, t1] (camera axis), oldest first:
    outages, reconnects, restarts (an outage in progress has ``t_end`` null)."""
    p.camera_scope([camera_id])
    check_range(t0, t1, None)
    rows = _api(_engine(request), "gaps", "live cameras")(camera_id, t0, t1)
    return {"gaps": [gap_json(g) for g in rows], **partial_json(rows)}


# -- monitors --------------------------------------------------------------------------------------
def _listed(request: Request, include_ended: bool) -> list:
    return list(_api(_engine(request), "monitors", "monitors")(include_ended=include_ended))


@router.get("/api/monitors", tags=["monitors"])
def monitors(request: Request, include_ended: bool = False, p: Principal = need("read")):
    """The monitors within the token's cameras (a session's standing requests: its own only)."""
    rows = _listed(request, include_ended)
    owners = request.app.state.watch_owners.of(m.monitor_id for m in rows)
    return {"monitors": [m.to_json() for m in rows if monitor_visible(p, m, owners)]}


@router.post("/api/monitors", tags=["monitors"], status_code=201)
async def watch(request: Request, body: MonitorBody, p: Principal = need("write")):
    """Watch the present of cameras for a condition; alerts arrive on /api/alerts/stream and /api/ws."""
    cams = p.camera_scope(body.cameras)
    fn = _api(_engine(request), "watch", "monitors")
    state = request.app.state

    def work():
        with state.monitor_lock:  # counted and added as one step: the share holds
            check_monitor_share(state.engine, state.owned, p.token_id, state.options.max_monitors_per_token)
            m = fn(body.condition, cams, mode=body.mode, min_confidence=body.min_confidence, every_s=body.every_s,
                   frames=body.frames, repeat_gap_s=body.repeat_gap_s)
            state.owned.record("monitor", p.token_id, m.monitor_id)
            return m

    return (await run_in_threadpool(work)).to_json()


@router.delete("/api/monitors/{monitor_id}", tags=["monitors"])
async def unwatch(request: Request, monitor_id: str, p: Principal = need("write")):
    """End a monitor within the token's cameras (another token's standing request: 404)."""
    eng = _engine(request)

    def find():
        rows = {m.monitor_id: m for m in _listed(request, True)}
        return rows.get(monitor_id), request.app.state.watch_owners.of([monitor_id] if monitor_id in rows else [])

    m, owners = await run_in_threadpool(find)
    if m is None or not monitor_visible(p, m, owners):
        raise HTTPException(404, f"no monitor {monitor_id[:64]!r}")
    ok = await run_in_threadpool(eng.unwatch, monitor_id)
    request.app.state.owned.release("monitor", monitor_id)
    if not ok:
        raise HTTPException(404, f"no active monitor {monitor_id!r}")
    return {"removed": monitor_id}


# -- alerts ------------------------------------------------------------------------------------------
def _token_alive(state, p: Principal):
    """For long-lived streams: whether the principal's token still exists (checked at each
    keepalive, so a revoked token's open streams end within one keepalive)."""
    if p.token_id is None:
        return None
    return lambda: p.token_id in state.tokens.tokens()



@router.get("/api/alerts", tags=["alerts"])
def alerts(request: Request, since: str | None = None, monitor: str | None = None, camera: str | None = None,
           limit: int = Query(500, ge=1, le=5000), p: Principal = need("read")):
    """Alerts after ``since`` (a position: the ``next_since`` of a previous reply, or an SSE
    event's id), oldest first; ``next_since`` continues."""
    if camera is not None:
        p.camera_scope([camera])
    backend = _backend(request)
    pos = backend.parse_alert_position(since)
    cams = [camera] if camera is not None else p.cameras  # the token's limit, applied in the query
    rows = backend.alerts_after(pos, monitor_id=monitor, cameras=cams, limit=limit)
    if rows:
        pos = rows[-1][1]  # past every row read, those of another token's standing requests too
    owners = request.app.state.watch_owners
    return {"alerts": [alert_json(a) for a, _ in rows if owners.allows(p.token_id, a.monitor_id)],
            "next_since": backend.alert_position_json(pos), **partial_json(rows)}


@router.get("/api/alerts/stream", tags=["alerts"], response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}}}})
async def alert_stream(request: Request, since: str | None = None, monitor: str | None = None,
                       camera: str | None = None, p: Principal = need("read")):
    """SSE: ``event: alert`` with ``id`` = the stream's position after it (one engine: the
    alert id). Reconnect with ``Last-Event-ID`` (or ``?since=``) to get every alert after it
    first, then the live ones."""
    hub, backend = request.app.state.hub, _backend(request)
    if not hub.available:
        raise HTTPException(501, "this engine has no monitors (Engine.subscribe_alerts is not available)")
    last = backend.parse_alert_position(request.headers.get("last-event-id"))
    if last is None:
        last = backend.parse_alert_position(since)
    if camera is not None:
        p.camera_scope([camera])

    owners = request.app.state.watch_owners

    def sees(a) -> bool:
        return p.sees(a.camera_id) and (monitor is None or a.monitor_id == monitor) and (
            camera is None or a.camera_id == camera) and owners.allows(p.token_id, a.monitor_id)

    state = request.app.state
    metrics, keepalive = state.metrics, state.options.keepalive_s
    state.stream_shares.take(p.token_id)  # 429 over the token's share of open streams

    async def events():
        metrics.sse_clients += 1
        try:
            with state.revocation.stream(p.token_id) as revoked:
                yield "retry: 2000\n\n"
                async for item in hub.stream(last, sees, keepalive, alive=_token_alive(state, p), stop=revoked):
                    if item is None:
                        yield SSE_KEEPALIVE
                    else:
                        yield sse_event(alert_json(item[0]), event="alert", id=backend.alert_position_text(item[1]))
        finally:
            metrics.sse_clients -= 1
            state.stream_shares.give(p.token_id)

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.get("/api/alerts/{alert_id}/frames/{k}", tags=["alerts"])
def alert_frame(request: Request, alert_id: int = Path(..., ge=0, le=MAX_ID), k: int = Path(..., ge=0, le=64),
                w: int | None = None, p: Principal = need("read")):
    """The k-th frame an alert's check saw (by alert id and index; never by path)."""
    backend = _backend(request)
    a = backend.alert(alert_id)
    if a is None or not request.app.state.watch_owners.allows(p.token_id, a.monitor_id):
        raise HTTPException(404, f"no alert {alert_id}")
    if not p.sees(a.camera_id):
        raise HTTPException(403, f"alert {alert_id} is of a camera outside this token's limit")
    if not 0 <= k < len(a.frame_paths):
        raise HTTPException(404, f"alert {alert_id} has {len(a.frame_paths)} frames; no frame {k}")
    return jpeg_response(backend.alert_frame(a, k), w, request.app.state.thumbnails)


# -- the WebSocket -------------------------------------------------------------------------------
async def _ws_principal(ws: WebSocket):
    """The socket's principal (header or first message) and the alert position it resumes after."""
    from fastapi import HTTPException as _H

    token = bearer(ws.headers)
    since = None
    state = ws.app.state
    if token is None and (state.tokens.required() or state.options.require_tokens):
        try:
            msg = json.loads(await asyncio.wait_for(ws.receive_text(), 10.0))
        except (asyncio.TimeoutError, ValueError, KeyError, TypeError, RecursionError):
            # not text, not JSON, nested too deeply, a binary frame, too slow: the same refusal
            raise _H(401, "send {\"type\": \"auth\", \"token\": \"...\"} first") from None
        if not isinstance(msg, dict) or msg.get("type") != "auth":
            raise _H(401, "the first message must be {\"type\": \"auth\", \"token\": \"...\"}")
        token = msg.get("token") if isinstance(msg.get("token"), str) else None
        since = msg.get("since")
    try:
        since = state.backend.parse_alert_position(since) if isinstance(since, (int, str)) else None
    except BadQuery:
        since = None
    return authenticate(state, token, ws.headers), since


@router.websocket("/api/ws")
async def ws_endpoint(ws: WebSocket):
    """Messages: ``hello``, ``alert`` (with ``alert``), ``camera_status`` (with ``camera``) on
    every change of a camera's state, reconnects or error, and ``ping`` when idle; after the
    client sends ``{"type": "subscribe_session", "session": id}``, ``session_turn`` (with
    ``session`` and ``turn``) for each new turn of that session of its token."""
    await ws.accept()
    try:
        p, since = await _ws_principal(ws)
    except HTTPException as e:
        await ws.send_json({"type": "error", "status": e.status_code, "detail": e.detail})
        await ws.close(code=1008)
        return
    except WebSocketDisconnect:  # the client left before authenticating
        return
    state = ws.app.state
    try:
        state.stream_shares.take(p.token_id)
    except QuotaExceeded as e:
        await ws.send_json({"type": "error", "status": 429, "detail": str(e)})
        await ws.close(code=1008)
        return
    try:
        await _ws_session(ws, p, since)
    finally:
        state.stream_shares.give(p.token_id)


async def _ws_session(ws: WebSocket, p: Principal, since) -> None:
    """An authenticated socket: its alerts, camera states and sessions until it closes."""
    state = ws.app.state
    engine, hub, opts = state.engine, state.hub, state.options
    send_lock = asyncio.Lock()

    async def send(msg):
        async with send_lock:
            await ws.send_json(msg)

    await send({"type": "hello", "scope": p.scope, "cameras": list(p.cameras) if p.cameras else None,
                "alerts": hub.available, "live": hasattr(engine, "status")})

    async def alerts_loop():
        if not hub.available:
            return await asyncio.Event().wait()
        owners = state.watch_owners
        async for item in hub.stream(since, lambda a: p.sees(a.camera_id) and owners.allows(p.token_id, a.monitor_id),
                                     opts.keepalive_s,
                                     alive=_token_alive(state, p)):
            await send({"type": "ping"} if item is None else {
                "type": "alert", "alert": alert_json(item[0]), "position": state.backend.alert_position_json(item[1])})
        await ws.close(code=1008)  # the token was revoked

    async def status_loop():
        if not hasattr(engine, "status"):
            return await asyncio.Event().wait()
        seen: dict = {}
        while True:
            now = await run_in_threadpool(_statuses, engine)
            for cam, st in now.items():
                key = (st.get("state"), st.get("reconnects"), st.get("error"), st.get("url"))
                if p.sees(cam) and seen.get(cam) != key:
                    seen[cam] = key
                    await send({"type": "camera_status", "camera": st})
            for cam in set(seen) - set(now):
                seen.pop(cam)
                await send({"type": "camera_status", "camera": {"camera_id": cam, "state": "removed"}})
            await asyncio.sleep(opts.status_poll_s)

    sessions = SessionSocket(engine, p, send) if hasattr(engine, "subscribe_turns") else None

    async def reader():
        # only session subscriptions are read (routes_sessions.py); anything else (binary, garbage)
        # is ignored; this also notices the close
        while (msg := await ws.receive())["type"] != "websocket.disconnect":
            if sessions is not None and isinstance(msg.get("text"), str):
                await sessions.handle(msg["text"])

    async def sessions_loop():
        return await (sessions.run() if sessions is not None else asyncio.Event().wait())

    stack = contextlib.ExitStack()
    revoked = stack.enter_context(state.revocation.stream(p.token_id))

    async def revoked_loop():  # the token revoked: the socket closes at once (server/revocation.py)
        await (revoked or asyncio.Event()).wait()
        await send({"type": "error", "status": 401, "detail": "this token was revoked"})

    state.metrics.ws_clients += 1
    tasks = [asyncio.create_task(c()) for c in (alerts_loop, status_loop, reader, sessions_loop, revoked_loop)]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for t in done:
            if t.exception() is not None and not isinstance(t.exception(), WebSocketDisconnect):
                raise t.exception()
    except (WebSocketDisconnect, RuntimeError):
        pass
    finally:
        stack.close()
        state.metrics.ws_clients -= 1
        for t in tasks:
            t.cancel()
        if sessions is not None:
            sessions.close()
        with contextlib.suppress(Exception):
            await ws.close()
