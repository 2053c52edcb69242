"""Agentic answering: a router, then a bounded planner loop of search / inspect / summarize /
answer actions over one question's ``MemoryView`` (VAM seed 3.4, B.4, B.6).

Every model reply is untrusted. A reply is parsed against the strict schemas of
``llm.schemas``; an invalid one gets ONE repair request; a reply still invalid on the first
planner turn becomes a permissive search, on a later turn the loop ends with the best evidence.
A failing model (``LLMError``) ends the loop with the best evidence found so far, or "not found".
The loop stops on an answer, on the turn budget, or after two consecutive turns that add no new
evidence. Everything reads the memory through the view, so ``as_of`` and the camera filter hold
for every stage, anchors and inspections included. The router and every planner turn see the
last question/answer pairs in view (the dialogue: a follow-up refers to them); the planner also
sees the kinds of summary documents that exist. A search may carry ``visual_ref`` (a result's
middle frame becomes an image query), ``inspection_prompt`` and ``joint_inspection`` (its
inspect_k picks looked at in one request); the two-phase answer reports ``found`` only on the
model's explicit verdict, so ``Engine.ask``'s auto mode lands here otherwise.

Model calls per ``answer()`` are bounded (``max_model_calls``):
    router 2 (reply + repair) + router summary documents MAX_SUMMARY_DOCS
    + per planner turn: 2 (reply + repair) + anchor checks 2 * MAX_ANCHOR_CHECKS
                        + max(search inspections MAX_INSPECTIONS_PER_TURN, inspect 1,
                              summary documents MAX_SUMMARY_DOCS)
    + 1 final answer request.
Summary documents are written by the memory writer's model; every other call goes to ``llm``.
Outside tools (``tools``: web_search, image_search; reason/tool_actions.py) make no model call:
each is one planner turn (counted above), and at most ``Toolbox.max_calls`` of them run per
answer, each bounded by its provider's timeout.
"""
from __future__ import annotations

import math
import time
from contextlib import contextmanager, nullcontext

from ..errors import VamError
from ..llm import (TOOL_ACTIONS, AnswerAction, FindEntityAction, Image, InspectAction, LLMError, LastSeenAction,
                   RouteFinal, RouteRetrieve, SearchAction, TimeRange, parse_action, parse_anchor, parse_route, prompts)
from ..memory import Evidence, MemoryView, last_pose
from ..numerics import spread_evenly
from . import entity_actions
from .answer import Answer
from .budget import Budget, QuestionBudget
from .planner_context import (CONTEXT_TEXT_CHARS, Found, PlannerRun, anchor_occurrences, evidence_key, found_rank,
                              render_block)
from .tool_actions import ToolActions
from .turn import ModelTurns, TraceEntry

NOT_FOUND = "Not found:"
MAX_NEW_PER_TURN = 12          # new results kept per turn: the context stays readable and bounded
MAX_INSPECTIONS_PER_TURN = 8   # inspect_k across all queries of one search, in one batch
INSPECT_FRAMES = 8             # frames per inspection of a search hit
JOINT_FRAMES = 16              # frames of one joint inspection, shared by its hits
MAX_ANCHOR_CHECKS = 4          # verifier calls per anchor
MAX_SUMMARY_DOCS = 16          # summary documents one summarize may write (windows x cameras)
POINT_PAD_S = 1.0              # an instant (a frame hit) is widened by this on each side before looking at it
MAX_NOTE_CHARS = 2000          # of an inspector reply kept
MAX_CITED = 10                 # evidence records an answer cites
PERMISSIVE = {"top_k": 20, "inspect_k": 0, "threshold": 0.0}  # the fallback search of an unparsable first turn


def max_model_calls(max_turns: int) -> int:
    """The most model requests one ``answer()`` can make (see the module docstring)."""
    per_turn = 2 + 2 * MAX_ANCHOR_CHECKS + max(MAX_INSPECTIONS_PER_TURN, 1, MAX_SUMMARY_DOCS)
    return 2 + MAX_SUMMARY_DOCS + max_turns * per_turn + 1


