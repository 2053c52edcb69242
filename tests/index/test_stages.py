"""The indexing pipeline as a chain of stages: each reports busy time, items, queue depth and
drops (``Engine.stage_status()``), the figures add up to what was indexed, a stage that falls
behind shows its queue full and the stages before it waiting, and a live sample offered while
the gates stay behind is a drop of the decode stage."""
import threading
import time

import numpy as np
import pytest

from support.clips import write_clip
from vam_engine.engine import Engine
from vam_engine.gate import GateCascade, make_body
from vam_engine.index import IndexPipeline, SourceReport
from vam_engine.index.records import GatedBatch
from vam_engine.ingest import Frame
from vam_engine.memory import CommitBatch, Store
from vam_engine.config import load_config

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 120

CFG = {"ingest": {"fps": 2.0, "batch_size": 4}, "store": {"commit_every": 4, "commit_interval_s": 0.2}}
ORDER = ["decode", "gate", "embed", "encode", "commit"]


def test_stage_figures_add_up_to_what_a_file_indexed(tmp_path):
    clip = tmp_path / "clip.mp4"
    write_clip(clip, [i * 1000 / 30 for i in range(30 * 12)], w=320, h=180, seed=3)
    with Engine(tmp_path / "store", CFG, device="cpu") as eng:
        assert eng.stage_status() == []  # nothing indexed yet: no pipeline
        rep = eng.index_file(str(clip), camera_id="cam")
        st = {s.name: s for s in eng.stage_status()}
        kept = len(eng.moments("cam"))
    assert list(st) == ORDER
    assert st["decode"].items == rep.decoded > 0 and st["decode"].busy_s > 0
    assert st["gate"].items == rep.sampled
    gate_dropped = sum(n for reason, n in rep.dropped.items() if reason != "dedup")
    assert st["embed"].items == rep.sampled - gate_dropped  # the frames that passed the gates
    assert st["encode"].items == kept == rep.kept > 0
    assert st["commit"].items >= 1
    for s in st.values():
        assert s.queue_depth == 0 and s.dropped == 0  # drained, and a file never drops
        assert s.busy_s >= 0 and s.workers >= 0
    assert st["gate"].queue_capacity == load_config(CFG).ingest.queue_frames


class _BlockedEmbedder:
    """An image embedder that blocks until released (a stage that fell behind)."""

    dim = 4

    def __init__(self):
        self.release = threading.Event()
        self.calls = 0

    def embed_images(self, frames):
        self.calls += 1
        self.release.wait(30)
        return np.ones((len(frames), self.dim), np.float32) / 2


def _frame(cam: str, i: int, rng) -> Frame:
    img = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    gray = img.mean(axis=2).astype(np.uint8)
    return Frame(cam, i * 0.5, None, None, gray, lambda: img)


def test_a_stage_that_falls_behind_shows_its_queue_and_live_samples_drop(tmp_path):
    cfg = load_config({"ingest": {"queue_frames": 3, "batch_size": 1}, "store": {"commit_interval_s": 0.2},
                       "gate": {"tile_min_mad": 0.0}})
    store = Store(tmp_path / "store")
    emb = _BlockedEmbedder()
    pipe = IndexPipeline(store, GateCascade(make_body("cpu"), cfg.gate), cfg, emb)
    rng = np.random.default_rng(7)
    try:
        state = store.sources.open("cam", "live:cam", "fp", "fps=2")
        pipe.register(state.source_id, SourceReport("cam", "live:cam"), None)
        offered = [pipe.offer_frame(_frame("cam", i, rng), state.source_id, 0.05) for i in range(12)]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the embedder holds a batch; the queues in front of it fill
            st = {s.name: s for s in pipe.stage_status()}
            if st["embed"].queue_depth == st["embed"].queue_capacity and st["gate"].queue_depth == 3:
                break
            offered.append(pipe.offer_frame(_frame("cam", len(offered), rng), state.source_id, 0.05))
        st = {s.name: s for s in pipe.stage_status()}
        assert emb.calls == 1
        assert st["embed"].queue_depth == st["embed"].queue_capacity  # full: the embed stage is the limit
        assert st["gate"].queue_depth == st["gate"].queue_capacity == 3
        assert st["decode"].dropped == offered.count(False) > 0  # what the gates could not take in time
        assert st["embed"].items == 0 and st["encode"].items == 0
    finally:
        emb.release.set()
        pipe.close()
        store.close()
    st = {s.name: s for s in pipe.stage_status()}
    assert st["gate"].items == offered.count(True)  # every sample queued was gated in the end
    assert st["embed"].busy_s > 0.0 and st["gate"].queue_depth == 0


def test_a_gated_batch_hands_its_rows_to_the_pending_commit():
    batch = CommitBatch(progress={1: 2.0, 2: 5.0})
    GatedBatch(progress={1: 3.0, 2: None}).into(batch)  # 2: a hold since its first sample: no progress yet
    assert batch.progress == {1: 3.0}
    GatedBatch(progress={2: 6.0}).into(batch)
    assert batch.progress == {1: 3.0, 2: 6.0}


def test_a_per_frame_embedder_gets_views_of_the_frames_and_the_same_vectors(tmp_path):
    """The default descriptor reads each frame once: the embed stage hands it each frame as a
    view (no stacked 2.7 MB copy per 720p frame) and the vectors equal one stacked call's."""
    from vam_engine.embed import DescriptorEmbedder
    from vam_engine.index.records import GatedFrame
    from vam_engine.index.semantic import SemanticStage
    from vam_engine.gate import GateRecord

    rng = np.random.default_rng(11)
    frames = [_frame("cam", i, rng) for i in range(5)]
    body = DescriptorEmbedder()
    seen = []

    class Spy:
        per_frame = True
        dim = body.dim

        def embed_images(self, batch):
            seen.append(batch)
            return body.embed_images(batch)

    cfg = load_config(CFG)
    store = Store(tmp_path / "store")
    try:
        stage = SemanticStage(store, Spy(), cfg, None)
        rec = GateRecord(100.0, 30.0, 0.1, 0.1, None)
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(1) as pool:
            stage.encoder = pool
            stage.process([GatedFrame(f, 1, rec) for f in frames], CommitBatch(), [])
    finally:
        store.close()
    assert len(seen) == 5 and all(len(b) == 1 for b in seen)
    rgbs = [f.rgb() for f in frames]
    assert all(np.shares_memory(b, r) for b, r in zip(seen, rgbs))  # views, not copies
    stacked = body.embed_images(np.stack(rgbs))
    np.testing.assert_allclose(np.concatenate([body.embed_images(b) for b in seen]), stacked, rtol=1e-4, atol=1e-6)
