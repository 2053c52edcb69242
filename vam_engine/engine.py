"""Engine: the thin public API. Owns the store, the gate body and the pipeline's workers.

What starts when (one rule, so that reading a store never changes it):

=========================================  ===========  ===============  =========
call                                       writer lock  document writer  retention
=========================================  ===========  ===============  =========
construction, search, moments, info, ask   no           no               no
index_file(s), push                        yes          yes (with LLM)   yes (when enabled)
summarize, wait_for_documents              yes          yes              no
delete, retain                             yes          no               retain: one pass
=========================================  ===========  ===============  =========

The writer lock (memory/writer_lock.py) makes one process the store's writer; readers take no
lock and keep working meanwhile. ``ask`` records every answer in the QA history (one row at
once; its embedding and the rolling summary's rewrite by a background thread that ``close``
waits for), and writes summary documents only when its planner asks for them (taking the
writer lock then). The LLM is built at its first
use (``ask`` or the document writer), never at construction.
"""
from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from .config import EngineConfig
from .device import resolve_device
from .errors import FrameError, SourceError, VamError
from .gate.bodies import make_body
from .gate.cascade import GateCascade
from .ingest import Frame, TickSampler, is_url, open_decoder
from .ingest.buffers import BufferPool
from .ingest.pushed import gray_and_spare, own_copy, pushed_view
from .embed import make_image_embedder, make_text_embedder
from .memory.records import Deletion, Moment, Summary, camera_time
from .memory.search import SOURCES, SearchResult, search
from .memory.store import Store
from .memory.vector_memory import VectorMemory
from .memory.writer_lock import WriterLock
from .engine_live import LiveCameraMethods
from .engine_monitor import EngineMonitors, MonitorMethods
from .engine_roles import ClaimingSummarizer, WatchedModel, load_config, retain_store
from .llm import describe_llm, make_llm
from .index.stage import sweep_source
from .index.pipeline import IndexPipeline, Progress, SourceReport, fingerprint

if TYPE_CHECKING:
    from .reason.answer import Answer

__all__ = ["Engine", "SourceReport", "Progress", "retain_store"]


def _check_camera_id(camera_id) -> str:
    if not isinstance(camera_id, str) or not camera_id.strip() or len(camera_id) > 256:
        raise ValueError(f"camera_id must be a non-empty string of at most 256 characters, got {camera_id!r}")
    return camera_id


