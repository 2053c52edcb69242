"""Snapshots of a vector space (vectors/space.py) in one file: the sections (ids, vectors, ANN
labels, the serialized faiss index), then a JSON trailer with seq, dim, model_id, kind and each
section's offset, size and CRC32. Written to a temporary name, fsynced and renamed into place,
so a reader sees the old file or the new one, never a mix; ``snapshot_info`` reads the trailer
alone. The space hands its rows over as ``SpaceContents`` and takes them back the same way."""
from __future__ import annotations

import json
import math
import os
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import VectorError
from .bodies import faiss_module
from .index import Ann

_MAGIC = b"VAMVEC\x01\n"
_END = b"VAMVEND1"
_FORMAT = 1
_TRAILER = struct.Struct("<Q8s")


@dataclass(frozen=True)
class SpaceContents:
    """What a snapshot holds of a space: its rows in row order and, when it has one, its ANN
    index with each row's label in it. Saving, the arrays are views of the space's own (its
    mutations wait meanwhile)."""

    name: str
    dim: int
    model_id: str
    index_setting: str  # the space's cfg.index ("flat", "ivf", "hnsw", "auto")
    ids: np.ndarray  # (n,) int64
    vectors: np.ndarray  # (n, dim) float32, normalized
    ann: Ann | None = None
    row_labels: np.ndarray | None = None  # (n,) int64: each row's label in ``ann``


def save(contents: SpaceContents, path, seq: int) -> None:
    """Write a snapshot of ``contents`` covering change-log position ``seq`` to ``path``
    atomically: a temporary file, fsynced, renamed into place (``sync_directory`` then makes
    the rename durable)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    n = len(contents.ids)
    ann = contents.ann
    sections: list[dict] = []
    try:
        with open(tmp, "wb") as f:
            f.write(_MAGIC)

            def put(name: str, arr: np.ndarray) -> None:
                mv = memoryview(np.ascontiguousarray(arr).reshape(-1)).cast("B")  # 1-D: an emptied space (0 x dim) too
                sections.append({"name": name, "offset": f.tell(), "nbytes": mv.nbytes,
                                 "crc32": zlib.crc32(mv)})
                f.write(mv)

            put("ids", contents.ids)
            put("vectors", contents.vectors)
            meta = None
            if ann is not None:
                put("row_labels", contents.row_labels)
                put("label_ids", ann.label_id[:ann.ntotal])
                off, crc = f.tell(), [0]

                def write(b: bytes) -> int:
                    crc[0] = zlib.crc32(b, crc[0])
                    f.write(b)
                    return len(b)

                faiss = faiss_module()
                faiss.write_index(ann.index, faiss.PyCallbackIOWriter(write))
                sections.append({"name": "faiss", "offset": off, "nbytes": f.tell() - off,
                                 "crc32": crc[0]})
                meta = {"kind": ann.kind, "ntotal": ann.ntotal, "tombstones": ann.tombstones,
                        "n_built": ann.n_built, "nlist": ann.nlist}
            header = {"format": _FORMAT, "name": contents.name, "dim": contents.dim, "model_id": contents.model_id,
                      "kind": contents.index_setting, "n": n, "seq": int(seq), "saved_at": time.time(),
                      "ann": meta, "sections": sections}
            hb = json.dumps(header).encode()
            f.write(hb)
            f.write(_TRAILER.pack(len(hb), _END))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        if isinstance(e, OSError):
            raise VectorError(f"{path}: cannot write vector snapshot: {e}") from e
        raise


def sync_directory(path) -> None:
    """Make the rename of a snapshot at ``path`` durable (best effort)."""
    try:
        fd = os.open(Path(path).parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def read_header(f, path: Path) -> dict:
    size = os.fstat(f.fileno()).st_size
    if size < len(_MAGIC) + _TRAILER.size:
        raise VectorError(f"{path}: not a vector snapshot (truncated: {size} bytes)")
    if f.read(len(_MAGIC)) != _MAGIC:
        raise VectorError(f"{path}: not a vector snapshot (bad magic)")
    f.seek(size - _TRAILER.size)
    hlen, end = _TRAILER.unpack(f.read(_TRAILER.size))
    if end != _END:
        raise VectorError(f"{path}: vector snapshot truncated or corrupt (no end marker)")
    hstart = size - _TRAILER.size - hlen
    if hlen > size or hstart < len(_MAGIC):
        raise VectorError(f"{path}: vector snapshot corrupt (bad header length {hlen})")
    f.seek(hstart)
    try:
        h = json.loads(f.read(hlen))
    except ValueError as e:
        raise VectorError(f"{path}: vector snapshot corrupt (header: {e})") from None
    try:
        if h["format"] != _FORMAT:
            raise VectorError(f"{path}: vector snapshot format {h['format']} (this engine reads {_FORMAT})")
        n, dim = int(h["n"]), int(h["dim"])
        int(h["seq"])
        if n < 0 or dim < 1:
            raise ValueError("bad n or dim")
        for s in h["sections"]:
            if s["offset"] < len(_MAGIC) or s["nbytes"] < 0 or s["offset"] + s["nbytes"] > hstart:
                raise ValueError(f"section {s['name']} outside the file")
    except VectorError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise VectorError(f"{path}: vector snapshot corrupt (header: {e!r})") from None
    return h


def snapshot_info(path) -> dict:
    """The JSON header of a snapshot (seq, dim, model_id, kind, n, ...), read cheaply."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return read_header(f, path)
    except OSError as e:
        raise VectorError(f"{path}: cannot read vector snapshot: {e}") from None


