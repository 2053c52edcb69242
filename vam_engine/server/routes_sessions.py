"""Session endpoints: conversations with the memory, each its own dialogue, standing "tell me when"
requests and replies (the engine's ``turn``, ``session``, ``sessions``, ``end_session``,
``subscribe_turns``; an engine without them answers 501).

Session ids are namespaced per token: the client names a session (``[A-Za-z0-9_.:-]{1,64}``, or
the server makes one up), the engine keeps it as ``"<token id>/<name>"``, so one token never
sees, streams or writes another's sessions (404, as for a session that does not exist). A
session is bound at creation to cameras within its token's limit. Any token may ask questions
in its sessions; a turn that asks to be told later registers a monitor and needs a write token
(403 saying so). Bounds (``ServeOptions``): open sessions per token, session streams at once
and each token's share of them, a token's active monitors with its sessions' standing requests
(429 beyond); the engine bounds standing requests per session, turns kept per session and the
ended sessions kept (``sessions.ended_per_owner``, ``ended_max_age_s``). A session's standing
requests are its token's alone (routes_live.py hides them from other tokens: ownership.py).

``GET /api/sessions/{id}/stream`` is SSE of the session's new turns (``event: turn``, ``id`` the
turn id): reconnect with ``Last-Event-ID`` (or ``?since=``) to get every turn after it first.
On the WebSocket (``/api/ws``), ``{"type": "subscribe_session", "session": id, "since"?: n}``
brings ``{"type": "session_turn", "session": id, "turn": {...}}`` messages (``SessionSocket``).
"""
from __future__ import annotations

import asyncio
import json
import math
import re
import secrets
import threading
from typing import Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from ..memory import SessionError, SessionLimit, WatchNotAllowed
from .auth import need
from .jsonify import answer_json, evidence_json, json_response
from .ownership import TokenSlots, check_monitor_share, session_prefix
from .queries import MAX_ID, BadQuery, parse_position
from .routes_memory import Cameras, RequestBody, ask_slot
from .sse import SSE_KEEPALIVE, STOPPED, next_item, sse_event
from .tokens import Principal

router = APIRouter()
NAME = r"^[A-Za-z0-9_.:-]{1,64}$"
MAX_SOCKET_SESSIONS = 16  # sessions one WebSocket may follow at once
QUEUE_MAX = 1000          # live turns waiting for a slow stream before it rereads the store


class SessionBody(RequestBody):
    id: str | None = Field(None, pattern=NAME)
    cameras: Cameras | None = None


class TurnBody(RequestBody):
    text: str = Field(..., min_length=1, max_length=4000)
    cameras: Cameras | None = None
    as_of: float | None = None
    mode: Literal["auto", "two_phase", "agentic"] = "auto"


def engine_session(p: Principal, name: str) -> str:
    """The engine's id of a token's session ``name``."""
    return session_prefix(p.token_id) + name


def finite(x):
    """A number JSON can carry (NaN and infinities are not JSON)."""
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def _api(engine, name: str):
    fn = getattr(engine, name, None)
    if fn is None:
        raise HTTPException(501, f"this engine has no sessions (Engine.{name} is not available in this build)")
    return fn


def _owned(engine, p: Principal, name: str, **kw):
    """The token's session ``name`` (with the turns ``kw`` asks for); 404 when it has none such."""
    if not re.fullmatch(NAME, name):
        raise HTTPException(404, f"no session {name[:64]!r}")
    sess = _api(engine, "session")(engine_session(p, name), **kw)
    if sess is None:
        raise HTTPException(404, f"no session {name[:64]!r}")
    return sess


def turn_json(t) -> dict:
    d = {"turn_id": t.turn_id, "role": t.role, "kind": t.kind, "text": t.text, "t": finite(t.t), "wall": t.wall,
         "evidence": [evidence_json(e) for e in t.evidence], "monitor_id": t.monitor_id, "alert_id": t.alert_id}
    if t.alert_id is not None and t.evidence:  # what the check saw, served by alert id and index
        d["alert_frames"] = [f"/api/alerts/{t.alert_id}/frames/{k}" for k in range(len(t.evidence[0].frame_paths))]
    return d


