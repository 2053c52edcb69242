from .records import GateRecord, Moment
from .store import MomentStore

__all__ = ["GateRecord", "Moment", "MomentStore"]
