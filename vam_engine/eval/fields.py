"""Reading one record's fields with errors that name the field (the loaders turn them into
RecordProblem lines: file, line, field, problem)."""
from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class FieldError(ValueError):
    def __init__(self, field: str, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


def read_entries(path: str | Path):
    """(line or entry number, record) pairs of a JSONL file or a JSON list; a JSONL line that is
    not JSON comes back as a FieldError in place of its record. A file that cannot be read at all
    raises ValueError naming it."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: cannot read the records: {e}") from None
    stripped = text.lstrip()
    if stripped.startswith("[") or (stripped.startswith("{") and p.suffix == ".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}: not valid JSON (line {e.lineno}: {e.msg})") from None
        if isinstance(data, dict):  # {"id": [...]} or {"data": [...]}: the one list inside
            lists = [v for v in data.values() if isinstance(v, list)]
            data = lists[0] if len(lists) == 1 else [data]
        return list(enumerate(data, 1))
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            out.append((i, json.loads(line)))
        except json.JSONDecodeError as e:
            out.append((i, FieldError("", f"not valid JSON ({e.msg} at column {e.colno})")))
    return out


def first(rec: dict, names, *, required: bool = True, default=None):
    """The value of the first of ``names`` present in ``rec``."""
    if not isinstance(rec, dict):
        raise FieldError("", f"a record must be a JSON object, got {type(rec).__name__}")
    for n in names:
        if n in rec and rec[n] is not None:
            return rec[n]
    if required:
        raise FieldError(names[0], "missing" + (f" (also looked for {', '.join(names[1:])})" if names[1:] else ""))
    return default


def text(rec, names, *, required=True, default="") -> str:
    v = first(rec, names, required=required, default=default)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        v = str(v)
    if not isinstance(v, str) or (required and not v.strip()):
        raise FieldError(names[0], f"must be a non-empty string, got {v!r}")
    return v.strip()


_CLOCK = re.compile(r"^(?:(\d+):)?(\d{1,2}):(\d{1,2}(?:\.\d+)?)$")


def seconds(rec, names, *, required=True, default=None) -> float | None:
    """A time in seconds: a number, or "HH:MM:SS(.f)" / "MM:SS"."""
    v = first(rec, names, required=required, default=default)
    if v is None:
        return None
    return to_seconds(v, names[0])


def to_seconds(v, name: str) -> float:
    if isinstance(v, str):
        m = _CLOCK.match(v.strip())
        if m:
            h, mi, s = m.groups()
            return int(h or 0) * 3600 + int(mi) * 60 + float(s)
        try:
            v = float(v)
        except ValueError:
            raise FieldError(name, f"must be seconds or HH:MM:SS, got {v!r}") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise FieldError(name, f"must be a finite non-negative time in seconds, got {v!r}")
    return float(v)


def absolute(v, name: str) -> float:
    """Unix seconds from a number or an ISO 8601 time (a time without a zone is UTC)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    if isinstance(v, str):
        try:
            d = datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
        except ValueError:
            raise FieldError(name, f"must be unix seconds or an ISO 8601 time, got {v!r}") from None
        if d.tzinfo is None:
            d = d.replace(tzinfo=UTC)
        return d.timestamp()
    raise FieldError(name, f"must be unix seconds or an ISO 8601 time, got {v!r}")


def options(rec, names=("options", "choices", "candidates")) -> tuple | None:
    """Options as "A. text" strings (bare texts get letters); None when there are none."""
    v = first(rec, names, required=False)
    if v is None or v == []:
        return None
    if isinstance(v, dict):  # {"A": "text", ...}
        v = [f"{k}. {t}" for k, t in sorted(v.items())]
    if not isinstance(v, list) or not all(isinstance(o, str) and o.strip() for o in v) or len(v) > len(LETTERS):
        raise FieldError(names[0], f"must be a list of non-empty strings (at most 26), got {v!r}")
    out = []
    for i, o in enumerate(v):
        o = o.strip()
        out.append(o if re.match(rf"^\(?{LETTERS[i]}[.):]", o) else f"{LETTERS[i]}. {o}")
    return tuple(out)


def option_text(opt: str) -> str:
    """"B. a red car" -> "a red car"."""
    return re.sub(r"^\(?[A-Z][.):]\s*", "", opt).strip()


def gt_letter(v, opts: tuple | None, name: str) -> str:
    """The correct letter from a letter, "(B)", a 0-based index, or the option's text."""
    if opts is None:
        raise FieldError("options", "a multiple-choice ground truth needs the options")
    n = len(opts)
    if isinstance(v, int) and not isinstance(v, bool):
        if 0 <= v < n:
            return LETTERS[v]
        raise FieldError(name, f"index {v} is outside the {n} options")
    if isinstance(v, str):
        s = v.strip()
        m = re.match(r"^\(?([A-Z])\)?(?:[.):\s]|$)", s)
        if m and LETTERS.index(m.group(1)) < n:
            return m.group(1)
        texts = [option_text(o).lower() for o in opts]
        if s.lower() in texts:
            return LETTERS[texts.index(s.lower())]
    raise FieldError(name, f"{v!r} names none of the {n} options")


def intervals(v, name: str, *, convert=None) -> tuple:
    """Evidence intervals from [{"t_start", "t_end"}], [[a, b], ...], or one [a, b]."""
    from .records import Interval

    if v is None:
        return ()
    conv = convert or (lambda x, n: to_seconds(x, n))
    if isinstance(v, list) and len(v) == 2 and not isinstance(v[0], (list, dict)):
        v = [v]
    if not isinstance(v, list):
        raise FieldError(name, f"must be a list of intervals, got {v!r}")
    out = []
    for item in v:
        if isinstance(item, dict):
            a = item.get("t_start", item.get("start"))
            b = item.get("t_end", item.get("end", a))
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            a, b = item
        else:
            raise FieldError(name, f"an interval must be {{t_start, t_end}} or [start, end], got {item!r}")
        if a is None:
            raise FieldError(name, f"an interval has no start: {item!r}")
        a, b = conv(a, name), conv(b, name)
        if b < a:
            raise FieldError(name, f"an interval ends before it starts: {item!r}")
        out.append(Interval(a, b))
    return tuple(out)
