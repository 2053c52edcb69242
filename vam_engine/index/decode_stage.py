"""The decode stage: a thread per file or URL source (``start``) iterating its decoder, putting
samples on the gate stage's queue (blocking while the gates are behind) and the present's frames
into the present feed (index/present.py); live cameras decode on their own reader threads
(ingest/live.py) and offer their samples instead (a live reader must keep reading its socket).

Its figures (``status``) cover every source's reader: the time each spent decoding (the
decoders' ``stats.busy_s``), the frames decoded, and the live samples dropped because the gates
stayed behind.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from ..errors import SourceError
from ..ingest import PresentFrame
from ..memory import camera_time
from .meter import StageMeter, StageStatus
from .present import PresentFeed


class DecodeStage:
    def __init__(self, present: PresentFeed, *, sources: Callable[[], list]):
        """``sources()``: the pipeline's book-keeping of its sources (their ``decoder`` is read)."""
        self.present = present
        self._sources = sources
        self.meter = StageMeter("decode")  # the drops; busy time and frames come from the decoders
        self._retired = [0.0, 0]  # busy_s and frames of sources no longer in the pipeline's book-keeping

    def retire(self, src) -> None:
        """A source's book-keeping is replaced (it registered again): keep its figures."""
        stats = getattr(src.decoder, "stats", None)
        if stats is not None:
            self._retired[0] += stats.busy_s
            self._retired[1] += stats.decoded

    def start(self, src, decoder, put: Callable[[object], None], end: Callable[[str | None], None]) -> threading.Thread:
        """A thread feeding the decoder's samples to ``put`` (and, with the present's fps, its
        present frames to the present feed) until it ends, then calling ``end(error)``."""
        if self.present.from_decode:
            decoder.want_present(self.present.fps)

        def work():
            err = None
            stats = decoder.stats
            try:
                it = iter(decoder)
                while True:
                    t0 = time.perf_counter()
                    frame = next(it, None)
                    stats.busy_s += time.perf_counter() - t0
                    if frame is None:
                        break
                    if isinstance(frame, PresentFrame):
                        try:
                            self.present.decoded(frame.camera_id, camera_time(frame.t_rel, frame.t_abs), frame.rgb)
                        except Exception as e:  # noqa: BLE001 - the present is best effort, the index is not
                            if len(stats.errors) < 20:
                                stats.errors.append(f"present: {e}")
                        continue
                    put(frame)
            except SourceError as e:
                err = e.problem
            except Exception as e:  # noqa: BLE001 - a decoder failure must end the source, not hang it
                err = f"decoding failed: {type(e).__name__}: {e}"
            finally:
                decoder.close()
            end(err)

        src.decoder = decoder
        t = threading.Thread(target=work, name=f"vam-decode-{src.report.camera_id}", daemon=True)
        t.start()
        return t

    def status(self) -> StageStatus:
        busy, frames = self._retired
        workers = 0
        for src in self._sources():
            stats = getattr(src.decoder, "stats", None)
            if stats is None:
                continue  # pushed frames: the caller's thread made them
            busy += stats.busy_s
            frames += stats.decoded
            workers += not src.ended
        dropped = self.meter.status().dropped
        return StageStatus("decode", workers, busy, frames, 0, None, dropped)
