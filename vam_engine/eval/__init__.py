"""The evaluation harness (``vam-engine eval``): benchmark records replayed as streams through
the engine and the baselines on the same model, scored the seeds' way, reported in the seeds'
table layouts.

records (the dataclasses) <- loaders (benchmark files) -> driver (streaming replay: frames,
questions at their times, monitors, baselines; results.jsonl) -> scorers -> report; sample/ is
the bundled suite, cli the subcommand."""
