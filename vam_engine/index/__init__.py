"""Stage 3: the online per-camera commit (semantic dedup and event boundaries over embeddings)."""
from .online import ADAPTIVE_MAX, ADAPTIVE_MIN, CommitInputError, CommitterState, Decision, HeldFrame, OnlineCommitter
from .otsu import otsu_threshold

__all__ = ["ADAPTIVE_MAX", "ADAPTIVE_MIN", "CommitInputError", "CommitterState", "Decision", "HeldFrame",
           "OnlineCommitter", "otsu_threshold"]
