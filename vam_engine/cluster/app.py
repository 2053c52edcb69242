"""The router's HTTP app (``vam-engine serve --cluster ADDRESS --store ROOT``).

The router serves the single engine's app (server/app.py) unchanged: every route, the SSE and
WebSocket alert streams, ``/metrics`` and the web page, with the same tokens (in
``<root>/tokens.json``), scopes and camera limits. Its reads go to the shards through
ClusterBackend (backend.py); every reply that merges shards names what did not answer
(``missing_cameras``, ``missing_shards``), and a request that needs one shard that is down
gets 503. Added: ``GET /api/cluster`` (shards, nodes, cameras per shard, health).
"""
# no "from __future__ import annotations": FastAPI reads the route's annotations, whose types are imported locally

from dataclasses import asdict


def create_cluster_app(router, options=None):
    from starlette.concurrency import run_in_threadpool

    from ..server import Principal, ServeOptions, create_app, need
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
