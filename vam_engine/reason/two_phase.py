"""Two-phase reasoning (OASIS 3.2): a coarse pass over what is immediately at hand, and a fine
pass over retrieved long-term memory only when the coarse pass asks for it.

Coarse. One request of four messages that go from what changes least to what changes most,
so consecutive questions share the longest prompt prefix and a prefix KV cache (``LocalQwenVL``'s,
which resumes at message boundaries, or a server's block cache) skips it: the fixed system
prompt; a user message with the forest's root summaries (by camera, then time, each with its
interval); a user message with, for each camera in view, its provisional nodes (below), its
medium buffer and its short window (each frame preceded by ``t=...s``); and a user message with
the rolling QA summary, the current time and the question. The QA summary changes after every question, so it comes after the
frames: while the memory stands still (an ``as_of``, or no new frames or roots), the next
question reuses system + roots + frames and prefills only its last message. The model replies
``{"answer": ...}`` when that suffices, or ``{"retrieve": <a short retrieval intent>}``, each
after an optional ``"think"`` (OASIS's Think step, kept in the trace).

Many cameras. The request is held to the question's budget (budget.py): with more than
``whole_cameras`` cameras in view, the cameras ranked first for the question are shown (their
roots, provisional nodes, speech and frames, thinned to their share of ``max_images`` and to
``max_tokens``), every other camera in one line (its last event and last activity).

Fine. The intent is the coarse reply's ``retrieve``; when the reply says the present does not
settle it without one, or is unusable, one short request continuing the coarse one asks for it
(OASIS's intent query I_i, written from the model's first response, not the question; the
question only when that reply is unusable too). It retrieves ``k_f`` forest nodes (greedy
lineage pruning: no two in one lineage) and ``k_q`` QA records. The fine request is the last
request's messages and reply unchanged plus ONE user message (node summaries with intervals and
up to ``keyframes_per_node`` (16) keyframes each, fewer when the fine budget is short; the QA
records; the instruction to answer), so ``LocalQwenVL`` continues from the coarse request's KV
cache and prefills only the new tokens; each stage's cached tokens and prefill time are in the
trace and timings.

Recent history the forest does not hold yet. An event becomes a forest leaf only once the
writer has documented it, and an event stays open up to ``commit.max_event_s``, so the frames
between the present's buffer and the newest root would be out of the fast path's reach. They
are shown as provisional nodes (``MemoryView.event_memory``: the open event and the events
waiting for their documents, as they stood at ``as_of``; never an event the roots already
cover): at the start of each camera's frames, the newest ``provisional_per_camera`` of them,
each with its interval, frame count, state and up to ``PROVISIONAL_KEYFRAMES`` keyframes from
before the present's buffer (the buffer shows the later seconds), marked provisional. The ones
left off are ranked for the fine stage by their mean frame embedding against the intent
(through the image embedder's text side), and the best ``k_p`` join the retrieved nodes. When a
document lands the event is a forest leaf and only that is shown.

Where the present's frames come from. From ``WorkingMemory`` (the ring buffers ingest fills)
when it covers the camera's present (see ``WorkingMemory.covers``); otherwise (after a restart,
or an ``as_of`` in the past) from the store: the moments of the same spans, thinned to the same
rates. Without ``as_of``, a camera's present is the newest of its newest moment and its newest
buffered frame (the gates may hold back still scenes for minutes); with it, ``as_of``. The
medium buffer's frames inside the short window's span are left out of the prompt (the short
window shows those seconds at a higher rate), which saves ~8 images per question.

What was said. Beside each camera's frames the coarse request shows the transcript segments
that ended within the medium span before its present (``WorkingMemory.heard``, the ring the
audio path feeds, when the frames came from the buffers; else the view's transcripts), each
with its interval; a coarse answer cites them (source "speech", with their text) beside the
frames it saw.

Replies are strict JSON (pydantic, extra keys forbidden); an invalid reply gets one repair
request, then the coarse stage falls back to retrieval (with the intent the model writes when
asked, else the question), and the fine stage to the raw reply text. ``found`` is the model's explicit verdict: a coarse answer
(the protocol's "the present suffices", unless it says ``"sufficient": false``, which sends the
question to the fine stage), or a fine answer with ``"sufficient": true``; a fine answer
without it, or a raw reply, keeps the model's words with ``found`` False, so ``auto`` tries the
agentic loop. Model errors never escape ``answer``: they end in a "Not
found: the model failed" answer with the error in the trace. After answering, the question and
answer are added to the QA history at the question's present and the rolling QA summary is
rewritten by one more model call (``update_qa``).
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

from ..errors import VamError
from ..llm import Image, LLMError, LLMRequest, parse_coarse, parse_fine, parse_intent, prompts
from ..memory import Evidence, MemoryView, last_pose
from ..numerics import spread_evenly
from .answer import Answer, moment_evidence
from .budget import Budget, QuestionBudget, fair_shares, ranked_shares, summary_line
from .turn import ModelTurns, TraceEntry

# defaults when no WorkingMemory is given (docs/design.md section 6, OASIS 4.2)
_SHORT_S, _SHORT_FPS, _MEDIUM_S, _MEDIUM_FPS = 8.0, 2.0, 32.0, 1.0
_QA_SUMMARY_CHARS = 2000
SPEECH_LINES = 24  # transcript segments per camera the coarse request shows at most (the latest)
CITED_LINES = 4  # of them a coarse answer cites per camera
PROVISIONAL_KEYFRAMES = 4  # keyframes of each provisional node (the present's buffer shows its later seconds)
TRACE_THINK_CHARS = 1000  # of the coarse reply's think step kept in the trace detail
_LABEL_TOKENS = 3  # the "t=...s" label before each image, estimated


def _thin(moments: list, fps: float) -> list:
    """Moments in time order, keeping one only if it is >= 1/fps after the last kept (the ring
    buffers' rule)."""
    out, last = [], -math.inf
    for m in moments:
        if m.t - last >= 1.0 / fps - 1e-6:
            out.append(m)
            last = m.t
    return out


class _Recent:
    """One camera's present: medium and short frames as (Image, t), where they came from, and
    the moments behind them when they came from the store."""

    def __init__(self, camera_id: str, now: float | None):
        self.camera_id = camera_id
        self.now = now
        self.medium: list = []
        self.short: list = []
        self.source = "none"       # "buffer" | "store" | "none"
        self.short_moments: list = []
        self.medium_moments: list = []
        self.said: list = []       # transcript segments of the medium span (memory.records.Transcript)


class _Plan:
    """What the coarse request shows: the shown cameras' presents (thinned to the budget), their
    roots and provisional nodes, the frames message's parts; the provisional nodes left off (the
    fine stage ranks them)."""

    def __init__(self, left_off=None):
        self.recents: list = []
        self.roots: list = []
        self.provisional: list = []
        self.left_off: list = list(left_off or [])
        self.frame_parts: list = []


def _image_count(r: _Recent, provisional) -> int:
    return sum(len(p.frame_paths) for p in provisional) + len(r.medium) + len(r.short)


def _thinned(r: _Recent, provisional, n: int):
    """(r, provisional) with at most ``n`` of their images, spread evenly in time over the
    provisional nodes' keyframes, the medium buffer and the short window (the newest kept)."""
    items = [("p", i, k) for i, p in enumerate(provisional) for k in range(len(p.frame_paths))]
    items += [("m", i, 0) for i in range(len(r.medium))] + [("s", i, 0) for i in range(len(r.short))]
    if len(items) <= n:
        return r, list(provisional)
    keep = {items[-1]} if n == 1 else {items[j] for j in spread_evenly(len(items), n)}
    out = _Recent(r.camera_id, r.now)
    out.source, out.said = r.source, r.said
    out.medium = [f for i, f in enumerate(r.medium) if ("m", i, 0) in keep]
    out.short = [f for i, f in enumerate(r.short) if ("s", i, 0) in keep]
    out.medium_moments = [m for i, m in enumerate(r.medium_moments) if ("m", i, 0) in keep]
    out.short_moments = [m for i, m in enumerate(r.short_moments) if ("s", i, 0) in keep]
    nodes = []
    for i, p in enumerate(provisional):
        ks = [k for k in range(len(p.frame_paths)) if ("p", i, k) in keep]
        nodes.append(replace(p, keyframes=tuple(p.keyframes[k] for k in ks if k < len(p.keyframes)),
                             keyframe_times=tuple(p.keyframe_times[k] for k in ks),
                             frame_paths=tuple(p.frame_paths[k] for k in ks)))
    return out, nodes


class TwoPhaseAnswerer:
    def __init__(self, llm, working=None, text_embedder=None, *, k_f: int = 2, k_q: int = 1,
                 use_qa: bool = True, update_qa: bool = True, keyframes_per_node: int = 16,
                 dialogue_tokens: int = prompts.DIALOGUE_TOKENS, provisional_per_camera: int = 4, k_p: int = 2,
                 budget: Budget | QuestionBudget | None = None):
        """``use_qa``: read the view's QA history (the rolling summary, the last pairs that fit
        in ``dialogue_tokens`` estimated tokens, similar earlier answers); ``update_qa``: remember each answer
        there and rewrite the summary in the caller's thread (``Engine.ask`` passes False and
        records every answer itself, off the response path). ``budget``: the question's
        (reason/budget.py; a ``Budget`` is made one per ``answer``; None: the defaults)."""
        if llm is None:
            raise ValueError("TwoPhaseAnswerer needs an LLM")
        for name, v in (("k_f", k_f), ("k_q", k_q), ("dialogue_tokens", dialogue_tokens),
                        ("provisional_per_camera", provisional_per_camera), ("k_p", k_p)):
            if not isinstance(v, int) or v < 0:
                raise ValueError(f"TwoPhaseAnswerer: {name} must be an int >= 0, got {v!r}")
        if not isinstance(keyframes_per_node, int) or keyframes_per_node < 0:
            raise ValueError(f"TwoPhaseAnswerer: keyframes_per_node must be an int >= 0, got {keyframes_per_node!r}")
        self.llm = llm
        self.working = working
        self.use_qa = use_qa
        self.text_embedder = text_embedder
        self.k_f, self.k_q, self.k_p = k_f, k_q, k_p
        self.provisional_per_camera = provisional_per_camera
        self.update_qa = update_qa
        self.dialogue_tokens = dialogue_tokens
        self.keyframes_per_node = keyframes_per_node
        self._budget = budget if budget is not None else Budget()
        self.budget: QuestionBudget | None = budget if isinstance(budget, QuestionBudget) else None
        if working is not None:
            self.short_s, self.short_fps = working.short_s, working.short_fps
            self.medium_s, self.medium_fps = working.medium_s, working.medium_fps
        else:
            self.short_s, self.short_fps, self.medium_s, self.medium_fps = _SHORT_S, _SHORT_FPS, _MEDIUM_S, _MEDIUM_FPS

    # -- the question --------------------------------------------------------------------------
    def answer(self, question: str, view: MemoryView) -> Answer:
        ans = Answer(text="", found=False, evidence=[], mode="two_phase")
        if not isinstance(self._budget, QuestionBudget):  # a limits-only budget: a fresh account per question
            self.budget = QuestionBudget(self._budget, question)
        t0 = time.perf_counter()
        now = None
        try:
            now = self._run(question, view, ans)
        except LLMError as e:
            ans.trace.append(TraceEntry("error", error=f"LLMError: {e}"))
            ans.text, ans.found, ans.evidence = f"Not found: the model failed: {e}", False, []
            ans.add_time("two_phase", time.perf_counter() - t0)
            return ans  # nothing worth remembering as a QA pair
        except VamError as e:  # the memory (store, embedder) failed: say so, do not raise
            ans.trace.append(TraceEntry("error", error=f"{type(e).__name__}: {e}"))
            ans.text, ans.found, ans.evidence = f"Not found: the memory failed: {e}", False, []
            ans.add_time("two_phase", time.perf_counter() - t0)
            return ans
        ans.asked_at = now
        if self.update_qa:
            self._remember(question, ans, view, now)
        ans.add_time("two_phase", time.perf_counter() - t0)
        return ans

    def _run(self, question: str, view: MemoryView, ans: Answer) -> float | None:
        t = time.perf_counter()
        coarse, recents, now, left_off, context = self._coarse_request(question, view)
        ans.add_time("context", time.perf_counter() - t)

        # -- coarse pass (one repair), then answer or fall back to retrieval
        parsed, last_req, last_text = self._ask_json(coarse, parse_coarse, ans, "coarse", context)
        entry = ans.trace[-1]
        if parsed is not None and parsed.think:
            entry.detail["think"] = parsed.think[:TRACE_THINK_CHARS]
        if parsed is not None and parsed.answer is not None and parsed.sufficient is not False:
            ans.text, ans.found = parsed.answer.strip(), True
            ans.evidence = self._coarse_evidence(recents)
            entry.action = "answer"
            return now
        if parsed is not None and parsed.retrieve is not None:
            intent = parsed.retrieve.strip()
            action = "retrieve" if parsed.answer is None else "insufficient_retrieve"
        else:  # no intent written: ask for one, continuing the conversation (OASIS: I_i from the first reply)
            action = "insufficient_retrieve" if parsed is not None else "fallback_retrieve"
            intent, last_req, last_text = self._ask_intent(last_req, last_text, question, ans)
        entry.action = action
        entry.intent = intent
        self._fine(intent, view, ans, last_req, last_text, left_off)
        return now

    def _coarse_request(self, question: str, view: MemoryView):
        """(the coarse request, the shown cameras' presents, the question's present, the
        provisional nodes not shown, the trace detail), within the question's budget."""
        budget = self.budget
        ranking = budget.ranking(view)
        whole = len(ranking) <= budget.budget.whole_cameras  # OASIS's present, whole (see budget.py)
        considered = ranking if whole else ranking[:budget.budget.max_cameras]
        recents = [self._recent(view, c.camera_id) for c in considered]
        nows = [r.now for r in recents if r.now is not None]
        now = view.as_of if view.as_of is not None else (max(nows) if nows else view.now())
        # keyframes of provisional nodes from before each present's buffer: it shows the rest
        before = {r.camera_id: r.now - self.medium_s for r in recents if r.source != "none"}
        memory = view.event_memory(PROVISIONAL_KEYFRAMES, before=before)
        qa_summary = view.qa_summary() if self.use_qa else ""
        # the last turns verbatim: the rolling summary is rewritten in the background and may
        # not hold the previous answer yet when a follow-up comes
        dialogue = prompts.fit_dialogue(view.dialogue(prompts.DIALOGUE_READ), self.dialogue_tokens) \
            if self.use_qa and self.dialogue_tokens else []
        question_parts = self._question_parts(question, now, qa_summary, dialogue)
        plan = self._fit(considered, recents, memory, question_parts, ranking[len(considered):], whole)
        coarse = prompts.two_phase_coarse(self._memory_parts(plan.roots), plan.frame_parts, question_parts)
        images, tokens = budget.budget.cost(coarse)
        budget.account.spent("coarse", images, tokens)
        if images > budget.budget.max_images or tokens > budget.budget.max_tokens:
            budget.account.notes.append(f"coarse: {images} images, {tokens} tokens: over the budget, with "
                                        f"{len(ranking)} camera(s) shown whole (ask.whole_cameras)")
        context = {"roots": [n.node_id for n in plan.roots], "qa_summary_chars": len(qa_summary), "now": now,
                   "provisional": [p.event_id for p in plan.provisional], "provisional_left_off": len(plan.left_off),
                   "frames": {r.camera_id: {"from": r.source, "medium": len(r.medium), "short": len(r.short),
                                            "speech": len(r.said)} for r in plan.recents},
                   "images": images, "tokens": tokens}
        if len(ranking) > len(plan.recents):
            context["cameras_not_shown"] = len(ranking) - len(plan.recents)
        return coarse, plan.recents, now, plan.left_off, context

    def _fit(self, considered, recents, memory, question_parts, rest, whole: bool) -> "_Plan":
        """The shown cameras' parts within the budget: each camera in rank order gets its
        ranked share of the images (``ranked_shares``), thinned evenly in time when its present
        holds more, fewer when the tokens run short; a camera that cannot be shown (the first
        always is) and every camera not considered is summarised in one line while the tokens
        last."""
        b, account = self.budget.budget, self.budget.account
        used = b.cost([prompts.TWO_PHASE_SYSTEM, *self._memory_parts([]), *question_parts])[1]
        by_cam: dict = {}
        for p in memory.provisional:
            by_cam.setdefault(p.camera_id, []).append(p)
        splits = {r.camera_id: self._split_provisional(by_cam.get(r.camera_id, [])) for r in recents}
        wants = [_image_count(r, splits[r.camera_id][0]) for r in recents]
        shares = wants if whole else ranked_shares(wants, b.max_images, b.min_camera_images)
        shown_ids = {r.camera_id for r in recents}
        plan = _Plan(left_off=[p for p in memory.provisional if p.camera_id not in shown_ids])
        dropped = []
        for choice, r, want, share in zip(considered, recents, wants, shares):
            shown, left_off = splits[r.camera_id]
            roots = sorted((n for n in memory.roots if n.camera_id == r.camera_id), key=lambda n: (n.t_start, n.node_id))
            text = b.cost(self._root_lines(roots) + self._camera_parts(*_thinned(r, shown, 0)))[1]
            room = b.max_tokens - used - text
            if not whole:
                share = min(share, max(0, room) // (b.image_tokens + _LABEL_TOKENS))
            if plan.recents and not whole and (room <= 0 or (share < 1 and want > 0)):
                dropped.append(choice)
                plan.left_off += by_cam.get(r.camera_id, [])
                continue
            r, shown = _thinned(r, shown, share)
            kept = _image_count(r, shown)
            if want > kept:
                account.trimmed[r.camera_id] = want - kept
            parts = self._camera_parts(r, shown)
            used += b.cost(self._root_lines(roots) + parts)[1]
            plan.recents.append(r)
            plan.roots += roots
            plan.provisional += shown
            plan.left_off += left_off
            plan.frame_parts += parts
            account.shown.append([r.camera_id, list(choice.reasons), kept])
        plan.frame_parts = plan.frame_parts or ["No camera is in view."]
        lines = self._summary_lines(dropped + list(rest), b.max_tokens - used)
        if lines:
            plan.frame_parts.append(lines)
        return plan

    def _summary_lines(self, choices, tokens_left: int) -> str:
        """One line per camera not shown, while ``tokens_left`` lasts; the count of the rest."""
        if not choices:
            return ""
        account = self.budget.account
        head = ("Other cameras in view, not shown here (one line each: the last event described and the last "
                "activity; to see one, reply with what to search the memory for):")
        lines, left = [head], tokens_left - prompts.estimate_tokens(head) - _LABEL_TOKENS
        for i, c in enumerate(choices):
            line = summary_line(c)
            cost = prompts.estimate_tokens(line) + 1
            if cost > left:
                account.unlisted = len(choices) - i
                lines.append(f"- ... and {len(choices) - i} more camera(s) not listed")
                break
            lines.append(line)
            account.summarised.append(c.camera_id)
            left -= cost
        return "\n".join(lines)

    def _ask_intent(self, last_req: LLMRequest, last_text: str, question: str, ans: Answer):
        """(intent, the request it continues from, its reply): the model's retrieval intent, one
        short request continuing the coarse one (no repair: a second try costs more than the
        question as the intent loses); the question itself when that reply is unusable too. A
        model failure ends the answer like the other stages'."""
        req = prompts.two_phase_intent(last_req, last_text)
        entry = TraceEntry("intent")
        ans.trace.append(entry)
        turn = ModelTurns(self.llm, ans).ask(req, parse_intent, "intent", entry, repair=False)
        if turn.parsed is None:
            entry.fallback = "retrieve with the question"
            return question, last_req, last_text
        entry.action = "retrieve"
        entry.intent = turn.parsed.retrieve.strip()
        return entry.intent, turn.request, turn.reply

    def _fine(self, intent: str, view: MemoryView, ans: Answer, last_req, last_text, left_off) -> None:
        """Retrieve forest nodes, provisional nodes and QA records for the intent; the fine
        request continues ``last_req`` and its reply ``last_text``."""
        q = None
        if self.text_embedder is not None:  # one embedding of the intent serves the forest and the QA history
            t = time.perf_counter()
            q = self.text_embedder.embed_texts([intent])[0]
            ans.add_time("embed", time.perf_counter() - t)
        t = time.perf_counter()
        hits = view.forest_retrieve(intent, self.k_f, query=q) if self.k_f else []
        ans.add_time("forest", time.perf_counter() - t)
        provisional = []
        if self.k_p and left_off:  # ranked in the image space, apart from the forest's text space
            t = time.perf_counter()
            provisional = view.rank_provisional(intent, left_off, self.k_p)
            ans.add_time("provisional", time.perf_counter() - t)
        records = []
        if self.use_qa and self.k_q and q is not None:
            t = time.perf_counter()
            records = view.similar_answers(q, self.k_q)
            ans.add_time("qa_retrieval", time.perf_counter() - t)
        t = time.perf_counter()
        evidence, parts = self._fine_parts(intent, hits, records, view, provisional)
        fine = prompts.two_phase_fine(last_req, last_text, parts)
        ans.add_time("fine_context", time.perf_counter() - t)
        images, tokens = self.budget.budget.cost(parts)
        self.budget.account.spent("fine", images, tokens)
        retrieved = {"intent": intent, "nodes": [[n.node_id, round(s, 4)] for n, s in hits],
                     "provisional": [[p.event_id, round(s, 4)] for p, s in provisional],
                     "qa": [r.qa_id for r in records], "images": images, "tokens": tokens}

        parsed, _, last_text = self._ask_json(fine, parse_fine, ans, "fine", retrieved)
        ans.evidence = evidence
        # found only on the model's explicit verdict that the memory shown suffices: anything
        # else keeps the model's words but reports not found (auto then tries the agentic loop)
        if parsed is not None:
            ans.text, ans.found = parsed.answer.strip(), parsed.sufficient is True
            ans.trace[-1].action = "answer" if ans.found else "insufficient"
        elif (hits or provisional) and last_text.strip():
            # the model answered with the evidence in view, just not as JSON: keep its words
            ans.text, ans.found = last_text.strip()[:4000], False
            ans.trace[-1].action = "raw_answer"
        else:
            ans.text, ans.found = f"Not found: no memory matched {intent[:200]!r} and the model gave no answer", False
            ans.trace[-1].action = "not_found"

    # -- model calls -----------------------------------------------------------------------------
    def _call(self, req: LLMRequest, ans: Answer, stage: str) -> str:
        """The reply text of one request without a schema, recorded as its own trace entry."""
        entry = TraceEntry(stage)
        ans.trace.append(entry)
        return ModelTurns(self.llm, ans).send([req], stage, entry)[0]

    def _ask_json(self, req: LLMRequest, parse, ans: Answer, stage: str, info: dict):
        """Send ``req``; on an invalid reply send one repair. Returns (parsed or None, the last
        request sent, its reply text): the next stage continues from exactly those."""
        entry = TraceEntry(stage, detail=info)
        ans.trace.append(entry)
        turn = ModelTurns(self.llm, ans).ask(req, parse, stage, entry)
        return turn.parsed, turn.request, turn.reply

    # -- context ---------------------------------------------------------------------------------
    def _camera_now(self, view: MemoryView, cam: str) -> float | None:
        if view.as_of is not None:
            return view.as_of
        latest = view.latest_time(cam)
        ts = [latest] if latest is not None else []
        if self.working is not None:
            latest = self.working.latest(cam)
            if latest is not None:
                ts.append(latest)
        return max(ts) if ts else None

    def _recent(self, view: MemoryView, cam: str) -> _Recent:
        r = self._frames_of(view, cam)
        if r.now is not None:
            if r.source == "buffer":
                r.said = self.working.heard(cam, r.now - self.medium_s, r.now)
            else:
                r.said = [x for x in view.transcripts(r.now - self.medium_s, r.now, camera=cam) if x.t_end <= r.now]
            r.said = r.said[-SPEECH_LINES:]
        return r

    def _frames_of(self, view: MemoryView, cam: str) -> _Recent:
        r = _Recent(cam, self._camera_now(view, cam))
        if r.now is None:
            return r
        if self.working is not None and self.working.covers(cam, r.now):
            short, medium = self.working.window(cam, r.now)
            r.short = [(Image(a), t) for a, t in short]
            r.medium = [(Image(a), t) for a, t in medium if t <= r.now - self.short_s]
            r.source = "buffer"
            return r
        # the store: the same spans, thinned to the same rates (view.frames clips to as_of)
        def span(seconds: float, fps: float) -> list:
            cap = int(seconds * fps * 4) + 4  # generous: _thin does the real selection
            ms = [m for m in view.frames(r.now - seconds, r.now, cap, camera=cam) if m.t > r.now - seconds]
            return _thin(ms, fps)
        r.short_moments = span(self.short_s, self.short_fps)
        r.medium_moments = [m for m in span(self.medium_s, self.medium_fps) if m.t <= r.now - self.short_s]
        r.short = [(Image(m.frame_path), m.t) for m in r.short_moments]
        r.medium = [(Image(m.frame_path), m.t) for m in r.medium_moments]
        r.source = "store" if (r.short or r.medium) else "none"
        return r

    @staticmethod
    def _root_lines(roots) -> list[str]:
        return [f"- camera {n.camera_id} [{n.t_start:.2f}s, {n.t_end:.2f}s]: {n.summary}" for n in roots]

    def _memory_parts(self, roots) -> list:
        lines = self._root_lines(roots)
        return ["Event memory (top-level summaries, per camera, oldest first):\n" + ("\n".join(lines) or "(empty)")]

    def _split_provisional(self, nodes) -> tuple[list, list]:
        """(shown, left off): each camera's newest ``provisional_per_camera`` nodes are shown."""
        by_cam: dict = {}
        for p in nodes:
            by_cam.setdefault(p.camera_id, []).append(p)
        shown, left_off = [], []
        for ps in by_cam.values():
            ps.sort(key=lambda p: (p.t_start, p.event_id))
            cut = len(ps) - self.provisional_per_camera
            left_off += ps[:max(cut, 0)]
            shown += ps[max(cut, 0):]
        return shown, left_off

    @staticmethod
    def _provisional_line(p, buffer: str = "the recent buffer below") -> str:
        if p.open:
            state = "still open"
        elif p.document:
            state = f"closed; described, not yet in the event memory: {p.document}"
        else:
            state = "closed, not described yet"
        line = f"camera {p.camera_id} [{p.t_start:.2f}s, {p.t_end:.2f}s]: {state}; {p.n_frames} frame(s)"
        return line + ("" if p.keyframes or not p.n_frames else f"; its frames are in {buffer}")

    def _provisional_parts(self, cam: str, nodes) -> list:
        mine = [p for p in nodes if p.camera_id == cam]
        if not mine:
            return []
        parts = [(f"Camera {cam}, recent events not in the event memory yet (PROVISIONAL: not described "
                  "there yet; their time range, frame count and keyframes):")]
        for p in mine:
            parts.append("- provisional event, " + self._provisional_line(p))
            for t, path in zip(p.keyframe_times, p.frame_paths):
                parts += [f"t={t:.2f}s", Image(path)]
        return parts

    def _camera_parts(self, r: _Recent, provisional=()) -> list:
        """One camera's part of the frames message: its provisional nodes, what was said, its
        medium buffer and its short window."""
        parts = self._provisional_parts(r.camera_id, provisional)
        if r.said:
            parts.append(self._speech_part(r))
        if not (r.medium or r.short):
            return parts + [f"Camera {r.camera_id}: no recent frames."]
        parts.append(f"Camera {r.camera_id}, recent buffer (up to {self.medium_fps:g} fps):")
        for img, t in r.medium:
            parts += [f"t={t:.2f}s", img]
        parts.append(f"Camera {r.camera_id}, short window (last {self.short_s:g} s, up to {self.short_fps:g} fps):")
        for img, t in r.short:
            parts += [f"t={t:.2f}s", img]
        return parts

    def _speech_part(self, r: _Recent) -> str:
        lines = prompts.speech_lines([(x.t_start, x.t_end, x.text) for x in r.said])
        return (f"Camera {r.camera_id}, speech heard (last {self.medium_s:g} s; a transcript, may mishear):\n"
                + "\n".join(f"- t={x['start_s']:.2f}-{x['end_s']:.2f}s: {x['text']}" for x in lines))

    @staticmethod
    def _question_parts(question: str, now, qa_summary: str, dialogue=()) -> list:
        when = "unknown (the memory is empty)" if now is None else f"t={now:.2f}s"
        parts = ["Earlier questions and answers:\n" + (qa_summary.strip() or "(none)")]
        if dialogue:
            c = prompts.DIALOGUE_CHARS
            parts.append("Recent dialogue (oldest first; the question may follow up on it):\n" + "\n".join(
                f"- at t={r.t:.2f}s: {r.question[:c]}\n  answer: {r.answer[:c]}" for r in dialogue))
        return parts + [f"Current time: {when}\nQuestion: {question}"]

    def _coarse_evidence(self, recents) -> list[Evidence]:
        """What a coarse answer saw: each camera's present, and the last lines heard there."""
        out = [e for e in (self._present_evidence(r) for r in recents) if e is not None]
        return out + [Evidence(r.camera_id, x.t_start, x.t_end, (), (), 0.0, "speech", x.text)
                      for r in recents for x in r.said[-CITED_LINES:]]

    def _present_evidence(self, r: _Recent) -> Evidence | None:
        """What a coarse answer saw of a camera's present: its short window (else its medium
        buffer). Store frames cite their moments; buffered frames only camera and interval."""
        if r.source == "store":
            return moment_evidence(r.short_moments or r.medium_moments)
        frames = r.short or r.medium
        if not frames:
            return None
        return Evidence(r.camera_id, frames[0][1], frames[-1][1], (), (), 0.0, "frame", None)

    def _fine_parts(self, intent: str, hits, records, view: MemoryView, provisional=()):
        """(evidence, parts) for the retrieved nodes, provisional nodes and QA records: up to
        ``keyframes_per_node`` keyframes of each node, fewer when the fine budget (its images,
        and its tokens after the text) is short, shared evenly (``fair_shares``)."""
        ids = [k for n, _ in hits for k in n.keyframes]
        moments = view.moments_by_id(ids) if ids else {}
        have = [[(k, t) for k, t in zip(n.keyframes, n.keyframe_times) if k in moments] for n, _ in hits]
        evidence = []
        for n, score in hits:
            mine = [(k, t) for k, t in zip(n.keyframes, n.keyframe_times) if k in moments]
            evidence.append(Evidence(n.camera_id, n.t_start, n.t_end, tuple(k for k, _ in mine),
                                     tuple(moments[k].frame_path for k, _ in mine), float(score),
                                     "event" if n.is_leaf else "summary", n.summary, similarity=float(score),
                                     pose=last_pose(moments[k] for k, _ in mine)))
        evidence += [Evidence(p.camera_id, p.t_start, p.t_end, p.keyframes, p.frame_paths, float(score),
                              "event", p.document, similarity=float(score)) for p, score in provisional]
        wants = [min(len(h), self.keyframes_per_node) for h in have] + [len(p.frame_paths) for p, _ in provisional]
        b = self.budget.budget
        text = b.cost(self._fine_text(intent, hits, records, provisional, [0] * len(wants), moments, have))[1]
        cap = min(b.fine_max_images, max(0, b.fine_max_tokens - text) // (b.image_tokens + _LABEL_TOKENS))
        shares = fair_shares(wants, cap)
        if sum(shares) < sum(wants):
            self.budget.account.notes.append(f"fine: {sum(wants) - sum(shares)} keyframe(s) left out by the budget")
        return evidence, self._fine_text(intent, hits, records, provisional, shares, moments, have)

    def _fine_text(self, intent, hits, records, provisional, shares, moments, have) -> list:
        """The fine message's parts, showing ``shares[i]`` images of item i (nodes, then
        provisional nodes), spread evenly over each."""
        parts: list = [f"Memory retrieved for: {intent}"]
        if not hits and not provisional:
            parts.append("No memory node matched.")
        for i, (n, _) in enumerate(hits):
            label = "event" if n.is_leaf else "summary of several events"
            parts.append(f"Node {i + 1} ({label}), camera {n.camera_id} [{n.t_start:.2f}s, {n.t_end:.2f}s]:\n{n.summary}")
            for k, t in (have[i][j] for j in spread_evenly(len(have[i]), shares[i])):
                pose = moments[k].pose  # where it was seen: "where" questions answer with it
                parts += [f"t={t:.2f}s" + (f", seen at {pose.where()}" if pose else ""), Image(moments[k].frame_path)]
        for i, (p, _) in enumerate(provisional, len(hits)):
            parts.append(f"Node {i + 1} (provisional: an event not in the event memory yet), "
                         + self._provisional_line(p, "the recent buffer shown before"))
            for j in spread_evenly(len(p.frame_paths), shares[i]):
                parts += [f"t={p.keyframe_times[j]:.2f}s", Image(p.frame_paths[j])]
        for rec in records:
            parts.append(f"Earlier question at t={rec.t:.2f}s: {rec.question}\nIts answer: {rec.answer}")
        return parts

    # -- QA history ------------------------------------------------------------------------------
    def _remember(self, question: str, ans: Answer, view: MemoryView, now) -> None:
        """Add the pair to the QA history and rewrite the rolling summary (OASIS:
        s_qa <- LLM(s_qa, (q, a))). A failure here never changes the answer."""
        t_q = float(now) if now is not None else 0.0
        try:
            t = time.perf_counter()
            emb = self.text_embedder.embed_texts([f"{question}\n{ans.text}"])[0] if self.text_embedder else None
            ans.add_time("embed", time.perf_counter() - t)
            t = time.perf_counter()
            view.remember_answer(t_q, question, ans.text, emb)
            previous = view.qa_summary(at=t_q)
            ans.add_time("qa_update", time.perf_counter() - t)
            reply = self._call(prompts.qa_summary_update(previous, question, ans.text, t_q), ans, "qa_summary")
            text = reply.strip()[:_QA_SUMMARY_CHARS]
            if text:
                t = time.perf_counter()
                view.set_qa_summary(t_q, text)
                ans.add_time("qa_update", time.perf_counter() - t)
        except VamError as e:
            ans.trace.append(TraceEntry("qa_summary", error=f"{type(e).__name__}: {e}"))
