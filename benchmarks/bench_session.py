"""Sessions: how long sorting a user turn takes, and how long after an alert fires the person who
asked has the model's reply.

Rows (p50/p99 over ``--turns`` turns or ``--alerts`` alerts, one process, a scripted model that
answers at once, so every figure is the engine's own overhead):

- classifier, rules alone: ``classify_by_rules`` over a mix of questions, "tell me when ...",
  cancels and changes (the baseline of the next row);
- classifier, scripted model: ``classify_by_model`` (the request built, the model called, the
  reply checked against the strict schema), the same messages;
- turn -> acknowledgement: ``Engine.turn("tell me when ...")`` through the scripted classifier
  to the stored, published acknowledgement (the monitor registered and bound), each followed by
  a cancel turn (not timed) so the session's cap never binds;
- alert -> alert delivered: an alert stored to its delivery to an alert subscriber (the
  baseline of the next rows);
- alert -> reply stored / delivered: the same alerts to the session's reply turn stored (the
  model's reply written, with the alert's frames in its prompt) and to its delivery to a turn
  subscriber (what a session stream gets).

    python benchmarks/bench_session.py                   # 2000 turns, 200 turn->ack, 50 alerts
    python benchmarks/bench_session.py --quick           # 200 turns, 40 turn->ack, 10 alerts

Prints the table and writes benchmarks/results/bench_session.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from _common import machine_info, percentiles, print_table, write_json

from vam_engine import Engine
from vam_engine.llm.base import Image
from vam_engine.llm.scripted import ScriptedLLM
from vam_engine.reason.intent import classify_by_model, classify_by_rules

MESSAGES = ["what is on the front camera now?", "tell me when a red square appears",
            "Please let me know if the courier arrives!", "stop watching for that", "When did the red car leave?",
            "Actually, tell me when a blue car parks instead", "never mind the courier", "how many people came in?",
            "alert me every time a dog crosses the yard", "cancel all"]
H, W = 48, 64


def _intent(req) -> str:
    """The scripted classifier: sorts by the message's words, as a model would reply."""
    msg = json.loads(req.messages[-1].content[0])["message"]
    r = classify_by_rules(msg)
    return json.dumps({"kind": r.kind, "condition": r.condition or "",
                       "target": "all" if r.target == "all" else None, "repeat": r.repeat})


def _frame(red: bool) -> np.ndarray:
    f = np.random.default_rng(0).integers(20, 40, (H, W, 3), dtype=np.uint8)
    if red:
        f[6:22, 8:28] = (230, 20, 20)
    return f


def _model(req) -> str:
    if req.tag == "turn_classifier":
        return _intent(req)
    if req.tag == "monitor":
        img = [p for m in req.messages for p in m.content if isinstance(p, Image)][-1].array()
        hit = bool((img[..., 0] > 150).mean() > 0.03)
        return json.dumps({"match": hit, "confidence": 0.9 if hit else 0.1, "observed_event": "a red square",
                           "reason": "colour"})
    if req.tag == "watch_reply":
        said = json.loads(req.messages[-1].content[0])
        return f"As you asked: {said['observed']} at t={said['t_s']:g}s."
    return "ok"


def _stats(name: str, seconds: list, baseline: list | None = None) -> dict:
    p50, p99 = percentiles(seconds, 50, 99, scale=1e3)
    out = {"row": name, "n": len(seconds), "p50_ms": p50, "p99_ms": p99}
    if baseline:
        out["p50_vs_baseline"] = p50 / max(percentiles(baseline, 50, scale=1e3)[0], 1e-9)
    return out


# -- rows ----------------------------------------------------------------------------------------------
def row_rules(n: int) -> list:
    out = []
    for k in range(n):
        t0 = time.perf_counter()
        classify_by_rules(MESSAGES[k % len(MESSAGES)])
        out.append(time.perf_counter() - t0)
    return out


def row_model(n: int) -> list:
    llm = ScriptedLLM(_intent)
    out = []
    for k in range(n):
        t0 = time.perf_counter()
        r = classify_by_model(llm, MESSAGES[k % len(MESSAGES)], [])
        out.append(time.perf_counter() - t0)
        assert r.by == "model", r.note
    return out


