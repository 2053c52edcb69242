"""Loaders: benchmark record files -> a LoadedSuite (questions, streams, problems).

Every loader reads record by record; a record it cannot read becomes a RecordProblem (file,
record, field, problem, "skipped"), and a quirk it repairs one marked "kept": nothing is
dropped silently. The layouts are the real releases' (``shared/EVAL_FORMATS.md``); the layout
of a file is recognised from its content when ``--format`` is not given."""
from __future__ import annotations

import json
from pathlib import Path

from .jsonl import load_jsonl
from .lifelong import load_mmlifelong
from .oasis import load_oasis
from .ovo import load_ovo
from .streamarena import load_streamarena
from .streamingbench import load_streamingbench
from .videos import VIDEO_EXTS, attach_videos, resolve_video

LOADERS = {"ovo": load_ovo, "streamingbench": load_streamingbench, "oasis": load_oasis,
           "mmlifelong": load_mmlifelong, "streamarena": load_streamarena, "jsonl": load_jsonl}
FORMATS = tuple(LOADERS)

__all__ = ["FORMATS", "LOADERS", "VIDEO_EXTS", "attach_videos", "detect_format", "dump_problems", "load",
           "read", "resolve_video"]


def _signature(rec) -> str | None:
    if isinstance(rec, list):
        return "streamingbench"  # questions_sqa.json: a list of lists of entries
    if not isinstance(rec, dict):
        return None
    keys = set(rec)
    if {"info", "breakpoint"} <= keys:
        return "oasis"
    if "questions" in keys and ("video_path" in keys or "time" in keys):
        return "streamingbench"
    if "task" in keys and "video" in keys and ("realtime" in keys or "test_info" in keys):
        return "ovo"
    if keys & {"clue_interval", "clue_intervals", "total_intervals"}:
        return "mmlifelong"
    if "capability" in keys and "query_time" in keys:
        return "streamarena"
    return None


def detect_format(path) -> str:
    """The layout of a records file, from its content: the releases' JSON lists by their
    fields, our JSONL by one JSON object a line. ValueError when it cannot tell."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: cannot read the records: {e}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, list):
        sigs = {_signature(rec) for rec in data[:50]} - {None}
        if len(sigs) == 1:
            return sigs.pop()
        raise ValueError(f"{p}: cannot recognise the records' layout (looks like {sorted(sigs) or 'none'}); "
                         f"pass --format (one of {', '.join(FORMATS)})")
    if data is None and any(line.strip().startswith("{") for line in text.splitlines()[:5]):
        return "jsonl"
    if isinstance(data, dict) and "video" in data and "question" in data:
        return "jsonl"  # a one-line JSONL file
    raise ValueError(f"{p}: cannot recognise the records' layout; pass --format (one of {', '.join(FORMATS)})")


def read(path, fmt: str | None = None):
    """Read ``path`` (layout ``fmt``, or recognised) without looking for videos."""
    if not Path(path).is_file():
        raise ValueError(f"{path}: no such records file")
    fmt = fmt or detect_format(path)
    if fmt not in LOADERS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return LOADERS[fmt](path)


def load(path, fmt: str | None = None, videos_dir=None):
    """Read ``path`` and resolve its streams' videos under ``videos_dir`` (questions whose video
    is missing are reported as problems too)."""
    suite = read(path, fmt)
    attach_videos(suite, videos_dir, str(path))
    return suite


def dump_problems(problems, path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(p.to_json(), ensure_ascii=False) + "\n" for p in problems)
