"""Reports in the layouts of the papers' tables: one row per method of the run, a ratio row
per baseline (engine / baseline), and the papers' published rows beside them (published.py);
printed and written as JSON and CSV.

- OVO-Bench: accuracy per task, Real-Time / Backward / Forward averages (means of their
  tasks), RT+BT (mean of the first two: VAM's headline) and overall (mean of the three, as the
  papers' tables give it: VAM's 61.95; OVO-Bench's scoring script prints a "Total Avg." over
  the twelve tasks instead, which we do not report).
- StreamingBench: accuracy per task and per axis (Real-Time, Omni-Source, Contextual;
  question-weighted), overall; Proactive Output's TimeOK (+-2 s) beside it.
- StreamBench: accuracy (share of yes) per class, their mean, and the judge's mean 0-5 score.
- StreamArena: RTP, HR (Avg, L1-L4), Tool, Pro (Avg, L1-L3), averages question-weighted; and
  mean latency per capability and pooled.
- MM-Lifelong: accuracy (1 / 0.5 / 0 per answer) and Ref@300.
- Our JSONL: accuracy per category and per group, overall, with proactive accuracy and TimeOK.

Accuracy is the mean credit of the scored answers under the benchmark's official rule, or,
with ``scoring="robust"``, under the harness's robust extraction (titled as such: those
numbers are not comparable with published ones). Every report ends with latency (per category
and pooled), response-prefill delay and tokens."""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from .published import PUBLISHED
from .records import ENGINE
from .tasks import OVO_GROUPS, SB_AXES, SB_TASKS, STREAMBENCH_CLASSES

SCORINGS = ("official", "robust", "both")
ROBUST_TITLE = " [robust extraction, not the official rule]"


@dataclass
class Table:
    title: str
    columns: list
    rows: list = field(default_factory=list)  # (label, [value | None, ...])
    unit: str = "%"

    def text(self) -> str:
        head = ["method"] + self.columns
        digits = 1 if self.unit == "%" else 2
        body = [[label] + [_fmt(v, 2 if "/" in label else digits) for v in vals] for label, vals in self.rows]
        widths = [max(len(str(r[i])) for r in [head] + body) for i in range(len(head))]
        line = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
        return "\n".join([f"{self.title} ({self.unit})", line(head), "  ".join("-" * w for w in widths)]
                         + [line(r) for r in body])

    def to_json(self) -> dict:
        return {"title": self.title, "unit": self.unit, "columns": self.columns,
                "rows": [{"method": label, "values": dict(zip(self.columns, vals))} for label, vals in self.rows]}


