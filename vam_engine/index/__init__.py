"""Indexing: the pipeline, a chain of typed stages (decode -> gate -> embed -> commit, with the
JPEG encoder and perception beside embed; ``pipeline.py`` wires them, each reports a
``StageStatus``), and the online per-camera commit it runs (semantic dedup and event boundaries
over embeddings; ``online.py``, ``semantic.py``); the device path (gates -> embedding -> dedup on
one device, only kept frames to the host; ``device_path.py``)."""
from .device_path import DeviceFrameBatch, DevicePath, DevicePathError, DevicePathResult, KeptFrame
from .online import ADAPTIVE_MAX, ADAPTIVE_MIN, CommitInputError, CommitterState, Decision, HeldFrame, OnlineCommitter
from .otsu import otsu_threshold
from .perceive import PerceptionFeed
from .pipeline import IndexPipeline, Progress, SourceReport, fingerprint
from .meter import StageStatus
from .semantic import load_state, sweep_source

__all__ = ["ADAPTIVE_MAX", "ADAPTIVE_MIN", "CommitInputError", "CommitterState", "Decision", "HeldFrame",
           "OnlineCommitter", "otsu_threshold", "IndexPipeline", "Progress", "SourceReport", "fingerprint",
           "PerceptionFeed", "StageStatus", "load_state", "sweep_source", "DeviceFrameBatch", "DevicePath",
           "DevicePathError", "DevicePathResult", "KeptFrame"]
