"""The device path (docs/gpu.md, "The device path"): one camera's batch of decoded frames, held on
one device (the NVDEC and DALI GPU bodies' CUDA tensors), through the gates, the embedder and the
semantic dedup, with only the kept frames' pixels coming back to the host, as JPEG (encoded on the
device when torchvision imports) or as RGB.

Device-agnostic torch: the same code runs on CPU tensors (the tests) and CUDA tensors; the device
is chosen once, at construction, and a batch on another device is an error naming both.

What crosses to the host per batch, and why:

- the gate statistics, downloaded by the gate body (``gate.make_body``: the Triton body reads the
  device frames in place): per-frame scalars, the 64 x 64 thumbnails and 64-bin histograms, about
  17 KB a frame against 8 MB of gray and RGB at 1080p. The cascade's rules (the view rule, the
  sharpness history) are host code over them.
- the embeddings of the frames the gates passed (dim float32 each, 2 KB at 512), in one copy: the
  committer's rules and state are host numpy (its dedup body, the Triton kernel on CUDA, uploads
  the rows it compares again; kept rows are what the memory stores anyway).
- the kept frames, once each, when they are kept (JPEG bytes or RGB).

Frames dropped by the gates or by the dedup never leave the device. Every copy this module makes
goes through one function, ``DevicePath.host`` (tests/index/test_device_path.py replaces it to
count the copies under torch's fake CUDA tensors). No ``.item()``, ``.tolist()`` or Python
indexing of a device tensor is made: the fake-CUDA check runs this module on a CPU-only torch,
where indexing a fake CUDA tensor fails, so ``select``/``narrow``/``stack`` are used.

A caller with one camera's frames calls ``DevicePath.run(DeviceFrameBatch.from_frames(frames))``
per batch and ``finish(camera_id)`` at a source's end or a gap (see the class). The pipeline's
embed stage takes the same route for a GPU decoder's frames with its own committers
(``embed_on_device`` and ``is_device_frame`` here; index/semantic.py).
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..config import CommitConfig
from ..errors import VamError
from ..gate import GateCascade, GateRecord, is_local_change
from .online import Decision, OnlineCommitter


class DevicePathError(VamError, ValueError):
    """A batch the device path cannot take; the message names the input and what is wrong."""


def _same_device(a, b) -> bool:
    """``cuda`` and ``cuda:0`` are one device when the index is left open."""
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


@dataclass(frozen=True)
class DeviceFrameBatch:
    """One camera's sampled frames in time order, on one device: ``gray`` N x H x W and ``rgb``
    N x H x W x 3 uint8 torch tensors, ``times`` their seconds on the camera's axis (host floats,
    strictly increasing; from PTS, never from an index), ``t_abs`` unix seconds when known."""

    camera_id: str
    gray: Any
    rgb: Any
    times: tuple[float, ...]
    t_abs: tuple[float | None, ...] | None = None

    def __post_init__(self):
        import torch

        for name, x, nd in (("gray", self.gray, 3), ("rgb", self.rgb, 4)):
            if not isinstance(x, torch.Tensor):
                raise DevicePathError(f"DeviceFrameBatch.{name} must be a torch tensor, got {type(x).__name__}")
            if x.dtype != torch.uint8 or x.ndim != nd:
                want = "N x H x W" if nd == 3 else "N x H x W x 3"
                raise DevicePathError(f"DeviceFrameBatch.{name} must be {want} uint8, got {x.dtype} {tuple(x.shape)}")
        if self.rgb.shape[-1] != 3 or tuple(self.rgb.shape[:3]) != tuple(self.gray.shape):
            raise DevicePathError(f"DeviceFrameBatch.rgb {tuple(self.rgb.shape)} does not match gray "
                                  f"{tuple(self.gray.shape)} (N x H x W x 3)")
        if self.gray.device != self.rgb.device:
            raise DevicePathError(f"DeviceFrameBatch: gray is on {self.gray.device}, rgb on {self.rgb.device}")
        object.__setattr__(self, "times", tuple(float(t) for t in self.times))
        if len(self.times) != len(self.gray):
            raise DevicePathError(f"DeviceFrameBatch: {len(self.times)} times for {len(self.gray)} frames")
        for a, b in zip(self.times, self.times[1:]):
            if not b > a:
                raise DevicePathError(f"DeviceFrameBatch.times must increase strictly: {b} after {a}")
        if any(not math.isfinite(t) for t in self.times):
            raise DevicePathError(f"DeviceFrameBatch.times must be finite, got {self.times}")
        if self.t_abs is not None and len(self.t_abs) != len(self.times):
            raise DevicePathError(f"DeviceFrameBatch: {len(self.t_abs)} t_abs for {len(self.times)} frames")

    @property
    def device(self):
        return self.gray.device

    def __len__(self) -> int:
        return len(self.times)

    @classmethod
    def from_frames(cls, frames: Sequence[Any], times: Sequence[float] | None = None) -> "DeviceFrameBatch":
        """A batch of one camera's decoded frames (``ingest.Frame``: a GPU body's gray and
        ``decoded_rgb()`` are CUDA tensors, stacked on the device; a CPU body's numpy planes become
        CPU tensors). ``times`` default to the frames' ``t_rel`` (give the camera's axis, e.g.
        ``t_abs`` where known, when that is what the committer runs on)."""
        import torch

        if not frames:
            raise DevicePathError("DeviceFrameBatch.from_frames: no frames")
        cams = {f.camera_id for f in frames}
        if len(cams) != 1:
            raise DevicePathError(f"DeviceFrameBatch.from_frames: frames of several cameras {sorted(cams)}")

        def tensor(x):
            return x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x))

        return cls(frames[0].camera_id, torch.stack([tensor(f.gray) for f in frames]),
                   torch.stack([tensor(f.decoded_rgb()) for f in frames]),
                   tuple(f.t_rel for f in frames) if times is None else tuple(times),
                   tuple(f.t_abs for f in frames))


@dataclass
class KeptFrame:
    """A frame the dedup kept, now on the host: its JPEG (``output="jpeg"``) or RGB."""

    t: float  # on the camera's axis, as given in the batch
    t_abs: float | None
    batch: int  # the ``run`` call it came in (a held frame is kept in a later one)
    index: int  # its index in that batch
    gate: GateRecord
    decision: Decision
    embedding: np.ndarray  # float32, unit norm
    jpeg: bytes | None = None
    rgb: np.ndarray | None = None  # H x W x 3 uint8


@dataclass
class DevicePathResult:
    """What one ``run`` (or ``finish``) decided. ``records``: one gate record per frame of the
    batch (empty for ``finish``); ``decisions``: the committer's, in order (their keys are the
    path's slots: frames of this batch or held from earlier ones); ``kept``: the kept frames, on the
    host; ``embeddings``: the rows of the frames the gates passed (``passed``, batch indices; -1
    for a held sample from an earlier batch), on the batch's device."""

    records: list[GateRecord]
    decisions: list[Decision]
    kept: list[KeptFrame]
    passed: list[int] = field(default_factory=list)
    embeddings: Any = None


