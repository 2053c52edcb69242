"""Reports in the layouts of the seeds' tables, one row per method and a ratio row per
baseline (engine / baseline), printed and written as JSON and CSV.

- OVO-Bench: accuracy per task, RT / BT / Fwd averages (mean of their tasks), overall = mean
  of the three averages.
- StreamingBench: accuracy per task and per axis (Real-Time, Omni-Source, Contextual;
  question-weighted), overall.
- StreamArena: RTP, HR (Avg, L1-L4), Tool, Pro (Avg, L1-L3), averages question-weighted; and
  mean latency per capability and pooled.
- MM-Lifelong: accuracy and Ref@300.
- Our JSONL: accuracy per category and per group, overall, with proactive accuracy and TimeOK.
Every report ends with latency (per category and pooled), response-prefill delay and tokens.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from .loaders import OVO_GROUPS, SB_TASKS
from .records import ENGINE


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


def _acc(rs) -> float | None:
    scored = [r for r in rs if r.correct is not None]
    return 100.0 * sum(bool(r.correct) for r in scored) / len(scored) if scored else None


def _mean(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _methods(results) -> list:
    ms = list(dict.fromkeys(r.method for r in results))
    return sorted(ms, key=lambda m: (m != ENGINE, ms.index(m)))


def _with_ratios(table: Table) -> Table:
    """A row "engine / baseline" for each baseline: the engine's value over the baseline's."""
    eng = next((vals for label, vals in table.rows if label == ENGINE), None)
    if eng is None:
        return table
    extra = []
    for label, vals in table.rows:
        if label == ENGINE:
            continue
        extra.append((f"{ENGINE}/{label}", [round(e / b, 2) if e is not None and b else None for e, b in zip(eng, vals)]))
    table.rows += extra
    return table


def _accuracy_table(title, results, columns) -> Table:
    """``columns``: (name, predicate(result) or a callable(results) -> value)."""
    t = Table(title, [c for c, _ in columns])
    for m in _methods(results):
        rs = [r for r in results if r.method == m]
        t.rows.append((m, [fn(rs) if getattr(fn, "aggregate", False) else _acc([r for r in rs if fn(r)])
                           for _, fn in columns]))
    return _with_ratios(t)


def _agg(fn):
    fn.aggregate = True
    return fn


def _present(results, attr, order) -> list:
    have = {getattr(r, attr) for r in results}
    return [x for x in order if x in have] + sorted(x for x in have if x not in order and x)


def ovo_tables(results) -> list:
    cols = []
    groups = {}
    for g in ("RT", "BT", "Fwd"):
        tasks = [t for t in _present(results, "category", list(OVO_GROUPS)) if OVO_GROUPS.get(t) == g]
        groups[g] = tasks
        cols += [(t, lambda r, t=t: r.category == t) for t in tasks]
        cols.append((f"{g} avg", _agg(lambda rs, ts=tasks: _mean([_acc([r for r in rs if r.category == t]) for t in ts]))))
    cols.append(("overall", _agg(lambda rs: _mean([_mean([_acc([r for r in rs if r.category == t]) for t in groups[g]])
                                                   for g in groups]))))
    return [_accuracy_table("OVO-Bench accuracy", results, cols)]


def streamingbench_tables(results) -> list:
    cols = []
    for axis in ("Real-Time", "Omni-Source", "Contextual"):
        tasks = [t for t in _present(results, "category", list(SB_TASKS)) if SB_TASKS.get(t, ("",))[0] == axis]
        cols += [(t, lambda r, t=t: r.category == t) for t in tasks]
        if tasks:
            cols.append((axis, lambda r, a=axis: r.group == a))
    cols.append(("overall", lambda r: True))
    return [_accuracy_table("StreamingBench accuracy", results, cols)]


def streamarena_tables(results) -> list:
    cols = [("RTP", lambda r: r.group == "RTP"), ("HR avg", lambda r: r.group == "HR")]
    cols += [(f"HR {s}", lambda r, s=s: r.group == "HR" and r.stratum == s) for s in ("L1", "L2", "L3", "L4")]
    cols += [("Tool", lambda r: r.group == "Tool"), ("Pro avg", lambda r: r.group == "Pro")]
    cols += [(f"Pro {s}", lambda r, s=s: r.group == "Pro" and r.stratum == s) for s in ("L1", "L2", "L3")]
    acc = _accuracy_table("StreamArena accuracy", results, cols)
    lat = Table("StreamArena mean latency", ["RTP", "HR", "Tool", "pooled"], unit="s")
    for m in _methods(results):
        rs = [r for r in results if r.method == m and r.kind == "reactive"]
        lat.rows.append((m, [_mean([r.latency_s for r in rs if r.group == g]) for g in ("RTP", "HR", "Tool")]
                         + [_mean([r.latency_s for r in rs if r.group in ("RTP", "HR", "Tool")])]))
    return [acc, _with_ratios(lat)]


def mmlifelong_tables(results) -> list:
    t = Table("MM-Lifelong", ["Acc.", "Ref@300"])
    for m in _methods(results):
        rs = [r for r in results if r.method == m]
        ref = _mean([r.ref300 for r in rs])
        t.rows.append((m, [_acc(rs), None if ref is None else 100.0 * ref]))
    return [_with_ratios(t)]


def jsonl_tables(results) -> list:
    cats = _present(results, "category", [])
    groups = _present(results, "group", [])
    cols = [(c, lambda r, c=c: r.category == c) for c in cats]
    if groups != cats:
        cols += [(f"[{g}]", lambda r, g=g: r.group == g) for g in groups]
    cols.append(("overall", lambda r: True))
    tables = [_accuracy_table("Accuracy per category", results, cols)]
    pro = [r for r in results if r.kind == "proactive"]
    if pro:
        t = Table("Proactive", ["Proactive-Acc", "TimeOK", "alerted"])
        for m in _methods(pro):
            rs = [r for r in pro if r.method == m]
            oks = [r.time_ok for r in rs if r.time_ok is not None]
            t.rows.append((m, [_acc(rs), 100.0 * sum(oks) / len(oks) if oks else None,
                               100.0 * sum(r.t_pred is not None for r in rs) / len(rs) if oks else None]))
        tables.append(t)
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


LAYOUTS = {"ovo": ovo_tables, "streamingbench": streamingbench_tables, "streamarena": streamarena_tables,
           "mmlifelong": mmlifelong_tables, "jsonl": jsonl_tables}


def build(results, benchmark: str) -> list:
    if not results:
        return []
    return LAYOUTS.get(benchmark, jsonl_tables)(results) + [cost_table(results)]


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
