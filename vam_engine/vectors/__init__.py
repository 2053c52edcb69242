"""Vector spaces: normalized float32 vectors under the caller's stable int64 ids, searched by
cosine (exact on numpy, torch or faiss-gpu bodies; faiss HNSW or IVF from a size on, with id
filters), each saved to and loaded from one snapshot file. It knows nothing of what the ids
name: the memory keeps one space per kind of thing it finds (memory/vector_memory.py)."""
from ..errors import VectorError
from .bodies import RowsDevice, resolve_rows_device
from .space import VectorSpace

__all__ = ["RowsDevice", "VectorError", "VectorSpace", "resolve_rows_device"]
