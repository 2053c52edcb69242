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
import hashlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _common import print_table, write_json  # noqa: E402

from vam_engine.llm import ScriptedLLM, prompts  # noqa: E402
from vam_engine.memory import Store  # noqa: E402
from vam_engine.memory.forest import EventForest
from vam_engine.memory.forest_nodes import ForestNodeRepository  # noqa: E402
from vam_engine.memory.records import GateRecord  # noqa: E402
from vam_engine.memory.commit import CommitBatch  # noqa: E402
from vam_engine.memory.records import PendingMoment  # noqa: E402
from vam_engine.reason.two_phase import TwoPhaseAnswerer  # noqa: E402
from vam_engine.memory.view import MemoryView  # noqa: E402
from vam_engine.reason.working import WorkingMemory  # noqa: E402

TEXT_DIM = 384
FRAME_DIM = 64  # the synthetic frame vectors (and so the event vectors, their means)
LLM_STAGES = ("coarse", "fine", "qa_summary")
QUESTIONS = ["Who came through the door?", "What is on the table now?", "Did the lights change?",
             "Where did the person with the bag go?", "How many cars are parked outside?"]
INTENTS = ["person at the door", "objects on the table", "lights turning on or off",
           "person carrying a bag", "cars in the parking lot"]


class HashEmbedder:
    """Deterministic bag-of-words text vectors (each word a seeded random direction): costs
    microseconds, so the overhead table is the engine's own."""

    def __init__(self, dim: int = TEXT_DIM):
        self.dim = dim
        self.name = self.model_id = "hash-bow" if dim == TEXT_DIM else f"hash-bow-{dim}"
        self._words: dict[str, np.ndarray] = {}

    def _word(self, w: str) -> np.ndarray:
        v = self._words.get(w)
        if v is None:
            seed = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            self._words[w] = v
        return v

    def embed_texts(self, texts) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split()[:64]:
                out[i] += self._word(w)
            n = np.linalg.norm(out[i])
            out[i] = out[i] / n if n > 0 else self._word("<empty>") / np.linalg.norm(self._word("<empty>"))
        return out


