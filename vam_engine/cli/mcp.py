"""``vam-engine mcp``: the memory as MCP tools over stdio, for a desktop assistant that starts the
command itself (its config names the command and its arguments; docs/integrations.md).

The assistant acts with ``--scope`` (read by default: search, ask, frames, entities, transcripts;
write adds watch and unwatch) and sees only ``--cameras`` when given, as a token limited so
would over HTTP. stdout carries the protocol alone: everything else the engine says goes to
stderr (the SDK points the process's stdout at stderr while it serves).
"""
from __future__ import annotations

import sys
import threading

from ..errors import VamError
from .common import config_from_args, make_engine


def cmd_mcp(args) -> int:
    try:
        import anyio
        import anyio.to_thread

        from ..server import LocalBackend, McpService, Ownership, Principal, ThumbnailCache, build_server
    except ImportError as e:
        raise VamError(f"mcp needs the MCP SDK ({e.name} is not installed): pip install 'vam_engine[mcp]'") from None
    cams = tuple(c.strip() for c in args.cameras.split(",") if c.strip()) if args.cameras else None
    if args.cameras is not None and not cams:
        raise VamError("--cameras must name at least one camera id (comma-separated)")
    principal = Principal(None, args.scope, cams)
    eng = make_engine(args)
    try:
        async def run(lane, fn):
            return await anyio.to_thread.run_sync(fn)

        service = McpService(eng, LocalBackend(eng), threading.BoundedSemaphore(args.max_asks),
                             Ownership(max_cameras=1), run, max_monitors=args.max_monitors,
                             thumbnails=ThumbnailCache(config_from_args(args).service.thumbnail_cache_mb << 20))
        server = build_server(service, lambda ctx: principal)
        limit = f", cameras {','.join(cams)}" if cams else ""
        print(f"vam-engine mcp: serving {args.store} on stdio (scope {args.scope}{limit})", file=sys.stderr, flush=True)
        anyio.run(server.run_stdio_async)
    finally:
        eng.close()
    return 0


def register(sub, g) -> None:
    sp = sub.add_parser("mcp", parents=[g.store, g.engine, g.model, g.texts, g.tools, g.perception],
                        help="serve the memory as MCP tools over stdio (for desktop assistants)")
    sp.add_argument("--scope", choices=("read", "write"), default="read",
                    help="read (default): search, ask, frames, entities, transcripts; write: + watch, unwatch")
    sp.add_argument("--cameras", help="only these cameras (comma-separated), as a camera-limited token")
    sp.add_argument("--max-asks", type=int, default=2, help="questions answered at once (default 2)")
    sp.add_argument("--max-monitors", type=int, default=8, help="monitors the assistant may start (default 8)")
    sp.set_defaults(func=cmd_mcp)
