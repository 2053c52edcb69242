"""The evaluation harness (``vam-engine eval``): benchmark records replayed as streams through
the engine and the baselines on the same model, scored as each benchmark's official code
scores them, reported in the papers' table layouts.

records (the dataclasses) <- loaders (the real benchmark files) -> driver / replay (streaming
replay: frames, questions at their times, proactive cases, baselines; results.jsonl) -> grade
(scorers: official rules and robust extraction; judges: the benchmarks' scales) -> report;
protocol holds each benchmark's live-protocol defaults, forms its question forms, check the
``--check`` summary, sample/ the bundled suite, cli the subcommand.

The names below are the way in; each loads its module at first use, so building the CLI's parser
(which reads ``BASELINES``, ``FORMATS``, ``SCORINGS``) or ``--check`` does not import the engine
the driver runs. No name is spelled like a submodule (``check_records``, not ``check``): importing
the submodule would bind its name on this package and shadow the lazy name."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# name -> (module it lives in, its name there)
_EXPORTS = {
    "BASELINES": ("vam_engine.eval.baselines", "BASELINES"),
    "FORMATS": ("vam_engine.eval.loaders", "FORMATS"),
    "load_suite": ("vam_engine.eval.loaders", "load"),
    "dump_problems": ("vam_engine.eval.loaders", "dump_problems"),
    "SCORINGS": ("vam_engine.eval.report", "SCORINGS"),
    "build_report": ("vam_engine.eval.report", "build"),
    "write_report": ("vam_engine.eval.report", "write"),
    "render_report": ("vam_engine.eval.report", "render"),
    "check_records": ("vam_engine.eval.check", "check"),
    "reactive_for": ("vam_engine.eval.protocol", "reactive_for"),
    "Driver": ("vam_engine.eval.driver", "Driver"),
    "DriverConfig": ("vam_engine.eval.driver", "DriverConfig"),
    "EngineHost": ("vam_engine.eval.driver", "EngineHost"),
    "Progress": ("vam_engine.eval.driver", "Progress"),
    "Judge": ("vam_engine.eval.judges", "Judge"),
    "SAMPLE_QUESTIONS": ("vam_engine.eval.sample", "QUESTIONS"),
    "prepare_sample_videos": ("vam_engine.eval.sample", "prepare_videos"),
}

__all__ = [  # a literal list, for linters; the same names as _EXPORTS
    "BASELINES", "FORMATS", "SAMPLE_QUESTIONS", "SCORINGS", "Driver", "DriverConfig", "EngineHost", "Judge",
    "Progress", "build_report", "check_records", "dump_problems", "load_suite", "prepare_sample_videos",
    "reactive_for", "render_report", "write_report",
]


def __getattr__(name: str):
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return __all__


if TYPE_CHECKING:  # for type checkers, editors and the layer contract: the same names, imported eagerly
    from .baselines import BASELINES
    from .check import check as check_records
    from .driver import Driver, DriverConfig, EngineHost, Progress
    from .judges import Judge
    from .loaders import FORMATS, dump_problems
    from .loaders import load as load_suite
    from .protocol import reactive_for
    from .report import SCORINGS
    from .report import build as build_report
    from .report import render as render_report
    from .report import write as write_report
    from .sample import QUESTIONS as SAMPLE_QUESTIONS
    from .sample import prepare_videos as prepare_sample_videos
