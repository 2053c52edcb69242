"""``vam-engine serve`` (one engine, or the router over camera shards on Ray with ``--cluster``)
and ``vam-engine token``.

Nothing here imports the web stack at module level: ``vam-engine index`` must not need it.
"""
from __future__ import annotations

import json
import signal
import sys
import threading
import time

from ..errors import VamError
from ..server import SCOPES, TokenStore
from . import notify_options
from .common import config_from_args, make_engine


# -- cameras file ------------------------------------------------------------------------------------
class CameraSet:
    """A cameras file applied to the engine (``engine.reload_cameras``: new cameras added, removed
    ones stopped, changed ones restarted, the others untouched; each camera's ``monitors`` kept in
    step by the engine); ``apply`` again after the file changed reloads it without a restart."""

    def __init__(self, engine, path: str):
        self.engine, self.path = engine, path
        self._lock = threading.Lock()

    def apply(self) -> list[str]:
        if not hasattr(self.engine, "reload_cameras"):
            raise VamError("--cameras needs live cameras (Engine.reload_cameras), which this build does not have")
        with self._lock:
            diff = self.engine.reload_cameras(self.path)  # an invalid file raises here, changing nothing
            return [f"{what} {cam}" for what, cams in (("added", diff.added), ("removed", diff.removed),
                                                       ("restarted", diff.changed),
                                                       ("monitors changed for", diff.monitors_changed))
                    for cam in cams]


# -- serve -------------------------------------------------------------------------------------------
def _web_stack():
    """uvicorn, or the error saying which extra to install. The service's face loads its web-stack
    names at first use: importing two of them here (app.py needs FastAPI, http.py uvicorn's h11
    protocol) is what makes the later ``from ..server import ...`` of the commands safe."""
    try:
        import uvicorn

        from ..server import create_app, server_config  # noqa: F401
    except ImportError as e:
        raise VamError(f"serve needs the web stack ({e.name} is not installed): pip install 'vam_engine[server]'") \
            from None
    return uvicorn


def _options(args, **kw):
    """The service's options: the command line's bounds, each token's shares from the config's
    ``service`` section (``--max-monitors-per-token`` overrides ``service.monitors_per_token``)."""
    from ..server import ServeOptions

    shares = ServeOptions.shares(config_from_args(args).service)
    if args.max_monitors_per_token is not None:
        shares["max_monitors_per_token"] = args.max_monitors_per_token
    return ServeOptions(max_upload_bytes=int(args.max_upload_mb * (1 << 20)),
                        max_cameras_per_token=args.max_cameras_per_token,
                        max_sessions_per_token=args.max_sessions_per_token,
                        max_session_streams=args.max_session_streams,
                        max_connections=args.max_connections, mcp=args.mcp, **shares, **kw)


