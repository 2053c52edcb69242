"""Errors a user can act on. Each message names the input and what is wrong with it."""
from .urls import redact


class VamError(Exception):
    """Base class of every error the engine raises on purpose."""


class SourceError(VamError):
    """A video source cannot be opened or decoded (missing, empty, truncated, not a video...)."""

    def __init__(self, source: str, problem: str):
        self.source = redact(str(source))  # a camera URL's password never reaches a message or log
        self.problem = problem
        super().__init__(f"{source}: {problem}")


class FrameError(VamError):
    """A pushed frame has the wrong type, shape or dtype."""


class StoreError(VamError):
    """The store directory is unusable (wrong schema version, not a store, ...)."""


class VectorError(VamError):
    """A vector or vector index is unusable (wrong dimension, not finite, a corrupt snapshot)."""


class Unavailable(VamError):
    """A part the request needs does not answer now (a cluster's shard that is down or
    restarting); the service answers 503: retry later."""
