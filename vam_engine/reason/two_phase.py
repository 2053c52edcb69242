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
``{"answer": ...}`` when that suffices, or ``{"retrieve": <a short retrieval intent>}``.

Fine. The intent retrieves ``k_f`` forest nodes (greedy lineage pruning: no two in one lineage)
and ``k_q`` QA records. The fine request is the coarse request's messages and reply unchanged
plus ONE user message (node summaries with intervals and up to 4 keyframes each, the QA
records, the instruction to answer), so ``LocalQwenVL`` continues from the coarse request's KV
cache and prefills only the new tokens; each stage's cached tokens and prefill time are in the
trace and timings.

Recent history the forest does not hold yet. An event becomes a forest leaf only once the
writer has documented it, and an event stays open up to ``commit.max_event_s``, so the frames
between the present's buffer and the newest root would be out of the fast path's reach. They
are shown as provisional nodes (``MemoryView.event_memory``: the open event and the events
waiting for their documents, as they stood at ``as_of``; never an event the roots already
cover): at the start of each camera's frames, the newest ``provisional_per_camera`` of them,
each with its interval, frame count, state and up to ``keyframes_per_node`` keyframes from
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
request, then the coarse stage falls back to retrieval with the question as the intent, and the
fine stage to the raw reply text. ``found`` is the model's explicit verdict: a coarse answer
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

from ..errors import VamError
from ..llm import prompts
from ..llm.base import Image, LLMError, LLMRequest
from ..llm.schemas import parse_coarse, parse_fine
from ..memory import Evidence, MemoryView, last_pose
from ..numerics import spread_evenly
from .answer import Answer, moment_evidence
from .turn import ModelTurns, TraceEntry

# defaults when no WorkingMemory is given (docs/design.md section 6, OASIS 4.2)
_SHORT_S, _SHORT_FPS, _MEDIUM_S, _MEDIUM_FPS = 8.0, 2.0, 32.0, 1.0
_QA_SUMMARY_CHARS = 2000
SPEECH_LINES = 24  # transcript segments per camera the coarse request shows at most (the latest)
CITED_LINES = 4  # of them a coarse answer cites per camera


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