class _ModelDown(Exception):
    """An LLMError on the way: the loop ends with what it has (never escapes ``answer``)."""

    def __init__(self, stage: str, error: Exception):
        self.stage = stage
        self.error = error
        super().__init__(f"{stage}: {error}")


class AgenticAnswerer:
    def __init__(self, llm, *, max_turns: int = 6, dialogue_tokens: int = prompts.DIALOGUE_TOKENS,
                 stage_clock=None, tools=None, budget: Budget | QuestionBudget | None = None,
                 tool_scope: tuple = ()):
        """``dialogue_tokens``: the last question/answer pairs in view the router and the
        planner see, newest kept, at most that many estimated tokens (a follow-up question
        refers to them). ``stage_clock(name)``: a
        context manager around the router step ("route"), each search action ("search"), its
        look-ahead inspections ("inspect_many") and each inspect action ("inspect"), model calls
        inside included: how a benchmark times the stages. ``tools``: a ``tools.Toolbox`` whose
        actions the planner may take (None: none, and those actions are invalid). ``budget``: the
        question's (reason/budget.py; a ``Budget`` gets a fresh account per ``answer``; None: the
        defaults): every inspection shows at most ``max_images`` frames, one over many cameras
        looks at the question's best ``max_cameras`` of them. ``tool_scope``: who asks (its tool
        replies are cached apart from every other asker's)."""
        if llm is None:
            raise VamError("the agentic answerer needs an LLM: set llm.backend (local or openai) or pass llm=...")
        if not (isinstance(max_turns, int) and 1 <= max_turns <= 20):
            raise VamError(f"max_turns must be an integer in 1..20, got {max_turns!r}")
        if not (isinstance(dialogue_tokens, int) and 0 <= dialogue_tokens <= 32_000):
            raise VamError(f"dialogue_tokens must be an integer in 0..32000, got {dialogue_tokens!r}")
        self.llm = llm
        self.max_turns = max_turns
        self.dialogue_tokens = dialogue_tokens
        self.stage_clock = stage_clock or (lambda name: nullcontext())
        self.tools = ToolActions(tools, tool_scope) if tools is not None else None
        self.budget = budget if budget is not None else Budget()

    @property
    def max_calls(self) -> int:
        return max_model_calls(self.max_turns)

    # -- entry ---------------------------------------------------------------------------------
    def answer(self, question: str, view: MemoryView) -> Answer:
        """Answer ``question`` from ``view`` (mode "agentic"). Never raises for anything a
        model replies; raises VamError only for a blank question."""
        if not isinstance(question, str) or not question.strip():
            raise VamError("the question must be a non-empty string")
        start = time.perf_counter()
        question = question.strip()
        run = PlannerRun(question, question, view, Answer("", False, [], "agentic"))
        run.budget = self.budget if isinstance(self.budget, QuestionBudget) else QuestionBudget(self.budget, question)
        run.turns = ModelTurns(self.llm, run.out)
        run.out.asked_at = view.now()
        try:
            run.dialogue = prompts.fit_dialogue(view.dialogue(prompts.DIALOGUE_READ), self.dialogue_tokens) \
                if self.dialogue_tokens else []
        except VamError as e:  # no dialogue is a worse answer, not a failed one
            run.out.trace.append(TraceEntry("dialogue", error=f"{type(e).__name__}: {e}"))
        try:
            self._route_and_plan(run)
        except _ModelDown as e:
            run.out.trace.append(TraceEntry(e.stage, error=f"model failed: {e.error}"))
            self._best_effort(run, f"the model failed ({e.error})")
        run.out.trace.append(TraceEntry("done", detail={"model_calls": run.turns.calls, "found": run.out.found,
                                                        "outside_calls": run.tool_calls}))
        run.out.timings["total"] = time.perf_counter() - start
        return run.out

    def _route_and_plan(self, run: PlannerRun) -> None:
        with self.stage_clock("route"):
            routed = self._route(run)
        if routed:
            return
        stale = 0  # consecutive turns without new evidence
        for turn in range(1, self.max_turns + 1):
            entry = TraceEntry("planner", turn=turn, turns_left=self.max_turns - turn + 1)
            run.out.trace.append(entry)
            request = self._plan(run, self.max_turns - turn + 1)
            action = self._ask(run, "planning", request, lambda text: self._parse_action(run, text), entry)
            if action is None:
                if turn == 1:
                    # B.6: an unparsable first turn does not end the loop; search for the question itself
                    action = SearchAction.model_validate({"action": "search", "queries": [
                        {"q": run.goal[:1000], **PERMISSIVE}]})
                    entry.fallback = "permissive search"
                else:
                    entry.fallback = "answer with the best evidence"
                    self._finish(run, "the planner's reply was invalid twice")
                    return
            entry.action = action.action
            if isinstance(action, AnswerAction):
                self._answer(run, action, entry)
                return
            added = self._execute(run, action, entry)
            stale = 0 if added else stale + 1
            if stale >= 2:
                entry.reason = "two consecutive turns added no new evidence"
                self._finish(run, "two consecutive turns added no new evidence")
                return
        self._finish(run, f"the turn budget ({self.max_turns}) is spent")

    # -- model calls ---------------------------------------------------------------------------
    @contextmanager
    def _timed(self, run: PlannerRun, stage: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            run.out.add_time(stage, time.perf_counter() - t0)

    def _call(self, run: PlannerRun, stage: str, requests: list) -> list[str]:
        """Reply texts, in order. Any model failure becomes _ModelDown."""
        try:
            return run.turns.send(requests, stage)
        except LLMError as e:
            raise _ModelDown(stage, e) from None

    def _ask(self, run: PlannerRun, stage: str, request, parse, entry: TraceEntry, *, repair: bool = True):
        """A parsed reply, with one repair request when the first is invalid; None when both are."""
        try:
            return run.turns.ask(request, parse, stage, entry, repair=repair).parsed
        except LLMError as e:
            raise _ModelDown(stage, e) from None

    def _parse_action(self, run: PlannerRun, text: str):
        """A planner action whose references exist (a dangling inspect ref is an invalid action)."""
        action = parse_action(text, self.tools.names if self.tools else ())
        if self.tools is not None:
            self.tools.check(run, action)
        if isinstance(action, InspectAction) and action.ref is not None:
            if run.lookup(action.ref.turn_idx, action.ref.result_idx) is None:
                raise ValueError(f"ref: [{action.ref.turn_idx}.{action.ref.result_idx}] is not a result in the "
                                 f"context (turns 1..{len(run.blocks)})")
        if isinstance(action, SearchAction) and action.visual_ref is not None:
            r = action.visual_ref.ref
            found = run.lookup(r.turn_idx, r.result_idx)
            if found is None:
                raise ValueError(f"visual_ref.ref: [{r.turn_idx}.{r.result_idx}] is not a result in the context "
                                 f"(turns 1..{len(run.blocks)})")
            if not found.evidence.frame_paths:
                raise ValueError(f"visual_ref.ref: [{r.turn_idx}.{r.result_idx}] has no frame to search with")
        return action

    # -- router --------------------------------------------------------------------------------
    def _route(self, run: PlannerRun) -> bool:
        """True when the router answered by itself."""
        entry = TraceEntry("router")
        run.out.trace.append(entry)
        request = prompts.route(run.question, run.view.now(), run.view.camera_ids(), run.dialogue)
        route = self._ask(run, "routing", request, parse_route, entry)
        if route is None:
            entry.fallback = "retrieve with the question as asked"
            return False
        if isinstance(route, RouteFinal):
            entry.action = "final"
            run.out.text, run.out.found = route.text, True
            return True
        if isinstance(route, RouteRetrieve):
            entry.action = "retrieve"
            run.goal = route.args.question
            return False
        entry.action = "summarize"
        args = route.args
        rng = TimeRange(mode=args.time_mode, start=args.min_time, end=args.max_time)
        found = self._guarded(run, entry, lambda: self._summarize(run, rng, args.granularity_seconds, args.prompt,
                                                                  args.summary_structure, entry))
        self._add_block(run, "router summarize", found, entry)
        return False

    # -- actions -------------------------------------------------------------------------------
    def _execute(self, run: PlannerRun, action, entry: TraceEntry) -> int:
        """Run one search / inspect / summarize action; its new results become the next
        context turn. Returns how many results are new."""
        if action.action in TOOL_ACTIONS:
            with self.stage_clock("tool"), self._timed(run, "tools"):
                return self.tools.run_action(run, action, entry)
        steer = self.tools.steering(run, action) if self.tools is not None else []
        if isinstance(action, SearchAction):
            with self.stage_clock("search"):
                found = self._guarded(run, entry, lambda: self._search(run, action, entry))
        elif isinstance(action, InspectAction):
            with self.stage_clock("inspect"):
                found = self._guarded(run, entry, lambda: self._inspect(run, action, entry))
        elif isinstance(action, (FindEntityAction, LastSeenAction)):
            found = self._guarded(run, entry, lambda: self._entities(run, action, entry))
        else:
            found = self._guarded(run, entry, lambda: self._summarize(
                run, action.time_range, action.granularity_seconds, action.prompt, action.summary_structure, entry))
        label = action.action
        if steer:  # asked with words of a web result: its results never go outside (tool_actions.py)
            run.steered.add(len(run.blocks) + 1)
            entry.detail["steered_by"] = steer[:8]
            label += " (with words of a web result: its results are not sent to outside tools)"
        self._add_block(run, label, found, entry)
        if run.failure is not None:
            raise run.failure
        return len(found)

    def _guarded(self, run: PlannerRun, entry: TraceEntry, fn) -> list:
        """An action's results; a memory-side failure (bad range, missing file) becomes a note
        the planner sees instead of an exception."""
        try:
            return fn()
        except _ModelDown:
            raise
        except LLMError as e:  # the writer's model (summaries)
            raise _ModelDown("summarize", e) from None
        except (VamError, ValueError, OSError) as e:
            entry.notes.append(f"failed: {e}"[:300])
            return []

    def _add_block(self, run: PlannerRun, label: str, found: list, entry: TraceEntry) -> None:
        turn_idx = len(run.blocks) + 1
        block = []
        for i, (ev, via, note, key) in enumerate(found):
            run.seen.add(key)
            block.append(Found(turn_idx, i, ev, via, note))
        run.blocks.append(block)
        entry.context_turn = turn_idx
        entry.added = [f.ref for f in block]
        entry.inspections = {f.ref: f.note for f in block if f.note}
        run.context.append(render_block(turn_idx, label, block, entry.notes))

    def _search(self, run: PlannerRun, action: SearchAction, entry: TraceEntry) -> list:
        rng = self._resolve(run, action.time_range, entry) if action.time_range is not None else (None, None)
        if rng is None:
            return []
        allowed = self._summary_filter(run, action.summary_filter)
        image = None
        if action.visual_ref is not None:  # checked when parsed: the result exists and has frames
            paths = run.lookup(action.visual_ref.ref.turn_idx, action.visual_ref.ref.result_idx).evidence.frame_paths
            image = paths[len(paths) // 2]
        # sources left out: every source in view (speech too, when the memory heard any)
        sources = tuple(action.sources) if "sources" in action.model_fields_set else run.view.default_sources()
        new, keys = [], set()
        for qi, q in enumerate(action.queries):
            with self._timed(run, "retrieval"):
                hits = run.view.search(q.q, top_k=q.top_k, time_range=None if rng == (None, None) else rng,
                                       sources=sources, image=image)
            rank = 0
            for h in hits:
                # calibrated per space (memory/search.py), so one threshold fits every space; a hit
                # with nothing to compare against (a lone vector in scope) is kept for the planner
                if h.relevance is not None and h.relevance < q.threshold:
                    continue
                if h.source == "summary" and allowed is not None and (h.camera_id, h.t_start, h.t_end) not in allowed:
                    continue
                key = evidence_key(h)
                if key in run.seen or key in keys:
                    continue
                keys.add(key)
                new.append((h, qi, rank))
                rank += 1
        dropped = max(0, len(new) - MAX_NEW_PER_TURN)
        # each query's own ranking (fused, so comparable within its list; cosines of different
        # spaces are not), taken round-robin across queries
        new = sorted(new, key=lambda x: (x[2], x[1]))[:MAX_NEW_PER_TURN]
        if dropped:
            entry.notes.append(f"{dropped} more new results not kept (at most {MAX_NEW_PER_TURN})")
        # look-ahead inspection (B.4): each query's best inspect_k new results, within the turn's budget
        picks = [i for i, (h, qi, rank) in enumerate(new) if rank < action.queries[qi].inspect_k]
        picks = sorted(picks, key=lambda i: (new[i][2], new[i][1]))[:MAX_INSPECTIONS_PER_TURN]
        try:
            with self.stage_clock("inspect_many"):
                notes = self._inspect_many(run, [new[i][0] for i in picks], action.inspection_prompt or run.goal,
                                           joint=action.joint_inspection)
        except _ModelDown as e:  # keep the hits found; the loop ends once they are in the context
            run.failure, notes = e, {}
        out = []
        for i, (h, _, _) in enumerate(new):
            note = notes.get(picks.index(i)) if i in picks else None
            out.append((h, "search", note, evidence_key(h)))
        return out

    def _entities(self, run: PlannerRun, action, entry: TraceEntry) -> list:
        """find_entity / last_seen (reason/entity_actions.py): no model call."""
        rng = None
        if getattr(action, "time_range", None) is not None:
            rng = self._resolve(run, action.time_range, entry)
            if rng is None:
                return []
        with self._timed(run, "retrieval"):
            return entity_actions.results(run.view, action, rng, run.seen, entry.notes)

    def _summary_filter(self, run: PlannerRun, flt) -> set | None:
        """(camera, t0, t1) of the summaries that pass ``summary_filter`` (None: no filter)."""
        if flt is None or (flt.summary_structure is None and flt.granularity_seconds is None):
            return None
        out = set()
        for s in run.view.summaries():
            if flt.summary_structure is not None and s.structure != flt.summary_structure:
                continue
            if flt.granularity_seconds is not None and not math.isclose(s.granularity_s, flt.granularity_seconds):
                continue
            out.add((s.camera_id or "*", s.t0, s.t1))
        return out

    def _inspect_many(self, run: PlannerRun, hits: list, prompt: str, *, joint: bool = False) -> dict:
        """Inspector notes {index in hits: text} for search hits, in one batch: one request per
        hit, or (``joint``) one request showing every hit's frames (JOINT_FRAMES in all, shared
        evenly) whose note every hit gets."""
        cap = run.budget.budget.max_images
        per_hit = max(1, min(JOINT_FRAMES, cap) // max(1, len(hits))) if joint else min(INSPECT_FRAMES, cap)
        groups, idx = [], []
        for i, h in enumerate(hits):
            ms = self._frames(run, h.t_start, h.t_end, per_hit, h.camera_id)
            if ms:
                groups.append([(Image(m.frame_path), m.t) for m in ms])
                idx.append(i)
        if joint and groups:
            text = self._send_inspections(run, [prompts.inspect(prompt, [f for g in groups for f in g],
                                                                groups=len(groups))])[0].strip()
            return {i: text[:MAX_NOTE_CHARS] for i in idx} if text else {}
        texts = self._send_inspections(run, [prompts.inspect(prompt, g) for g in groups])
        return {i: t.strip()[:MAX_NOTE_CHARS] for i, t in zip(idx, texts) if t.strip()}

    def _send_inspections(self, run: PlannerRun, requests: list) -> list[str]:
        """Inspection requests, each counted in the question's budget account."""
        for req in requests:
            run.budget.account.spent("inspection", *run.budget.budget.cost(req))
        return self._call(run, "inspection", requests)

    def _frames(self, run: PlannerRun, t0: float, t1: float | None, n: int, camera: str | None = None) -> list:
        """Up to ``n`` moments of [t0, t1] (None: up to now; at most the budget's ``max_images``)
        in time order, through the view. A single instant is widened a little: one frame alone
        rarely shows an action. Over every camera, only the question's best ``max_cameras`` of
        them are read (the budget's ranking; the rest are named in the account's notes)."""
        if t1 is None:
            t1 = run.view.now()
            if t1 is None:
                return []
        if t1 - t0 <= 1e-6:
            t0, t1 = t0 - POINT_PAD_S, t1 + POINT_PAD_S
        n = min(n, run.budget.budget.max_images)
        with self._timed(run, "inspection"):
            if camera not in (None, "*"):
                ms = run.view.frames(t0, t1, n, camera)
            else:
                look, left = run.budget.inspection_cameras(run.view, run.view.camera_ids())
                if not left:
                    ms = run.view.frames(t0, t1, n, None)
                else:
                    run.budget.account.notes.append(f"inspection: looked at cameras {', '.join(look)}; "
                                                    f"{len(left)} other camera(s) left out by the budget")
                    ms = [m for cam in look for m in run.view.frames(t0, t1, n, cam)]
        if len(ms) > n:  # several cameras: spread the budget over all of them
            ms = [ms[i] for i in spread_evenly(len(ms), n)]
        return sorted(ms, key=lambda m: m.t)

    def _inspect(self, run: PlannerRun, action: InspectAction, entry: TraceEntry) -> list:
        if action.ref is not None:
            ev = run.lookup(action.ref.turn_idx, action.ref.result_idx).evidence
            t0, t1, camera = ev.t_start, ev.t_end, ev.camera_id
        else:
            rng = self._resolve(run, action.time_range, entry)
            if rng is None:
                return []
            (t0, t1), camera = rng, None
        ms = self._frames(run, t0, t1, action.max_frames, camera)
        if not ms:
            entry.notes.append("no frames in that range")
            return []
        text = self._send_inspections(run, [prompts.inspect(action.prompt, [(Image(m.frame_path), m.t)
                                                                             for m in ms])])[0]
        text = text.strip()[:MAX_NOTE_CHARS]
        if not text:
            entry.notes.append("the inspector replied nothing")
            return []
        out = []
        for cam in dict.fromkeys(m.camera_id for m in ms):
            mine = [m for m in ms if m.camera_id == cam]
            ts = [m.t for m in mine]
            ev = Evidence(cam, min(ts), max(ts), tuple(m.moment_id for m in mine), tuple(m.frame_path for m in mine),
                          0.0, "frame", text, pose=last_pose(mine))
            key = evidence_key(ev, "inspect", action.prompt.lower())  # the same look with the same question is nothing new
            if key not in run.seen:
                out.append((ev, "inspect", text, key))
        return out

    def _summarize(self, run: PlannerRun, rng: TimeRange, granularity: float, prompt: str, structure,
                   entry: TraceEntry) -> list:
        resolved = self._resolve(run, rng, entry)
        if resolved is None:
            return []
        t0, t1 = resolved
        now = run.view.now()
        if now is None:
            entry.notes.append("the memory is empty")
            return []
        t1 = now if t1 is None else min(t1, now)
        if t1 <= t0:
            entry.notes.append(f"nothing to summarize in [{t0:.2f}, {t1:.2f}]")
            return []
        cams = len(run.view.camera_ids())
        if cams > MAX_SUMMARY_DOCS:
            entry.notes.append(f"{cams} cameras: at most {MAX_SUMMARY_DOCS} summary documents "
                               "per call; ask about fewer cameras")
            return []
        per_camera = MAX_SUMMARY_DOCS // max(1, cams)
        # Bounded cost: coarser windows rather than hundreds of model calls. The writer steps
        # a += granularity, and float drift can add one sliver window past ceil(span / g): so
        # ceil must stay below the budget, and widened windows get a 1e-9 slack to reach t1.
        if math.ceil((t1 - t0) / granularity) >= per_camera:
            wider = (t1 - t0) / per_camera * (1 + 1e-9)
            if wider > granularity * (1 + 1e-6):
                entry.notes.append(f"windows widened to {wider:.1f} s (at most {MAX_SUMMARY_DOCS} documents)")
            granularity = wider
        with self._timed(run, "summarize"):
            docs = run.view.summarize(t0, t1, granularity, prompt, structure)
        if not docs:
            entry.notes.append("no summary written (no frames in range, or no writer)")
        moments = run.view.moments_by_id([m for d in docs for m in d.moment_ids])
        out = []
        for d in docs:
            ms = [moments[m] for m in d.moment_ids if m in moments]
            ev = Evidence(d.camera_id or "*", d.t0, d.t1, tuple(m.moment_id for m in ms),
                          tuple(m.frame_path for m in ms), 0.0, "summary", d.text, pose=last_pose(ms))
            key = evidence_key(ev)
            if key not in run.seen:
                out.append((ev, "summarize", None, key))
        return out

    # -- time ranges ---------------------------------------------------------------------------
    def _resolve(self, run: PlannerRun, rng: TimeRange, entry: TraceEntry):
        """(t0, t1 or None for "until now") on the cameras' axis, or None when an anchor cannot
        be found (the reason goes to the entry's notes)."""
        if rng.anchor is not None:
            occ = self._anchor(run, rng.anchor, entry)
            if occ is None:
                return None
            return occ[0] - (rng.before_s or 0.0), occ[1] + (rng.after_s or 0.0)
        if rng.start_anchor is not None:
            a = self._anchor(run, rng.start_anchor, entry)
            b = self._anchor(run, rng.end_anchor, entry) if a is not None else None
            if a is None or b is None:
                return None
            if b[1] < a[0]:
                entry.notes.append(f"end anchor ({b[0]:.2f} s) is before start anchor ({a[0]:.2f} s)")
                return None
            return a[0], b[1]
        off = self._origin(run) if rng.mode == "relative" else 0.0
        return rng.start + off, None if rng.end is None else rng.end + off

    def _origin(self, run: PlannerRun) -> float:
        """Time zero of "relative" times: 0 on a relative axis; on an absolute (unix) axis, the
        first moment in view (no later than ``as_of``)."""
        if run.origin is None:
            run.origin = run.view.origin()
        return run.origin

    def _anchor(self, run: PlannerRun, anchor, entry: TraceEntry):
        """(t0, t1) of the anchor's occurrence_index-th occurrence, or None.

        Candidates: a search for the description, grouped into occurrences in time order
        (``anchor_occurrences``). The first min(inspect_k, MAX_ANCHOR_CHECKS) occurrences are checked by the
        verifier on their frames (one call each, one batch): rejected ones do not count, an
        unreadable verdict counts as unverified; later occurrences count unverified."""
        notes = entry.notes
        with self._timed(run, "retrieval"):
            occurrences = anchor_occurrences(run.view.search(anchor.description, top_k=anchor.top_k))
        label = f"anchor {anchor.description[:80]!r}"
        checks = min(anchor.inspect_k, MAX_ANCHOR_CHECKS, len(occurrences))
        verdicts = self._verify(run, anchor, occurrences[:checks], notes)
        kept = [occ for i, occ in enumerate(occurrences) if i >= checks or verdicts[i] is not False]
        if len(kept) < anchor.occurrence_index:
            notes.append(f"{label}: {len(kept)} occurrence(s) found, occurrence {anchor.occurrence_index} asked for")
            return None
        t0, t1, _ = kept[anchor.occurrence_index - 1]
        notes.append(f"{label} #{anchor.occurrence_index} at {t0:.2f}-{t1:.2f} s")
        return t0, t1

    def _verify(self, run: PlannerRun, anchor, occurrences: list, notes: list) -> list:
        """True / False / None (no frames or an unreadable verdict) per occurrence."""
        target = anchor.description
        if anchor.verification_prompt:
            target += f" (verify: {anchor.verification_prompt})"
        requests, idx = [], []
        for i, (t0, t1, cam) in enumerate(occurrences):
            ms = self._frames(run, t0, t1, INSPECT_FRAMES, cam)
            if ms:
                requests.append(prompts.anchor(target, [(Image(m.frame_path), m.t) for m in ms]))
                idx.append(i)
        out: list = [None] * len(occurrences)
        for i, text in zip(idx, self._send_inspections(run, requests)):
            try:
                v = parse_anchor(text)
                out[i] = bool(v.match and v.confidence >= 0.5)
            except ValueError as e:
                notes.append(f"anchor verdict unreadable ({str(e)[:120]}): counted unverified")
        return out

    # -- endings -------------------------------------------------------------------------------
    def _answer(self, run: PlannerRun, action: AnswerAction, entry: TraceEntry) -> None:
        found = run.findings()
        run.out.tool_citations = self.tools.cite(run, action) if self.tools is not None else []
        if not found and run.out.tool_citations:  # an outside fact alone: cited apart, no memory evidence
            run.out.text, run.out.found, run.out.evidence = action.response, True, []
            return
        if not found:
            entry.notes.append("answer without any evidence")
            run.out.text = (f"{NOT_FOUND} no evidence in memory supports an answer "
                            f"(the planner said: {action.response[:300]})")
            run.out.found = False
            return
        best = None
        if action.best_ref is not None:
            best = run.lookup(action.best_ref.turn_idx, action.best_ref.result_idx)
        if best is None:
            best = max(found, key=found_rank)
            entry.fallback = "best_ref is not a result: the best-ranked result is cited"
        entry.best_ref = best.ref
        run.out.text, run.out.found = action.response, True
        run.out.evidence = self._cite(run, best)

    def _cite(self, run: PlannerRun, best: Found) -> list[Evidence]:
        rest = sorted((f for f in run.findings() if f is not best), key=found_rank, reverse=True)
        return [best.evidence] + [f.evidence for f in rest[:MAX_CITED - 1]]

    def _finish(self, run: PlannerRun, reason: str) -> None:
        """Forced end: one final answer request when there is evidence, else not found."""
        entry = TraceEntry("final", reason=reason)
        run.out.trace.append(entry)
        if not run.findings():
            run.out.text, run.out.found = f"{NOT_FOUND} no evidence in memory supports an answer ({reason})", False
            return
        action = self._ask(run, "planning", self._plan(run, 0),
                           lambda text: self._parse_action(run, text), entry, repair=False)
        if isinstance(action, AnswerAction):
            entry.action = "answer"
            self._answer(run, action, entry)
        else:
            if entry.error is None:
                entry.error = f"expected an answer, got {getattr(action, 'action', None)}"
            self._best_effort(run, reason)

    def _best_effort(self, run: PlannerRun, reason: str) -> None:
        """An ending with no model answer: the best evidence as the answer, or not found."""
        found = run.findings()
        if not found:
            run.out.text, run.out.found, run.out.evidence = (f"{NOT_FOUND} no evidence in memory supports an "
                                                             f"answer ({reason})"), False, []
            return
        best = max(found, key=found_rank)
        ev = best.evidence
        what = (best.note or ev.text or f"{len(ev.moment_ids)} frame(s)")[:CONTEXT_TEXT_CHARS]
        run.out.text = (f"Best evidence ({reason}): camera {ev.camera_id}, {ev.t_start:.2f}-{ev.t_end:.2f} s, "
                        f"{ev.source}: {what}")
        run.out.found = True
        run.out.evidence = self._cite(run, best)

    # -- context -------------------------------------------------------------------------------
    def _context(self, run: PlannerRun) -> str:
        return "\n".join(run.context)

    def _plan(self, run: PlannerRun, turns_left: int):
        """One planner request: the dialogue, the goal, the context, and the kinds of summary
        documents in view (read each turn: a summarize action adds some)."""
        try:
            kinds = run.view.summary_kinds()
        except VamError:
            kinds = []
        tools = self.tools.names if self.tools else ()
        return prompts.plan(run.goal, self._context(run), turns_left, dialogue=run.dialogue, structures=kinds,
                            tools=tools, max_tool_calls=self.tools.max_calls if self.tools else 0)
