"""``vam-engine serve --cluster ADDRESS --store ROOT``: the router over HTTP.

The single engine's app (server/app.py) reads its store directly for pages, frames and metrics,
so the router gets its own app with the same auth (tokens in ``<root>/tokens.json``, the same
scopes and camera limits), the same request bodies and JSON shapes for what it serves, and
``GET /api/cluster``. Each read says what it lacks (``missing_cameras``, ``missing_shards``).

Served: GET /api/health, GET /api/cluster, POST /api/search (text; an uploaded image is not
taken here), POST /api/ask, GET /api/moments, GET /api/frames/{id}, GET /api/alerts (``cursor``:
the previous reply's, as JSON), POST /api/monitors, DELETE /api/monitors/{id}. Not served (the
single engine's app has them): SSE/WebSocket alert streams, event and moment paging by cursor,
live-camera routes, summarize, delete, /metrics and the web page.
"""
# no "from __future__ import annotations": FastAPI reads the routes' annotations, whose types are imported locally

import json
import sys
from dataclasses import asdict

from ..errors import VamError


def create_cluster_app(router, options=None):
    from fastapi import FastAPI, HTTPException
    from fastapi.responses import JSONResponse, Response
    from pydantic import BaseModel, Field
    from starlette.concurrency import run_in_threadpool

    from ..server.app import ServeOptions, need
    from ..server.auth import Principal, TokenStore
    from ..server.jsonify import alert_json, answer_json, evidence_json, moment_json
    from ..server.routes_memory import AskBody, SearchBody
    from .router import AlertCursor, ShardDown

    options = options or ServeOptions(tokens_dir=router.root)
    app = FastAPI(title="vam_engine cluster", version="0.1.0")
    app.state.engine = router
    app.state.options = options
    app.state.tokens = TokenStore(options.tokens_dir or router.root)

    class WatchBody(BaseModel):
        condition: str = Field(..., min_length=1, max_length=2000)
        cameras: list[str] | None = None
        mode: str = "once"
        min_confidence: float = 0.6
        every_s: float = 2.0
        frames: int = 4
        repeat_gap_s: float = 3.0

    def missing(res) -> dict:
        return {"missing_cameras": list(res.missing_cameras), "missing_shards": list(res.missing_shards)}

    @app.exception_handler(ShardDown)
    async def _down(request, exc):
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @app.exception_handler(VamError)
    async def _vam(request, exc):
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @app.exception_handler(PermissionError)
    async def _forbidden(request, exc):
        return JSONResponse({"detail": str(exc)}, status_code=403)

    @app.get("/api/health")
    def health():
        return {"ok": True, "cluster": True, "auth": app.state.tokens.any() or options.require_tokens}

    @app.get("/api/cluster")
    async def cluster(p: Principal = need("read")):
        """The shards: their nodes, cameras (placed), health and store directories."""
        info = await run_in_threadpool(router.info)
        return {"root": info.root, "shards": [
            {"name": s.name, "no": s.no, "alive": s.alive, "error": s.error,
             "cameras": [c for c in s.cameras if p.sees(c)],
             "status": None if s.status is None else {k: list(v) if isinstance(v, tuple) else v
                                                       for k, v in asdict(s.status).items()}}
            for s in info.shards]}

    @app.post("/api/search")
    async def search(body: SearchBody, p: Principal = need("read")):
        cams = p.camera_scope(body.cameras)
        tr = (body.t0, body.t1) if body.t0 is not None or body.t1 is not None else None
        if body.text is None:
            raise HTTPException(422, "the cluster's search takes text (an image query: use the Python API)")
        res = await run_in_threadpool(lambda: router.search(text=body.text, top_k=body.top_k, time_range=tr,
                                                            cameras=cams, sources=tuple(body.sources),
                                                            as_of=body.as_of))
        return {"evidence": [evidence_json(e) for e in res.evidence if p.sees(e.camera_id)],
                "notes": list(res.notes), **missing(res)}

    @app.post("/api/ask")
    async def ask(body: AskBody, p: Principal = need("read")):
        cams = p.camera_scope(body.cameras)
        a = await run_in_threadpool(lambda: router.ask(body.question, as_of=body.as_of, camera=cams,
                                                       mode=body.mode, max_turns=body.max_turns))
        return {**answer_json(a), **missing(a)}

    @app.get("/api/moments")
    async def moments(camera: str | None = None, t0: float | None = None, t1: float | None = None,
                      p: Principal = need("read")):
        if camera is not None:
            p.camera_scope([camera])
        res = await run_in_threadpool(lambda: router.moments(camera, t0, t1))
        return {"moments": [moment_json(m) for m in res if p.sees(m.camera_id)], **missing(res)}

    @app.get("/api/frames/{moment_id}")
    async def frame(moment_id: int, p: Principal = need("read")):
        shard, local = router.locate(moment_id)
        got = await run_in_threadpool(lambda: router._call(shard, "moments_by_id", [local]))
        m = got.get(local)
        if m is None:
            raise HTTPException(404, f"no moment {moment_id}")
        if not p.sees(m.camera_id):
            raise HTTPException(403, f"moment {moment_id} belongs to a camera outside this token's limit")
        data = await run_in_threadpool(lambda: router.frame(moment_id))
        return Response(data, media_type="image/jpeg")

    @app.get("/api/alerts")
    async def alerts(cursor: str | None = None, monitor_id: str | None = None, p: Principal = need("read")):
        try:
            since = AlertCursor(tuple((str(s), int(i)) for s, i in json.loads(cursor).items())) if cursor else None
        except (ValueError, AttributeError, TypeError):
            raise HTTPException(422, "cursor: the 'cursor' of a previous /api/alerts reply (a JSON object)") from None
        res = await run_in_threadpool(lambda: router.alerts(since, monitor_id))
        return {"alerts": [alert_json(a) for a in res if p.sees(a.camera_id)], "cursor": dict(res.cursor.last),
                **missing(res)}

    @app.post("/api/monitors")
    async def watch(body: WatchBody, p: Principal = need("write")):
        cams = p.camera_scope(body.cameras)
        m = await run_in_threadpool(lambda: router.watch(body.condition, cams, mode=body.mode,
                                                         min_confidence=body.min_confidence, every_s=body.every_s,
                                                         frames=body.frames, repeat_gap_s=body.repeat_gap_s))
        return m.to_json()

    @app.delete("/api/monitors/{monitor_id}")
    async def unwatch(monitor_id: str, p: Principal = need("write")):
        if not await run_in_threadpool(lambda: router.unwatch(monitor_id)):
            raise HTTPException(404, f"no active monitor {monitor_id}")
        return {"ok": True}

    return app


