"""Reading one record's fields with errors that name the field (the loaders turn them into
RecordProblem lines: file, record, field, problem)."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_MARK = re.compile(r"^\(?([A-Z])[.):]\s*")


class FieldError(ValueError):
    def __init__(self, field: str, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


def read_json(path: str | Path):
    """The parsed content of a JSON file; ValueError naming the file when it cannot be read."""
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: cannot read the records: {e}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: not valid JSON (line {e.lineno}: {e.msg})") from None


def read_jsonl(path: str | Path) -> list:
    """(line, record) pairs of a JSONL file; a line that is not JSON comes back as a FieldError
    in place of its record (blank lines and # comments are skipped)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: cannot read the records: {e}") from None
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            out.append((i, json.loads(line)))
        except json.JSONDecodeError as e:
            out.append((i, FieldError("", f"not valid JSON ({e.msg} at column {e.colno})")))
    return out


def first(rec, names, *, required: bool = True, default=None):
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


def number(rec, names, *, required=True, default=None) -> float | None:
    """A finite non-negative number of seconds (or a count)."""
    v = first(rec, names, required=required, default=default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise FieldError(names[0], f"must be a finite non-negative number, got {v!r}")
    return float(v)


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


_HMS = re.compile(r"^\d+:\d{2}:\d{2}$")


def official_clock(v, name: str) -> tuple[float, str]:
    """A StreamingBench time stamp read as its official scripts read it: the ":"-separated
    integer fields summed as seconds, minutes, hours from the right ("00:24" is 24 s, "00:12450"
    is 12450 s). Returns (seconds, note): the note says how a stamp that is not H:MM:SS was read."""
    if not isinstance(v, str) or not v.strip():
        raise FieldError(name, f"must be a time stamp H:MM:SS, got {v!r}")
    parts = v.strip().split(":")
    if not all(p.isdigit() for p in parts) or len(parts) > 3:
        raise FieldError(name, f"must be a time stamp H:MM:SS, got {v!r}")
    t = float(sum(int(p) * 60 ** i for i, p in enumerate(reversed(parts))))
    note = "" if _HMS.match(v.strip()) else f"time stamp {v!r} is not H:MM:SS; read as {t:g} s, as the official scripts read it"
    return t, note


def option_text(opt: str) -> str:
    """"B. a red car" -> "a red car"."""
    return _MARK.sub("", opt, count=1).strip()


def option_letter(opt: str) -> str | None:
    m = _MARK.match(opt)
    return m.group(1) if m else None


def bare_options(rec, names=("options", "choices", "candidates")) -> tuple | None:
    """Options as "A. text" strings (bare texts get letters by position; a dict {"A": text});
    None when there are none."""
    v = first(rec, names, required=False)
    if v is None or v == []:
        return None
    if isinstance(v, dict):
        v = [f"{k}. {t}" for k, t in sorted(v.items())]
    if not isinstance(v, list) or not all(isinstance(o, str) and o.strip() for o in v) or len(v) > len(LETTERS):
        raise FieldError(names[0], f"must be a list of non-empty strings (at most 26), got {v!r}")
    out = []
    for i, o in enumerate(v):
        o = o.strip()
        out.append(o if option_letter(o) == LETTERS[i] else f"{LETTERS[i]}. {o}")
    return tuple(out)


def marked_options(v, name: str = "options") -> tuple[tuple, list]:
    """A released option list with its quirks repaired: (options, notes). Options written
    "A. text" keep the letters as written (the official scorers compare letters, so a list
    marked A, C, B, D is kept in that order); empty items are dropped; an unmarked item after
    a marked one is the rest of that option cut at a line break and is joined to it. A list
    with no marks (StreamingBench SQA), or with marks on at most half of its items (a name such
    as "A.Lebrun."), is lettered A, B, C, ... by position."""
    if not isinstance(v, list) or not v or not all(isinstance(o, str) for o in v):
        raise FieldError(name, f"must be a non-empty list of strings, got {v!r}")
    notes = []
    items = [o for o in v if o.strip()]
    if len(items) < len(v):
        notes.append(f"dropped {len(v) - len(items)} empty option(s)")
    if not items:
        raise FieldError(name, "every option is empty")
    marked = sum(option_letter(o.strip()) is not None for o in items)
    if 2 * marked <= len(items):  # bare texts (one may look marked: the name "A.Lebrun.")
        if len(items) > len(LETTERS):
            raise FieldError(name, f"{len(items)} options is more than {len(LETTERS)}")
        if marked:
            notes.append(f"only {marked} of {len(items)} options look marked: all lettered A, B, C, ... by position")
        return tuple(f"{LETTERS[i]}. {o.strip()}" for i, o in enumerate(items)), notes
    out: list = []
    for o in items:
        if option_letter(o.strip()) or not out:
            out.append(o.strip())
        else:
            out[-1] = f"{out[-1].rstrip()} {o.strip()}"
            notes.append(f"joined {o.strip()[:30]!r} to the option before it (a line break in the release)")
    marks = [option_letter(o) or "?" for o in out]
    if marks != list(LETTERS[:len(out)]):
        notes.append(f"options are marked {', '.join(marks)} (kept as written)")
    return tuple(out), notes


def gt_letter(v, opts: tuple | None, name: str) -> str:
    """The correct letter from a letter, "(B)", a 0-based index, or the option's text."""
    if opts is None:
        raise FieldError("options", "a multiple-choice ground truth needs the options")
    letters = [option_letter(o) for o in opts]
    n = len(opts)
    if isinstance(v, int) and not isinstance(v, bool):
        if 0 <= v < n:
            return letters[v]
        raise FieldError(name, f"index {v} is outside the {n} options")
    if isinstance(v, str):
        s = v.strip()
        m = re.match(r"^\(?([A-Z])\)?(?:[.):\s]|$)", s)
        if m and m.group(1) in letters:
            return m.group(1)
        texts = [option_text(o).lower() for o in opts]
        if s.lower() in texts:
            return letters[texts.index(s.lower())]
    raise FieldError(name, f"{v!r} names none of the {n} options ({', '.join(l or '?' for l in letters)})")


def intervals(v, name: str) -> tuple:
    """Evidence intervals from [{"t_start", "t_end"}], [[a, b], ...], or one [a, b]."""
    from .records import Interval

    if v is None:
        return ()
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
        a, b = to_seconds(a, name), to_seconds(b, name)
        if b < a:
            raise FieldError(name, f"an interval ends before it starts: {item!r}")
        out.append(Interval(a, b))
    return tuple(out)