class HashImageEmbedder:
    """A stand-in image embedder for the frame/event spaces (FRAME_DIM, like the synthetic frame
    vectors): its text side is the hashing bag-of-words in FRAME_DIM (microseconds, deterministic),
    images map to a seeded random direction of their bytes (no query here uses one). The
    synthetic frame vectors are random, so what a query finds is arbitrary, but every source
    returns top_k hits and every stage downstream runs on them."""

    has_text = True

    def __init__(self, dim: int = FRAME_DIM):
        self.dim = dim
        self.name = self.model_id = f"hash-image-{dim}"
        self._text = HashEmbedder(dim)

    def embed_texts(self, texts) -> np.ndarray:
        return self._text.embed_texts(texts)

    def embed_images(self, frames) -> np.ndarray:
        out = np.zeros((len(frames), self.dim), np.float32)
        for i, f in enumerate(frames):
            seed = int.from_bytes(hashlib.blake2b(np.ascontiguousarray(f).tobytes(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(self.dim)
            out[i] = v / np.linalg.norm(v)
        return out


def _unit_rows(rng, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _picture(i: int, h: int = 252, w: int = 448) -> np.ndarray:
    """A cheap distinct frame per index (blocks of colour), so images differ by content."""
    rng = np.random.default_rng(i)
    small = rng.integers(0, 256, (9, 16, 3), dtype=np.uint8)
    return np.repeat(np.repeat(small, h // 9 + 1, 0), w // 16 + 1, 1)[:h, :w]


WORDS = ["door", "table", "person", "car", "bag", "light", "dog", "window", "chair", "screen"]


def _event_text(k: int) -> str:
    """The synthetic document of the k-th event (forest leaf summary and event document)."""
    return f"event {k}: " + " ".join(WORDS[(k * 7 + j) % len(WORDS)] for j in range(12))


def build_memory(root: Path, n: int, *, event_len: int, files: bool, seed: int = 0):
    """A store of ``n`` 1-fps moments of camera "cam" in events of ``event_len``, and a forest
    over the events. Returns (store, forest, seconds to build)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    store = Store(root)
    src = store.sources.open("cam", "synthetic://cam", "synthetic", "fps=1").source_id
    gate = GateRecord(lap_var=120.0, mad=25.0, ssim=0.5, hist_corr=None, dropped_by=None)
    chunk = 5000
    for start in range(0, n, chunk):
        vecs = _unit_rows(rng, min(chunk, n - start), FRAME_DIM)
        batch = CommitBatch()
        for j, v in enumerate(vecs):
            i = start + j
            ref = store.frames.ref("cam", src, float(i))
            if files:
                store.frames.write(ref, _picture(i), 80)
            batch.moments.append(PendingMoment("cam", src, float(i), None, i, ref, 448, 252, gate, v,
                                               event_start=(i % event_len == 0)))
        batch.progress[src] = float(start + len(vecs) - 1)
        store.commit(batch)
    store.commit(CommitBatch(close_events={"cam"}))
    forest = EventForest(ForestNodeRepository(store.db))
    rows = store.db.conn().execute("SELECT event_id, moment_id, t FROM moments ORDER BY t").fetchall()
    by_event: dict = {}
    for ev, mid, t in rows:
        by_event.setdefault(ev, []).append((mid, t))
    embs = _unit_rows(rng, len(by_event), TEXT_DIM)
    for k, (ev, ms) in enumerate(sorted(by_event.items())):
        idx = np.linspace(0, len(ms) - 1, min(16, len(ms))).round().astype(int)
        kf = [ms[i] for i in sorted(set(idx.tolist()))]
        summary = _event_text(k)
        forest.insert_event("cam", ev, ms[0][1], ms[-1][1], kf, summary, embs[k])
    return store, forest, time.perf_counter() - t0


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
    p = llm._render(req.messages, "bench")  # private: the benchmark needs the image spans
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
        wm.observe("cam", t, _picture(100_000 + k))
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
        wm.observe("cam", end - 40.0 + 0.5 * k, _picture(200_000 + k))

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
        p90 = float(np.percentile(per["overhead"], 90)) * 1e3
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


# -- part 3: agentic engine overhead with a scripted model -------------------------------------------

AGENT_TURNS = ("search", "inspect", "answer")  # the scripted planner's turns, in order
INSPECTOR_NOTE = ("The frames show a person carrying a dark bag walk from the table to the door at "
                  "t=1.00s and leave; the door stays open afterwards.")
SUMMARY_WINDOW_S = 600.0


def _agent_reply(state: dict, max_turns: int):
    """The fixed script of question ``state["i"]``: router -> retrieve; planner turn 1 -> search
    (2 queries, top_k 20, inspect_k 2, threshold 0, all sources); turn 2 -> inspect [1.0] with
    8 frames; turn 3 -> answer citing [2.0] (the inspection); every inspector request -> a fixed
    note. Which planner turn a request is comes from its "Remaining turns" line."""
    def reply(req) -> str:
        i = state["i"]
        q, intent = QUESTIONS[i % len(QUESTIONS)], INTENTS[i % len(INTENTS)]
        if req.tag == "router":
            return json.dumps({"type": "tool", "name": "retrieve", "args": {"question": q}})
        if req.tag == "inspector":
            return INSPECTOR_NOTE
        if req.tag != "planner":
            return ""  # off-script (a repair, an anchor check): the run's checks reject it
        text = next(p for p in req.messages[-1].content if isinstance(p, str))
        turn = max_turns - int(re.search(r"Remaining turns: (\d+)", text).group(1)) + 1
        if turn == 1:
            return json.dumps({"action": "search", "queries": [
                {"q": intent, "top_k": 20, "inspect_k": 2, "threshold": 0.0},
                {"q": f"{WORDS[i % len(WORDS)]} and {WORDS[(i + 3) % len(WORDS)]} near the {intent}",
                 "top_k": 20, "inspect_k": 2, "threshold": 0.0}],
                "sources": ["frame", "event", "summary"], "thought": "look in every source"})
        if turn == 2:
            return json.dumps({"action": "inspect", "prompt": f"Look closely: {q}",
                               "ref": {"turn_idx": 1, "result_idx": 0}, "max_frames": 8, "thought": ""})
        return json.dumps({"action": "answer", "response": f"scripted answer {i}",
                           "best_ref": {"turn_idx": 2, "result_idx": 0}, "thought": ""})
    return reply


class TimedLLM:
    """Wraps the scripted body: records (tag, requests, start, end) of every generate call, so
    the time spent inside the model can be taken out of each stage."""

    def __init__(self, llm):
        self.llm, self.name, self.calls = llm, llm.name, []

    def generate(self, requests):
        t0 = time.perf_counter()
        out = self.llm.generate(requests)
        self.calls.append((requests[0].tag if requests else "", len(requests), t0, time.perf_counter()))
        return out

    def model_s(self, *tags) -> float:
        return sum(t1 - t0 for tag, _, t0, t1 in self.calls if not tags or tag in tags)


def _timed_agent_class():
    from vam_engine.reason.agent import AgenticAnswerer

    class TimedAgent(AgenticAnswerer):
        """Adds wall clocks around the router, the search action, the look-ahead inspections of a
        search and the inspect action (model calls inside included; subtracted afterwards).
        Changes nothing the answerer does."""

        wall: dict = {}

        def _clock(self, key, fn, *a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.wall[key] = self.wall.get(key, 0.0) + time.perf_counter() - t0

        def _route(self, run):
            return self._clock("route", super()._route, run)

        def _search(self, run, action, entry):
            return self._clock("search", super()._search, run, action, entry)

        def _inspect_many(self, run, hits, prompt, *, joint=False):
            return self._clock("inspect_many", super()._inspect_many, run, hits, prompt, joint=joint)

        def _inspect(self, run, action, entry):
            if action.ref is not None:  # what the inspect turn looks at: [1.0]'s source and span
                ev = run.lookup(action.ref.turn_idx, action.ref.result_idx).evidence
                self.wall["inspect_target"] = (ev.source, ev.t_end - ev.t_start)
            return self._clock("inspect", super()._inspect, run, action, entry)

    return TimedAgent


def _fill_searchable(store, text_emb: HashEmbedder) -> dict:
    """What the agentic search needs beyond part 2's store: an event document (and its
    "event_doc" vector) for every closed event, and one summary document per SUMMARY_WINDOW_S
    window (its "summary" vector, up to 8 moments each). Frame and event vectors are there
    already (FRAME_DIM, the store's own on commit)."""
    t0 = time.perf_counter()
    conn = store.db.conn()
    events = [r[0] for r in conn.execute("SELECT event_id FROM events WHERE closed=1 ORDER BY t_start")]
    texts = [_event_text(k) for k in range(len(events))]
    store.doc_queue.set_docs(list(zip(events, texts, text_emb.embed_texts(texts))))
    end = conn.execute("SELECT MAX(t) FROM moments").fetchone()[0]
    n_sum = 0
    for k, a in enumerate(np.arange(0.0, end, SUMMARY_WINDOW_S)):
        b = min(a + SUMMARY_WINDOW_S, end)
        ids = [r[0] for r in conn.execute("SELECT moment_id FROM moments WHERE camera_id='cam' AND t>=? AND t<? "
                                          "ORDER BY t", (float(a), float(b)))]
        if not ids:
            continue
        picks = [ids[j] for j in sorted(set(np.linspace(0, len(ids) - 1, min(8, len(ids))).round().astype(int)))]
        text = (f"window {a:.0f}-{b:.0f} s: " + ", ".join(f"{WORDS[(k + j) % len(WORDS)]} seen" for j in range(6)) +
                f"; {INTENTS[k % len(INTENTS)]}")
        store.summaries.add("cam", float(a), float(b), SUMMARY_WINDOW_S, "what happened", "timeline", text, picks,
                          text_emb.embed_texts([text])[0])
        n_sum += 1
    return {"event_docs": len(events), "summaries": n_sum, "fill_s": time.perf_counter() - t0}


def _pct(xs, q) -> float:
    return float(np.percentile(xs, q)) if xs else float("nan")


def _check_run(ans, llm: TimedLLM) -> dict:
    """The run followed the script (router retrieve; search, inspect, answer; no repair, no
    fallback), or RuntimeError: a table of an off-script run would measure something else."""
    planner = [e for e in ans.trace if e.stage == "planner"]
    router = [e for e in ans.trace if e.stage == "router"]
    bad = [e for e in ans.trace if e.error or e.repair_reply is not None or e.fallback or e.stage == "final"]
    actions = [e.action for e in planner]
    if (not ans.found or bad or actions != list(AGENT_TURNS) or [e.action for e in router] != ["retrieve"]
            or not planner[0].added or not planner[1].added):
        raise RuntimeError(f"the agentic run left the script: actions {actions}, found {ans.found}, "
                           f"trace {[{k: v for k, v in e.to_dict().items() if k != 'reply'} for e in ans.trace]}")
    return {"turn1_results": len(planner[0].added), "lookahead_inspections": len(planner[0].inspections),
            "model_calls": sum(n for _, n, _, _ in llm.calls)}


def part_agentic(args, store, forest, build_s: float) -> dict:
    from vam_engine.config import VectorConfig
    from vam_engine.memory.vector_memory import VectorMemory

    end = float(args.moments - 1)
    text_emb, img_emb = HashEmbedder(), HashImageEmbedder()
    t0 = time.perf_counter()
    vm = VectorMemory(store.vector_table, store.root / "vectors", VectorConfig())  # loads the frame/event vectors; follows the fills below
    fill = _fill_searchable(store, text_emb)
    fill["vectors_s"] = time.perf_counter() - t0 - fill["fill_s"]
    fill["spaces"] = {name: vm.size(name) for name in ("frame", "event", "event_doc", "summary")}
    fill["index"] = VectorConfig().index

    max_turns = 6
    state = {"i": 0}
    llm = TimedLLM(ScriptedLLM(_agent_reply(state, max_turns)))
    agent = _timed_agent_class()(llm, max_turns=max_turns)
    n_turns = len(AGENT_TURNS)
    cases = {"all cameras, now": (None, None), "camera cam, now": (None, ["cam"]),
             "camera cam, as_of=-1h": (end - 3600.0, ["cam"])}
    stages = ["routing", "planning", "retrieval", "inspection"]
    segs = ["routing seg", "turn 1 (search)", "turn 2 (inspect)", "turn 3 (answer)"]
    table, turn_table, raw = [], [], {}
    for case, (as_of, cams) in cases.items():
        per: dict = {k: [] for k in stages + segs + ["engine", "engine_per_turn", "model", "total", "view_search",
                                                     "turn1_results", "lookahead_inspections", "model_calls",
                                                     "inspect_target"]}
        for r in range(args.agentic_questions + 1):
            state["i"] = r
            agent.wall, llm.calls = {}, []
            view = MemoryView(store, vm, img_emb, text_emb, forest, None, as_of=as_of, cameras=cams)
            t_start = time.perf_counter()
            ans = agent.answer(QUESTIONS[r % len(QUESTIONS)], view)
            t_end = time.perf_counter()
            info = _check_run(ans, llm)
            if r == 0:
                continue  # warm-up: first reads of the SQLite pages, word vectors
            w = agent.wall
            per["inspect_target"].append(w.pop("inspect_target", None))
            total = t_end - t_start
            model = llm.model_s()
            st = {"routing": w.get("route", 0.0) - llm.model_s("router"),
                  "retrieval": w.get("search", 0.0) - w.get("inspect_many", 0.0),
                  "inspection": w.get("inspect_many", 0.0) + w.get("inspect", 0.0) - llm.model_s("inspector"),
                  "planning": (total - w.get("route", 0.0) - w.get("search", 0.0) - w.get("inspect", 0.0)
                               - llm.model_s("planner"))}
            # per turn: from the start of a planner request to the start of the next (or the end),
            # less the model time inside; the routing segment runs up to the first planner request
            bounds = [t_start] + [c[2] for c in llm.calls if c[0] == "planner"] + [t_end]
            seg = [(b - a) - sum(max(0.0, min(c1, b) - max(c0, a)) for _, _, c0, c1 in llm.calls)
                   for a, b in zip(bounds, bounds[1:])]
            for k, v in st.items():
                per[k].append(v)
            for k, v in zip(segs, seg):
                per[k].append(v)
            per["engine"].append(total - model)
            per["engine_per_turn"].append((total - model) / n_turns)
            per["model"].append(model)
            per["total"].append(total)
            per["view_search"].append(ans.timings.get("retrieval", 0.0))
            for k, v in info.items():
                per[k].append(v)
        raw[case] = per
        ms = lambda k: statistics.mean(per[k]) * 1e3  # noqa: E731
        table.append([case] + [ms(s) / n_turns for s in stages] +
                     [ms("engine_per_turn"), _pct(per["engine_per_turn"], 50) * 1e3,
                      _pct(per["engine_per_turn"], 90) * 1e3, _pct(per["engine"], 50) * 1e3,
                      ms("model"), statistics.median(per["model_calls"])])
        turn_table.append([case] + [x for s in segs for x in (_pct(per[s], 50) * 1e3, _pct(per[s], 90) * 1e3)] +
                          [_pct(per["view_search"], 50) * 1e3, statistics.median(per["turn1_results"]),
                           statistics.median(per["lookahead_inspections"]),
                           " ".join(f"{src}:{n}" for src, n in sorted(Counter(
                               t[0] for t in per["inspect_target"] if t).items()))])
    print(f"\nAgentic engine overhead, ms ({args.agentic_questions} questions per case; {args.moments:,} moments, "
          f"{fill['spaces']['event_doc']:,} event docs, {fill['summaries']:,} summaries, scripted model, hashing "
          f"embedders; stage columns: mean engine ms per planner turn ({n_turns} turns), the router's share "
          f"included)")
    t4 = print_table(["case"] + stages + ["engine/turn", "p50", "p90", "engine/question p50", "model (scripted)",
                                          "model calls"], table)
    print("\nPer turn, engine ms p50 / p90 (a turn: its planner request to the next; routing seg: up to the "
          "first planner request); view.search: ms in the searches of a question")
    t5 = print_table(["case"] + [f"{s} {q}" for s in segs for q in ("p50", "p90")] +
                     ["view.search p50", "turn-1 results", "look-ahead inspections", "[1.0] inspected"],
                     turn_table)
    return {"moments": args.moments, "questions": args.agentic_questions, "turns": n_turns, "setup": fill,
            "table": t4, "table_turns": t5,
            "per_turn_ms": {row[0]: dict(zip(stages + ["engine_per_turn_mean", "engine_per_turn_p50",
                                                      "engine_per_turn_p90", "engine_per_question_p50",
                                                      "model_ms", "model_calls"], row[1:])) for row in table},
            "raw_s": raw}


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
                result["agentic"] = part_agentic(args, store, forest, build_s)
    if not args.skip_two_tier:
        from _two_tier import part_two_tier

        result["two_tier"] = part_two_tier(args, print_table)
    if not args.skip_ask_busy:
        from _ask_busy import part_ask_busy

        result["ask_busy"] = part_ask_busy(args, print_table)
    name = "bench_reason" if args.moments == 10_000 else f"bench_reason_{args.moments}"
    if args.skip_kv and args.skip_overhead and args.skip_agentic:
        name = "bench_reason_two_tier"  # parts 4-5 alone: keep the full run's JSON
    print(f"\nwrote {write_json(name, result)}")


if __name__ == "__main__":
    main()
