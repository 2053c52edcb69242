"""Random unit vectors for the vector and search tests."""
from __future__ import annotations

import numpy as np


def unit_rows(a, dtype=None) -> np.ndarray:
    """Each row of ``a`` (``a`` itself when 1-D) scaled to length 1, in ``dtype`` (default: ``a``'s
    float type). Many random rows at once; ``vam_engine.numerics.unit`` checks and scales one
    vector the engine was given."""
    a = np.asarray(a)
    a = a.astype(dtype if dtype is not None else np.result_type(a.dtype, np.float32))
    return a / np.linalg.norm(a, axis=-1, keepdims=True)
