"""bench_reason part 3, agentic overhead: the engine's own time per stage and per planner turn of
``AgenticAnswerer`` with a scripted model that replies at once, over part 2's store made
searchable (see bench_reason.py's docstring, part 3)."""
from __future__ import annotations

import json
import re
import statistics
import time
from collections import Counter
from contextlib import contextmanager

import numpy as np

from _common import percentiles, print_table
from _reason_memory import INTENTS, QUESTIONS, WORDS, HashEmbedder, HashImageEmbedder, event_text

from vam_engine.llm import ScriptedLLM
from vam_engine.memory.view import MemoryView

AGENT_TURNS = ("search", "inspect", "answer")  # the scripted planner's turns, in order
INSPECTOR_NOTE = ("The frames show a person carrying a dark bag walk from the table to the door at "
                  "t=1.00s and leave; the door stays open afterwards.")
SUMMARY_WINDOW_S = 600.0
MAX_TURNS = 6
STAGES = ["routing", "planning", "retrieval", "inspection"]
SEGMENTS = ["routing seg", "turn 1 (search)", "turn 2 (inspect)", "turn 3 (answer)"]
FIRST_RESULT = re.compile(r"\[1\.0\] camera \S+, ([-\d.]+)-([-\d.]+) s, (\w+)")  # [1.0] in the planner's context


def _agent_reply(state: dict, max_turns: int):
    """The fixed script of question ``state["i"]``: router -> retrieve; planner turn 1 -> search
    (2 queries, top_k 20, inspect_k 2, threshold 0, all sources); turn 2 -> inspect [1.0] with
    8 frames (what [1.0] is, its source and span, read from the context into
    ``state["inspect_target"]``); turn 3 -> answer citing [2.0] (the inspection); every
    inspector request -> a fixed note. Which planner turn a request is comes from its
    "Remaining turns" line."""
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
            m = next((m for p in (x for msg in req.messages for x in msg.content if isinstance(x, str))
                      if (m := FIRST_RESULT.search(p))), None)
            state["inspect_target"] = None if m is None else (m.group(3), float(m.group(2)) - float(m.group(1)))
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


class StageClock:
    """The answerer's ``stage_clock``: wall seconds per stage (the router step, search actions,
    their look-ahead inspections, inspect actions), model calls inside included."""

    def __init__(self):
        self.wall: dict = {}

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - t0


def _fill_searchable(store, text_emb: HashEmbedder) -> dict:
    """What the agentic search needs beyond part 2's store: an event document (and its
    "event_doc" vector) for every closed event, and one summary document per SUMMARY_WINDOW_S
    window (its "summary" vector, up to 8 moments each). Frame and event vectors are there
    already (FRAME_DIM, the store's own on commit)."""
    t0 = time.perf_counter()
    conn = store.db.conn()
    events = [r[0] for r in conn.execute("SELECT event_id FROM events WHERE closed=1 ORDER BY t_start")]
    texts = [event_text(k) for k in range(len(events))]
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


def searchable_memory(store) -> tuple[object, dict]:
    """``VectorMemory`` over the store (its frame/event vectors loaded; it follows the fills),
    then the documents and summaries; (the vector memory, what was filled)."""
    from vam_engine.config import VectorConfig
    from vam_engine.memory.vector_memory import VectorMemory

    t0 = time.perf_counter()
    vm = VectorMemory(store.vector_table, store.root / "vectors", VectorConfig())
    fill = _fill_searchable(store, HashEmbedder())
    fill["vectors_s"] = time.perf_counter() - t0 - fill["fill_s"]
    fill["spaces"] = {name: vm.size(name) for name in ("frame", "event", "event_doc", "summary")}
    fill["index"] = VectorConfig().index
    return vm, fill


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


