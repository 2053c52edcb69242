"""Each benchmark's live protocol, as the defaults of a run; easier settings are explicit
options (``vam-engine eval --help``).

- The stream clock keeps running while the engine answers (``reactive="race"``: frames keep
  arriving at 1x real time while an answer is computed, the answer sees only ``as_of`` = the
  question's time), except where the benchmark pauses it: StreamArena pauses at each reactive
  question until it is answered.
- No catch-up before a question (``settle=False``): the engine answers from what it has
  committed by then, as it would live.
- Monitors check on their own period, StreamMind's 2 s; StreamingBench's Proactive Output is
  polled once a second, as its protocol polls, from the question until t_gt + 4 s.
- While a monitor waits the stream runs at 1x real time and checks the model cannot keep up
  with are dropped (``proactive="realtime"``); ``"drain"`` judges every due check first.
- The engine indexes at its own rate (its config, 0.5 fps by default, VAM's), whatever rate
  the stream is pushed at; frames are pushed as decoded (no resize).
- A fresh store per stream (``store="per_video"``), so no question history (the QA history
  and its rolling summary, the dialogue) reaches another stream's prompts.
"""
from __future__ import annotations

PAUSES = {"streamarena"}          # benchmarks whose protocol stops the clock at a reactive question
POLL_PERIOD_S = {"streamingbench": 1.0}
MONITOR_PERIOD_S = 2.0            # StreamMind C.5
POLL_AFTER_GT_S = 4.0             # StreamingBench polls until t_gt + 4 s
CASE_TAIL_S = 30.0                # StreamArena: a proactive case ends 30 s after t_gt


def reactive_for(benchmark: str) -> str:
    return "pause" if benchmark in PAUSES else "race"


def watch_period(benchmark: str) -> float:
    return POLL_PERIOD_S.get(benchmark, MONITOR_PERIOD_S)


def case_end(q, tail_s: float = CASE_TAIL_S) -> float:
    """The stream time a proactive case ends without an alert."""
    if q.rule == "sb_proactive":
        return q.t_gt + POLL_AFTER_GT_S
    return q.t_gt + tail_s


def answers_on_alert(q) -> bool:
    """StreamingBench asks the question itself at the first yes and scores that answer;
    StreamArena scores the alert."""
    return q.rule == "sb_proactive"
