"""The embed stage: one thread takes the gate stage's ``GatedBatch``es, embeds their frames and
runs each camera's online committer (index/semantic.py), applies what happened to each source's
report (the one thread that writes reports), hands kept frames to perception and their JPEGs to
the encoder pool, and gathers a ``CommitUnit`` (index/records.py) for the commit stage: by size
(``store.commit_every`` frames), at a source's end, on flush(), or once per
``store.commit_interval_s`` (a commit per sample would write the camera's reference frame every
time).
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Callable

from ..config import EngineConfig
from ..memory import CommitBatch
from .meter import StageMeter, stop_thread
from .records import CommitUnit, GatedBatch
from .semantic import SemanticStage


class EmbedStage:
    def __init__(self, semantic: SemanticStage, cfg: EngineConfig, *, perception=None,
                 source: Callable[[int], object], report: Callable[[object], None],
                 out: Callable[[CommitUnit], None], fail: Callable[[BaseException], None], depth: int = 2):
        """``source(source_id)``: the pipeline's book-keeping of a source (None: not of this run);
        ``report(src)``: sends a source's progress; ``out``: where a commit unit goes (blocks
        while commits are behind). ``depth``: gated batches that may wait (each holds frames)."""
        self.semantic = semantic
        self.cfg = cfg
        self.perception = perception
        self._source = source
        self._report = report
        self._out = out
        self._fail = fail
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.meter = StageMeter("embed", depth=self.queue.qsize, capacity=depth)
        self._thread = threading.Thread(target=self._loop, name="vam-embed", daemon=True)
        self._flush = False  # a flush was asked for: hand over at the next frame taken, if none is pending
        self._bounds: dict[str, float] = {}  # the last batch's undecided times (``_undecided``)
        self._new_unit()

    def start(self) -> None:
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        """After everything queued is embedded (the gate stage stopped first): ends the thread."""
        stop_thread(self._thread, self.queue)

    def _new_unit(self) -> None:
        self._batch = CommitBatch()
        self._writes: list[Future] = []
        self._perceived: list[Future] = []
        self._ended: list = []
        self._taken = self._gated = 0
        self._last = time.monotonic()

    def _loop(self) -> None:
        try:
            while True:
                gated = self.queue.get()
                if gated is None:
                    return
                with self.meter.busy():
                    self._take(gated)
                    self.meter.add(items=len(gated.passed))
                    if self._due(gated):
                        self._hand_over()
        except BaseException as e:  # noqa: BLE001 - surfaced to every caller through raise_if_failed
            self._fail(e)

    def _take(self, gated: GatedBatch) -> None:
        batch, writes = self._batch, self._writes
        gated.into(batch)
        decisions = self.semantic.process(gated.passed, batch, writes)
        for cam in gated.gaps:
            decisions += self.semantic.finish(cam, batch, writes)
        for end in gated.ends:
            if not end.error:  # a file source's end: its camera's held frame and open event close
                decisions += self.semantic.finish(end.camera_id, batch, writes)
        touched = {}
        for sid, counts in gated.counts.items():
            src = self._source(sid)
            if src is None:
                continue
            rep = src.report
            rep.sampled += counts.sampled
            for gate, n in counts.dropped.items():
                rep.dropped[gate] += n
                if rep.dropped[gate] <= 0:
                    del rep.dropped[gate]
            if counts.last_t is not None:
                src.last_t = counts.last_t
            touched[sid] = src
        for sid, reason in decisions:
            src = self._source(sid)
            if src is None:
                continue  # a frame held from a source of an earlier run
            if reason is None:
                src.report.kept += 1
            else:
                src.report.dropped[reason] += 1
            touched[sid] = src
        for end in gated.ends:
            src = self._source(end.source_id)
            src.ended = True
            if end.error:
                src.report.failed = end.error
            else:
                batch.finished.add(end.source_id)
            touched[end.source_id] = src
            self._ended.append(src)
        for src in touched.values():
            self._report(src)
        if self.perception is not None:  # the kept frames of every camera: one submission
            self._bounds = self._undecided(gated)
            self._perceived += self.perception.submit(self._bounds)
        self._taken += gated.taken
        self._gated += gated.gated

    def _undecided(self, gated: GatedBatch) -> dict[str, float]:
        """Per camera, the time from which frames may still be kept (what perception's present
        frames wait for): the online committer's bound, or the gates' held sample's when older."""
        out = self.semantic.undecided(gated.gated_t)
        for cam, t in gated.held_t.items():
            if cam in out:
                out[cam] = min(out[cam], t)
        return out

    def _due(self, gated: GatedBatch) -> bool:
        self._flush = self._flush or gated.flush
        if not self._taken:
            return False
        return bool(self._gated >= self.cfg.store.commit_every or self._ended or self._flush
                    or time.monotonic() - self._last >= self.cfg.store.commit_interval_s)

    def _hand_over(self) -> None:
        self._flush = False
        self.semantic.checkpoint(self._batch, self._writes)
        if self.perception is not None:
            self._perceived.append(self.perception.snapshot(self._bounds))
        self._out(CommitUnit(self._batch, self._writes, self._perceived, self._ended, self._taken))
        self._new_unit()