def cmd_serve(args) -> int:
    if getattr(args, "cluster", None):  # the router over camera shards on Ray
        return cmd_serve_cluster(args)
    uvicorn = _web_stack()
    from ..server import check_bind, create_app, is_loopback, server_config, settle_heap

    tokens = TokenStore(args.store)
    check_bind(args.host, tokens)  # before the engine loads: a refused start costs little
    notify_cfg = notify_options.notify_config(args)  # so is a bad --mqtt or --webhook
    eng = make_engine(args, existing=False)
    notifier = None
    try:
        notifier = notify_options.make_notifier(eng, notify_cfg)  # None without --mqtt and --webhook
        opts = _options(args, cors_origins=tuple(args.cors_origin or ()),
                        require_tokens=not is_loopback(args.host),
                        metric_sources=(notifier.metric_lines,) if notifier is not None else ())
        app = create_app(eng, opts)  # first: it taps the model the writer and the monitors then use
        # serve is the store's one writer (docs/design.md section 7): claimed now, so a second writer is told
        # at once, and the document writer and retention run while it serves
        eng.start()
        if notifier is not None:
            notifier.start()
            print(f"vam-engine serve: alerts, replies and camera states to {', '.join(s.where for s in notifier.sinks)}",
                  file=sys.stderr)
        cams = None
        if args.cameras:
            cams = CameraSet(eng, args.cameras)
            for line in cams.apply():
                print(f"cameras: {line}", file=sys.stderr)

            def reload(*_):
                def run():
                    try:
                        for line in cams.apply() or ["no change"]:
                            print(f"cameras reloaded: {line}", file=sys.stderr)
                    except (VamError, ValueError, OSError) as e:  # the running cameras stay as they were
                        print(f"cameras file not reloaded: {e}", file=sys.stderr)
                threading.Thread(target=run, daemon=True).start()

            signal.signal(signal.SIGHUP, reload)
        needs = "tokens required" if tokens.required() or opts.require_tokens else "no token yet (loopback only)"
        print(f"vam-engine serve: http://{args.host}:{args.port}/ ({needs}); store {args.store}", file=sys.stderr,
              flush=True)
        # uvicorn shuts down gracefully on SIGINT/SIGTERM, then raises the signal again for the
        # handler that was there before: a quiet one, so the engine below closes (its writer
        # drains, its vectors are snapshot) and serve exits 0
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: None)
        settle_heap()  # last before serving: what start-up built is not walked by every full collection
        # the access log holds methods, paths and statuses (server/middleware.py), never a query string
        uvicorn.Server(server_config(app, args.host, args.port, opts, log_level=args.log_level)).run()
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C interrupts a slow close
            signal.signal(sig, signal.SIG_DFL if sig == signal.SIGTERM else signal.default_int_handler)
    finally:
        if notifier is not None:  # first: what it holds goes out, then "offline"
            notifier.close()
        eng.close()
    return 0


def cmd_serve_cluster(args) -> int:
    """``serve --cluster ADDRESS``: connect (``local``: start Ray here), serve until SIGINT/SIGTERM."""
    uvicorn = _web_stack()
    from ..server import check_bind, is_loopback, server_config

    check_bind(args.host, TokenStore(args.store))
    notify_options.notify_config(args)  # --mqtt and --webhook are refused here, naming why
    from ..cluster import connect, create_cluster_app

    # --llm: the router's model for ask (and the shards', unless the config names one)
    config = config_from_args(args).model_dump(mode="json")
    router = connect(None if args.cluster == "local" else args.cluster, root=args.store, shards=args.shards,
                     config=config, device=args.device)
    try:
        opts = _options(args, tokens_dir=args.store, require_tokens=not is_loopback(args.host))
        app = create_cluster_app(router, opts)
        names = ", ".join(router.shard_names())
        print(f"vam-engine serve --cluster {args.cluster}: http://{args.host}:{args.port}/ ; root {args.store}; "
              f"shards {names}", file=sys.stderr, flush=True)
        uvicorn.Server(server_config(app, args.host, args.port, opts, log_level=args.log_level)).run()
    finally:
        router.close()
    return 0


# -- token ---------------------------------------------------------------------------------------------
def cmd_token(args) -> int:
    tokens = TokenStore(args.store)
    if args.token_cmd == "create":
        cams = [c for c in args.cameras.split(",")] if args.cameras else None
        info, token = tokens.create(args.scope, cams, label=args.label or "")
        limit = f", cameras {','.join(info.cameras)}" if info.cameras else ""
        print(f"created token {info.token_id} (scope {info.scope}{limit}); it is shown once, only its hash is "
              f"kept in {tokens.path}:", file=sys.stderr)
        print(token)
        return 0
    if args.token_cmd == "list":
        rows = sorted(tokens.tokens().values(), key=lambda t: t.created_at)
        if args.json:
            print(json.dumps([t.to_json() for t in rows], indent=2))
            return 0
        if not rows and tokens.required():
            print("no tokens, and the store has had one: serve admits nobody until a token is created "
                  "('vam-engine token reset' opens loopback again)")
        elif not rows:
            print("no tokens (serve admits loopback requests without one and refuses other addresses)")
        for t in rows:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t.created_at))
            print(f"{t.token_id}  {t.scope:5}  cameras {','.join(t.cameras) if t.cameras else '*'}  created {when} UTC"
                  + (f"  {t.label}" if t.label else ""))
        return 0
    if args.token_cmd == "reset":
        if not args.yes:
            raise VamError("token reset lets loopback clients in without a token again: add --yes to confirm")
        tokens.reset()
        print(f"{tokens.path}: no token is required now on loopback (other addresses still need one)")
        return 0
    if not tokens.revoke(args.token_id):
        raise VamError(f"no token {args.token_id!r} in {tokens.path} (see 'vam-engine token list')")
    print(f"revoked {args.token_id}; a running server refuses it from its next request")
    return 0


