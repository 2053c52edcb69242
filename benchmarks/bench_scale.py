"""Scale across cameras, the request part: what one question sends the model at 1, 4, 16 and 64
cameras, with the per-question budget (reason/budget.py) and without it, and which cameras a
question about a thing seen on one camera shows.

Each store is generated (benchmarks/_scale_store.py: pushed frames, no video): every camera's
events say "an empty grey corridor", except one camera in the middle of the ids, whose events
say "a person with a red umbrella at the bus stop". The question is "Where did you see the red
umbrella?", asked in two-phase mode of a loopback OpenAI-compatible server that counts what it
receives (images; estimated tokens: images x 256 + text characters / 4) and answers the protocol:
the coarse stage retrieves "a red umbrella", the fine stage answers.

Per store size, two presents: from the store (an engine reopened on it: no ring buffers) and live
(the same engine with each camera's ring buffers filled with 40 s at 2 fps, newer than the store,
as ingest fills them); each with the budget (the defaults: 16 images, 12k tokens) and without it
(the baseline: ``ask.whole_cameras`` 64, every camera's present shown whole, as before the
budget). Columns: the coarse request's images and tokens, the fine stage's added images and
tokens (the fine request continues the coarse one: its total is the sum), the cameras shown,
where the planted camera is among them (1: first), the fine stage's evidence on it, and the
coarse images against the baseline's.

    python benchmarks/bench_scale.py            # 1, 4, 16, 64 cameras
    python benchmarks/bench_scale.py --quick    # 1, 4, 16 cameras

Prints the table and writes benchmarks/results/bench_scale.json.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from _common import machine_info, print_table, write_json
from _scale_store import (QUESTION, STORE_CONFIG, CountingServer, build_store, camera_ids, frames_of,
                          planted_camera)

from vam_engine.engine import Engine
from vam_engine.llm import OpenAIChat

LIVE_S, LIVE_FPS = 40.0, 2.0   # the ring buffers' spans are 8 s at 2 fps and 32 s at 1 fps: 40 s covers both


def fill_present(eng: Engine, n: int) -> None:
    """Each camera's ring buffers filled with LIVE_S of frames at LIVE_FPS ending after its newest
    stored moment (what ingest hands the present as it decodes)."""
    for i, cam in enumerate(camera_ids(n)):
        start = (eng.view(cameras=[cam]).now() or 0.0) + 1.0
        for k in range(int(LIVE_S * LIVE_FPS)):
            eng.working.observe(cam, start + k / LIVE_FPS, frames_of(i + 500, k))


def ask_once(store: Path, n: int, *, live: bool, budget: bool) -> dict:
    """One question of a copy of one store (no earlier question in its history), counted at the
    server; a row's figures."""
    cfg = {**STORE_CONFIG, "ask": {} if budget else {"whole_cameras": 64}}
    planted = planted_camera(n)
    copy = store.with_name(f"{store.name}_{'live' if live else 'store'}_{'on' if budget else 'off'}")
    shutil.copytree(store, copy)
    with CountingServer() as srv:
        eng = Engine(copy, cfg, device="cpu", llm=OpenAIChat(srv.url, "counting"))
        try:
            if live:
                fill_present(eng, n)
            ans = eng.ask(QUESTION, mode="two_phase")
            eng.wait_for_answers(60)
        finally:
            eng.close()
        coarse, fine = srv.of("coarse"), srv.of("fine")
    account = next(e.detail for e in ans.trace if e.stage == "budget")
    shown = [c for c, _, _ in account["shown"]]
    c = coarse[0]
    f = fine[0] if fine else None
    fine_evidence = [e.camera_id for e in ans.evidence]
    return {"cameras": n, "present": "live" if live else "store", "budget": budget,
            "coarse_images": c.images, "coarse_tokens": c.tokens,
            "fine_added_images": None if f is None else f.images - c.images,
            "fine_added_tokens": None if f is None else f.tokens - c.tokens,
            "fine_request_images": None if f is None else f.images, "fine_request_tokens": None if f is None else f.tokens,
            "shown": len(shown), "summarised": account["summarised"], "unlisted": account["unlisted"],
            "planted": planted, "planted_position": shown.index(planted) + 1 if planted in shown else None,
            "planted_reasons": next((r for cam, r, _ in account["shown"] if cam == planted), None),
            "fine_evidence_on_planted": sum(e == planted for e in fine_evidence), "fine_evidence": len(fine_evidence),
            "max_images": account["max_images"], "max_tokens": account["max_tokens"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cameras", default="1,4,16,64", help="store sizes, comma separated")
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds of frames pushed per camera (2 fps)")
    ap.add_argument("--quick", action="store_true", help="1, 4 and 16 cameras, 1 s of frames each")
    args = ap.parse_args(argv)
    if args.quick:
        args.cameras, args.seconds = "1,4,16", 1.0
    sizes = [int(x) for x in args.cameras.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            store = build_store(Path(tmp), n, seconds=args.seconds)
            for live in (False, True):
                base = ask_once(store, n, live=live, budget=False)
                row = ask_once(store, n, live=live, budget=True)
                row["coarse_images_vs_baseline"] = row["coarse_images"] / max(1, base["coarse_images"])
                row["coarse_tokens_vs_baseline"] = row["coarse_tokens"] / max(1, base["coarse_tokens"])
                rows += [base, row]
    print(f"\nrequests per question ('{QUESTION}', two-phase, coarse retrieves, fine answers); "
          f"budget: {rows[-1]['max_images']} images, {rows[-1]['max_tokens']} tokens; baseline: every present whole")
    print_table(["cameras", "present", "budget", "coarse img", "coarse tok", "fine +img", "fine +tok", "shown",
                 "summarised", "planted at", "fine on planted", "coarse img / base"],
                [[r["cameras"], r["present"], "on" if r["budget"] else "off", r["coarse_images"], r["coarse_tokens"],
                  r["fine_added_images"], r["fine_added_tokens"], r["shown"], r["summarised"],
                  r["planted_position"], f"{r['fine_evidence_on_planted']}/{r['fine_evidence']}",
                  f"{r['coarse_images_vs_baseline']:.2f}x" if r["budget"] else "baseline"] for r in rows])
    path = write_json("bench_scale", {"machine": machine_info(), "args": vars(args), "question": QUESTION,
                                      "rows": rows})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
