"""The semantic part of the embed stage: embed the frames that passed the gates (one batch
across cameras), run each camera's online committer, and turn its decisions into pending
moments (the embed stage, index/embed_stage.py, runs it on its thread).

A kept frame is also handed to the perception feed when there is one (index/perceive.py): what it
finds commits with the moment, and a change of the text on screen there makes the frame start an
event too (the feed marks it when the results come back, before the commit).

The committer holds at most one frame per camera (the newest of a run of similar frames). So
that a crash loses nothing, the held frame's JPEG is written before each commit that records
the committer's state (which holds its embedding); when the frame is later dropped, its file
goes with that later commit.
"""
from __future__ import annotations

from collections import defaultdict
from concurrent.futures import Executor, Future
from dataclasses import dataclass, replace

import numpy as np

from ..config import EngineConfig
from ..gate import GateRecord, is_local_change
from ..ingest import Pose
from ..memory import CommitBatch, GateSample, PendingMoment, Store, camera_time
from .dedup_bodies import make_body as make_dedup_body
from .device_path import embed_on_device, is_device_frame
from .online import CommitterState, OnlineCommitter


@dataclass(frozen=True)
class FrameKey:
    """What the committer echoes back for a frame; saved with a held frame (``to_json``)."""

    source_id: int
    t_rel: float
    t_abs: float | None
    pts: int | None
    width: int
    height: int
    gate: GateRecord  # the image gates' statistics (it passed them: dropped_by is None)
    pose: Pose | None = None  # where the camera was (a held frame keeps it across a restart)

    def to_json(self) -> dict:
        g = self.gate
        out = {"source_id": self.source_id, "t_rel": self.t_rel, "t_abs": self.t_abs, "pts": self.pts,
               "width": self.width, "height": self.height,
               "gate": {"lap_var": g.lap_var, "mad": g.mad, "ssim": g.ssim, "hist_corr": g.hist_corr,
                        "tile_mad": g.tile_mad, "tiles_changed": g.tiles_changed, "blurred": g.blurred}}
        if self.pose is not None:
            out["pose"] = self.pose.to_json()
        return out

    @classmethod
    def from_json(cls, d: dict) -> "FrameKey":
        """``to_json()``'s output, or the abbreviated key of version 1 states (s, w, h, g)."""
        if "s" in d:  # version 1
            g = d["g"]
            return cls(int(d["s"]), float(d["t_rel"]), d["t_abs"], d["pts"], int(d["w"]), int(d["h"]),
                       GateRecord(g[0], g[1], g[2], g[3], None))
        g = d["gate"]
        p = d.get("pose")
        return cls(int(d["source_id"]), float(d["t_rel"]), d["t_abs"], d["pts"], int(d["width"]), int(d["height"]),
                   GateRecord(g["lap_var"], g["mad"], g["ssim"], g["hist_corr"], None, g.get("tile_mad"),
                              g.get("tiles_changed"), bool(g.get("blurred", False))),
                   None if p is None else Pose(p["x"], p["y"], p["z"], p["yaw"], p["frame"]))


def read_state(data: dict) -> CommitterState:
    """A committer state from its JSON form (either version)."""
    return CommitterState.from_json(data, key_from_json=FrameKey.from_json)


def load_state(store: Store, camera_id: str) -> CommitterState | None:
    """A camera's committer state as last committed (None: the camera starts fresh)."""
    data = store.sources.commit_state(camera_id)
    return None if data is None else read_state(data)


def sweep_source(store: Store, camera_id: str, source_id: int) -> int:
    """Before resuming a source: remove its frame files that no row and no held frame
    references (memory/sources.py: ``sweep_files``). Returns how many."""
    state = load_state(store, camera_id)
    held = state.held if state is not None else None
    keep = ([store.frames.ref(camera_id, source_id, held.key.t_rel)]
            if held is not None and held.key.source_id == source_id else [])
    return store.sources.sweep_files(source_id, keep)


def _to_host(rgb) -> np.ndarray:
    """A decoded frame's RGB as a contiguous host array (what ``Frame.rgb`` returns)."""
    if hasattr(rgb, "cpu"):
        rgb = rgb.cpu().numpy()
    return np.ascontiguousarray(rgb, dtype=np.uint8)


def _host_rgb(payload: dict) -> np.ndarray:
    """A pending frame's RGB on the host, copied from its device once (then kept in its place)."""
    rgb = payload["rgb"]
    if not isinstance(rgb, np.ndarray):
        rgb = payload["rgb"] = _to_host(rgb)
    return rgb


