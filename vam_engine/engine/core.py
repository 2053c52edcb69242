"""Engine: the public API. Its methods are short delegations to the parts it is composed of,
each of which receives what it uses, never the engine. The package docstring
(engine/__init__.py) lists the parts and says what starts when.
"""
from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Callable, Sequence

from ..config import EngineConfig, load_config
from ..device import resolve_device
from ..embed import make_image_embedder
from ..errors import SourceError, VamError
from ..gate import GateCascade, make_body
from ..index import Progress, SourceReport, StageStatus
from ..ingest import CameraDiff, CameraSpec, CameraStatus, camera_list, check_camera_id
from ..memory import (SOURCES, SPEECH, Alert, Deletion, Gap, MemoryView, Moment, MonitorSpec, SearchResult, Store,
                      Summary, Transcript, check_delete_range, make_place, search)
from ..reason import Answering, TurnResult, WorkingMemory, present_side
from ..tools import make_toolbox
from .audio import EngineAudio
from .clips import Clip, EngineClips
from .documents import Documents
from .files import index_sources
from .lifecycle import Lifecycle
from .live import LiveCameras
from .models import EngineModels, model_name
from .monitors import EngineMonitors
from .perception import EnginePerception, PerceptionReads
from .pushed import PushedCameras
from .views import EngineViews

if TYPE_CHECKING:
    from ..reason import Answer