def session_json(s, name: str, turns: bool = False) -> dict:
    d = {"id": name, "cameras": list(s.cameras) if s.cameras is not None else None, "created_at": s.created_at,
         "ended_at": s.ended_at, "open": s.open,
         "watches": [{"monitor_id": w.monitor_id, "request": w.request, "condition": w.condition,
                      "cameras": list(w.cameras) if w.cameras is not None else None} for w in s.watches]}
    if turns:
        d["turns"] = [turn_json(t) for t in s.turns]
    return d


def _name(p: Principal, sid: str) -> str:
    return sid[len(engine_session(p, "")):]


# -- sessions ----------------------------------------------------------------------------------------
@router.post("/api/sessions", tags=["sessions"], status_code=201)
async def create_session(request: Request, body: SessionBody, p: Principal = need("read")):
    """Start a session (``id``: its name; default: one made up), bound to ``cameras`` (within the
    token's limit; default: all the token may see)."""
    eng = request.app.state.engine
    create = _api(eng, "create_session")
    cams = p.camera_scope(body.cameras)
    name = body.id or f"s_{secrets.token_hex(6)}"
    cap = request.app.state.options.max_sessions_per_token

    def work():
        with request.app.state.session_lock:  # count and create as one step: the cap holds
            held = [s for s in eng.sessions(prefix=engine_session(p, "")) if _name(p, s.session_id)]
            if len(held) >= cap:
                raise HTTPException(429, f"this token has {len(held)} open sessions, at most {cap} per token: end "
                                         "one first (DELETE /api/sessions/{id})")
            try:
                return create(engine_session(p, name), cams)
            except SessionError as e:
                raise HTTPException(409, str(e).replace(engine_session(p, ""), "", 1)) from None

    return session_json(await run_in_threadpool(work), name)


@router.get("/api/sessions", tags=["sessions"])
def list_sessions(request: Request, include_ended: bool = False, p: Principal = need("read")):
    """This token's sessions (never another token's), oldest first."""
    eng = request.app.state.engine
    rows = _api(eng, "sessions")(prefix=engine_session(p, ""), include_ended=include_ended)
    return {"sessions": [session_json(s, _name(p, s.session_id)) for s in rows if _name(p, s.session_id)]}


@router.get("/api/sessions/{name}", tags=["sessions"])
def get_session(request: Request, name: str, after: int | None = Query(None, ge=0, le=MAX_ID),
                last: int | None = Query(None, ge=1, le=100_000), p: Principal = need("read")):
    """The session with its turns (``after``: those after a turn id; ``last``: the newest n)."""
    return json_response(session_json(_owned(request.app.state.engine, p, name, after=after, last=last), name,
                                       turns=True))


@router.delete("/api/sessions/{name}", tags=["sessions"])
async def end_session(request: Request, name: str, p: Principal = need("read")):
    """End the session and its standing requests (its turns stay readable)."""
    eng = request.app.state.engine
    _owned(eng, p, name, last=0)
    ended = await run_in_threadpool(eng.end_session, engine_session(p, name))
    return {"ended": name, "was_open": ended}


# -- turns ---------------------------------------------------------------------------------------------
@router.post("/api/sessions/{name}/turns", tags=["sessions"])
async def take_turn(request: Request, name: str, body: TurnBody, p: Principal = need("read")):
    """One user turn: a question is answered now (``answer``); "tell me when ..." registers a
    standing request and is acknowledged (``kind`` "watch"; needs a write token); "stop watching
    for that" ends one (``kind`` "cancel"). The reply to a standing request comes later, on the
    session's stream and in its turns."""
    eng = request.app.state.engine
    sess = _owned(eng, p, name, last=0)
    if body.cameras is not None:
        cams = p.camera_scope(body.cameras)
    else:  # the session's cameras; a token's limit holds over a session bound wider (one migrated)
        cams = list(sess.cameras) if sess.cameras is not None else (list(p.cameras) if p.cameras else None)
    state = request.app.state
    release = ask_slot(state, p)
    quota = monitor_quota(state, p) if p.allows("write") else None
    try:
        r = await run_in_threadpool(lambda: eng.turn(body.text, session=engine_session(p, name), camera=cams,
                                                     as_of=body.as_of, mode=body.mode, may_watch=p.allows("write"),
                                                     read_only=not p.allows("write"), watch_quota=quota))
    except SessionLimit as e:
        raise HTTPException(429, str(e).replace(engine_session(p, ""), "", 1)) from None
    except WatchNotAllowed as e:
        raise HTTPException(403, str(e)) from None
    except SessionError as e:  # ended, a camera outside it
        raise HTTPException(409, str(e).replace(engine_session(p, ""), "", 1)) from None
    finally:
        release()
    return json_response(turn_result_json(r))