def register(sub, g) -> None:
    sp = sub.add_parser("serve", parents=[g.store, g.engine, g.model, g.texts, g.tools, g.audio, g.perception],
                        help="serve the store over HTTP: API, alerts, metrics and the web page")
    sp.add_argument("--cameras", help="cameras file (TOML) to ingest; SIGHUP reloads it")
    sp.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1; any other needs a token first)")
    sp.add_argument("--port", type=int, default=8000)
    sp.add_argument("--max-upload-mb", type=float, default=10.0, help="request body limit (default 10 MB)")
    sp.add_argument("--max-connections", type=int, default=256, help="open connections at most (503 beyond)")
    sp.add_argument("--max-cameras-per-token", type=int, default=16,
                    help="live cameras one token may have added (429 beyond)")
    sp.add_argument("--max-monitors-per-token", type=int, default=None,
                    help="active monitors one token may hold, its sessions' standing requests included (429 "
                         "beyond; default: the config's service.monitors_per_token, 4)")
    sp.add_argument("--max-sessions-per-token", type=int, default=32,
                    help="open sessions one token may hold (429 beyond)")
    sp.add_argument("--max-session-streams", type=int, default=64,
                    help="session event streams open at once (429 beyond)")
    sp.add_argument("--cors-origin", action="append", help="allow this browser origin (repeatable; default none)")
    sp.add_argument("--mcp", action="store_true", help="also serve the memory as MCP tools (streamable HTTP at "
                    "/mcp, the same tokens; needs vam_engine[mcp])")
    sp.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    sp.add_argument("--cluster", metavar="ADDRESS", help="serve camera shards on this Ray cluster ('local': start "
                    "one here); --store is then the shards' root")
    sp.add_argument("--shards", type=int, help="with --cluster: how many shards a new root gets (default: one per node)")
    notify_options.add_arguments(sp)
    sp.set_defaults(func=cmd_serve)

    sp = sub.add_parser("token", help="create, list or revoke the service's bearer tokens")
    tsub = sp.add_subparsers(dest="token_cmd", required=True)
    c = tsub.add_parser("create", parents=[g.store], help="print a new token once (only its hash is stored)")
    c.add_argument("--scope", required=True, choices=SCOPES,
                   help="read: GET, search, ask; write: + cameras, monitors, summarize; admin: + delete")
    c.add_argument("--cameras", help="limit the token to these cameras (comma-separated)")
    c.add_argument("--label", help="a note shown by 'token list'")
    c = tsub.add_parser("list", parents=[g.store], help="the tokens (ids, scopes, cameras; never the tokens)")
    c.add_argument("--json", action="store_true")
    c = tsub.add_parser("revoke", parents=[g.store], help="revoke a token by id (the last one too: the store "
                                                           "then admits nobody until a new token or a reset)")
    c.add_argument("token_id")
    c = tsub.add_parser("reset", parents=[g.store], help="with no token left: admit loopback clients without "
                                                          "one again, as before the first token")
    c.add_argument("--yes", action="store_true", help="confirm")
    sp.set_defaults(func=cmd_token)