class AgenticRun:
    """The answerer with its scripted, timed model and stage clock, over the searchable memory."""

    def __init__(self, store, vm, forest):
        from vam_engine.reason.agent import AgenticAnswerer

        self.store, self.vm, self.forest = store, vm, forest
        self.text_emb, self.img_emb = HashEmbedder(), HashImageEmbedder()
        self.state = {"i": 0}
        self.llm = TimedLLM(ScriptedLLM(_agent_reply(self.state, MAX_TURNS)))
        self.clock = StageClock()
        self.agent = AgenticAnswerer(self.llm, max_turns=MAX_TURNS, stage_clock=self.clock)

    def question(self, r: int, as_of, cams) -> dict:
        """Question r: the engine's seconds per stage and per turn (model time taken out)."""
        self.state["i"] = r
        self.clock.wall, self.llm.calls = {}, []
        view = MemoryView(self.store, self.vm, self.img_emb, self.text_emb, self.forest, None, as_of=as_of,
                          cameras=cams)
        t_start = time.perf_counter()
        ans = self.agent.answer(QUESTIONS[r % len(QUESTIONS)], view)
        t_end = time.perf_counter()
        info = _check_run(ans, self.llm)
        w, llm, n_turns = self.clock.wall, self.llm, len(AGENT_TURNS)
        total, model = t_end - t_start, llm.model_s()
        out = {"routing": w.get("route", 0.0) - llm.model_s("router"),
               "retrieval": w.get("search", 0.0) - w.get("inspect_many", 0.0),
               "inspection": w.get("inspect_many", 0.0) + w.get("inspect", 0.0) - llm.model_s("inspector"),
               "planning": (total - w.get("route", 0.0) - w.get("search", 0.0) - w.get("inspect", 0.0)
                            - llm.model_s("planner"))}
        # per turn: from the start of a planner request to the start of the next (or the end),
        # less the model time inside; the routing segment runs up to the first planner request
        bounds = [t_start] + [c[2] for c in llm.calls if c[0] == "planner"] + [t_end]
        out.update(zip(SEGMENTS, [(b - a) - sum(max(0.0, min(c1, b) - max(c0, a)) for _, _, c0, c1 in llm.calls)
                                  for a, b in zip(bounds, bounds[1:])]))
        out.update(engine=total - model, engine_per_turn=(total - model) / n_turns, model=model, total=total,
                   view_search=ans.timings.get("retrieval", 0.0), inspect_target=self.state.pop("inspect_target", None),
                   **info)
        return out

    def case(self, questions: int, as_of, cams) -> dict:
        """``questions`` questions after one warm-up (first reads of the SQLite pages, word vectors):
        {figure: [value per question]}."""
        per: dict = {k: [] for k in STAGES + SEGMENTS + ["engine", "engine_per_turn", "model", "total", "view_search",
                                                         "turn1_results", "lookahead_inspections", "model_calls",
                                                         "inspect_target"]}
        for r in range(questions + 1):
            q = self.question(r, as_of, cams)
            if r > 0:
                for k in per:
                    per[k].append(q[k])
        return per


def _p(xs, q: float) -> float | None:
    return percentiles(xs, q, scale=1e3)[0]


def stage_row(case: str, per: dict) -> list:
    n_turns = len(AGENT_TURNS)
    ms = lambda k: statistics.mean(per[k]) * 1e3  # noqa: E731
    return ([case] + [ms(s) / n_turns for s in STAGES] +
            [ms("engine_per_turn"), _p(per["engine_per_turn"], 50), _p(per["engine_per_turn"], 90),
             _p(per["engine"], 50), ms("model"), statistics.median(per["model_calls"])])


def turn_row(case: str, per: dict) -> list:
    return ([case] + [x for s in SEGMENTS for x in (_p(per[s], 50), _p(per[s], 90))] +
            [_p(per["view_search"], 50), statistics.median(per["turn1_results"]),
             statistics.median(per["lookahead_inspections"]),
             " ".join(f"{src}:{n}" for src, n in sorted(Counter(t[0] for t in per["inspect_target"] if t).items()))])


def part_agentic(args, store, forest, build_s: float) -> dict:
    vm, fill = searchable_memory(store)
    run = AgenticRun(store, vm, forest)
    end = float(args.moments - 1)
    cases = {"all cameras, now": (None, None), "camera cam, now": (None, ["cam"]),
             "camera cam, as_of=-1h": (end - 3600.0, ["cam"])}
    table, turn_table, raw = [], [], {}
    for case, (as_of, cams) in cases.items():
        raw[case] = per = run.case(args.agentic_questions, as_of, cams)
        table.append(stage_row(case, per))
        turn_table.append(turn_row(case, per))
    n_turns = len(AGENT_TURNS)
    print(f"\nAgentic engine overhead, ms ({args.agentic_questions} questions per case; {args.moments:,} moments, "
          f"{fill['spaces']['event_doc']:,} event docs, {fill['summaries']:,} summaries, scripted model, hashing "
          f"embedders; stage columns: mean engine ms per planner turn ({n_turns} turns), the router's share "
          f"included)")
    t4 = print_table(["case"] + STAGES + ["engine/turn", "p50", "p90", "engine/question p50", "model (scripted)",
                                          "model calls"], table)
    print("\nPer turn, engine ms p50 / p90 (a turn: its planner request to the next; routing seg: up to the "
          "first planner request); view.search: ms in the searches of a question")
    t5 = print_table(["case"] + [f"{s} {q}" for s in SEGMENTS for q in ("p50", "p90")] +
                     ["view.search p50", "turn-1 results", "look-ahead inspections", "[1.0] inspected"], turn_table)
    return {"moments": args.moments, "questions": args.agentic_questions, "turns": n_turns, "setup": fill,
            "table": t4, "table_turns": t5,
            "per_turn_ms": {row[0]: dict(zip(STAGES + ["engine_per_turn_mean", "engine_per_turn_p50",
                                                      "engine_per_turn_p90", "engine_per_question_p50",
                                                      "model_ms", "model_calls"], row[1:])) for row in table},
            "raw_s": raw}