def monitor_quota(state, p: Principal):
    """What a turn calls before it registers a standing request: the token's share of monitors
    (its own and its sessions' together; 429 beyond)."""
    def check() -> None:
        with state.monitor_lock:
            check_monitor_share(state.engine, state.owned, p.token_id, state.options.max_monitors_per_token)
    return check


def turn_result_json(r) -> dict:
    it = r.intent
    return {"kind": r.kind, "text": r.text, "turns": [turn_json(t) for t in r.turns],
            "intent": {"kind": it.kind, "by": it.by, "condition": it.condition, "repeat": it.repeat, "note": it.note},
            "answer": answer_json(r.answer) if r.answer is not None else None,
            "monitor": r.monitor.to_json() if r.monitor is not None else None, "ended": list(r.ended),
            "timings": {k: finite(v) for k, v in r.timings.items()}}


# -- streams -------------------------------------------------------------------------------------------
def _position(text) -> int | None:
    return parse_position(text, "a turn position (a non-negative turn id)")


class TurnFeed:
    """A session's turns for one client: subscribed first, the stored turns after a position
    read second (none falls between), then the live ones, put on ``queue`` as (``key``, turn).
    A client more than QUEUE_MAX turns behind rereads the store instead of being dropped (the
    reader keeps its position: turns it had already are skipped)."""

    def __init__(self, engine, sid: str, queue: asyncio.Queue, key=None):
        self.engine, self.sid, self.queue, self.key = engine, sid, queue, key
        self.loop = asyncio.get_running_loop()
        self.overflowed = False
        self._sub = engine.subscribe_turns(self._deliver)

    def _deliver(self, turn) -> None:  # on the engine's thread
        if turn.session_id == self.sid:
            try:
                self.loop.call_soon_threadsafe(self._put, turn)
            except RuntimeError:  # the loop closed
                pass

    def _put(self, turn) -> None:
        try:
            self.queue.put_nowait((self.key, turn))
        except asyncio.QueueFull:
            self.overflowed = True

    async def start(self, since: int | None) -> tuple[int, list]:
        """(the position to send after, the stored turns after ``since``); ``since`` None: from
        the session's newest turn on."""
        if since is None:
            s = await run_in_threadpool(self.engine.session, self.sid, last=1)
            return (s.turns[-1].turn_id if s is not None and s.turns else 0), []
        return since, await self.reread(since)

    async def reread(self, pos: int) -> list:
        """The stored turns after ``pos``."""
        self.overflowed = False
        s = await run_in_threadpool(self.engine.session, self.sid, after=pos)
        return list(s.turns) if s is not None else []

    def close(self) -> None:
        self._sub.close()