@dataclass(eq=False)
class _Slot:
    """A frame between the gates and its dedup decision: its RGB stays on the device (a clone
    once it outlives its batch, so the batch's tensor can go)."""

    batch: int
    index: int
    t: float
    t_abs: float | None
    rgb: Any
    record: GateRecord | None = None
    embedding: np.ndarray | None = None
    own: bool = False  # rgb is its own clone, not a view of its batch

    def to_json(self):
        """The committer's state serialises its held frame's key."""
        return {"batch": self.batch, "index": self.index, "t": self.t}


def _host_copy(x) -> np.ndarray:
    """The one copy to the host: a tensor's bytes as numpy."""
    return x.cpu().numpy()


def is_device_frame(rgb, embedder) -> bool:
    """Whether a decoded frame (``Frame.decoded_rgb()``) can be embedded where it lies: it is a
    torch tensor (a GPU decoder's) and the embedder takes tensors (``embed_tensor``)."""
    return hasattr(embedder, "embed_tensor") and type(rgb).__module__.startswith("torch") and hasattr(rgb, "cpu")


def embed_on_device(embedder, rgbs: Sequence[Any], host: Callable[[Any], np.ndarray] = _host_copy):
    """H x W x 3 uint8 tensors of one size, on one device, embedded there: (the unit rows on the
    device, their one copy on the host as float32 numpy). Used by ``DevicePath`` and by the
    pipeline's embed stage for a GPU decoder's frames (index/semantic.py)."""
    import torch

    emb_dev = embedder.embed_tensor(torch.stack(list(rgbs)))
    return emb_dev, np.asarray(host(emb_dev), np.float32)