class TwoPhaseAnswerer:
    def __init__(self, llm, working=None, text_embedder=None, *, k_f: int = 2, k_q: int = 1,
                 use_qa: bool = True, update_qa: bool = True, keyframes_per_node: int = 4,
                 dialogue_tokens: int = prompts.DIALOGUE_TOKENS, provisional_per_camera: int = 4, k_p: int = 2):
        """``use_qa``: read the view's QA history (the rolling summary, the last pairs that fit
        in ``dialogue_tokens`` estimated tokens, similar earlier answers); ``update_qa``: remember each answer
        there and rewrite the summary in the caller's thread (``Engine.ask`` passes False and
        records every answer itself, off the response path)."""
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
        if working is not None:
            self.short_s, self.short_fps = working.short_s, working.short_fps
            self.medium_s, self.medium_fps = working.medium_s, working.medium_fps
        else:
            self.short_s, self.short_fps, self.medium_s, self.medium_fps = _SHORT_S, _SHORT_FPS, _MEDIUM_S, _MEDIUM_FPS

    # -- the question --------------------------------------------------------------------------
    def answer(self, question: str, view: MemoryView) -> Answer:
        ans = Answer(text="", found=False, evidence=[], mode="two_phase")
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
        # -- coarse context
        t = time.perf_counter()
        recents = [self._recent(view, cam) for cam in view.camera_ids()]
        nows = [r.now for r in recents if r.now is not None]
        now = view.as_of if view.as_of is not None else (max(nows) if nows else view.now())
        # keyframes of provisional nodes from before each present's buffer: it shows the rest
        before = {r.camera_id: r.now - self.medium_s for r in recents if r.source != "none"}
        memory = view.event_memory(self.keyframes_per_node, before=before)
        roots = sorted(memory.roots, key=lambda n: (n.camera_id, n.t_start, n.node_id))
        shown, left_off = self._split_provisional(memory.provisional)
        qa_summary = view.qa_summary() if self.use_qa else ""
        # the last turns verbatim: the rolling summary is rewritten in the background and may
        # not hold the previous answer yet when a follow-up comes
        dialogue = prompts.fit_dialogue(view.dialogue(prompts.DIALOGUE_READ), self.dialogue_tokens) \
            if self.use_qa and self.dialogue_tokens else []
        coarse = prompts.two_phase_coarse(self._memory_parts(roots), self._frame_parts(recents, shown),
                                          self._question_parts(question, now, qa_summary, dialogue))
        ans.add_time("context", time.perf_counter() - t)
        context = {"roots": [n.node_id for n in roots], "qa_summary_chars": len(qa_summary), "now": now,
                   "provisional": [p.event_id for p in shown], "provisional_left_off": len(left_off),
                   "frames": {r.camera_id: {"from": r.source, "medium": len(r.medium), "short": len(r.short),
                                            "speech": len(r.said)} for r in recents}}

        # -- coarse pass (one repair), then answer or fall back to retrieval
        parsed, last_req, last_text = self._ask_json(coarse, parse_coarse, ans, "coarse", context)
        if parsed is not None and parsed.answer is not None and parsed.sufficient is not False:
            ans.text, ans.found = parsed.answer.strip(), True
            ans.evidence = self._coarse_evidence(recents)
            ans.trace[-1].action = "answer"
            return now
        if parsed is not None and parsed.answer is not None:  # an answer the model says the present does not settle
            intent, action = question, "insufficient_retrieve"
        elif parsed is not None:
            intent, action = parsed.retrieve.strip(), "retrieve"
        else:
            intent, action = question, "fallback_retrieve"
        ans.trace[-1].action = action
        ans.trace[-1].intent = intent

        # -- fine: retrieve forest nodes and QA records for the intent
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
        retrieved = {"intent": intent, "nodes": [[n.node_id, round(s, 4)] for n, s in hits],
                     "provisional": [[p.event_id, round(s, 4)] for p, s in provisional],
                     "qa": [r.qa_id for r in records]}

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
        return now

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
    def _memory_parts(roots) -> list:
        lines = [f"- camera {n.camera_id} [{n.t_start:.2f}s, {n.t_end:.2f}s]: {n.summary}" for n in roots]
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

    def _frame_parts(self, recents, provisional=()) -> list:
        parts = []
        for r in recents:
            parts += self._provisional_parts(r.camera_id, provisional)
            if r.said:
                parts.append(self._speech_part(r))
            if not (r.medium or r.short):
                parts.append(f"Camera {r.camera_id}: no recent frames.")
                continue
            parts.append(f"Camera {r.camera_id}, recent buffer (up to {self.medium_fps:g} fps):")
            for img, t in r.medium:
                parts += [f"t={t:.2f}s", img]
            parts.append(f"Camera {r.camera_id}, short window (last {self.short_s:g} s, up to {self.short_fps:g} fps):")
            for img, t in r.short:
                parts += [f"t={t:.2f}s", img]
        return parts or ["No camera is in view."]

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
        """(evidence, parts) for the retrieved nodes, provisional nodes and QA records."""
        ids = [k for n, _ in hits for k in n.keyframes]
        moments = view.moments_by_id(ids) if ids else {}
        parts: list = [f"Memory retrieved for: {intent}"]
        evidence = []
        if not hits and not provisional:
            parts.append("No memory node matched.")
        for i, (n, score) in enumerate(hits, 1):
            kind = "event" if n.is_leaf else "summary"
            have = [(k, t) for k, t in zip(n.keyframes, n.keyframe_times) if k in moments]
            evidence.append(Evidence(n.camera_id, n.t_start, n.t_end, tuple(k for k, _ in have),
                                     tuple(moments[k].frame_path for k, _ in have), float(score),
                                     kind, n.summary, similarity=float(score),
                                     pose=last_pose(moments[k] for k, _ in have)))
            label = "event" if n.is_leaf else "summary of several events"
            parts.append(f"Node {i} ({label}), camera {n.camera_id} [{n.t_start:.2f}s, {n.t_end:.2f}s]:\n{n.summary}")
            for k, t in (have[j] for j in spread_evenly(len(have), self.keyframes_per_node)):
                pose = moments[k].pose  # where it was seen: "where" questions answer with it
                parts += [f"t={t:.2f}s" + (f", seen at {pose.where()}" if pose else ""), Image(moments[k].frame_path)]
        for i, (p, score) in enumerate(provisional, len(hits) + 1):
            evidence.append(Evidence(p.camera_id, p.t_start, p.t_end, p.keyframes, p.frame_paths, float(score),
                                     "event", p.document, similarity=float(score)))
            parts.append(f"Node {i} (provisional: an event not in the event memory yet), "
                         + self._provisional_line(p, "the recent buffer shown before"))
            for t, path in zip(p.keyframe_times, p.frame_paths):
                parts += [f"t={t:.2f}s", Image(path)]
        for rec in records:
            parts.append(f"Earlier question at t={rec.t:.2f}s: {rec.question}\nIts answer: {rec.answer}")
        return evidence, parts

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
