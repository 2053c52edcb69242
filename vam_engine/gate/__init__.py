"""The gates (docs/pipeline.md): per-frame statistics bodies (bodies.py: the numpy reference, the
fused C++ CPU body, the Triton CUDA body, one chosen by ``make_body``), the cascade of rules over
them with its view rule (cascade.py) and the records it returns (records.py)."""
from .bodies import CpuBody, CudaBody, GateComparison, GateStats, ReferenceBody, Tiles, make_body
from .cascade import GateCascade, is_local_change
from .records import GateRecord, GateRun, Released

__all__ = ["make_body", "CpuBody", "CudaBody", "ReferenceBody", "GateStats", "GateComparison", "Tiles",
           "GateCascade", "is_local_change", "GateRecord", "GateRun", "Released"]