class Engine(LiveCameraMethods, MonitorMethods):
    """``Engine(store_dir, config)``: index files, live cameras (``add_camera``: engine_live.py)
    or pushed frames into a durable moment store, search it and ask it questions.

    ``config`` is an EngineConfig, a dict of overrides, or a path to a JSON/TOML file. An engine
    starts nothing until a write-side call needs it (see the module docstring): an engine used
    only for reads never takes the store's writer lock, never runs retention or the document
    writer, and changes no frame file or moment row.
    """

    def __init__(self, store_dir: str | os.PathLike, config: EngineConfig | dict | str | None = None,
                 *, device: str | None = None, llm=None):
        """``llm``: an object implementing the MLLM contract (vam_engine.llm), overriding the
        config's ``llm`` section; with one, the memory writer documents events and keeps the
        event forest. A construction that fails closes what it opened."""
        cfg = load_config(config, device)
        self.config = cfg
        self.device = resolve_device(cfg.device)
        # checked before anything opens: a config that cannot work fails here, loading nothing
        self._llm_name = llm.name if llm is not None and hasattr(llm, "name") else (
            "llm" if llm is not None else describe_llm(cfg.llm))
        self._llm = llm
        self._lock = threading.Lock()
        self._start_lock = threading.RLock()  # claiming the store and starting its workers
        self._writer_lock = WriterLock(store_dir)
        self._pipeline: IndexPipeline | None = None
        self._text_embedder = None
        self._retention = None
        self._retention_pass = None
        self._forest = None
        self._ask_writer = None
        self._qa = None  # the QA-history recorder, started by the first ask
        self.writer = None
        self.store = None
        self.vectors = None
        try:
            self.store = Store(store_dir, keyframes_per_event=cfg.writer.frames_per_event)
            self._body = make_body(self.device)
            self._cascade = GateCascade(self._body, cfg.gate)
            self.embedder = make_image_embedder(cfg.embed, device=self.device)
            self.store.sources.check_model("image_embedder", self.embedder.model_id)
            if self._documents and cfg.embed.text_model is None and not self.embedder.has_text:
                raise VamError("the memory writer embeds its documents with a text embedder, and none is "
                               "configured: set embed.text_model (for example 'minilm') or use an image model "
                               "with a text side")
            self._vectors_seen = self._vector_state()  # before the load: a commit during it shows
            self.vectors = self._open_vectors()
        except BaseException:
            self._close_opened()
            raise
        self._push: dict[str, tuple[int, TickSampler, list]] = {}  # camera -> (source, sampler, [last t])
        self._buffers = BufferPool()  # private copies of sampled pushed frames
        self._live = None  # the live cameras (engine_live.py), made by the first add_camera
        from .reason.working import WorkingMemory, present_side

        self.working = WorkingMemory(max_side=present_side(cfg.llm))  # each camera's present (OASIS 3.1)
        self._monitors = EngineMonitors(self)

    @staticmethod
    def connect(address: str | None = "auto", **kw):
        """The same surface over camera shards on a Ray cluster: vam_engine.cluster.connect."""
        from .cluster import connect

        return connect(address, **kw)

    # -- lifetime ------------------------------------------------------------------------------
    @property
    def _documents(self) -> bool:
        """Whether this engine documents events (an LLM is set and the writer is enabled)."""
        return self._llm_name is not None and self.config.writer.enabled

    @property
    def llm(self):
        """The model (built at first use; None without one)."""
        with self._start_lock:
            if self._llm is None and self._llm_name is not None:
                self._llm = make_llm(self.config.llm, device=self.device)
            return self._llm

    def built_llm(self):
        """The model if it has been built (never builds it: for observers such as /metrics)."""
        return self._llm

    def wrap_model(self, wrap) -> bool:
        """Use ``wrap(model)`` from now on (building the model first); False without a model.
        For observers that only watch the calls (the service's latency tap), installed before
        the model's first use."""
        with self._start_lock:
            if self.llm is None:
                return False
            self._llm = wrap(self._llm)
            return True

    @property
    def forest(self):
        """The event forest (with an LLM and the writer enabled, else None), loaded at first use."""
        if self._forest is None and self._documents:
            from .memory.forest import EventForest
            from .memory.forest_nodes import ForestNodeRepository

            with self._start_lock:
                if self._forest is None:
                    self._forest = EventForest(ForestNodeRepository(self.store.db), self.config.forest)
        return self._forest

    @property
    def writing(self) -> bool:
        """Whether this engine holds the store's writer lock (after its first write-side call)."""
        return self._writer_lock.held

    def _claim(self) -> None:
        """Become the store's one writer, or StoreError naming the process that is."""
        with self._start_lock:
            if self._writer_lock.held:
                return
            self._writer_lock.acquire()
            # Another process may have written since the indexes were loaded: a writer's indexes
            # must hold every committed vector (its snapshots claim the log position they cover).
            if self._vector_state() != self._vectors_seen:
                self.vectors = self._open_vectors()

    def _open_vectors(self) -> VectorMemory:
        return VectorMemory(self.store.vector_table, self.store.root / "vectors", self.config.vectors,
                            device=self.device)

    def _vector_state(self) -> tuple:
        """What changes when any process commits vectors: the log's end, and the snapshot
        files (a snapshot prunes the log it covers)."""
        snaps = sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size)
                       for p in (Path(self.store.root) / "vectors").glob("*") if p.is_file())
        return self.store.vector_table.seq(), tuple(snaps)

    def _start_writer(self):
        """Claim the store and start the document writer (with an LLM); returns it or None."""
        with self._start_lock:
            self._claim()
            if self.writer is None and self._documents:
                from .reason.writer import MemoryWriter, WriterMemory

                st = self.store
                memory = WriterMemory(st.doc_queue, st.events, st.moments, st.summaries)
                self.writer = MemoryWriter(memory, self.text_embedder(), self.llm, self.forest,
                                           self.config.writer, max_batch=self.config.llm.max_batch).start()
            return self.writer

    def start(self) -> None:
        """Become the store's writer now and start what indexing runs beside it: the document
        writer, background retention and the monitors (otherwise done at the first ingest). A
        service calls it at start, so a second writer is refused at once."""
        self._start_ingest()

    def _start_ingest(self) -> None:
        """What indexing needs: the claim, the document writer and background retention."""
        with self._start_lock:
            self._start_writer()
            if self._retention is None and self.config.retention.enabled:
                from .memory.retention import RetentionWorker

                self._retention = RetentionWorker(self.store.moments, cfg=self.config.retention)
                self._retention.start()
        self._monitors.resume()

    def _pipe(self) -> IndexPipeline:
        self._start_ingest()
        with self._lock:
            if self._pipeline is None:
                wanted = self._llm_name is not None  # a model reads the present (answers, monitors): fed from decode
                self._pipeline = IndexPipeline(self.store, self._cascade, self.config, self.embedder,
                                               after_commit=self._after_commit, observe=self.working.observe,
                                               present_fps=self.working.short_fps if wanted else None,
                                               present_side=self.working.max_side)
            return self._pipeline

    def _after_commit(self) -> None:
        if self.writer is not None:
            self.writer.notify()
            self.writer.wait_for_room()

    def close(self) -> None:
        """Stop every worker, then close the store. A part that fails to stop (a pipeline that
        had failed, a camera stuck in its read) does not keep the others running."""
        errors = []

        def step(fn):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - raised after every other part is closed
                errors.append(e)
        if self._live is not None:
            step(self._live.close)  # their sources end after what they queued: the flush below commits it
        with self._lock:
            pipe, self._pipeline = self._pipeline, None
        if self.writer is not None:
            step(self.writer.stop_holding)  # closing must not wait for the writer's backlog to drain
        if pipe is not None:
            step(pipe.close)
        if self.writer is not None:
            step(self.writer.close)
        step(self._monitors.close)
        if self._qa is not None:
            step(self._qa.close)  # before the model and the store it uses
        if self._llm is not None:
            step(self._llm.close)
        if self._retention is not None:
            step(self._retention.stop)
        self._close_opened()
        if errors:
            raise errors[0]

    def _close_opened(self) -> None:
        if self.vectors is not None and self.writing:
            # Only the writer snapshots the vector indexes: a reader's snapshot would claim the
            # log position of commits another process made after this one loaded them.
            self.vectors.close()
        if self.store is not None:
            self.store.close()
        self._writer_lock.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- files and streams ---------------------------------------------------------------------
    def index_file(self, path: str | os.PathLike, camera_id: str | None = None, *,
                   start_time_abs: float | None = None,
                   progress: Callable[[Progress], None] | None = None) -> SourceReport:
        """Index one video file or URL; raises SourceError when it cannot be opened at all."""
        report = self.index_files([path], [camera_id] if camera_id else None, start_time_abs=start_time_abs,
                                  progress=progress)[0]
        if report.failed and report.sampled == 0 and not report.already_done:
            raise SourceError(str(path), report.failed)
        return report

    def index_files(self, paths: Sequence[str | os.PathLike], camera_ids: Sequence[str] | None = None, *,
                    start_time_abs: float | None = None,
                    progress: Callable[[Progress], None] | None = None,
                    on_open_error: str = "raise") -> list[SourceReport]:
        """Index several sources concurrently, one decode worker per source, one gate stage.

        ``on_open_error``: "raise" stops before indexing anything when a source cannot be
        opened; "report" indexes the others and returns the failure in that source's report.
        """
        paths = [str(p) for p in paths]
        if camera_ids is None:
            camera_ids = _default_camera_ids(paths)
        if len(camera_ids) != len(paths):
            raise ValueError(f"{len(paths)} sources but {len(camera_ids)} camera ids")
        if len(set(camera_ids)) != len(camera_ids):
            raise ValueError(f"camera ids must differ between concurrent sources: {list(camera_ids)}")
        ing = self.config.ingest
        sampling = f"fps={ing.fps:g}" + (",keyframes" if ing.keyframes_only else "")
        pipe = self._pipe()
        t_start = time.monotonic()
        reports, started = [], []
        for path, cam in zip(paths, camera_ids):
            rep = SourceReport(_check_camera_id(cam), path)
            reports.append(rep)
            try:
                if is_url(path) or not os.path.isfile(path):
                    # a live stream restarts its clock on every connection: each run is a new source
                    uri, fp = path, f"uri:{path}@{time.time():.6f}"
                else:
                    uri, fp = os.path.abspath(path), fingerprint(path)
                    prior = self.store.sources.find(cam, fp, sampling)
                    if prior is not None and prior.done:
                        rep.already_done = True
                        continue
                    rep.resumed_from = prior.progress_t if prior is not None else None
                decoder = open_decoder(path, cam, device=self.device, fps=ing.fps,
                                       keyframes_only=ing.keyframes_only, start_time_abs=start_time_abs,
                                       resume_after=rep.resumed_from, skip_nonref=ing.skip_nonref,
                                       skip_gops=ing.skip_gops, threads=ing.decode_threads)
                state = self.store.sources.open(cam, uri, fp, sampling)
                if rep.resumed_from is not None:
                    sweep_source(self.store, cam, state.source_id)
            except SourceError as e:
                if on_open_error == "raise":
                    for _, dec in started:
                        dec.close()
                    raise
                rep.failed = e.problem
                continue
            rep.decoder = decoder.name
            src = pipe.register(state.source_id, rep, decoder.info.duration_s, progress)
            started.append((src, decoder))
        for src, decoder in started:
            pipe.decode_worker(src, decoder)
        for src, _ in started:
            pipe.wait(src)
        wall = time.monotonic() - t_start
        for rep in reports:
            rep.wall_s = wall
        return reports

    # -- pushed frames -------------------------------------------------------------------------
    def push(self, camera_id: str, frame, t: float, *, t_abs: float | None = None) -> bool:
        """Push one H x W x 3 uint8 RGB frame (numpy array or torch tensor) taken at t seconds.

        Frames are sampled at the configured rate like a file; returns whether this one was
        sampled (queued for the gates). Blocks briefly when the pipeline is behind.
        """
        # a camera pushed before was checked then (only a str can equal a key of _push)
        st = self._push.get(camera_id) if self._pipeline is not None and type(camera_id) is str else None
        cam = camera_id if st is not None else _check_camera_id(camera_id)
        if not isinstance(t, (int, float)) or not math.isfinite(t):
            raise FrameError(f"camera {cam!r}: t must be a finite number of seconds, got {t!r}")
        src_id, sampler, last = st if st is not None else self._push_state(cam)
        if last[0] is not None and t <= last[0]:
            raise FrameError(f"camera {cam!r}: t={t} is not after the previous frame's t={last[0]}")
        view = pushed_view(cam, frame)
        last[0] = t
        t = float(t)
        if not sampler.accept(t):  # the present sees every pushed frame (it copies what it keeps)
            ct = t if t_abs is None else float(t_abs)  # camera_time, inline: this path is timed in us
            if self.working.wants(cam, ct):
                self.working.observe(cam, ct, view)
            return False  # nothing copied or converted: most frames of a fast loop end here
        # The caller may overwrite its buffer as soon as push returns: copy it; the present's
        # downscaled copy is read from that copy, still in cache; the gray plane is made from it
        # on the gate thread (Frame runs the callable at its first read).
        rgb = own_copy(view, self._buffers)
        self.working.observe(cam, camera_time(t, t_abs), rgb)
        f = Frame(cam, t, t_abs, None, lambda: gray_and_spare(rgb, self._buffers), lambda: rgb)
        self._push_state(cam)  # (re-)registers the source: the pipeline may have ended it
        self._pipe().put_frame(f, src_id)
        return True

    def _push_state(self, cam: str):
        pipe = self._pipe()  # claims the store before its first write
        with self._lock:
            st = self._push.get(cam)
            if st is None:
                state = self.store.sources.open(cam, f"push:{cam}", "push", f"fps={self.config.ingest.fps:g}")
                sampler = TickSampler(self.config.ingest.fps)
                if state.progress_t is not None:
                    sampler.resume_after(state.progress_t)
                    sweep_source(self.store, cam, state.source_id)
                st = (state.source_id, sampler, [state.progress_t])
                self._push[cam] = st
        pipe.register(st[0], SourceReport(cam, f"push:{cam}", decoder="push"), None)
        return st

    def end_push(self, camera_id: str) -> None:
        """A pushing camera's stream ended: decide its held frame (the end of a run of similar
        frames is kept) and close its open event. Later pushes continue the camera."""
        st = self._push.get(camera_id)
        if st is None:
            raise ValueError(f"camera {camera_id!r} has pushed nothing in this engine")
        self._pipe().end_source(st[0])
        self.flush()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every pushed frame is gated and committed; False on timeout."""
        return self._pipeline.flush(timeout) if self._pipeline is not None else True

    # -- search and deletion -------------------------------------------------------------------
    def text_embedder(self):
        if self._text_embedder is None:
            self._text_embedder = make_text_embedder(self.config.embed, device=self.device,
                                                     image_embedder=self.embedder)
            if self._text_embedder is not None:
                self.store.sources.check_model("text_embedder", self._text_embedder.model_id)
        return self._text_embedder

    def search(self, text: str | None = None, image=None, top_k: int = 10, time_range=None, cameras=None,
               sources=SOURCES, as_of: float | None = None) -> SearchResult:
        """Evidence for a text and/or image query (image: H x W x 3 uint8 array or a path), fused
        across the frame, event and summary spaces. Times are on each camera's axis (absolute
        seconds when known); ``as_of`` returns nothing that ends after it. ``cameras``: one id or
        a list (None: all)."""
        if isinstance(cameras, str):
            cameras = [cameras]
        texts = self.text_embedder() if text is not None and {"event", "summary"} & set(sources) else None
        return search(self.store, self.vectors, self.embedder, texts, text=text, image=image, top_k=top_k,
                      time_range=time_range, cameras=cameras, sources=tuple(sources), as_of=as_of)

    def delete(self, cameras=None, time_range=None) -> Deletion:
        """Remove the moments (rows, JPEGs, vectors), events, samples and alerts of the given
        cameras (all when None) within time_range (camera axis, start <= end; everything when
        None). Deleting whole cameras also removes the monitors that watched only them."""
        if cameras is None and time_range is None:
            raise ValueError("delete needs cameras=... and/or time_range=... (refusing to delete everything implicitly)")
        if isinstance(cameras, str):
            cameras = [cameras]
        t0, t1 = time_range if time_range is not None else (None, None)
        for name, t in (("start", t0), ("end", t1)):
            if t is not None and not (isinstance(t, (int, float)) and math.isfinite(t)):
                raise VamError(f"delete: the time range's {name} must be a finite time in seconds, got {t!r}")
        if t0 is not None and t1 is not None and t0 > t1:
            raise VamError(f"delete: the time range starts after it ends (t0={t0:g} > t1={t1:g}): nothing "
                           f"would be deleted; give t0 <= t1")
        self._claim()
        if self._pipeline is not None:
            self._pipeline.flush()  # nothing in flight may re-add what is deleted
        forest = self.forest
        # summaries over deleted events must not survive them: a running writer stores none meanwhile
        with self.writer.lock if self.writer is not None else contextlib.nullcontext():
            out = self.store.delete(cameras, t0, t1)
            if forest is not None:
                for cam in set(forest.cameras()) & set(cameras or forest.cameras()):
                    if time_range is None:
                        forest.remove_camera(cam)
                    else:
                        self._rebuild_forest(cam)
        self._cascade.forget(out.cameras)
        if self._pipeline is not None:
            self._pipeline.semantic.reset(out.cameras)
        self._monitors.forget_deleted()
        return out

    def _rebuild_forest(self, cam: str) -> None:
        """Re-insert a camera's remaining documented events; the writer rewrites the merges
        (a later writer, when none runs in this engine: they stay marked stale until then)."""
        texts = self.text_embedder()
        leaves = []
        for e in self.store.events.documented(cam):
            vec = e.doc_vector if e.doc_vector is not None else texts.embed_texts([e.doc])[0]
            times = self.store.moments.times(e.keyframes)
            leaves.append((e.event_id, e.t_start, e.t_end, [(k, times[k]) for k in e.keyframes if k in times],
                           e.doc, vec))
        self.forest.rebuild(cam, leaves)
        if self.writer is not None:
            self.writer.notify()

    def retain(self, budget_s: float | None = None):
        """Run one retention pass now (whatever ``retention.enabled`` says: this is the explicit
        call) and return its ``RetentionReport``: moments thinned (``deleted``), files re-encoded,
        frame bytes before and after."""
        self._claim()
        self.flush()
        with self._start_lock:
            if self._retention is not None:
                ret = self._retention.retention
            else:
                if self._retention_pass is None:
                    from .memory.retention import RetentionPass

                    self._retention_pass = RetentionPass(self.store.moments, cfg=self.config.retention)
                ret = self._retention_pass
        return ret.run(budget_s=budget_s)

    # -- documents -----------------------------------------------------------------------------
    def summarize(self, time_range: tuple[float, float], granularity_s: float, prompt: str, *,
                  cameras=None, structure: str | None = None) -> list[Summary]:
        """Write reusable summary documents: one per camera per window of ``granularity_s``
        seconds over ``time_range`` (camera axis), from the window's frames and the event
        documents overlapping it. They are searchable (source "summary"). Returns them."""
        if not self._documents:
            raise VamError("summarize needs an LLM: set llm.backend (local or openai) or pass llm=...")
        t0, t1 = (float(x) for x in time_range)
        if not (math.isfinite(t0) and math.isfinite(t1) and t0 < t1):
            raise VamError(f"time_range must be two finite times with start < end, got {time_range}")
        if not 0 < granularity_s <= 86400:
            raise VamError(f"granularity_s must be in (0, 86400], got {granularity_s}")
        if (t1 - t0) / granularity_s > 10_000:
            raise VamError(f"{(t1 - t0) / granularity_s:.0f} windows requested; at most 10000 per call")
        if not isinstance(prompt, str) or not prompt.strip():
            raise VamError("summarize needs a non-empty prompt (what the summaries should focus on)")
        self.flush()
        self._start_writer()
        cams = [cameras] if isinstance(cameras, str) else list(cameras or self.store.moments.cameras())
        ids = [i for cam in cams for i in self.writer.summarize(cam, t0, t1, granularity_s, prompt.strip(),
                                                                 structure)]
        found = self.store.summaries.by_id(ids)
        return [found[i] for i in ids]

    def wait_for_documents(self, timeout: float | None = None) -> bool:
        """Wait until every committed event has its document and the forest's summaries are
        current (starting the document writer: a write-side call). False on timeout; True at
        once without an LLM."""
        self.flush()
        if not self._documents:
            return True
        return self._start_writer().wait_idle(timeout)

    # -- questions -----------------------------------------------------------------------------
    def ask(self, question: str, as_of: float | None = None, camera=None, mode: str = "auto", *,
            max_turns: int = 6, wait_for_ingest: bool = False) -> "Answer":
        """Answer a question from the memory, with cited evidence (camera, interval, moment ids,
        frame paths), the trace of every model turn, token counts and timings per stage.

        ``mode``: "two_phase" (coarse answer from the present and the forest's roots, fine
        retrieval of forest nodes when needed, continuing from the coarse KV cache), "agentic"
        (router + search/inspect/summarize/answer planner loop), or "auto": two-phase, then the
        agentic loop when two-phase finds nothing. ``as_of``: nothing later than it is seen by
        any stage. ``camera``: one camera id or a list (default: all).

        It answers from what is committed now; ``wait_for_ingest=True`` first waits for every
        frame already queued (evaluation that pauses the stream clock). Every answer returned is
        recorded in the QA history (scope: ``camera``); the summary rewrite runs after it returns
        (``Answer.background``). ``timings["response_s"]``: the latency the caller saw."""
        from .engine_ask import answer_in_mode, check_ask
        from .memory.view import MemoryView

        check_ask(question, as_of, mode, max_turns, wait_for_ingest)
        if self._llm_name is None:
            raise VamError("ask needs an LLM: set llm.backend (local or openai), --llm, or pass llm=...")
        question = question.strip()
        t0 = time.perf_counter()
        if wait_for_ingest:
            self.flush()
        model = WatchedModel(self.llm)
        summarizer = self._summarizer()
        view = MemoryView(self.store, self.vectors, self.embedder, self.text_embedder(), self.forest,
                          summarizer.summarize if summarizer is not None else None, as_of=as_of, cameras=camera)
        answer = answer_in_mode(model, self._two_phase(model), question, view, mode, max_turns)
        answer.timings["total"] = time.perf_counter() - t0
        t = answer.asked_at if answer.asked_at is not None else view.now()
        answer.background = self._qa_recorder().record(question, answer, view, 0.0 if t is None else t)
        answer.timings["response_s"] = time.perf_counter() - t0
        return answer

    def _two_phase(self, model):
        from .reason.two_phase import TwoPhaseAnswerer

        # ask records every answer itself (either path), off the response path
        return TwoPhaseAnswerer(model, self.working, self.text_embedder(), update_qa=False)

    def _qa_recorder(self):
        from .reason.qa_record import QARecorder

        with self._start_lock:
            if self._qa is None:
                self._qa = QARecorder(self.llm, self.text_embedder())
            return self._qa

    def wait_for_answers(self, timeout: float | None = None) -> bool:
        """Wait until the QA-history work of every answer returned so far (embedding, summary
        rewrite) has ended; False on timeout."""
        return self._qa is None or self._qa.wait_idle(timeout)

    def _summarizer(self):
        """What ``ask`` writes summary documents with: the running writer, or (an engine that
        has only read) one that claims the store at its first summary; None without an LLM."""
        if self.writer is not None or not self._documents:
            return self.writer
        with self._start_lock:
            if self._ask_writer is None:
                self._ask_writer = ClaimingSummarizer(self)
            return self._ask_writer

    # -- reads ---------------------------------------------------------------------------------
    def moments(self, camera_id: str | None = None, t0: float | None = None, t1: float | None = None) -> list[Moment]:
        return self.store.moments.list(camera_id, t0, t1)

    def info(self) -> dict:
        out = self.store.info()
        out["device"] = self.device
        out["gate_body"] = self._body.name
        out["embedder"] = self.embedder.name
        out["vector_warnings"] = list(self.vectors.warnings)
        out["llm"] = self._llm_name
        if self.writer is not None:
            out["writer"] = vars(self.writer.stats())
            out["forest_nodes"] = len(self.forest)
        return out


def _default_camera_ids(paths: list[str]) -> list[str]:
    ids = []
    for p in paths:
        base = Path(p).stem if not is_url(p) else p.rstrip("/").rsplit("/", 1)[-1] or "stream"
        cand, k = base, 2
        while cand in ids:
            cand, k = f"{base}-{k}", k + 1
        ids.append(cand)
    return ids
