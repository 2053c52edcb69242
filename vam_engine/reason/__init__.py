"""Reasoning over the memory: the memory writer (documents, forest summaries)."""
from .writer import MemoryWriter, WriterStats

__all__ = ["MemoryWriter", "WriterStats"]
