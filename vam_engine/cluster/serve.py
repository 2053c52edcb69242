"""``vam-engine serve --cluster ADDRESS --store ROOT``: the router over HTTP.

The router serves the single engine's app (server/app.py) unchanged: every route, the SSE and
WebSocket alert streams, ``/metrics`` and the web page, with the same tokens (in
``<root>/tokens.json``), scopes and camera limits. Its reads go to the shards through
ClusterBackend (backend.py); every reply that merges shards names what did not answer
(``missing_cameras``, ``missing_shards``), and a request that needs one shard that is down
gets 503. Added: ``GET /api/cluster`` (shards, nodes, cameras per shard, health).
"""
# no "from __future__ import annotations": FastAPI reads the route's annotations, whose types are imported locally

import sys
from dataclasses import asdict

from ..errors import VamError


def create_cluster_app(router, options=None):
    from starlette.concurrency import run_in_threadpool

    from ..server.app import ServeOptions, create_app, need
    from ..server.auth import Principal
    from .backend import ClusterBackend

    app = create_app(router, options or ServeOptions(tokens_dir=router.root), backend=ClusterBackend(router))

    @app.get("/api/cluster", tags=["service"])
    async def cluster(p: Principal = need("read")):
        """The shards: their nodes, cameras (placed), health and store directories."""
        info = await run_in_threadpool(router.info)
        return {"root": info.root, "shards": [
            {"name": s.name, "no": s.no, "alive": s.alive, "error": s.error,
             "cameras": [c for c in s.cameras if p.sees(c)],
             "status": None if s.status is None else {k: list(v) if isinstance(v, tuple) else v
                                                       for k, v in asdict(s.status).items()}}
            for s in info.shards]}

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
