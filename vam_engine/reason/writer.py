"""The memory writer: turns committed events into retrieval documents, keeps the event forest's
summaries current, and writes summary documents over time windows.

It runs on its own thread, off the ingest path. Its queue is durable: a closed event without a
document is the work item (SQLite), so a crash or restart loses nothing and the writer picks up
where it stopped. Each round takes up to ``llm.max_batch`` items across events, cameras and
forest merges, makes one batched model call, embeds the replies in one text-embedder call and
stores them in one transaction per kind. A failed or timed-out write is retried with exponential
backoff; after ``writer.max_attempts`` tries the event gets a placeholder document naming the
failure, so the camera's forest does not stall behind it (the event, its frames and its vectors
are untouched).

What was said. With transcripts (the audio path), an event's document request carries the
transcript segments overlapping its interval, and the summary windows theirs. Transcription runs behind
the video (speech is transcribed once its utterance ends, and ASR may lag), so an event whose
camera's speech up to its end is not stored yet (``WriterMemory.speech_settled``) waits for it,
at most ``SPEECH_WAIT_S`` after it closed; then it is documented with what is there.

The clip (``writer.clips``). With it, an event's request carries the event's MP4 (engine/clips.py:
cut from the source file with its sound, else built from the retained frames) as a ``Clip`` whose
frames are the keyframes: a model that takes video sees what happens between the keyframes (and
hears it), and a server that refuses video gets the keyframes instead (llm/openai_http.py). A
clip that cannot be made (too long, the encoders busy) leaves the keyframes alone, as without.

Backpressure: ingest never waits for a model call, but when more than ``writer.queue_events``
events wait for a document, ``wait_for_room`` (called by the pipeline after a commit) holds the
committing thread until the writer catches up, so a file indexed faster than its documents can be
written slows to the writer's pace instead of growing an unbounded backlog.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ..config import WriterConfig
from ..llm import Image, LLMError, prompts
from ..memory import (DocumentQueue, EventRepository, MomentRepository, Summary, SummaryRepository,
                      TranscriptRepository, is_absolute_time)
from ..numerics import spread_evenly

log = logging.getLogger(__name__)
SPEECH_WAIT_S = 30.0  # an event waits at most this long after it closed for its speech to be transcribed
SPEECH_LINES = 40  # transcript segments a document request carries at most (the latest kept)
MIN_CLIP_S = 1.0  # an event shorter than this (one kept frame) gets a clip this long


@dataclass(frozen=True)
class WriterMemory:
    """What the writer reads and writes of the memory (memory/: the store's repositories).
    ``transcripts``: what was said (None: documents from frames only); ``speech_settled(camera,
    t)``: whether the camera's speech up to t is stored (None: never wait)."""

    queue: DocumentQueue
    events: EventRepository
    moments: MomentRepository
    summaries: SummaryRepository
    transcripts: TranscriptRepository | None = None
    speech_settled: Callable[[str, float], bool] | None = None
    # clip_of(camera, t0, t1): the interval's MP4 (None: documents from the keyframes only)
    clip_of: Callable[[str, float, float], bytes] | None = None

    def clip(self, camera_id: str, t0: float, t1: float) -> bytes | None:
        """The event's clip for its document, or None (no clips, or none could be made: the
        keyframes alone then, as before)."""
        if self.clip_of is None:
            return None
        try:
            return self.clip_of(camera_id, t0, max(t1, t0 + MIN_CLIP_S))
        except Exception as e:  # noqa: BLE001 - a clip is an extra: its trouble never holds a document back
            log.info("memory writer: no clip of %s [%.3f, %.3f] (%s); sending its keyframes", camera_id, t0, t1, e)
            return None

    def said(self, camera_id: str, t0: float, t1: float) -> list[tuple[float, float, str]]:
        """(t_start, t_end, text) of the camera's transcript segments overlapping [t0, t1]: a
        sentence that runs past the interval's end is quoted whole (one kept frame every few
        seconds would otherwise leave it in no event's document)."""
        if self.transcripts is None:
            return []
        segs = self.transcripts.list(camera_id, t0, t1)
        return [(x.t_start, x.t_end, x.text) for x in segs[-SPEECH_LINES:]]


PLACEHOLDER = "[no document: the model failed {n} times; last error: {err}]"


@dataclass
class WriterStats:
    pending_events: int          # closed events waiting for a document
    lag_s: float                 # how long the oldest of them has waited
    stale_nodes: int             # forest nodes whose summary is being (re)written
    documents: int               # event documents written by this writer
    merges: int                  # forest summaries written by this writer
    failures: int                # failed attempts (each retried later)
    model_s: float               # time spent in model calls
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


class MemoryWriter:
    def __init__(self, memory: WriterMemory, text_embedder, llm, forest, cfg: WriterConfig, *, max_batch: int = 8):
        """``memory``: the repositories the writer reads and writes (never a store)."""
        self.memory = memory
        self.text_embedder = text_embedder
        self.llm = llm
        self.forest = forest
        self.cfg = cfg
        self.max_batch = max_batch
        self._wake = threading.Event()
        self._room = threading.Condition()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._node_retry: dict[int, float] = {}  # node id -> wall time of its next try
        self._node_tries: dict[int, int] = {}
        self._counts = dict(documents=0, merges=0, failures=0, model_s=0.0, prompt_tokens=0,
                            completion_tokens=0, cached_tokens=0)
        self._idle = threading.Event()
        self._healthy = True  # the last model call succeeded
        self._speech_waits = False  # the last round left events waiting for their speech
        self._hold = True  # backpressure on
        self.lags = deque(maxlen=4096)  # seconds from an event's close to its stored document
        # held while replies are stored; a deletion holds it so nothing it removes comes back
        self.lock = threading.RLock()
        self.error: BaseException | None = None

    # -- lifetime ------------------------------------------------------------------------------
    def start(self) -> "MemoryWriter":
        self._thread = threading.Thread(target=self._run, name="vam-writer", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop = True
        self._wake.set()
        with self._room:
            self._room.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def stop_holding(self) -> None:
        """Backpressure off for good (the engine is closing)."""
        self._hold = False
        with self._room:
            self._room.notify_all()

    def notify(self) -> None:
        """New work may exist (the pipeline committed, an event closed)."""
        self._idle.clear()
        self._wake.set()

    # -- flow control --------------------------------------------------------------------------
    def wait_for_room(self, timeout: float | None = None) -> bool:
        """Block while more than ``queue_events`` events wait for a document. False on timeout.
        While the model is failing ingest is not held: the backlog is durable and drains later."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._room:
            while (self._hold and not self._stop and self.error is None and self._healthy
                   and self.memory.queue.backlog().pending > self.cfg.queue_events):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._wake.set()
                self._room.wait(0.5 if left is None else min(0.5, left))
        return True

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no event waits for a document and no forest summary is stale (items
        waiting for a retry count as pending). False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.notify()
            with self.lock:  # never between a round's documents and their forest leaves
                s = self.stats()
            if s.pending_events == 0 and s.stale_nodes == 0:
                return True
            if self.error is not None:
                raise RuntimeError(f"the memory writer stopped: {self.error}") from self.error
            if deadline is not None and time.monotonic() >= deadline:
                return False
            self._idle.wait(0.05)

    def stats(self) -> WriterStats:
        backlog = self.memory.queue.backlog()
        stale = len(self.forest.stale_nodes()) if self.forest is not None else 0
        oldest = backlog.oldest_closed_at
        return WriterStats(backlog.pending, 0.0 if oldest is None else max(0.0, time.time() - oldest), stale,
                           **self._counts)

    # -- the loop ------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            with self.lock:
                self._insert_documented()  # events documented before a crash, not yet in the forest
            while not self._stop:
                self._wake.clear()
                did = self._round()
                with self._room:
                    self._room.notify_all()
                if not did:
                    self._idle.set()
                    # events waiting for their speech are looked at again soon
                    self._wake.wait(0.2 if self._speech_waits else 1.0)
                self._speech_waits = False
        except BaseException as e:  # noqa: BLE001 - reported through stats/wait_idle, never silent
            log.exception("memory writer stopped")
            self.error = e
            self._idle.set()
            with self._room:
                self._room.notify_all()

    def _speech_ready(self, job, now: float) -> bool:
        settled = self.memory.speech_settled
        if settled is None or job.closed_at is None or now - job.closed_at >= SPEECH_WAIT_S:
            return True
        try:
            return settled(job.event.camera_id, job.event.t_end)
        except Exception:  # noqa: BLE001 - the audio path's trouble never holds documents back
            log.exception("memory writer: cannot tell whether speech is transcribed; documenting now")
            return True

    def _round(self) -> bool:
        now = time.time()
        events = self.memory.queue.jobs(self.max_batch, now)
        waiting = [j for j in events if not self._speech_ready(j, now)]
        if waiting:  # their speech is still being transcribed: documented in a later round
            events = [j for j in events if j not in waiting]
            self._speech_waits = True
        nodes = []
        if self.forest is not None and len(events) < self.max_batch:
            nodes = [n for n in self.forest.stale_nodes() if self._node_retry.get(n.node_id, 0.0) <= now]
            nodes = nodes[: self.max_batch - len(events)]
        if not events and not nodes:
            return False
        requests = [prompts.event_document(j.event.camera_id, j.event.t_start, j.event.t_end,
                                           [(Image(p), t) for p, t in j.frames],
                                           absolute=is_absolute_time(j.event.t_start),
                                           speech=self.memory.said(j.event.camera_id, j.event.t_start, j.event.t_end),
                                           clip=self.memory.clip(j.event.camera_id, j.event.t_start, j.event.t_end))
                    for j in events]
        requests += [prompts.merge_summaries(n.camera_id, [(c.t_start, c.t_end, c.summary)
                                                           for c in self.forest.children(n.node_id)])
                     for n in nodes]
        replies = self._generate(requests)
        texts, ok = [], []
        for i, r in enumerate(replies):
            try:
                if isinstance(r, Exception):
                    raise r
                self._counts["prompt_tokens"] += r.prompt_tokens
                self._counts["completion_tokens"] += r.completion_tokens
                self._counts["cached_tokens"] += r.cached_tokens
                texts.append(prompts.clean_document(r.text))
                ok.append(i)
            except Exception as e:  # noqa: BLE001 - a model or input failure is retried, never lost
                why = str(e) if isinstance(e, (LLMError, ValueError)) else f"{type(e).__name__}: {e}"
                item = events[i] if i < len(events) else nodes[i - len(events)]
                self._failed([item] if i < len(events) else [], [] if i < len(events) else [item], why)
        self._healthy = bool(ok) or not replies
        vecs = self.text_embedder.embed_texts(texts) if texts else np.zeros((0, 0), np.float32)
        with self.lock:
            self._store_replies(events, nodes, texts, vecs, ok)
        return True

    def _generate(self, requests) -> list:
        """One reply or exception per request. A failed batch is retried request by request, so
        one bad item (an unreadable frame, a prompt the server rejects) fails alone."""
        t0 = time.monotonic()
        try:
            return self.llm.generate(requests)
        except Exception as e:  # noqa: BLE001
            if len(requests) == 1:
                return [e]
            out = []
            for r in requests:
                try:
                    out += self.llm.generate([r])
                except Exception as e1:  # noqa: BLE001
                    out.append(e1)
            return out
        finally:
            self._counts["model_s"] += time.monotonic() - t0

    def _store_replies(self, events, nodes, texts, vecs, ok) -> None:
        docs, merged = [], []
        for text, vec, i in zip(texts, vecs, ok):
            if i < len(events):
                docs.append((events[i].event.event_id, text, vec))
            else:
                merged.append((nodes[i - len(events)], text, vec))
        if docs:
            self._counts["documents"] += self.memory.queue.set_docs(docs)
            now = time.time()
            self.lags.extend(now - events[i].closed_at for i in ok
                             if i < len(events) and events[i].closed_at is not None)
            self._insert_documented({events[i].event.camera_id for i in ok if i < len(events)})
        for node, text, vec in merged:
            if self.forest.set_summary(node.node_id, node.summary_version, text, vec):
                self._counts["merges"] += 1
            self._node_retry.pop(node.node_id, None)
            self._node_tries.pop(node.node_id, None)

    def _failed(self, events, nodes, error: str) -> None:
        with self.lock:
            self._record_failure(events, nodes, error)

    def _record_failure(self, events, nodes, error: str) -> None:
        now = time.time()
        self._counts["failures"] += len(events) + len(nodes)
        retry, give_up = [], []
        for job in events:
            e = job.event
            n = self.memory.queue.attempts(e.event_id) + 1
            if n >= self.cfg.max_attempts:
                give_up.append((e, n))
            delay = min(self.cfg.retry_max_s, self.cfg.retry_base_s * 2 ** (n - 1))
            retry.append((e.event_id, error, now + delay))
        self.memory.queue.fail(retry)
        if give_up:
            texts = [PLACEHOLDER.format(n=n, err=error[:200]) for _, n in give_up]
            vecs = self.text_embedder.embed_texts(texts)
            # a placeholder is not a document anyone should find by search: no event_doc vector
            self.memory.queue.set_docs([(e.event_id, t, None) for (e, _), t in zip(give_up, texts)])
            self._insert_documented({e.camera_id for e, _ in give_up},
                                    {e.event_id: v for (e, _), v in zip(give_up, vecs)})
        for n in nodes:  # a stale node keeps its placeholder summary until a retry succeeds
            tries = self._node_tries[n.node_id] = self._node_tries.get(n.node_id, 0) + 1
            self._node_retry[n.node_id] = now + min(self.cfg.retry_max_s, self.cfg.retry_base_s * 2 ** (tries - 1))
        log.warning("memory writer: %d item(s) failed, retried later: %s", len(events) + len(nodes), error)

    def _insert_documented(self, cameras=None, vectors: dict | None = None) -> None:
        """Insert documented events into their camera's forest, in time order, stopping at the
        first closed event still without a document (the forest takes leaves in order)."""
        if self.forest is None:
            return
        vectors = vectors or {}
        for cam in sorted(self.memory.moments.cameras() if cameras is None else cameras):
            pending = [e for e in self.memory.events.documented(cam, unlinked_only=True)
                       if self.forest.leaf_for_event(e.event_id) is None]
            if not pending:
                continue
            first_missing = self.memory.queue.first_undocumented_start(cam)
            inserted = []
            for e in pending:
                if first_missing is not None and e.t_start > first_missing:
                    break
                vec = e.doc_vector if e.doc_vector is not None else vectors.get(e.event_id)
                if vec is None:
                    vec = self.text_embedder.embed_texts([e.doc])[0]
                times = self.memory.moments.times(e.keyframes)
                self.forest.insert_event(cam, e.event_id, e.t_start, e.t_end,
                                         [(k, times[k]) for k in e.keyframes if k in times], e.doc, vec)
                inserted.append((e.event_id, self.forest.leaf_for_event(e.event_id).node_id))
            self.memory.events.set_forest_nodes(inserted)

    # -- summary documents ---------------------------------------------------------------------
    def summarize(self, camera_id: str, t0: float, t1: float, granularity_s: float, focus: str,
                  structure: str | None = None, frames_per_window: int = 8) -> list[Summary]:
        """Write one summary document per window of ``granularity_s`` over [t0, t1] for one
        camera (windows with no moment are skipped) and store them (searchable, source
        "summary"). Runs in the caller's thread, batched. Returns them, stored."""
        drafts = self.draft_summaries(camera_id, t0, t1, granularity_s, focus, structure, frames_per_window)
        vecs = self.text_embedder.embed_texts([d.text for d in drafts]) if drafts else []
        return [replace(d, summary_id=self.memory.summaries.add(camera_id, d.t0, d.t1, granularity_s, focus, structure,
                                                                d.text, d.moment_ids, vec))
                for d, vec in zip(drafts, vecs)]

    def draft_summaries(self, camera_id: str, t0: float, t1: float, granularity_s: float, focus: str,
                        structure: str | None = None, frames_per_window: int = 8) -> list[Summary]:
        """The summary documents ``summarize`` would write, without storing them (``summary_id``
        None): what a caller that may not write the memory gets for its answer."""
        windows = []
        documented = [(e.t_start, e.t_end, e.doc) for e in self.memory.events.list(camera_id) if e.doc]
        a = t0
        while a < t1:
            b = min(t1, a + granularity_s)
            ms = self.memory.moments.on_axis(camera_id, a, b)
            if ms:
                picks = [ms[i] for i in spread_evenly(len(ms), frames_per_window)]
                docs = [d for d in documented if d[1] >= a and d[0] <= b]
                windows.append((a, b, picks, docs))
            a = b
        out = []
        for chunk in range(0, len(windows), self.max_batch):
            part = windows[chunk:chunk + self.max_batch]
            reqs = [prompts.summary_window(camera_id, a, b, granularity_s, focus, docs,
                                           [(Image(m.frame_path), m.t) for m in picks], structure=structure,
                                           speech=self.memory.said(camera_id, a, b))
                    for a, b, picks, docs in part]
            replies = self.llm.generate(reqs)
            out += [Summary(None, camera_id, a, b, granularity_s, focus, structure, prompts.clean_document(r.text),
                            tuple(m.moment_id for m in picks))
                    for (a, b, picks, _), r in zip(part, replies)]
        return out