def load(path, new_space: Callable, *, name: str | None = None, dim: int | None = None,
         model_id: str | None = None) -> tuple:
    """Read a snapshot written by ``save``: (space, its SpaceContents, seq). ``new_space(name,
    dim, model_id)`` makes the empty space the snapshot is read into; its ANN index is read only
    when it is of the kind that space builds (``space.ann_kind``). VectorError naming the file
    when it is missing, truncated or corrupt, or when ``name``/``dim``/``model_id`` are given
    and differ from the snapshot's."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return _load(f, path, new_space, name, dim, model_id)
    except OSError as e:
        raise VectorError(f"{path}: cannot read vector snapshot: {e}") from None
    except (ValueError, TypeError, KeyError, IndexError, RuntimeError, struct.error) as e:
        raise VectorError(f"{path}: vector snapshot corrupt ({type(e).__name__}: {e})") from None
    except MemoryError:
        raise VectorError(f"{path}: vector snapshot too large for memory (or corrupt sizes)") from None


def _load(f, path, new_space, name, dim, model_id):
    h = read_header(f, path)
    if dim is not None and int(h["dim"]) != int(dim):
        raise VectorError(f"{path}: snapshot holds {h['dim']}-d vectors, expected {dim}")
    if model_id is not None and h.get("model_id", "") != model_id:
        raise VectorError(f"{path}: snapshot was made with model {h.get('model_id')!r}, expected {model_id!r}")
    if name is not None and h.get("name") != name:
        raise VectorError(f"{path}: snapshot is of space {h.get('name')!r}, expected {name!r}")
    sec = {s["name"]: s for s in h["sections"]}
    n, d = int(h["n"]), int(h["dim"])

    def corrupt(why: str) -> VectorError:
        return VectorError(f"{path}: vector snapshot corrupt ({why})")

    def read(key: str, shape, dtype) -> np.ndarray:
        if key not in sec:
            raise corrupt(f"no {key} section")
        s = sec[key]
        need = math.prod(shape) * np.dtype(dtype).itemsize
        if need != s["nbytes"]:  # section sizes are bounded by the file's: allocation is safe
            raise corrupt(f"{key}: {s['nbytes']} bytes, expected {need}")
        arr = np.empty(shape, dtype)
        f.seek(s["offset"])
        mv = memoryview(arr.reshape(-1)).cast("B")  # a view: 1-D casts for an emptied space (0 x dim) too
        got = f.readinto(mv)
        if got != arr.nbytes:
            raise corrupt(f"{key}: truncated")
        if zlib.crc32(mv) != s["crc32"]:
            raise corrupt(f"{key}: checksum mismatch")
        return arr

    space = new_space(h.get("name") or name or path.stem, d, h.get("model_id", ""))
    ids = read("ids", (n,), np.int64)
    vecs = read("vectors", (n, d), np.float32)
    if n:
        if (ids < 0).any() or len(np.unique(ids)) != n:
            raise corrupt("negative or duplicate ids")
        if not np.isfinite(vecs).all():
            raise corrupt("non-finite vectors")
    ann, labels = None, None
    meta = h.get("ann")
    if meta and n and meta.get("kind") == space.ann_kind:
        ann, labels = _load_ann(f, sec, meta, n, d, ids, read, corrupt)
    contents = SpaceContents(space.name, d, space.model_id, h.get("kind", ""), ids, vecs, ann, labels)
    return space, contents, int(h["seq"])


def _load_ann(f, sec, meta, n, d, ids, read, corrupt):
    try:
        ntotal = int(meta["ntotal"])
        kind = meta["kind"]
    except (KeyError, TypeError, ValueError) as e:
        raise corrupt(f"ann metadata: {e!r}") from None
    labels = read("row_labels", (n,), np.int64)
    label_id = read("label_ids", (ntotal,), np.int64)
    if "faiss" not in sec:
        raise corrupt("no faiss section")
    s = sec["faiss"]
    f.seek(s["offset"])  # verify the checksum before faiss parses a byte of it
    crc, left = 0, s["nbytes"]
    while left:
        b = f.read(min(left, 1 << 22))
        if not b:
            raise corrupt("faiss: truncated")
        crc = zlib.crc32(b, crc)
        left -= len(b)
    if crc != s["crc32"]:
        raise corrupt("faiss: checksum mismatch")
    f.seek(s["offset"])
    left = [s["nbytes"]]

    def reader(size: int) -> bytes:
        b = f.read(min(size, left[0]))
        left[0] -= len(b)
        return b

    faiss = faiss_module()
    try:
        index = faiss.read_index(faiss.PyCallbackIOReader(reader))
    except RuntimeError as e:
        raise corrupt(f"faiss: {e}") from None
    if index.d != d or index.ntotal != ntotal:
        raise corrupt(f"faiss index is {index.d}-d with {index.ntotal} vectors, expected {d}-d with {ntotal}")
    if (labels < 0).any() or (labels >= ntotal).any() or not np.array_equal(label_id[labels], ids):
        raise corrupt("ann labels do not match the ids")
    nlist = int(faiss.extract_index_ivf(index).nlist) if kind == "ivf" else int(meta.get("nlist") or 0)
    return Ann.restore(kind, d, index, nlist, labels, ids, ntotal, int(meta.get("n_built") or n)), labels
