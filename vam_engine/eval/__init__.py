"""The evaluation harness (``vam-engine eval``): benchmark records replayed as streams through
the engine and the baselines on the same model, scored as each benchmark's official code
scores them, reported in the papers' table layouts.

records (the dataclasses) <- loaders (the real benchmark files) -> driver / replay (streaming
replay: frames, questions at their times, proactive cases, baselines; results.jsonl) -> grade
(scorers: official rules and robust extraction; judges: the benchmarks' scales) -> report;
protocol holds each benchmark's live-protocol defaults, forms its question forms, check the
``--check`` summary, sample/ the bundled suite, cli the subcommand."""
