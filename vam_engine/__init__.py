"""vam_engine: a streaming visual-memory engine."""
__version__ = "0.1.0"