def _fmt(v, digits: int) -> str:
    if v is None:
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def _mean(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _methods(results) -> list:
    ms = list(dict.fromkeys(r.method for r in results))
    return sorted(ms, key=lambda m: (m != ENGINE, ms.index(m)))


class _Acc:
    """Accuracy (%) of results under one scoring: the mean credit of the scored ones."""

    def __init__(self, robust: bool):
        self.attr = "score_robust" if robust else "score"

    def __call__(self, rs) -> float | None:
        vals = [getattr(r, self.attr) for r in rs if getattr(r, self.attr) is not None]
        return 100.0 * sum(vals) / len(vals) if vals else None


def _with_ratios(table: Table) -> Table:
    """A row "engine / baseline" for each baseline of the run: the engine's value over the baseline's."""
    eng = next((vals for label, vals in table.rows if label == ENGINE), None)
    if eng is None:
        return table
    extra = [(f"{ENGINE}/{label}", [round(e / b, 2) if e is not None and b else None for e, b in zip(eng, vals)])
             for label, vals in table.rows if label != ENGINE]
    table.rows += extra
    return table


def _published(table: Table, benchmark: str) -> Table:
    for label, values in PUBLISHED.get(benchmark, []):
        if any(c in values for c in table.columns):
            table.rows.append((label, [values.get(c) for c in table.columns]))
    return table


def _table(title, results, columns, benchmark: str = "") -> Table:
    """``columns``: (name, fn(results of one method) -> value)."""
    t = Table(title, [c for c, _ in columns])
    for m in _methods(results):
        rs = [r for r in results if r.method == m]
        t.rows.append((m, [fn(rs) for _, fn in columns]))
    return _published(_with_ratios(t), benchmark)


def _where(acc, pred):
    return lambda rs: acc([r for r in rs if pred(r)])


def _present(results, attr, order) -> list:
    have = {getattr(r, attr) for r in results}
    return [x for x in order if x in have] + sorted(x for x in have if x not in order and x)


def ovo_tables(results, acc: _Acc) -> list:
    task_acc = lambda rs, t: acc([r for r in rs if r.category == t])
    cols, groups = [], {}
    for g, name in (("RT", "RT avg"), ("BT", "BT avg"), ("Fwd", "Fwd avg")):
        tasks = [t for t in OVO_GROUPS if OVO_GROUPS[t] == g]
        present = [t for t in tasks if any(r.category == t for r in results)]
        groups[g] = present
        cols += [(t, lambda rs, t=t: task_acc(rs, t)) for t in present]
        cols.append((name, lambda rs, ts=present: _mean([task_acc(rs, t) for t in ts]) if ts else None))
    avg = lambda rs, g: _mean([task_acc(rs, t) for t in groups[g]]) if groups[g] else None
    cols.append(("RT+BT", lambda rs: _mean([avg(rs, "RT"), avg(rs, "BT")]) if groups["RT"] and groups["BT"] else None))
    cols.append(("overall", lambda rs: _mean([avg(rs, g) for g in groups]) if all(groups.values()) else None))
    return [_table("OVO-Bench accuracy", results, cols, "ovo")]


def streamingbench_tables(results, acc: _Acc) -> list:
    cols = []
    for axis in SB_AXES:
        tasks = [t for t in _present(results, "category", list(SB_TASKS)) if SB_TASKS.get(t, ("",))[0] == axis]
        cols += [(t, _where(acc, lambda r, t=t: r.category == t)) for t in tasks]
        if tasks:
            cols.append((axis, _where(acc, lambda r, a=axis: r.group == a)))
    cols.append(("overall", acc))
    tables = [_table("StreamingBench accuracy", results, cols, "streamingbench")]
    if any(r.category == "PO" for r in results):
        tables.append(_proactive_table("StreamingBench Proactive Output (TimeOK: +-2 s)",
                                       [r for r in results if r.category == "PO"], acc))
    return tables


def streambench_tables(results, acc: _Acc) -> list:
    classes = ["OS", "LM", "SM", "CI", "KG", "SF"]
    cols = [(c, _where(acc, lambda r, c=c: r.category == c)) for c in classes if any(r.category == c for r in results)]
    cols.append(("Avg", lambda rs: _mean([acc([r for r in rs if r.category == c]) for c in STREAMBENCH_CLASSES])))
    cols.append(("score 0-5", lambda rs: _mean([r.judge_score for r in rs])))
    return [_table("StreamBench accuracy (share judged yes) and mean judge score", results, cols, "streambench")]


def streamarena_tables(results, acc: _Acc) -> list:
    cols = [("RTP", _where(acc, lambda r: r.group == "RTP")), ("HR avg", _where(acc, lambda r: r.group == "HR"))]
    cols += [(f"HR {s}", _where(acc, lambda r, s=s: r.group == "HR" and r.stratum == s)) for s in ("L1", "L2", "L3", "L4")]
    cols += [("Tool", _where(acc, lambda r: r.group == "Tool")), ("Pro avg", _where(acc, lambda r: r.group == "Pro"))]
    cols += [(f"Pro {s}", _where(acc, lambda r, s=s: r.group == "Pro" and r.stratum == s)) for s in ("L1", "L2", "L3")]
    table = _table("StreamArena accuracy", results, cols, "streamarena")
    lat = Table("StreamArena mean latency", ["RTP", "HR", "Tool", "pooled"], unit="s")
    for m in _methods(results):
        rs = [r for r in results if r.method == m and r.kind == "reactive"]
        lat.rows.append((m, [_mean([r.latency_s for r in rs if r.group == g]) for g in ("RTP", "HR", "Tool")]
                         + [_mean([r.latency_s for r in rs if r.group in ("RTP", "HR", "Tool")])]))
    return [table, _with_ratios(lat)]


def mmlifelong_tables(results, acc: _Acc) -> list:
    ref = lambda rs: None if _mean([r.ref300 for r in rs]) is None else 100.0 * _mean([r.ref300 for r in rs])
    return [_table("MM-Lifelong", results, [("Acc.", acc), ("Ref@300", ref)], "mmlifelong")]


def _proactive_table(title, pro, acc: _Acc) -> Table:
    t = Table(title, ["Proactive-Acc", "TimeOK", "alerted"])
    for m in _methods(pro):
        rs = [r for r in pro if r.method == m]
        oks = [r.time_ok for r in rs if r.time_ok is not None]
        t.rows.append((m, [acc(rs), 100.0 * sum(oks) / len(oks) if oks else None,
                           100.0 * sum(r.t_pred is not None for r in rs) / len(rs) if oks else None]))
    return t


def jsonl_tables(results, acc: _Acc) -> list:
    cats = _present(results, "category", [])
    groups = _present(results, "group", [])
    cols = [(c, _where(acc, lambda r, c=c: r.category == c)) for c in cats]
    if groups != cats:
        cols += [(f"[{g}]", _where(acc, lambda r, g=g: r.group == g)) for g in groups]
    cols.append(("overall", acc))
    tables = [_table("Accuracy per category", results, cols)]
    pro = [r for r in results if r.kind == "proactive"]
    if pro:
        tables.append(_proactive_table("Proactive", pro, acc))
    return tables


def cost_table(results) -> Table:
    """Latency L = t_response - t_query per category and pooled (reactive answers), the
    response-prefill delay, and mean tokens per answer."""
    cats = _present([r for r in results if r.kind == "reactive"], "category", [])
    t = Table("Latency per category, pooled; prefill; tokens", [*cats, "pooled", "prefill", "prompt tok", "compl tok"],
              unit="s, tokens")
    for m in _methods(results):
        rs = [r for r in results if r.method == m and r.kind == "reactive" and r.response is not None]
        t.rows.append((m, [_mean([r.latency_s for r in rs if r.category == c]) for c in cats]
                       + [_mean([r.latency_s for r in rs]), _mean([r.prefill_s for r in rs]),
                          _mean([r.prompt_tokens for r in rs]), _mean([r.completion_tokens for r in rs])]))
    return t


LAYOUTS = {"ovo": ovo_tables, "streamingbench": streamingbench_tables, "streambench": streambench_tables,
           "streamarena": streamarena_tables, "mmlifelong": mmlifelong_tables, "jsonl": jsonl_tables}


def build(results, benchmark: str, scoring: str = "official") -> list:
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    if not results:
        return []
    layout = LAYOUTS.get(benchmark, jsonl_tables)
    tables = []
    if scoring in ("official", "both"):
        tables += layout(results, _Acc(robust=False))
    if scoring in ("robust", "both"):
        for t in layout(results, _Acc(robust=True)):
            t.title += ROBUST_TITLE
            t.rows = [(label, vals) for label, vals in t.rows if not label.startswith("paper:")]
            tables.append(t)
    return tables + [cost_table(results)]


def write(tables, out_dir, extra: dict | None = None) -> tuple[Path, Path]:
    """report.json (the tables and ``extra``: run status, problems) and report.csv (one row per
    table, method, column)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jp, cp = out / "report.json", out / "report.csv"
    jp.write_text(json.dumps({**(extra or {}), "tables": [t.to_json() for t in tables]}, indent=2), encoding="utf-8")
    with open(cp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["table", "unit", "method", "column", "value"])
        for t in tables:
            for label, vals in t.rows:
                for c, v in zip(t.columns, vals):
                    w.writerow([t.title, t.unit, label, c, "" if v is None else round(v, 4)])
    return jp, cp


def render(tables) -> str:
    return "\n\n".join(t.text() for t in tables)
