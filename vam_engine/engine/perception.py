"""Perception for an engine (``perception.enabled``: a detector set, or OCR on).

``EnginePerception`` builds the stage at the engine's construction, so a detector or OCR model
that is missing or does not run is an error before anything is indexed, never mid-stream. The
indexing pipeline gets its feed (index/perceive.py) when it starts; the feed first restores the
stage's saved state from the store, so a resumed or later run goes on with the same tracks and
entities. After a deletion the state is restored again from what is left.

``PerceptionReads`` answers the engine's reads of what perception stored (entities, an entity's
timeline, last seen, a moment's detections and text): store reads with the engine's argument
checks, available whether or not this engine runs perception.
"""
from __future__ import annotations

from ..config import EngineConfig
from ..errors import VamError
from ..ingest import camera_list
from ..numerics import finite_time, time_range
from ..index import PerceptionFeed
from ..memory import Store
from ..perception import make_perception_stage

MAX_ENTITY_PAGE = 10_000


class EnginePerception:
    def __init__(self, store: Store, cfg: EngineConfig, device: str):
        self.store = store
        self.stage = make_perception_stage(cfg.perception, device)  # PerceptionError now, not mid-stream
        self._feed: PerceptionFeed | None = None

    def feed(self) -> PerceptionFeed:
        """The pipeline's feed, its stage restored from the store (the writer calls this once
        it holds the store)."""
        if self._feed is None:
            self._feed = PerceptionFeed(self.stage, self.store)
            self._feed.restore()
        return self._feed

    @property
    def detect_present(self) -> bool:
        return bool(self.stage.detect_present and self.stage.detector is not None)

    def reset(self) -> None:
        """After a deletion: the stage goes on from what the store still holds."""
        if self._feed is not None:
            self._feed.restore()

    def stats(self) -> dict:
        out = dict(self.stage.stats)
        if self._feed is not None:
            out["feed"] = dict(self._feed.stats)
            out["last_error"] = self._feed.last_error
        return out

    def close(self) -> None:
        self.stage.close()


def _cameras(camera) -> list[str] | None:
    return camera_list(camera, "camera", nonempty=True)


def _time(name: str, t) -> float | None:
    return finite_time(t, name, optional=True)


def _range(range_) -> tuple[float | None, float | None]:
    return time_range(range_, open_ends=True)


class PerceptionReads:
    """See the module docstring. ``vectors``: a callable giving the store's vector memory (for
    an entity's look-alikes)."""

    def __init__(self, store: Store, vectors):
        self.store = store
        self._vectors = vectors

    def entities(self, label=None, camera=None, time_range=None, as_of=None, *, after: int | None = None,
                 limit: int | None = None):
        if label is not None and not (isinstance(label, str) and label) and not (
                isinstance(label, (list, tuple)) and 0 < len(label) <= 100
                and all(isinstance(x, str) and x for x in label)):
            raise VamError(f"label must be a class name or a list of up to 100, got {label!r}"[:300])
        if limit is not None and not (isinstance(limit, int) and 1 <= limit <= MAX_ENTITY_PAGE):
            raise VamError(f"limit must be an integer in 1..{MAX_ENTITY_PAGE}, got {limit!r}")
        t0, t1 = _range(time_range)
        return self.store.entities.list(label=label, cameras=_cameras(camera), t0=t0, t1=t1,
                                        as_of=_time("as_of", as_of), after=after, limit=limit)

    def entity(self, entity_id: int, camera=None, as_of=None, similar: int = 5):
        if isinstance(entity_id, bool) or not isinstance(entity_id, int) or entity_id < 0:
            raise VamError(f"entity_id must be a non-negative integer, got {entity_id!r}")
        return self.store.entities.timeline(entity_id, cameras=_cameras(camera), as_of=_time("as_of", as_of),
                                            vectors=self._vectors(), similar=similar)

    def last_seen(self, query: str, camera=None, as_of=None):
        if not isinstance(query, str) or not query.strip():
            raise VamError(f"last_seen needs a non-empty query (a label, colour, text or words), got {query!r}")
        return self.store.entities.last_seen(query.strip()[:500], cameras=_cameras(camera),
                                             as_of=_time("as_of", as_of))

    def perceived(self, moment_id: int) -> tuple[list, list]:
        """(detections, OCR lines) of one moment."""
        return (self.store.entities.detections([moment_id]).get(moment_id, []),
                self.store.entities.ocr_lines([moment_id]).get(moment_id, []))