def cmd_serve_cluster(args) -> int:
    """``serve --cluster ADDRESS``: connect (``local``: start Ray here), serve until SIGINT/SIGTERM."""
    from ..server.auth import TokenStore
    from ..server.cli import check_bind, is_loopback
    from .router import connect

    tokens = TokenStore(args.store)
    check_bind(args.host, tokens)
    try:
        import uvicorn

        from ..server.app import ServeOptions
    except ImportError as e:
        raise VamError(f"serve needs the web stack ({e.name} is not installed): pip install 'vam_engine[server]'") \
            from None
    from ..config import EngineConfig

    over = {}
    if getattr(args, "llm", None):  # the router's model for ask (and the shards', unless the config names one)
        from ..llm import parse_llm_spec

        over["llm"] = parse_llm_spec(args.llm)
    if getattr(args, "text_model", None):
        over["embed"] = {"text_model": args.text_model}
    config = EngineConfig.load(args.config, device=args.device, **over).model_dump(mode="json")
    router = connect(None if args.cluster == "local" else args.cluster, root=args.store, shards=args.shards,
                     config=config, device=args.device)
    try:
        opts = ServeOptions(tokens_dir=args.store, require_tokens=not is_loopback(args.host))
        app = create_cluster_app(router, opts)
        names = ", ".join(router.shard_names())
        print(f"vam-engine serve --cluster {args.cluster}: http://{args.host}:{args.port}/ ; root {args.store}; "
              f"shards {names}", file=sys.stderr, flush=True)
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, server_header=False)
    finally:
        router.close()
    return 0
