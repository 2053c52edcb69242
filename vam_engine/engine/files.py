"""Indexing files and stream URLs to their end (``Engine.index_files``): one decode worker per
source into the engine's one pipeline; a finished file indexed again is nothing to do, an
interrupted one resumes after its last commit. With the audio path on, each source's audio track
is transcribed beside it (engine/audio.py: its own thread, resuming after the camera's last
stored segment; a file whose video is done but whose audio is not gets its audio finished), and
its report says how (``SourceReport.audio``); the video's wall time does not include it."""
from __future__ import annotations

import os
import threading
import time
from typing import Callable, Sequence

from ..config import EngineConfig
from ..errors import SourceError
from ..index import IndexPipeline, Progress, SourceReport, fingerprint, sweep_source
from ..ingest import check_camera_id, default_camera_ids, is_url, open_decoder, redact
from ..memory import Store
from .audio import EngineAudio


def sampling_of(config: EngineConfig) -> str:
    """A source's sampling as its row records it (a resume needs the same)."""
    ing = config.ingest
    return f"fps={ing.fps:g}" + (",keyframes" if ing.keyframes_only else "")


def index_sources(store: Store, config: EngineConfig, device: str, pipe: Callable[[], IndexPipeline],
                  paths: Sequence[str], camera_ids: Sequence[str] | None, *, start_time_abs: float | None,
                  progress: Callable[[Progress], None] | None, on_open_error: str,
                  audio: EngineAudio | None = None) -> list[SourceReport]:
    """See ``Engine.index_files``."""
    paths = [str(p) for p in paths]
    if camera_ids is None:
        camera_ids = default_camera_ids(paths)
    if len(camera_ids) != len(paths):
        raise ValueError(f"{len(paths)} sources but {len(camera_ids)} camera ids")
    if len(set(camera_ids)) != len(camera_ids):
        raise ValueError(f"camera ids must differ between concurrent sources: {list(camera_ids)}")
    pipeline = pipe()
    t_start = time.monotonic()
    reports, started, heard = [], [], []
    for path, cam in zip(paths, camera_ids):
        rep = SourceReport(check_camera_id(cam), redact(path))  # a URL's secrets are never stored nor shown
        reports.append(rep)
        try:
            opened = _open_source(store, config, device, path, cam, rep, start_time_abs)
        except SourceError as e:
            if on_open_error == "raise":
                for _, dec in started:
                    dec.close()
                raise
            rep.failed = e.problem
            continue
        state, decoder = opened
        heard.append((path, cam, state.source_id, decoder, rep))
        if decoder is None:  # already indexed
            continue
        rep.decoder = decoder.name
        src = pipeline.register(state.source_id, rep, decoder.info.duration_s, progress)
        started.append((src, decoder))
    for src, decoder in started:
        pipeline.decode_worker(src, decoder)
    # on its own thread once the video has started: loading the ASR model never delays the video
    listening = _AudioStart(store, audio, heard) if audio is not None and audio.active else None
    for src, _ in started:
        pipeline.wait(src)
    wall = time.monotonic() - t_start
    for rep in reports:
        rep.wall_s = wall
    for cam, source_id, rep in listening.join() if listening is not None else []:
        rep.audio = audio.finish_file(cam, source_id)
    return reports


class _AudioStart(threading.Thread):
    """``_start_audio`` on its own thread; ``join()`` returns its result (raises its error)."""

    def __init__(self, store: Store, audio: EngineAudio, heard):
        super().__init__(name="vam-audio-start", daemon=True)
        self._args, self._out, self._error = (store, audio, heard), [], None
        audio.expect([h[1] for h in heard])  # until each is started (or not), its speech is not settled
        self.start()

    def run(self) -> None:
        try:
            self._out = _start_audio(*self._args)
        except BaseException as e:  # noqa: BLE001 - raised in the caller's thread by join
            self._error = e

    def join(self, timeout=None) -> list:
        super().join(timeout)
        if self._error is not None:
            raise self._error
        return self._out


def _start_audio(store: Store, audio: EngineAudio, heard) -> list:
    """Start each source's audio (the video's axis: its decoder's absolute start, kept in the
    source row for a later run that finds the video done); returns (camera, source id, report)
    of those started."""
    out = []
    for path, cam, source_id, decoder, rep in heard:
        try:
            if decoder is not None:
                epoch = decoder.info.start_time_abs
                store.sources.update_info(source_id, audio_epoch=epoch)
            else:
                epoch = store.sources.info(source_id).get("audio_epoch")
            if audio.open_file(cam, path, source_id, epoch, resume=not is_url(path)):
                out.append((cam, source_id, rep))
        except Exception as e:  # noqa: BLE001 - one source's audio failing to start ends its audio only
            rep.audio = {"state": "error", "error": f"{type(e).__name__}: {e}"}
        finally:
            audio.unexpect(cam)
    return out


def _open_source(store: Store, config: EngineConfig, device: str, path: str, cam: str, rep: SourceReport,
                 start_time_abs: float | None):
    """(source row, decoder); the decoder is None when the file is indexed already (``rep``
    says so)."""
    ing = config.ingest
    sampling = sampling_of(config)
    if is_url(path) or not os.path.isfile(path):
        # a live stream restarts its clock on every connection: each run is a new source
        uri = redact(path)
        fp = f"uri:{uri}@{time.time():.6f}"
    else:
        uri, fp = os.path.abspath(path), fingerprint(path)
        prior = store.sources.find(cam, fp, sampling)
        if prior is not None and prior.done:
            rep.already_done = True
            return prior, None
        rep.resumed_from = prior.progress_t if prior is not None else None
    decoder = open_decoder(path, cam, device=device, fps=ing.fps, keyframes_only=ing.keyframes_only,
                           start_time_abs=start_time_abs, resume_after=rep.resumed_from,
                           skip_nonref=ing.skip_nonref, skip_gops=ing.skip_gops, threads=ing.decode_threads)
    state = store.sources.open(cam, uri, fp, sampling)
    if rep.resumed_from is not None:
        sweep_source(store, cam, state.source_id)
    return state, decoder