class Engine:
    """``Engine(store_dir, config)``: index files, live cameras (``add_camera``) or pushed frames
    into a durable moment store, search it, ask it questions and watch it for conditions.

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
        name = model_name(cfg, llm)  # checked before anything opens: a config that cannot work loads nothing
        self.store = None
        self._life = None
        self._perception = None
        try:
            self.store = Store(store_dir, keyframes_per_event=cfg.writer.frames_per_event)
            self._cascade = GateCascade(make_body(self.device), cfg.gate)
            self.embedder = make_image_embedder(cfg.embed, device=self.device)
            self.store.sources.check_model("image_embedder", self.embedder.model_id)
            self._models = EngineModels(self.store, cfg, self.device, self.embedder, llm, name)
            if self._models.documents and cfg.embed.text_model is None and not self.embedder.has_text:
                raise VamError("the memory writer embeds its documents with a text embedder, and none is "
                               "configured: set embed.text_model (for example 'minilm') or use an image model "
                               "with a text side")
            self.working = WorkingMemory(cfg.ask.short_s, cfg.ask.short_fps, cfg.ask.medium_s, cfg.ask.medium_fps,
                                         max_side=present_side(cfg.llm))  # each camera's present (OASIS 3.1)
            self._monitors = EngineMonitors(self.store, cfg, self.working, self._models, self.embedder)
            self._audio = EngineAudio(self.store, cfg, self.device, self._models.text_embedder,
                                      lambda: self._life.claim(), self.working)
            # detector and OCR load now: a model that cannot run is an error before any frame
            self._perception = EnginePerception(self.store, cfg, self.device) if cfg.perception.enabled else None
            self._clips = EngineClips(self.store, cfg.clips)
            clips = self._clips
            self._life = Lifecycle(self.store, cfg, self.device, self._models, self._cascade, self.embedder,
                                   self.working, on_ingest=self._monitors.resume, speech_settled=self._audio.settled,
                                   perception=self._perception,
                                   clip_of=(lambda cam, t0, t1: clips.clip(cam, t0, t1).data) if cfg.writer.clips
                                   else None)
        except BaseException:
            if self._perception is not None and self._life is None:  # built, not yet handed to the lifecycle
                self._perception.close()
            if self._life is not None:
                self._life.close_store()
            elif self.store is not None:
                self.store.close()
            raise
        life = self._life
        self._pushed = PushedCameras(self.store, cfg, life.pipe, lambda: life.pipeline, self.working)
        self._live = LiveCameras(self.store, cfg, life.pipe, self._cascade, self._pushed, self._monitors,
                                 has_model=name is not None, audio=self._audio)
        self._documents = Documents(self.store, life, self._models, cfg)
        self._reads = PerceptionReads(self.store, lambda: life.vectors)
        self.tools = make_toolbox(cfg.tools)  # the planner's outside tools (config ``tools``; None: off)
        self._views = EngineViews(self.store, life, self._models, self._documents, self.embedder, self.working)
        # questions, turns, sessions and their replies: the one answering body (reason/ask.py)
        self._answering = Answering(self._views, self._models, cfg, sessions=self.store.sessions,
                                    monitors=self._monitors, tools=self.tools, flush=life.flush)
        self._sessions = self._answering.sessions

    @staticmethod
    def connect(address: str | None = "auto", **kw):
        """Deprecated (kept for one release): ``vam_engine.connect``, the same surface over camera
        shards on a Ray cluster. The engine layer does not import the cluster above it; this
        forwards through the package's face."""
        import vam_engine

        return vam_engine.connect(address, **kw)

    # -- lifetime ------------------------------------------------------------------------------
    @property
    def llm(self):
        """The model (built at first use; None without one)."""
        return self._models.llm

    def built_llm(self):
        """The model if it has been built (never builds it: for observers such as /metrics)."""
        return self._models.built_llm()

    def wrap_model(self, wrap) -> bool:
        """Use ``wrap(model)`` from now on (building the model first); False without a model.
        For observers that only watch the calls (the service's latency tap), installed before
        the model's first use."""
        return self._models.wrap_llm(wrap)

    @property
    def forest(self):
        """The event forest (with an LLM and the writer enabled, else None), loaded at first use."""
        return self._models.forest

    @property
    def vectors(self):
        """The vector indexes (reloaded when this engine becomes the writer after another wrote)."""
        return self._life.vectors

    @property
    def writer(self):
        """The running document writer (None until a write-side call starts it, or without a model)."""
        return self._life.writer

    @property
    def writing(self) -> bool:
        """Whether this engine holds the store's writer lock (after its first write-side call)."""
        return self._life.writing

    def start(self) -> None:
        """Become the store's writer now and start what indexing runs beside it: the document
        writer, background retention and the monitors (otherwise done at the first ingest). A
        service calls it at start, so a second writer is refused at once."""
        self._life.start_ingest()

    def close(self) -> None:
        """Stop every worker, then close the store. A part that fails to stop (a pipeline that
        had failed, a camera stuck in its read) does not keep the others running."""
        errors = []

        def step(fn):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - raised after every other part is closed
                errors.append(e)
        step(self._live.close)  # their sources end after what they queued: the pipeline's close commits it
        step(self._audio.close)  # speech heard so far is stored (bounded), before the store closes
        self._life.stop_pipeline(step)
        step(self._monitors.close)
        step(self._answering.close)  # after the monitors (no alert comes to reply to), before the model and store
        step(self._models.close)
        step(self._life.stop_retention)
        self._life.close_store()
        if errors:
            raise errors[0]

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
        With ``audio.model`` set, each source's audio track is transcribed beside it (its own
        thread; a resumed run continues after the camera's last stored segment) and the call
        returns once that is stored too: ``SourceReport.audio`` says how it went ("no_audio",
        "error" with why, "ended" with its segments); ``wall_s`` is the video's.
        """
        return index_sources(self.store, self.config, self.device, self._life.pipe, paths, camera_ids,
                             start_time_abs=start_time_abs, progress=progress, on_open_error=on_open_error,
                             audio=self._audio)

    # -- pushed frames -------------------------------------------------------------------------
    def push(self, camera_id: str, frame, t: float, *, t_abs: float | None = None, pose=None) -> bool:
        """Push one H x W x 3 uint8 RGB frame (numpy array or torch tensor) taken at t seconds.

        Frames are sampled at the configured rate like a file; returns whether this one was
        sampled (queued for the gates). Blocks briefly when the pipeline is behind. ``pose``:
        where the camera was, (x, y, z, yaw) in metres and radians or a ``Pose`` naming its map
        frame (ingest/poses.py); kept with the moment (``Moment.pose``).
        """
        return self._pushed.push(camera_id, frame, t, t_abs, pose)

    def push_audio(self, camera_id: str, samples, sample_rate: int, t: float) -> None:
        """Push audio heard by a camera (a robot's microphone): ``samples`` (n,) or (n, channels),
        int16/int32/uint8/float, at ``sample_rate`` Hz, its first sample at ``t`` seconds on the
        camera's axis (the ``t`` its frames are pushed with, or their ``t_abs`` when given).
        Returns at once: resampling, voice activity and ASR run on the audio path's threads
        (needs ``audio.model``). Consecutive calls continue each other; a jump in ``t`` ends the
        utterance in progress. ``end_push`` ends the camera's speech in progress."""
        self._audio.push(check_camera_id(camera_id), samples, sample_rate, t)

    def end_push(self, camera_id: str) -> None:
        """A pushing camera's stream ended: decide its held frame (the end of a run of similar
        frames is kept) and close its open event; its pushed audio's speech in progress goes to
        ASR. Later pushes continue the camera."""
        heard = self._audio.end(camera_id)
        if self._pushed.has(camera_id) or not heard:
            self._pushed.end(camera_id)
            self.flush()

    def wait_for_transcripts(self, timeout: float | None = None) -> bool:
        """Wait until the audio of every file being indexed is read and everything heard so far
        (pushed, live, files) is transcribed and stored; speech in progress on a live or pushed
        camera waits for its pause (or ``end_push``). False on timeout; True at once without the
        audio path."""
        return self._audio.wait(timeout)

    def transcripts(self, camera=None, t0: float | None = None, t1: float | None = None,
                    as_of: float | None = None) -> list[Transcript]:
        """Transcript segments (what was said, camera, interval, language, confidence) of
        ``camera`` (one id or a list; None: all) overlapping [t0, t1] (camera axis), none ending
        after ``as_of``, in time order."""
        return self.store.transcripts.list(camera, t0, t1, as_of=as_of)

    def push_progress(self, camera_id: str) -> float | None:
        """The time up to which the camera's pushed frames are committed (None: nothing yet): a
        pusher resuming after a restart continues with frames after it."""
        return self._pushed.progress(camera_id)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every pushed frame is gated and committed; False on timeout."""
        return self._life.flush(timeout)

    # -- live cameras --------------------------------------------------------------------------
    def add_camera(self, camera_id: str, url: str, *, fps: float | None = None, realtime: bool = False,
                   stall_s: float = 20.0, max_retries: int | None = None, gate: dict | None = None,
                   backoff_s: float = 1.0, backoff_max_s: float = 60.0,
                   connect_timeout_s: float | None = None, pose=None) -> CameraStatus:
        """Index a live source on its own thread from now on; returns its status at once.

        ``url``: rtsp://, rtsps://, rtmp://, http(s):// (MPEG-TS, HLS, MJPEG), /dev/videoN, or a
        file (``realtime``: paced at 1x; else read at full speed, its t_abs the wall clock at the
        start plus its PTS). ``fps``: samples per second (default ingest.fps). The camera
        reconnects after an error or ``stall_s`` without a frame, waiting ``backoff_s`` doubling
        to ``backoff_max_s`` (with jitter), forever unless ``max_retries`` attempts in a row fail;
        ``connect_timeout_s`` (default min(stall_s, 10)) bounds each connection attempt. ``gate``:
        GateConfig overrides for this camera. ``pose``: where the camera is at each sample, a
        callable ``t -> pose or None`` (t on the camera's axis) or the path of a JSON-lines pose
        file read as it grows, interpolated onto the frames' times (ingest/poses.py). Bad
        arguments: ValueError naming camera and field.
        """
        return self._live.add(CameraSpec(
            check_camera_id(camera_id), url, fps=fps, realtime=realtime, stall_s=stall_s, max_retries=max_retries,
            gate=dict(gate or {}), backoff_s=backoff_s, backoff_max_s=backoff_max_s,
            connect_timeout_s=connect_timeout_s), pose=pose)

    def remove_camera(self, camera_id: str) -> None:
        """Stop a live camera at once; what it queued is still committed (its source ends after it)."""
        self._live.remove(camera_id)

    def status(self, camera_id: str | None = None) -> list[CameraStatus]:
        """Every live camera now (or one: ValueError when it is not running): state, input fps,
        last frame, reconnects, lag, drops, gaps, error. Empty before the first add_camera."""
        return self._live.status(camera_id)

    def stage_status(self) -> list[StageStatus]:
        """Each stage of the indexing pipeline (decode, gate, embed, encode, perceive, commit):
        seconds busy, items done, queue depth and bound, drops since it started (index/meter.py).
        Empty before anything was indexed in this engine."""
        pipe = self._life.pipeline
        return [] if pipe is None else pipe.stage_status()

    def gaps(self, camera_id: str | None = None, t0: float | None = None, t1: float | None = None) -> list[Gap]:
        """Live cameras' intervals without video overlapping [t0, t1] (camera axis), oldest first;
        an outage in progress is an open gap (``t_end`` None)."""
        return self._live.gaps(camera_id, t0, t1)

    def apply_cameras(self, specs) -> CameraDiff:
        """Make the running live cameras match ``specs`` (CameraSpec list); returns the diff."""
        return self._live.apply(list(specs))

    def reload_cameras(self, path: str | os.PathLike) -> CameraDiff:
        """Read a cameras file (TOML: ingest/cameras_file.py) and apply it; an invalid file
        raises CamerasFileError and changes nothing."""
        return self._live.reload(path)

    # -- search and deletion -------------------------------------------------------------------
    def text_embedder(self):
        """The document text embedder (None: no text model and no text side of the image model)."""
        return self._models.text_embedder()

    def search(self, text: str | None = None, image=None, top_k: int = 10, time_range=None, cameras=None,
               sources=None, as_of: float | None = None, *, labels=None, near=None, radius: float | None = None,
               region=None, map_frame: str | None = None) -> SearchResult:
        """Evidence for a text and/or image query (image: H x W x 3 uint8 array or a path), fused
        by rank across the frame, event and summary spaces and, for text, the full-text index
        (words on screen, detected things, event and summary documents) and speech (transcript
        segments, found by their words and their meaning; evidence ``source == "speech"`` with
        the segment's text); each hit's ``source`` says where it came from. ``sources`` None:
        all but speech, and speech when the store holds any transcript (a store that never heard
        anything pays nothing for it). Times are on each camera's axis (absolute seconds when
        known); ``as_of`` returns nothing that ends after it. ``cameras``: one id or a list
        (None: all). ``labels``: only hits showing a detected thing of these classes. ``near``
        (x, y) with ``radius``, ``region`` (a box (x0, y0, x1, y1) or a polygon of (x, y)
        corners) and ``map_frame``: only hits taken there (their moments' poses;
        memory/places.py), filtered before ranking. Each hit carries the pose of its latest
        moment that has one (``Evidence.pose``)."""
        cameras = camera_list(cameras)
        if isinstance(labels, str):
            labels = [labels]
        place = make_place(near, radius, region, map_frame)
        if sources is None:
            sources = SOURCES + (SPEECH,) if self.store.transcripts.exists() else SOURCES
        wants_texts = {"event", "summary", SPEECH} & set(sources)
        texts = self.text_embedder() if text is not None and wants_texts else None
        return search(self.store, self.vectors, self.embedder, texts, text=text, image=image, top_k=top_k,
                      time_range=time_range, cameras=cameras, sources=tuple(sources), as_of=as_of, place=place,
                      labels=labels)

    def delete(self, cameras=None, time_range=None) -> Deletion:
        """Remove the moments (rows, JPEGs, vectors), events, samples, alerts and transcript
        segments (rows, full-text rows, vectors; speech still being transcribed there is dropped
        when it arrives) of the given cameras (all when None) within time_range (camera axis,
        start <= end; everything when None). Deleting whole cameras also removes the monitors
        that watched only them."""
        if cameras is None and time_range is None:
            raise ValueError("delete needs cameras=... and/or time_range=... (refusing to delete everything implicitly)")
        cameras = camera_list(cameras)
        t0, t1 = check_delete_range(time_range)
        self._life.claim()
        self.flush()  # nothing in flight may re-add what is deleted
        self._audio.forget(cameras, t0, t1)  # nor speech still being transcribed
        writer = self._life.writer
        # summaries over deleted events must not survive them: a running writer stores none meanwhile
        with writer.lock if writer is not None else contextlib.nullcontext():
            out = self.store.delete(cameras, t0, t1)
            self._documents.forget(cameras, time_range)
        self._cascade.forget(out.cameras)
        if self._life.pipeline is not None:
            self._life.pipeline.forget(out.cameras)
        if self._perception is not None:
            self._perception.reset()
        self._monitors.forget_deleted()
        return out

    def retain(self, budget_s: float | None = None):
        """Run one retention pass now (whatever ``retention.enabled`` says: this is the explicit
        call) and return its ``RetentionReport``: moments thinned (``deleted``), files re-encoded,
        frame bytes before and after."""
        return self._life.retain(budget_s)

    # -- documents -----------------------------------------------------------------------------
    def summarize(self, time_range: tuple[float, float], granularity_s: float, prompt: str, *,
                  cameras=None, structure: str | None = None) -> list[Summary]:
        """Write reusable summary documents: one per camera per window of ``granularity_s``
        seconds over ``time_range`` (camera axis), from the window's frames and the event
        documents overlapping it. They are searchable (source "summary"). Returns them."""
        return self._documents.summarize(time_range, granularity_s, prompt, cameras, structure)

    def wait_for_documents(self, timeout: float | None = None) -> bool:
        """Wait until every committed event has its document and the forest's summaries are
        current (starting the document writer: a write-side call). False on timeout; True at
        once without an LLM."""
        return self._documents.wait(timeout)

    # -- questions -----------------------------------------------------------------------------
    def view(self, as_of: float | None = None, cameras=None, *, session: str | None = None,
             write: bool = True) -> MemoryView:
        """The causal view of this memory that reasoning reads: nothing after ``as_of``, nothing of
        a camera outside ``cameras`` (one id or a list; None: all); its QA history is that of
        ``cameras`` and ``session`` alone. Its summaries (the planner's ``summarize``) are
        written by this engine, claiming the store at the first; ``write`` False: drafted for
        the answer only, never stored."""
        return self._views.view(as_of, cameras, session=session, write=write)

    def ask(self, question: str, as_of: float | None = None, camera=None, mode: str = "auto", *,
            max_turns: int = 6, wait_for_ingest: bool = False, session: str | None = None,
            read_only: bool = False) -> "Answer":
        """Answer a question from the memory, with cited evidence (camera, interval, moment ids,
        frame paths), the trace of every model turn, token counts and timings per stage.

        ``mode``: "two_phase" (coarse answer from the present and the forest's roots, fine
        retrieval of forest nodes when needed, continuing from the coarse KV cache), "agentic"
        (router + search/inspect/summarize/answer planner loop), or "auto": two-phase, then the
        agentic loop when two-phase finds nothing. ``as_of``: nothing later than it is seen by
        any stage. ``camera``: one camera id or a list (default: all; in a session: the
        session's cameras). With outside tools configured (config ``tools``: web and image search)
        the agentic planner may call them; the answer cites their results apart from its evidence
        (``Answer.tool_citations``). Evidence carries the pose of its latest moment with one
        (``Evidence.pose``; ``Answer.position``).

        It answers from what is committed now; ``wait_for_ingest=True`` first waits for every
        frame already queued (evaluation that pauses the stream clock). Every answer returned is
        recorded in the QA history of its scope (``camera`` and ``session``: a question reads and
        joins that history only); the summary rewrite runs after it returns
        (``Answer.background``). ``session``: the conversation (created on first use, bound to
        every camera; ``create_session`` binds one to cameras); the question and its answer
        become its turns. ``ask`` answers; a turn that may be a request to be told later goes
        to ``turn``. ``read_only``: the asker may not write the memory, so summary documents the
        planner writes stay in the answer. ``timings["response_s"]``: the latency the caller saw."""
        return self._answering.ask(question, as_of, camera, mode, max_turns=max_turns,
                                   wait_for_ingest=wait_for_ingest, session=session, read_only=read_only)

    def wait_for_answers(self, timeout: float | None = None) -> bool:
        """Wait until the QA-history work of every answer returned so far (embedding, summary
        rewrite) has ended; False on timeout."""
        return self._answering.wait_for_answers(timeout)

    # -- sessions ------------------------------------------------------------------------------
    def turn(self, text: str, *, session: str, camera=None, as_of: float | None = None, mode: str = "auto",
             max_turns: int = 6, intent: str | None = None, condition: str | None = None,
             target: str | None = None, every_s: float | None = None, may_watch: bool = True,
             read_only: bool = False, watch_quota=None) -> TurnResult:
        """One user turn of ``session`` (created on first use), sorted and acted on: a question
        is answered now (``ask``'s body; ``mode``, ``max_turns``, ``as_of`` as there); "tell me
        when ..." registers a standing request (a monitor bound to the session, its condition
        written from the request), acknowledged at once; "stop watching for that" ends one (the
        one it names, "all", else the most recent); "... instead" replaces one. When a standing
        request fires, the session gets a reply written by the model (a "reply" turn; see
        ``session``, ``subscribe_turns``).

        The turn is sorted by the model at frontend priority (``sessions.classifier``; the rules
        when its reply is unusable), or taken as ``intent`` ("question", "watch", "cancel",
        "change") with ``condition`` (the monitor's, default: the text minus its trigger) and
        ``target`` (a standing request's monitor id). ``every_s``: a new standing request's
        check period (default ``sessions.watch_every_s``). ``may_watch`` False: a request to be
        told later is refused (WatchNotAllowed). ``camera``: within the session's cameras
        (SessionError otherwise; default: the session's). ``watch_quota()``: called before a new
        standing request is registered (after those a change ends); what it raises refuses it
        (the service counts the caller's share of monitors there)."""
        return self._answering.turn(text, session=session, camera=camera, as_of=as_of, mode=mode,
                                    max_turns=max_turns, intent=intent, condition=condition, target=target,
                                    every_s=every_s, may_watch=may_watch, read_only=read_only,
                                    watch_quota=watch_quota)

    def create_session(self, session: str, camera=None):
        """Start a session bound to ``camera`` (one id or a list; None: every camera): its turns
        may name no other. SessionError when it exists."""
        return self._sessions.create(session, camera)

    def sessions(self, *, prefix: str | None = None, include_ended: bool = False):
        """The sessions (without their turns) whose id begins with ``prefix``, oldest first."""
        return self._sessions.list(prefix, include_ended)

    def session(self, session: str, *, after: int | None = None, last: int | None = None):
        """A ``Session`` with its ``turns`` (those after turn id ``after``; ``last``: only the
        newest that many) and its active standing requests (``watches``); None: no such one."""
        return self._sessions.get(session, after=after, last=last)

    def end_session(self, session: str) -> bool:
        """End a session and its standing requests (its turns stay). False: none such was open."""
        return self._sessions.end(session)

    def subscribe_turns(self, callback=None):
        """New turns of every session as they are stored, replies included (an
        ``AlertSubscription`` carrying ``SessionTurn``s; ``turn.session_id`` says whose)."""
        return self._sessions.subscribe(callback)

    def wait_for_replies(self, timeout: float | None = None) -> bool:
        """Wait until every fired standing request so far has its reply stored; False on timeout."""
        return self._sessions.drain(timeout)

    def reply_stats(self):
        """``ReplyStats``: replies written, fallbacks, alert-to-reply latency per reply."""
        return self._sessions.reply_stats()

    # -- monitors ------------------------------------------------------------------------------
    def watch(self, condition: str, cameras=None, *, images=None, mode: str = "once", min_confidence: float = 0.6,
              every_s: float = 2.0, frames: int = 4, repeat_gap_s: float = 3.0):
        """Watch for ``condition`` (text; ``images``: reference images, arrays or paths) on
        ``cameras`` (None: all): the latest ``frames`` frames of each camera's present are checked
        every ``every_s`` of stream time; an alert fires at ``confidence >= min_confidence``.
        ``once`` ends at the first alert, ``repeat`` fires again after ``repeat_gap_s`` without a
        match. Durable: active monitors resume when the store is next indexed. reason/monitor.py
        has the rules; at most ``monitors.max_active`` (8) are active."""
        cams = None if cameras is None else tuple(camera_list(cameras))
        return self._monitors.watch(MonitorSpec(condition, cams, mode, min_confidence, every_s, frames,
                                                repeat_gap_s), images)

    def monitors(self, include_ended: bool = False):
        return self._monitors.list(include_ended)

    def watch_sessions(self, monitor_ids=None) -> dict[str, str]:
        """Monitor id -> the session whose standing request ("tell me when ...") it serves, for
        the monitors sessions started (``monitor_ids``: only those); the others are nobody's."""
        return self.store.sessions.monitor_sessions(monitor_ids)

    def unwatch(self, monitor_id: str) -> bool:
        """End a monitor (its alerts stay). False: no such active monitor."""
        return self._monitors.unwatch(monitor_id)

    def alerts(self, since: int | None = None, monitor_id: str | None = None, camera=None) -> list[Alert]:
        """Stored alerts with ``alert_id > since``, oldest first."""
        return self._monitors.alerts(since, monitor_id, camera)

    def subscribe_alerts(self, callback=None):
        """An ``AlertSubscription``: iterate it (or ``get(timeout)``) for alerts as they fire in
        this engine; ``callback(alert)`` is also called for each. ``close()`` it when done."""
        return self._monitors.subscribe(callback)

    def wait_for_monitors(self, timeout: float | None = None) -> bool:
        """Wait until every check due so far is judged; False on timeout."""
        return self._monitors.drain(timeout)

    def monitor_stats(self):
        """``MonitorStats``: checks, model calls, vigilance skips, alerts since this engine began."""
        return self._monitors.stats()

    # -- what perception found ----------------------------------------------------------------
    def entities(self, label=None, camera=None, time_range=None, as_of: float | None = None, *,
                 after: int | None = None, limit: int | None = None):
        """Entities (things detected, tracked and linked across cameras) seen on ``camera`` (one
        id or a list; None: all) in ``time_range`` (overlap, camera axis), of ``label`` (a class
        name or a list), as known at ``as_of``; by id (``after``: those after that id)."""
        return self._reads.entities(label, camera, time_range, as_of, after=after, limit=limit)

    def entity(self, entity_id: int, *, camera=None, as_of: float | None = None):
        """An entity's timeline (``EntityTimeline``: its sightings on stored frames with boxes,
        its tracks, look-alike entities); None when it is not in view."""
        return self._reads.entity(entity_id, camera, as_of)

    def last_seen(self, query: str, *, camera=None, as_of: float | None = None):
        """Where something was last seen (``LastSeen``: camera, time, frame, box), found by its
        label, colour names, text read on it, or text shown on screen; None when nothing matches."""
        return self._reads.last_seen(query, camera, as_of)

    def perceived(self, moment_id: int) -> tuple[list, list]:
        """(detections, OCR lines) stored for one moment."""
        return self._reads.perceived(moment_id)

    # -- reads ---------------------------------------------------------------------------------
    def clip(self, camera_id: str, t0: float, t1: float) -> Clip:
        """An MP4 of [t0, t1] on the camera's axis (``Clip.data``; H.264, and AAC where the source
        had sound): cut from the source file while it is there unchanged, else built from the
        retained frames at their times (``Clip.made_from``). At most ``clips.max_s`` long;
        ClipBusy while ``clips.max_encodes`` are being encoded; NoClip when the camera has no
        retained frame at or before the interval (engine/clips.py)."""
        return self._clips.clip(camera_id, t0, t1)

    def moments(self, camera_id: str | None = None, t0: float | None = None, t1: float | None = None, *,
                near=None, radius: float | None = None, region=None, map_frame: str | None = None) -> list[Moment]:
        """Retained frames by camera and time (t0/t1 bound t_rel); ``near`` (x, y) with ``radius``,
        ``region`` (box or polygon) and ``map_frame``: only those whose pose is there."""
        return self.store.moments.list(camera_id, t0, t1, place=make_place(near, radius, region, map_frame))

    def info(self) -> dict:
        out = self.store.info()
        out["device"] = self.device
        out["gate_body"] = self._cascade.body.name
        out["embedder"] = self.embedder.name
        out["vector_warnings"] = list(self.vectors.warnings)
        out["llm"] = self._models.name
        out["transcripts_by_camera"] = self.store.transcripts.counts()
        out["audio"] = {"model": self.config.audio.model, "active": self._audio.active,
                        "cameras": self._audio.statuses()}
        if self._perception is not None:
            out["perception"] = self._perception.stats()
        if self.writer is not None:
            out["writer"] = vars(self.writer.stats())
            out["forest_nodes"] = len(self.forest)
        return out