def _device_jpeg_encoder():
    """torchvision's ``encode_jpeg`` (nvjpeg on CUDA tensors), or None when it does not import."""
    try:
        from torchvision.io import encode_jpeg
    except Exception:  # noqa: BLE001 - missing, or built for another torch: the host encoder
        return None
    return encode_jpeg


class DevicePath:
    """Gates -> embedding -> dedup for batches on one device; see the module docstring.

    ``gates``: the camera gates (a ``GateCascade`` over ``gate.make_body(device)``: on CUDA the
    Triton body reads the frames on the device). ``embedder``: an image embedder with
    ``embed_tensor`` (``TorchImageEmbedder``: unit rows left on the device). ``commit``: the commit
    config; ``dedup_body``: the committers' similarity body (``index.dedup_bodies.make_body``).
    ``committers``: camera -> OnlineCommitter, shared with the caller (created here when missing, so
    a stage keeps persisting their state as it does). ``output``: ``"jpeg"`` (device-encoded with
    torchvision on CUDA, else PIL on the host) or ``"rgb"``. ``host``: the copy to the host.
    """

    def __init__(self, gates: GateCascade, embedder, commit: CommitConfig | None = None, dedup_body=None, *,
                 device: str = "cpu", output: str = "jpeg", jpeg_quality: int = 90,
                 committers: dict[str, OnlineCommitter] | None = None,
                 host: Callable[[Any], np.ndarray] = _host_copy):
        import torch

        if output not in ("jpeg", "rgb"):
            raise DevicePathError(f"DevicePath output must be 'jpeg' or 'rgb', got {output!r}")
        if not 1 <= int(jpeg_quality) <= 100:
            raise DevicePathError(f"DevicePath jpeg_quality must be 1..100, got {jpeg_quality}")
        if not hasattr(embedder, "embed_tensor"):
            raise DevicePathError(f"DevicePath: the embedder {getattr(embedder, 'name', embedder)!r} has no "
                                  f"embed_tensor (the torch body has; onnx and tensorrt take host frames)")
        self.gates = gates
        self.embedder = embedder
        self.commit = commit if commit is not None else CommitConfig()
        self.dedup_body = dedup_body
        self.device = torch.device(device)
        self.output = output
        self.jpeg_quality = int(jpeg_quality)
        self.committers = {} if committers is None else committers
        self.host = host
        # chosen once: nvjpeg through torchvision for CUDA frames, else the host encoder
        self._encode = _device_jpeg_encoder() if output == "jpeg" and self.device.type == "cuda" else None
        self.jpeg_on = "device" if self._encode is not None else "host"
        self._batches = 0
        self._pending: dict[str, list[_Slot]] = {}  # camera -> slots pushed to its committer, undecided

    def committer(self, camera_id: str) -> OnlineCommitter:
        c = self.committers.get(camera_id)
        if c is None:
            c = self.committers[camera_id] = OnlineCommitter(self.commit, body=self.dedup_body)
        return c

    # -- the path ----------------------------------------------------------------------------------
    def run(self, batch: DeviceFrameBatch) -> DevicePathResult:
        """Gate, embed and dedup one camera's batch; the kept frames come back to the host."""
        if not isinstance(batch, DeviceFrameBatch):
            raise DevicePathError(f"DevicePath.run takes a DeviceFrameBatch, got {type(batch).__name__}")
        if not _same_device(batch.device, self.device):
            raise DevicePathError(f"DevicePath: batch of camera {batch.camera_id!r} is on {batch.device}, "
                                  f"the path on {self.device}")
        seq = self._batches
        self._batches += 1
        cam = batch.camera_id
        n = len(batch)
        slots = [_Slot(seq, i, batch.times[i], None if batch.t_abs is None else batch.t_abs[i],
                       batch.rgb.select(0, i)) for i in range(n)]
        # the planes are unbound, not indexed: views, and what fake CUDA tensors run
        run = self.gates.gate(cam, list(batch.gray.unbind(0)), batch.times, slots)
        before: dict[int, list] = {}
        for r in run.released:
            before.setdefault(r.before, []).append(r)
        passed: list[_Slot] = []
        for i, (slot, rec) in enumerate(zip(slots, run.records)):
            for r in before.pop(i, ()):  # held samples the view rule kept before frame i's decision
                passed.append(self._released(r))
            slot.record = rec
            if rec.dropped_by is None:
                passed.append(slot)
        for rs in before.values():
            passed += [self._released(r) for r in rs]
        res = self._commit(cam, passed)
        res.records = run.records
        self._outlive(cam)
        return res

    def finish(self, camera_id: str) -> DevicePathResult:
        """A source of the camera ended (or a gap): the gates' held sample and the committer's
        held frame are decided (kept when their rules say so) and come back like a batch's.
        The pixels of a held frame live on the device only: a committer restored from a saved
        state holds a key without them, so a resumed run gates again from the hold's start (as
        the pipeline does, ``GateCascade.hold_start``) rather than restoring a held frame here."""
        passed = [self._released(r) for r in self.gates.end(camera_id)]
        res = self._commit(camera_id, passed, finish=True)
        self._pending.pop(camera_id, None)
        return res

    @staticmethod
    def _released(r) -> _Slot:
        slot = r.key
        slot.record = r.record
        return slot

    def _commit(self, cam: str, passed: list[_Slot], finish: bool = False) -> DevicePathResult:
        c = self.committer(cam)
        decisions: list[Decision] = []
        emb_dev = None
        if passed:
            # the one copy of the batch's embeddings (module doc)
            emb_dev, embs = embed_on_device(self.embedder, [s.rgb for s in passed], self.host)
            for s, e in zip(passed, embs):
                s.embedding = e
            keeps = [s.record.blurred or (self.commit.keep_local_changes and is_local_change(self.gates.cfg, s.record))
                     for s in passed]
            decisions += c.push_batch([s.t for s in passed], embs, passed, keeps)
            self._pending.setdefault(cam, []).extend(passed)
        if finish:
            decisions += c.finish()
        decided = {id(d.key) for d in decisions}
        self._pending[cam] = [s for s in self._pending.get(cam, []) if id(s) not in decided]
        kept = self._download([d for d in decisions if d.kept])
        now = -1 if finish else self._batches - 1  # finish has no batch of its own
        return DevicePathResult([], decisions, kept, [s.index if s.batch == now else -1 for s in passed], emb_dev)

    def _outlive(self, cam: str) -> None:
        """Frames that wait past their batch (the committer's held frame, the gates' held sample)
        keep a clone of their RGB, not a view of the whole batch's tensor."""
        waiting = list(self._pending.get(cam, []))
        held = self.gates.held_key(cam)
        if held is not None:
            waiting.append(held)
        for s in waiting:
            if not s.own:
                s.rgb, s.own = s.rgb.clone(), True

    def _download(self, decisions: list[Decision]) -> list[KeptFrame]:
        """The kept frames' pixels to the host: one copy per frame size (RGB), or the device
        encoder's JPEG bytes; PIL on the host otherwise."""
        import torch

        out = [KeptFrame(d.key.t, d.key.t_abs, d.key.batch, d.key.index, d.key.record, d,
                         np.asarray(d.key.embedding, np.float32)) for d in decisions]
        if not out:
            return out
        if self._encode is not None:
            chw = [d.key.rgb.movedim(2, 0).clone(memory_format=torch.contiguous_format) for d in decisions]
            encoded = self._encode(chw, quality=self.jpeg_quality)
            for k, data in zip(out, encoded):
                k.jpeg = self.host(data).tobytes()
            return out
        by_shape: dict[tuple, list[int]] = {}
        for j, d in enumerate(decisions):
            by_shape.setdefault(tuple(d.key.rgb.shape), []).append(j)
        for idx in by_shape.values():
            rgbs = self.host(torch.stack([decisions[j].key.rgb for j in idx]))
            for j, rgb in zip(idx, rgbs):
                out[j].rgb = np.ascontiguousarray(rgb, np.uint8)
        if self.output == "jpeg":
            from PIL import Image

            for k in out:
                buf = io.BytesIO()
                Image.fromarray(k.rgb).save(buf, format="JPEG", quality=self.jpeg_quality)
                k.jpeg, k.rgb = buf.getvalue(), None
        return out