@router.get("/api/sessions/{name}/stream", tags=["sessions"], response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}}}})
async def session_stream(request: Request, name: str, since: str | None = None, p: Principal = need("read")):
    """SSE: ``event: turn`` for each new turn of the session (replies included), ``id`` the turn
    id; reconnect with ``Last-Event-ID`` (or ``?since=``) for every turn after it first."""
    eng = request.app.state.engine
    _api(eng, "subscribe_turns")
    _owned(eng, p, name, last=0)
    last = _position(request.headers.get("last-event-id"))
    if last is None:
        last = _position(since)
    state = request.app.state
    state.session_stream_shares.take(p.token_id)  # 429 over the token's share of the pool
    if not state.session_streams.acquire(blocking=False):
        state.session_stream_shares.give(p.token_id)
        raise HTTPException(429, f"{state.options.max_session_streams} session streams are open, this server's "
                                 "limit; retry later", headers={"Retry-After": "5"})
    keepalive = state.options.keepalive_s
    alive = (lambda: p.token_id in state.tokens.tokens()) if p.token_id is not None else (lambda: True)

    async def events():
        feed = None
        try:
            with state.revocation.stream(p.token_id) as revoked:
                feed = TurnFeed(eng, engine_session(p, name), asyncio.Queue(QUEUE_MAX))
                yield "retry: 2000\n\n"
                pos, turns = await feed.start(last)
                while True:
                    for t in turns:
                        if t.turn_id > pos:
                            pos = t.turn_id
                            yield sse_event(turn_json(t), event="turn", id=t.turn_id)
                    if feed.overflowed:
                        turns = await feed.reread(pos)
                        continue
                    try:
                        item = await next_item(feed.queue, keepalive, revoked)
                    except asyncio.TimeoutError:
                        if not alive():
                            return
                        yield SSE_KEEPALIVE
                        turns = []
                        continue
                    if item is STOPPED:  # the token was revoked
                        return
                    turns = [item[1]]
        finally:
            if feed is not None:
                feed.close()
            state.session_streams.release()
            state.session_stream_shares.give(p.token_id)

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


class SessionSocket:
    """The sessions a WebSocket follows: ``handle`` takes the client's messages; ``run`` (one
    task) answers subscriptions and sends ``session_turn`` messages, each session's in order."""

    def __init__(self, engine, p: Principal, send):
        self.engine, self.p, self.send = engine, p, send
        self.queue: asyncio.Queue = asyncio.Queue(QUEUE_MAX)  # (None, subscription) or (name, turn)
        self.feeds: dict[str, tuple[TurnFeed, list]] = {}  # name -> (feed, [position])

    async def handle(self, text: str) -> None:
        """A client message; anything but a well-formed subscription is ignored."""
        try:
            msg = json.loads(text)
        except (ValueError, RecursionError):
            return
        if isinstance(msg, dict) and msg.get("type") == "subscribe_session" and isinstance(msg.get("session"), str):
            await self.queue.put((None, (msg["session"], msg.get("since"))))

    async def run(self) -> None:
        while True:
            name, item = await self.queue.get()
            if name is None:
                await self._subscribe(*item)
                continue
            feed, pos = self.feeds[name]
            turns = await feed.reread(pos[0]) if feed.overflowed else [item]
            for t in turns:
                if t.turn_id > pos[0]:
                    pos[0] = t.turn_id
                    await self.send({"type": "session_turn", "session": name, "turn": turn_json(t)})

    async def _subscribe(self, name: str, since) -> None:
        if name in self.feeds:
            return
        if len(self.feeds) >= MAX_SOCKET_SESSIONS:
            return await self.send({"type": "error", "status": 429,
                                    "detail": f"a socket follows at most {MAX_SOCKET_SESSIONS} sessions"})
        sid = engine_session(self.p, name)
        sess = await run_in_threadpool(self.engine.session, sid, last=0) if re.fullmatch(NAME, name) else None
        if sess is None:
            return await self.send({"type": "error", "status": 404, "detail": f"no session {name[:64]!r}"})
        try:
            since = _position(since) if isinstance(since, (int, str)) else None
        except BadQuery:
            since = None
        feed = TurnFeed(self.engine, sid, self.queue, name)
        pos, backlog = await feed.start(since)
        self.feeds[name] = (feed, [pos])
        await self.send({"type": "session_subscribed", "session": name, "position": pos})
        for t in backlog:
            if t.turn_id > self.feeds[name][1][0]:
                self.feeds[name][1][0] = t.turn_id
                await self.send({"type": "session_turn", "session": name, "turn": turn_json(t)})

    def close(self) -> None:
        for feed, _ in self.feeds.values():
            feed.close()


def session_state(options) -> dict:
    """What ``create_app`` keeps for these routes: the stream slots and the creation lock."""
    return {"session_streams": threading.BoundedSemaphore(options.max_session_streams),
            "session_stream_shares": TokenSlots(options.max_session_streams_per_token, "session streams open",
                                                "service.session_streams_per_token", retry_after=5),
            "session_lock": threading.Lock()}
