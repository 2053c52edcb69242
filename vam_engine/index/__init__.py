"""Indexing: the pipeline (decode workers -> batched gates -> the semantic stage -> commits;
``pipeline.py``) and the online per-camera commit it runs (semantic dedup and event boundaries
over embeddings; ``online.py``, ``stage.py``); the device path (gates -> embedding -> dedup on one
device, only kept frames to the host; ``device_path.py``)."""
from .device_path import DeviceFrameBatch, DevicePath, DevicePathError, DevicePathResult, KeptFrame
from .online import ADAPTIVE_MAX, ADAPTIVE_MIN, CommitInputError, CommitterState, Decision, HeldFrame, OnlineCommitter
from .otsu import otsu_threshold
from .perceive import PerceptionFeed
from .pipeline import IndexPipeline, Progress, SourceReport, fingerprint
from .stage import sweep_source

__all__ = ["ADAPTIVE_MAX", "ADAPTIVE_MIN", "CommitInputError", "CommitterState", "Decision", "HeldFrame",
           "OnlineCommitter", "otsu_threshold", "IndexPipeline", "Progress", "SourceReport", "fingerprint",
           "PerceptionFeed", "sweep_source", "DeviceFrameBatch", "DevicePath", "DevicePathError", "DevicePathResult",
           "KeptFrame"]