def _engine(root: Path) -> Engine:
    cfg = {"ingest": {"fps": 0.5}, "writer": {"enabled": False}, "retention": {"enabled": False},
           "sessions": {"max_turns_kept": 100_000}}
    return Engine(root, cfg, device="cpu", llm=ScriptedLLM(_model))


def row_turn_to_ack(n: int, root: Path) -> list:
    out = []
    with _engine(root) as eng:
        eng.push("cam", _frame(False), 0.0)
        for k in range(n):
            t0 = time.perf_counter()
            r = eng.turn(f"tell me when a red square number {k} appears", session="bench")
            out.append(time.perf_counter() - t0)
            assert r.kind == "watch"
            eng.turn("stop watching for that", session="bench")
    return out


def row_alert_to_reply(n: int, root: Path) -> dict:
    """For ``n`` alerts: stored -> delivered to an alert subscriber, -> reply stored, -> reply
    delivered to a turn subscriber (wall seconds)."""
    delivered_alert, delivered_turn = {}, {}
    lock = threading.Lock()

    def on_alert(a):
        with lock:
            delivered_alert[a.alert_id] = time.time()

    def on_turn(t):
        if t.kind == "reply":
            with lock:
                delivered_turn[t.alert_id] = time.time()

    with _engine(root) as eng:
        subs = [eng.subscribe_alerts(on_alert), eng.subscribe_turns(on_turn)]
        t = 0.0
        for k in range(n):
            eng.turn("tell me when a red square appears", session="bench", every_s=0.5)
            for red in (False, False, True, True):
                eng.push("cam", _frame(red), t)
                t += 0.5
                eng.wait_for_monitors(30)
            eng.wait_for_replies(30)
        for s in subs:
            s.close()
        alerts = {a.alert_id: a for a in eng.alerts()}
        replies = [x for x in eng.session("bench").turns if x.kind == "reply"]
        fallbacks = eng.reply_stats().fallbacks
    assert len(replies) == len(alerts) == n, (len(replies), len(alerts))
    return {"alert_delivered": [delivered_alert[i] - a.created_at for i, a in alerts.items()],
            "reply_stored": [r.wall - alerts[r.alert_id].created_at for r in replies],
            "reply_delivered": [delivered_turn[r.alert_id] - alerts[r.alert_id].created_at for r in replies],
            "fallbacks": fallbacks}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=2000, help="classifier calls per classifier row")
    ap.add_argument("--acks", type=int, default=200, help="watch turns for the turn -> acknowledgement row")
    ap.add_argument("--alerts", type=int, default=50)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.turns, args.acks, args.alerts = 200, 40, 10
    rules = row_rules(args.turns)
    model = row_model(args.turns)
    with tempfile.TemporaryDirectory() as tmp:
        acks = row_turn_to_ack(args.acks, Path(tmp) / "ack")
        replies = row_alert_to_reply(args.alerts, Path(tmp) / "reply")
    rows = [_stats("classifier, rules alone", rules), _stats("classifier, scripted model", model, rules),
            _stats("turn -> acknowledgement (scripted model)", acks, model),
            _stats("alert -> alert delivered", replies["alert_delivered"]),
            _stats("alert -> reply stored", replies["reply_stored"], replies["alert_delivered"]),
            _stats("alert -> reply delivered", replies["reply_delivered"], replies["alert_delivered"])]

    def ms(v):
        return "-" if v is None else f"{v:.3f}"
    print(f"\nsessions: scripted model answering at once; {args.turns} classifier calls, {args.acks} watch turns, "
          f"{args.alerts} alerts ({replies['fallbacks']} replies fell back to the observation)")
    print_table(["row", "n", "p50 ms", "p99 ms", "p50 / baseline"],
                [[r["row"], r["n"], ms(r["p50_ms"]), ms(r["p99_ms"]),
                  f"{r['p50_vs_baseline']:.1f}x" if "p50_vs_baseline" in r else "baseline"] for r in rows])
    path = write_json("bench_session", {"machine": machine_info(), "args": vars(args), "rows": rows,
                                        "reply_fallbacks": replies["fallbacks"]})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
