"""Snapshots of a vector space (memory/vectors.py) in one file: the sections (ids, vectors, ANN
labels, the serialized faiss index), then a JSON trailer with seq, dim, model_id, kind and each
section's offset, size and CRC32. Written to a temporary name, fsynced and renamed into place,
so a reader sees the old file or the new one, never a mix; ``snapshot_info`` reads the trailer
alone."""
from __future__ import annotations

import json
import math
import os
import struct
import threading
import time
import zlib
from pathlib import Path

import numpy as np

from ..config import VectorConfig
from ..errors import VectorError
from .vector_index import Ann
from .vector_bodies import faiss_module

_MAGIC = b"VAMVEC\x01\n"
_END = b"VAMVEND1"
_FORMAT = 1
_TRAILER = struct.Struct("<Q8s")


def save(space, path, seq: int) -> None:
    """Write a snapshot covering change-log position ``seq`` to ``path`` atomically (a
    temporary file, fsynced, renamed into place). Mutations wait; searches do not."""
    path = Path(path)
    if isinstance(seq, bool) or not isinstance(seq, (int, np.integer)) or seq < 0:
        raise space._err(f"snapshot seq must be an integer >= 0, got {seq!r}")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    with space._mut:
        n = space._n
        ann = space._ann
        sections: list[dict] = []
        try:
            with open(tmp, "wb") as f:
                f.write(_MAGIC)

                def put(name: str, arr: np.ndarray) -> None:
                    mv = memoryview(np.ascontiguousarray(arr).reshape(-1)).cast("B")  # 1-D: an emptied space (0 x dim) too
                    sections.append({"name": name, "offset": f.tell(), "nbytes": mv.nbytes,
                                     "crc32": zlib.crc32(mv)})
                    f.write(mv)

                put("ids", space._ids[:n])
                put("vectors", space._vecs[:n])
                meta = None
                if ann is not None:
                    put("row_labels", space._label[:n])
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
                header = {"format": _FORMAT, "name": space.name, "dim": space.dim, "model_id": space.model_id,
                          "kind": space.cfg.index, "n": n, "seq": int(seq), "saved_at": time.time(),
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
    try:  # make the rename durable
        fd = os.open(path.parent, os.O_RDONLY)
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

def load(cls, path, cfg: VectorConfig | None = None, *, device: str = "cpu", name: str | None = None,
         dim: int | None = None, model_id: str | None = None,
         background_build: bool = True) -> tuple:
    """Read a snapshot written by ``save``. Returns (space, seq). VectorError naming the
    file when it is missing, truncated or corrupt, or when ``name``/``dim``/``model_id``
    are given and differ from the snapshot's."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return _load(cls, f, path, cfg, device, name, dim, model_id, background_build)
    except OSError as e:
        raise VectorError(f"{path}: cannot read vector snapshot: {e}") from None
    except (ValueError, TypeError, KeyError, IndexError, RuntimeError, struct.error) as e:
        raise VectorError(f"{path}: vector snapshot corrupt ({type(e).__name__}: {e})") from None
    except MemoryError:
        raise VectorError(f"{path}: vector snapshot too large for memory (or corrupt sizes)") from None

def _load(cls, f, path, cfg, device, name, dim, model_id, background_build):
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

    space = cls(h.get("name") or name or path.stem, d, cfg, device=device, model_id=h.get("model_id", ""),
                background_build=background_build)
    ids = read("ids", (n,), np.int64)
    vecs = read("vectors", (n, d), np.float32)
    if n:
        if (ids < 0).any() or len(np.unique(ids)) != n:
            raise corrupt("negative or duplicate ids")
        if not np.isfinite(vecs).all():
            raise corrupt("non-finite vectors")
    ann = None
    meta = h.get("ann")
    if meta and n and meta.get("kind") == space._ann_kind:
        ann = _load_ann(f, path, sec, meta, n, d, ids, read, corrupt)
    space._vecs, space._ids = vecs, ids
    space._seqno = np.arange(n, dtype=np.int64)
    space._next_seqno = n
    space._label = ann[1] if ann else np.full(n, -1, np.int64)
    space._n = n
    space._map.rebuild(ids)
    if space._backend is not None:
        space._backend.reset(vecs)
    if ann:
        space._ann = ann[0]
    with space._mut:
        build = space._claim_build()
    if build:
        space._run_build()
    return space, int(h["seq"])

def _load_ann(f, path, sec, meta, n, d, ids, read, corrupt):
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
    ann = Ann(kind, d, index, int(meta.get("nlist") or 0))
    if kind == "ivf":
        ann.nlist = int(faiss.extract_index_ivf(index).nlist)
    ann._grow(ntotal)
    ann.ntotal = ntotal
    ann.label_id[:ntotal] = -1
    ann.label_id[labels] = ids
    live = np.zeros(ntotal, bool)
    live[labels] = True
    ann.bits[:] = 0
    packed = np.packbits(live, bitorder="little")
    ann.bits[:len(packed)] = packed
    ann.tombstones = ntotal - n
    ann.n_built = int(meta.get("n_built") or n)
    return ann, labels
