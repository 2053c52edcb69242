"""``vam-engine eval FILE --check``: read and validate a records file without videos or a model;
count the questions per benchmark task and list every record skipped or repaired."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from . import loaders
from .records import KEPT, SKIPPED
from .tasks import SB_TASKS, STREAMBENCH_CLASSES


@dataclass
class CheckReport:
    file: str
    layout: str
    benchmark: str
    questions: int
    streams: int
    tasks: dict                      # task -> questions, in first-seen order
    groups: dict                     # table group (RT, Real-Time, HR, ...) -> questions
    kinds: dict                      # reactive / proactive / asked at the end -> questions
    problems: list = field(default_factory=list)  # of RecordProblem
    notes: list = field(default_factory=list)

    @property
    def skipped(self) -> int:
        return sum(p.action == SKIPPED for p in self.problems)

    def to_json(self) -> dict:
        return {"file": self.file, "format": self.layout, "benchmark": self.benchmark, "questions": self.questions,
                "streams": self.streams, "tasks": self.tasks, "groups": self.groups, "kinds": self.kinds,
                "skipped": self.skipped, "kept_with_repair": sum(p.action == KEPT for p in self.problems),
                "problems": [p.to_json() for p in self.problems], "notes": self.notes}

    def text(self) -> str:
        names = {**{a: full for a, (_, full) in SB_TASKS.items()}, **STREAMBENCH_CLASSES}
        width = max([len(t) for t in self.tasks] + [4])
        lines = [f"{self.file}: {self.benchmark} ({self.layout} layout), {self.questions} questions over "
                 f"{self.streams} streams"]
        lines += [f"  {t.ljust(width)}  {n:6d}" + (f"  {names[t]}" if self.benchmark != "ovo" and t in names else "")
                  for t, n in self.tasks.items()]
        lines.append("  groups: " + ", ".join(f"{g} {n}" for g, n in self.groups.items()))
        lines.append("  kinds: " + ", ".join(f"{k} {n}" for k, n in self.kinds.items()))
        skipped = [p for p in self.problems if p.action == SKIPPED]
        kept = [p for p in self.problems if p.action == KEPT]
        lines.append(f"  records skipped: {len(skipped)}; read with a repair: {len(kept)}")
        lines += [f"  skipped: {p}" for p in skipped] + [f"  kept: {p}" for p in kept]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def check(path, fmt: str | None = None) -> CheckReport:
    suite = loaders.read(path, fmt)
    qs = suite.questions
    kinds = Counter("at the end" if q.at_end else q.kind for q in qs)
    return CheckReport(str(path), suite.layout, suite.benchmark, len(qs), len({q.video for q in qs}),
                       dict(Counter(q.category for q in qs)), dict(Counter(q.group for q in qs)), dict(kinds),
                       list(suite.problems), list(suite.notes))
