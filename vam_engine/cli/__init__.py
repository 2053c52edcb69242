"""The ``vam-engine`` command (also ``python -m vam_engine.cli``): one module per command family,
each with a ``register(sub, groups)`` that adds its subcommands, and the option groups and the
engine they share in ``common.py``.

- ``index``: index (files; ``--live``/``--realtime`` through ``live``)
- ``demo``: demo (the built-in example, on whatever extras are installed)
- ``query``: info, search, summarize, ask, delete, retain
- ``watch``: watch
- ``perception``: entities
- ``serve``: serve (one engine, or ``--cluster``), token
- ``mcp``: mcp (the memory as MCP tools over stdio)
- ``clip``: clip (an MP4 of an interval)
- ``eval``: eval

This is the top floor: it may import any layer, and no layer imports it.
"""
from __future__ import annotations

import argparse
import sys

from ..errors import VamError
from . import eval as eval_commands
from . import clip, demo, index, mcp, perception, query, serve, watch
from .common import option_groups

__all__ = ["main", "build_parser"]

COMMAND_MODULES = (index, demo, query, watch, perception, eval_commands, serve, mcp, clip)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vam-engine", description="Streaming visual-memory engine")
    sub = p.add_subparsers(dest="cmd", required=True)
    groups = option_groups()
    for module in COMMAND_MODULES:
        module.register(sub, groups)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (VamError, ValueError) as e:
        print(f"vam-engine: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vam-engine: interrupted; committed work is kept and the next run resumes", file=sys.stderr)
        return 130
