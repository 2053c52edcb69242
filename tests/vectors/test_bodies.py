"""The device rule and the torch body's row updates (vam_engine/vectors/bodies.py): the rule the
vector spaces and the event forest share, and the in-place row writes the forest makes."""
from __future__ import annotations

import numpy as np
import pytest

from vam_engine.device import cuda_available
from vam_engine.vectors import RowsDevice, VectorError, resolve_rows_device
from vam_engine.vectors import bodies as vector_bodies


def test_device_rule():
    assert resolve_rows_device("cpu") == RowsDevice("numpy")
    assert resolve_rows_device("torch-cpu") == RowsDevice("torch", "cpu")
    assert isinstance(resolve_rows_device("cpu").body(8), vector_bodies.NumpyRows)
    if not cuda_available():
        assert resolve_rows_device("auto").kind in ("numpy", "faiss-gpu")
    with pytest.raises(VectorError, match="unknown vector device 'gpu0'"):
        resolve_rows_device("gpu0")


def test_torch_rows_put_rows_in_any_order_and_beyond_the_end(rng):
    pytest.importorskip("torch")
    body = resolve_rows_device("torch-cpu").body(6, "float32")
    assert body.name == "torch-cpu-float32" and not body.approx
    want = np.zeros((3000, 6), np.float32)
    first = rng.standard_normal((10, 6)).astype(np.float32)
    body.write(0, first)
    want[:10] = first
    for _ in range(5):
        rows = rng.choice(3000, int(rng.integers(1, 200)), replace=False).astype(np.int64)
        vecs = rng.standard_normal((len(rows), 6)).astype(np.float32)
        body.put_rows(rows, vecs)
        want[rows] = vecs
        assert body.t.shape[0] > rows.max()
    written = np.flatnonzero(np.any(want != 0, axis=1))
    np.testing.assert_array_equal(body.t[written].numpy(), want[written])
    body.put_rows(np.empty(0, np.int64), np.empty((0, 6), np.float32))   # nothing: no error
    with pytest.raises(VectorError, match="unknown dtype name 'float33'"):
        resolve_rows_device("torch-cpu").body(6, "float33")