def _read_rgb(path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def _key(frame, source_id: int, rec: GateRecord) -> FrameKey:
    h, w = frame.shape
    return FrameKey(source_id, frame.t_rel, frame.t_abs, frame.pts, w, h, rec, frame.pose)


def _ident(key: FrameKey) -> tuple:
    return key.source_id, key.t_rel


class SemanticStage:
    def __init__(self, store: Store, embedder, cfg: EngineConfig, encoder: Executor, *, present=None,
                 perception=None, encode_meter=None):
        """``present``: the PresentFeed (index/present.py) offered each frame that passed the
        gates; ``perception``: a PerceptionFeed (index/perceive.py) each kept frame is handed
        to; ``encode_meter``: the JPEG encoder's StageMeter."""
        self.store = store
        self.perception = perception
        self.present = present
        self.encode_meter = encode_meter
        self.embedder = embedder
        self.cfg = cfg
        self.encoder = encoder
        self._committers: dict[str, OnlineCommitter] = {}
        self._payload: dict[tuple, dict] = {}  # (source, t_rel) -> rgb, emb, written: frames not yet decided
        self._scratch: dict[tuple, np.ndarray] = {}  # frame shape -> reused embedder batch (_batch)
        # the dedup similarities' body, on the engine's device (chosen once, like the gates')
        self._dedup = make_dedup_body(cfg.device)

    def _committer(self, cam: str) -> OnlineCommitter:
        c = self._committers.get(cam)
        if c is None:
            state = load_state(self.store, cam)
            c = self._committers[cam] = OnlineCommitter(self.cfg.commit, state, body=self._dedup)
            held = state.held if state is not None else None
            if held is not None:  # held before a restart: its JPEG was written before that commit
                sid, t_rel = _ident(held.key)
                self._payload[(sid, t_rel)] = {"rgb": None, "emb": held.embedding.astype(np.float32),
                                               "written": True, "ref": self.store.frames.ref(cam, sid, t_rel)}
        return c

    def undecided(self, gated: dict[str, float]) -> dict[str, float]:
        """Per camera, the time from which frames may still be kept: its held frame's, else
        its last gated sample's (``gated``: camera -> that time)."""
        out = dict(gated)
        for cam, c in self._committers.items():
            if c.held_t is not None:
                out[cam] = c.held_t
        return out

    def reset(self, cameras) -> None:
        """Forget cameras' committers (after a deletion cleared their saved state)."""
        for cam in cameras:
            self._committers.pop(cam, None)

    def process(self, passed: list, batch: CommitBatch, writes: list[Future]) -> list[tuple[int, str | None]]:
        """``passed``: GatedFrames (index/records.py) in time order per camera. Returns
        (source_id, reason) per decision made now (reason None: kept)."""
        if not passed:
            return []
        rgbs = [self._decoded(g.frame) for g in passed]  # host arrays, or a GPU decoder's tensors
        if self.present is not None:
            for g, rgb in zip(passed, rgbs):
                self.present.gated(g.frame.camera_id, g.frame.t_rel, g.frame.t_abs, rgb)
        embs = np.empty((len(passed), 0), np.float32)
        by_shape: dict[tuple, list[int]] = defaultdict(list)
        for i, rgb in enumerate(rgbs):
            by_shape[(tuple(rgb.shape), self._on_device(rgb))].append(i)
        per_frame = getattr(self.embedder, "per_frame", False)
        for (shape, on_device), idx in by_shape.items():  # one embedder call per frame size, across cameras
            if on_device:  # embedded where the decoder left them; only the rows come back
                out = embed_on_device(self.embedder, [rgbs[i] for i in idx])[1]
            elif per_frame:  # views of the frames, no stacked copy (a 720p frame is 2.7 MB)
                out = np.concatenate([self.embedder.embed_images(rgbs[i][None]) for i in idx])
            else:
                out = self.embedder.embed_images(self._batch(shape, [rgbs[i] for i in idx]))
            if embs.shape[1] == 0:
                embs = np.empty((len(passed), out.shape[1]), np.float32)
            embs[idx] = out
        by_camera: dict[str, list[int]] = defaultdict(list)
        keys, ts, keeps = [], [], []
        for i, g in enumerate(passed):
            f, sid, rec = g.frame, g.source_id, g.record
            key = _key(f, sid, rec)
            keys.append(key)
            self._payload[_ident(key)] = {"rgb": rgbs[i], "emb": embs[i], "written": False,
                                          "ref": self.store.frames.ref(f.camera_id, sid, f.t_rel)}
            ts.append(camera_time(f.t_rel, f.t_abs))
            # a view's one blurred moment (the gates' view rule) is never a semantic duplicate either
            keeps.append(rec.blurred or (self.cfg.commit.keep_local_changes and is_local_change(self.cfg.gate, rec)))
            by_camera[f.camera_id].append(i)
        out = []
        for cam, idx in by_camera.items():  # one similarity call per camera (on CUDA, one launch)
            decisions = self._committer(cam).push_batch([ts[i] for i in idx], embs[idx], [keys[i] for i in idx],
                                                        [keeps[i] for i in idx])
            out += [self._apply(cam, d, batch, writes) for d in decisions]
        return out

    def _decoded(self, frame):
        """A passed frame's RGB: a GPU decoder's tensor stays on its device when the embedder
        takes tensors (the device path's rule, index/device_path.py: only kept frames are copied
        to the host, by ``_host_rgb``); otherwise the host array ``Frame.rgb`` makes."""
        rgb = frame.decoded_rgb()
        return rgb if self._on_device(rgb) else _to_host(rgb)

    def _on_device(self, rgb) -> bool:
        return is_device_frame(rgb, self.embedder)

    def _batch(self, shape: tuple, frames: list) -> np.ndarray:
        """N x H x W x 3 of ``frames`` for the embedder: one frame as a view, several stacked
        into an array reused from call to call (a fresh one costs its page faults every batch;
        embedders read their input during the call and keep nothing of it)."""
        if len(frames) == 1:
            return frames[0][None]
        buf = self._scratch.get(shape)
        if buf is None or len(buf) < len(frames):
            self._scratch.clear()  # the frame size changed, or a larger batch came: keep one
            buf = self._scratch[shape] = np.empty((max(len(frames), 16), *shape), np.uint8)
        return np.stack(frames, out=buf[: len(frames)])

    def finish(self, cam: str, batch: CommitBatch, writes: list[Future]) -> list[tuple[int, str | None]]:
        """A source of this camera ended: decide its held frame and close its open event."""
        out = [self._apply(cam, d, batch, writes) for d in self._committer(cam).finish()]
        batch.close_events.add(cam)
        return out

    def checkpoint(self, batch: CommitBatch, writes: list[Future]) -> None:
        """Before a hand-over: every held frame's JPEG is on its way, every state is saved."""
        for cam, c in self._committers.items():
            batch.commit_states[cam] = c.state()
        for p in self._payload.values():  # what is still here is held (decisions pop their frames)
            if not p["written"]:
                p["written"] = True
                writes.append(self._submit_write(p["ref"], _host_rgb(p)))

    def _write(self, ref: str, rgb: np.ndarray) -> None:
        """A kept frame's JPEG (on the encoder's pool)."""
        if self.encode_meter is None:
            self.store.frames.write(ref, rgb, self.cfg.store.jpeg_quality)
            return
        self.encode_meter.waiting(-1)
        with self.encode_meter.busy(items=1):
            self.store.frames.write(ref, rgb, self.cfg.store.jpeg_quality)

    def _submit_write(self, ref: str, rgb: np.ndarray) -> Future:
        if self.encode_meter is not None:
            self.encode_meter.waiting(1)
        return self.encoder.submit(self._write, ref, rgb)

    def _apply(self, cam: str, d, batch: CommitBatch, writes: list[Future]) -> tuple[int, str | None]:
        key = d.key
        sid, t_rel = _ident(key)
        p = self._payload.pop((sid, t_rel), None)
        ref = self.store.frames.ref(cam, sid, t_rel)
        g = key.gate
        if not d.kept:
            batch.samples.append(GateSample(cam, sid, t_rel, replace(g, dropped_by=d.reason or "dedup")))
            # Its file may exist even when this run never wrote it: a run killed after writing a
            # held frame but before the commit recording it leaves the file without any state.
            batch.discard_files.append(ref)
            return sid, d.reason or "dedup"
        emb = p["emb"]
        if not p["written"]:
            writes.append(self._submit_write(ref, _host_rgb(p)))
        pending = PendingMoment(cam, sid, t_rel, key.t_abs, key.pts, ref, key.width, key.height, g,
                                embedding=emb, event_start=d.event_start, pose=key.pose)
        batch.moments.append(pending)
        if self.perception is not None:  # a frame held before a restart is read back from its file
            rgb = _host_rgb(p) if p["rgb"] is not None else (lambda: _read_rgb(self.store.frames.path(ref)))
            self.perception.kept(cam, pending.t, rgb, (sid, t_rel))
        return sid, None
