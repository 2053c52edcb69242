"""Two-phase reasoning: what the coarse->fine KV reuse saves, and the engine's own overhead per
question.

Part 1, KV reuse (``--questions`` 5 consecutive questions, one memory state). A tiny random-weight
Qwen2-VL (vam_engine/synthetic/tiny_qwen.py) on this CPU, its image bound raised to ``--image-px`` (224: a
448x252 frame is 66 image tokens) so the prompt is image-heavy like a real one: a store of
``--small`` 1-fps moments with JPEG frames, a forest over 20-moment events, a ring buffer
holding the last 40 s at 2 fps. A random model writes no JSON, so each reply is replaced, after
the model generated it, by the JSON a working model would give (coarse: a retrieval intent;
fine: an answer; QA summarizer: a line): the model's compute and cache are real, only the text
that steers the flow is scripted. Replies are cut at ``--max-new`` tokens (a random model never
stops; prefill is what is measured). Every request is then sent again to a second instance
with ``kv_cache_bytes=0`` (the baseline: no reuse), in the same order.

- per stage (median over the questions): prompt tokens, tokens served from the cache, prefill
  seconds with reuse and without;
- per question: prompt tokens over all its requests, cached, prefilled, "new" (tokens past the
  longest common prefix with any earlier request of the run, images compared by content: what
  an ideal prefix cache would prefill), and prefilled/new (1.0 = nothing reusable was prefilled
  again; ``LocalQwenVL`` resumes at message boundaries, so the common head of a message that
  differs further on, e.g. "Earlier questions and answers:" before a new QA summary, is
  prefilled again and the ratio stays a little above 1).

Part 2, engine overhead (``--moments``, default 1e4; ``--moments 100000`` for 1e5). Synthetic
moments committed through ``Store``/``CommitBatch`` (1 fps, random 64-d frame vectors, no
JPEG files: the scripted model never reads them), events of 30 moments, an ``EventForest``
over them (random 384-d document embeddings), 200 QA records, and a ``ScriptedLLM`` that
replies at once (coarse asks for retrieval, so every stage runs). Text embedding uses a
hashing embedder (~20 us) so the table shows the engine's work; MiniLM's latency per call is
reported on its own line when the package is present (an answer embeds three texts: the
intent for the forest, the intent for the QA history, the new QA record). Per stage median
milliseconds over ``--repeats`` questions, for the present read from the ring buffers (as_of
None) and from the store (as_of one hour back). Engine overhead = the answer's time minus the
model calls and text embedding. Target: under 20 ms at 1e5 moments.

Part 3, agentic overhead (``--agentic-questions`` 30 per case, same store as part 2). The store
gets what a search of every source needs: ``VectorMemory`` over it (frame and event vectors are
the store's own, FRAME_DIM=64; flat exact search below its 200k ANN threshold), an event document
with a hashed 384-d vector for every event, and one summary document per 600 s window (the
``summary`` space). Queries are embedded by the hashing embedder (documents) and
``HashImageEmbedder``, a stand-in image embedder whose text side hashes into the 64-d frame space
(deterministic, microseconds; random frame vectors, so what a query finds is arbitrary, but every
source returns hits). ``AgenticAnswerer`` runs a fixed script per question with a ``ScriptedLLM``
that replies at once: router -> retrieve; planner turn 1 -> search (2 queries, top_k 20,
inspect_k 2, threshold 0, all sources); turn 2 -> inspect [1.0], 8 frames; turn 3 -> answer citing
[2.0]; inspector requests -> a fixed note. Every run is checked to have followed the script.
Engine time per stage = the stage's wall time minus the time inside the model: routing (the
router step), retrieval (the search action without its look-ahead inspections), inspection
(look-ahead inspections and the inspect action), planning (the rest: planner prompts, parsing,
context, answer). Per turn: from a planner request to the next. Three cases: all cameras at the
present (what ``engine.ask`` does by default), camera "cam" at the present, camera "cam" one hour
back (a camera filter or ``as_of`` makes the search filter ids in SQLite). Target: under 20 ms of
engine time per turn at 1e5 moments.

    python benchmarks/bench_reason.py                    # ~1 min on 2 cores
    python benchmarks/bench_reason.py --moments 100000   # the 1e5 row (~2 min more)
    python benchmarks/bench_reason.py --skip-kv          # parts 2, 3 and 4 only (seconds)
    python benchmarks/bench_reason.py --skip-kv --skip-overhead --skip-agentic   # parts 4 and 5 only

Part 4, two-tier scheduling: see benchmarks/_two_tier.py (answer latency with the writer idle
and saturated, through the scheduler's HTTP and local adapters, and with no tiers).

Part 5, ``ask`` while ingest is busy: see benchmarks/_ask_busy.py (response latency with a
backlog of queued frames behind a slow embedder, answering from what is committed vs
``wait_for_ingest=True``).

Prints the tables and writes benchmarks/results/bench_reason.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from _common import percentiles, print_table, write_json
from _reason_memory import INTENTS, QUESTIONS, HashEmbedder, build_memory, picture

from vam_engine.llm import ScriptedLLM, prompts
from vam_engine.memory.view import MemoryView
from vam_engine.reason.two_phase import TwoPhaseAnswerer
from vam_engine.reason.working import WorkingMemory

LLM_STAGES = ("coarse", "fine", "qa_summary")


# -- part 1: KV reuse with the tiny model -------------------------------------------------------------

class JsonActor:
    """Runs the real body, then replaces each reply's text with what a working model would say
    (the body's compute and cache are untouched); records (request, response)."""

    def __init__(self, llm):
        self.llm, self.name, self.calls, self.q = llm, llm.name, [], 0

    def generate(self, requests):
        out = []
        for req, resp in zip(requests, self.llm.generate(requests)):
            text = {"two_phase_coarse": json.dumps({"retrieve": INTENTS[self.q % len(INTENTS)]}),
                    "two_phase_fine": json.dumps({"answer": f"answer {self.q}", "sufficient": True}),
                    "qa_summarizer": f"after question {self.q}: asked about {INTENTS[self.q % len(INTENTS)]}",
                    }.get(req.tag, resp.text)
            resp = replace(resp, text=text)
            self.calls.append((self.q, req, resp))
            out.append(resp)
        return out

    def cache_info(self):
        return self.llm.cache_info()

    def close(self):
        self.llm.close()


def _content_ids(llm, req) -> list:
    """The prompt's token ids with each image's placeholder run replaced by ids derived from
    the image's content (the cache compares images by content)."""
    p = llm.render(req.messages)
    ids = list(p.ids)
    for (s, e), d in zip(p.spans, p.digests):
        base = -int(d[:8], 16)
        ids[s:e] = [base - k for k in range(e - s)]
    return ids


def _lcp(a: list, b: list) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def part_kv(args, tmp: Path) -> dict:
    import torch

    from vam_engine.synthetic.tiny_qwen import build_tiny_qwen2_vl
    from vam_engine.llm.local_qwen import LocalQwenVL

    path = build_tiny_qwen2_vl(tmp / "tiny")
    cfg_path = os.path.join(path, "preprocessor_config.json")
    cfg = json.load(open(cfg_path))
    cfg["max_pixels"] = args.image_px * args.image_px
    json.dump(cfg, open(cfg_path, "w"))
    for role in ("two_phase_coarse", "two_phase_fine", "qa_summarizer"):
        prompts.SAMPLING[role] = replace(prompts.SAMPLING[role], max_tokens=args.max_new)

    store, forest, _ = build_memory(tmp / "small", args.small, event_len=20, files=True)
    end = float(args.small - 1)
    wm = WorkingMemory()
    for k in range(81):  # the last 40 s at 2 fps
        t = end - 40.0 + 0.5 * k
        wm.observe("cam", t, picture(100_000 + k))
    emb = HashEmbedder()
    view = MemoryView(store, None, None, emb, forest, None, cameras=["cam"])
    warm = JsonActor(LocalQwenVL(path, kv_cache_bytes=4 << 30))
    answerer = TwoPhaseAnswerer(warm, wm, emb)
    answers = []
    for q in range(args.questions):
        warm.q = q
        answers.append(answerer.answer(QUESTIONS[q % len(QUESTIONS)], view))

    cold = LocalQwenVL(path, kv_cache_bytes=0)
    seen: list = []
    rows = []
    for q, req, resp in warm.calls:
        ref = cold.generate([req])[0]
        ids = _content_ids(cold, req)
        best = max((_lcp(ids, s) for s in seen), default=0)
        seen.append(ids)
        rows.append({"question": q, "tag": req.tag, "prompt_tokens": resp.prompt_tokens,
                     "cached_tokens": resp.cached_tokens, "prefill_s": resp.prefill_s,
                     "cold_prefill_s": ref.prefill_s, "cold_prompt_tokens": ref.prompt_tokens,
                     "new_tokens": len(ids) - best})
    warm.close()
    cold.close()

    stage_rows = []
    for tag in ("two_phase_coarse", "two_phase_fine", "qa_summarizer"):
        rs = [r for r in rows if r["tag"] == tag]
        if not rs:
            continue
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        first = rs[0]
        stage_rows.append([tag, len(rs), med("prompt_tokens"), first["cached_tokens"], med("cached_tokens"),
                           med("prompt_tokens") - med("cached_tokens"), med("prefill_s") * 1e3,
                           med("cold_prefill_s") * 1e3, med("cold_prefill_s") / max(med("prefill_s"), 1e-9)])
    print("\nKV reuse per stage (tiny Qwen2-VL on CPU; medians over the questions; Q1 = first question)")
    t1 = print_table(["stage", "n", "prompt tok", "cached Q1", "cached", "prefilled", "prefill ms",
                      "no-reuse ms", "speedup"], stage_rows)
    q_rows = []
    for q in range(args.questions):
        rs = [r for r in rows if r["question"] == q]
        prompt = sum(r["prompt_tokens"] for r in rs)
        cached = sum(r["cached_tokens"] for r in rs)
        new = sum(r["new_tokens"] for r in rs)
        q_rows.append([q + 1, len(rs), prompt, cached, prompt - cached, new, (prompt - cached) / max(new, 1),
                       sum(r["prefill_s"] for r in rs) * 1e3, sum(r["cold_prefill_s"] for r in rs) * 1e3])
    print("\nConsecutive questions (all requests of each question)")
    t2 = print_table(["question", "requests", "prompt tok", "cached", "prefilled", "new", "prefilled/new",
                      "prefill ms", "no-reuse ms"], q_rows)
    return {"requests": rows, "table_stages": t1, "table_questions": t2,
            "answers": [{"text": a.text, "found": a.found, "trace": [{k: v for k, v in e.to_dict().items() if k != "reply"}
                                                                     for e in a.trace]} for a in answers]}


# -- part 2: engine overhead with a scripted model ---------------------------------------------------

def part_overhead(args, store, forest, build_s: float) -> dict:
    end = float(args.moments - 1)
    emb = HashEmbedder()
    qa = store.qa
    for i in range(200):
        t = end * i / 200
        qa.add(t, f"old question {i} about the {INTENTS[i % 5]}", f"old answer {i}", emb.embed_texts([f"q {i}"])[0])
    wm = WorkingMemory()
    for k in range(81):
        wm.observe("cam", end - 40.0 + 0.5 * k, picture(200_000 + k))

    def reply(req):
        return {"two_phase_coarse": '{"retrieve": "person carrying a bag"}',
                "two_phase_fine": '{"answer": "they left through the door", "sufficient": true}'}.get(req.tag, "summary line")

    llm = ScriptedLLM(reply)
    answerer = TwoPhaseAnswerer(llm, wm, emb)
    cases = {"buffer (as_of=None)": None, "store (as_of=-1h)": end - 3600.0}
    stages = ["context", "forest", "qa_retrieval", "fine_context", "qa_update", "embed", "llm (scripted)"]
    table, raw = [], {}
    for name, as_of in cases.items():
        per = {s: [] for s in stages + ["overhead", "total"]}
        for r in range(args.repeats + 1):
            view = MemoryView(store, None, None, emb, forest, None, as_of=as_of, cameras=["cam"])
            ans = answerer.answer(QUESTIONS[r % len(QUESTIONS)], view)
            if r == 0:
                continue  # warm-up: first reads of the SQLite pages
            tm = ans.timings
            llm_s = sum(tm.get(s, 0.0) for s in LLM_STAGES)
            for s in stages[:-1]:
                per[s].append(tm.get(s, 0.0))
            per["llm (scripted)"].append(llm_s)
            per["overhead"].append(tm["two_phase"] - llm_s - tm.get("embed", 0.0))
            per["total"].append(tm["two_phase"])
        raw[name] = per
        ms = {k: statistics.median(v) * 1e3 for k, v in per.items()}
        p90 = percentiles(per["overhead"], 90, scale=1e3)[0]
        table.append([name] + [ms[s] for s in stages] + [ms["overhead"], p90])
    print(f"\nEngine overhead per question, ms (median of {args.repeats}; {args.moments:,} moments, "
          f"{len(forest):,} forest nodes, scripted model, hashing text embedder)")
    t3 = print_table(["present from"] + stages + ["overhead", "overhead p90"], table)
    out = {"moments": args.moments, "forest_nodes": len(forest), "build_s": build_s, "table": t3,
           "stages_ms": {row[0]: dict(zip(stages + ["overhead", "overhead_p90"], row[1:])) for row in table},
           "raw_s": raw}
    try:
        from vam_engine.embed.text import SentenceTransformerEmbedder

        mini = SentenceTransformerEmbedder("minilm")
        mini.embed_texts(["warm up"])
        runs = []
        for i in range(20):
            t = time.perf_counter()
            mini.embed_texts([INTENTS[i % 5]])
            runs.append(time.perf_counter() - t)
        out["minilm_embed_ms"] = statistics.median(runs) * 1e3
        print(f"MiniLM text embedding, one short text: {out['minilm_embed_ms']:.1f} ms per call "
              f"(x3 per answered question with retrieval and QA update)")
    except Exception as e:  # noqa: BLE001 - optional line
        print(f"(MiniLM latency not measured: {type(e).__name__}: {e})")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--moments", type=float, default=1e4, help="part 2 store size (1e5 for the target row)")
    ap.add_argument("--repeats", type=int, default=30, help="part 2 questions per case")
    ap.add_argument("--questions", type=int, default=5, help="part 1 consecutive questions")
    ap.add_argument("--small", type=int, default=300, help="part 1 store: moments (1 fps, with JPEGs)")
    ap.add_argument("--image-px", type=int, default=224, help="part 1: the tiny model's image bound (side)")
    ap.add_argument("--max-new", type=int, default=16, help="part 1: reply tokens")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (tiny model, MiniLM)")
    ap.add_argument("--agentic-questions", type=int, default=30, help="part 3 questions per case")
    ap.add_argument("--skip-kv", action="store_true", help="skip part 1 (the slow one)")
    ap.add_argument("--skip-overhead", action="store_true", help="skip part 2 (two-phase overhead)")
    ap.add_argument("--skip-agentic", action="store_true", help="skip part 3 (agentic overhead)")
    ap.add_argument("--skip-two-tier", action="store_true", help="skip part 4 (two-tier scheduling)")
    ap.add_argument("--tier-answers", type=int, default=50, help="part 4 answers per row")
    ap.add_argument("--tier-latency-ms", type=float, default=20.0, help="part 4 scripted latency per call")
    ap.add_argument("--skip-ask-busy", action="store_true", help="skip part 5 (ask while ingest is busy)")
    ap.add_argument("--busy-embed-ms", type=float, default=50.0, help="part 5: embedder ms per frame")
    ap.add_argument("--busy-fps", type=float, default=10.0, help="part 5: pushed frames' rate (all sampled)")
    ap.add_argument("--busy-asks", type=int, default=20, help="part 5: questions without waiting")
    args = ap.parse_args()
    args.moments = int(args.moments)
    import torch

    torch.set_num_threads(args.threads)  # tiny models and one-text embeddings gain nothing from threads
    result = {"args": vars(args)}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if not args.skip_kv:
            result["kv"] = part_kv(args, tmp)
        if not (args.skip_overhead and args.skip_agentic):
            store, forest, build_s = build_memory(tmp / f"big{args.moments}", args.moments, event_len=30,
                                                  files=False)
            if not args.skip_overhead:
                result["overhead"] = part_overhead(args, store, forest, build_s)
            if not args.skip_agentic:
                from _agentic import part_agentic

                result["agentic"] = part_agentic(args, store, forest, build_s)
    if not args.skip_two_tier:
        from _two_tier import part_two_tier

        result["two_tier"] = part_two_tier(args)
    if not args.skip_ask_busy:
        from _ask_busy import part_ask_busy

        result["ask_busy"] = part_ask_busy(args)
    name = "bench_reason" if args.moments == 10_000 else f"bench_reason_{args.moments}"
    if args.skip_kv and args.skip_overhead and args.skip_agentic:
        name = "bench_reason_two_tier"  # parts 4-5 alone: keep the full run's JSON
    print(f"\nwrote {write_json(name, result)}")


if __name__ == "__main__":
    main()
