"""The pipeline's route for a GPU decoder's frames (index/semantic.py with index/device_path.py):
when a frame's ``decoded_rgb()`` is a torch tensor and the embedder takes tensors, the embed
stage embeds it where it lies and copies to the host only the frames it writes (kept, or held at
a commit), once each. Run here on CPU tensors: the same moments, embeddings and JPEGs as the host
route on fresh random scene sequences, and frames the dedup dropped never copied."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support.tiny_clip_model import save_tiny_clip  # noqa: E402
from vam_engine.config import load_config  # noqa: E402
from vam_engine.embed import make_image_embedder  # noqa: E402
from vam_engine.gate import GateCascade, make_body  # noqa: E402
from vam_engine.index import IndexPipeline, SourceReport  # noqa: E402
from vam_engine.index import semantic  # noqa: E402
from vam_engine.ingest import Frame  # noqa: E402
from vam_engine.memory import Store  # noqa: E402

H, W = 48, 64
CFG = {"ingest": {"batch_size": 4}, "store": {"commit_every": 6, "commit_interval_s": 0.2},
       "embed": {"body": "torch", "batch_size": 4}}


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    return save_tiny_clip(tmp_path_factory.mktemp("clip"))


def scenes(rng, n: int) -> list[np.ndarray]:
    """A camera's RGB frames: a few scenes, each held for a random run of noisy, shifted frames
    (so the dedup drops some), some scenes coming back."""
    bases, out = [], []
    while len(out) < n:
        if bases and rng.random() < 0.3:
            base = bases[int(rng.integers(len(bases)))]
        else:
            coarse = rng.integers(0, 256, (H // 8, W // 8, 3)).repeat(8, 0).repeat(8, 1).astype(np.float64)
            base = coarse * rng.uniform(0.4, 1.0) + rng.normal(0, 10, (H, W, 3))
            bases.append(base)
        for _ in range(int(rng.integers(2, 7))):
            f = np.roll(base, int(rng.integers(-2, 3)), axis=1) + rng.normal(0, rng.uniform(0.5, 6), (H, W, 3))
            out.append(np.clip(f, 0, 255).astype(np.uint8))
    return out[:n]


def gray_of(rgb: np.ndarray) -> np.ndarray:
    x = rgb.astype(np.int32)
    return ((x[..., 0] * 4899 + x[..., 1] * 9617 + x[..., 2] * 1868 + 8192) >> 14).astype(np.uint8)


def run(tmp_path, clip_dir, frames, times, as_tensor: bool, monkeypatch):
    """Index one camera's frames through the pipeline; returns (moments as (t, embedding, JPEG
    sha1), the times whose RGB was copied from a tensor to the host, the times written)."""
    copied, written = [], []
    to_host = semantic._to_host

    def counting_to_host(rgb):
        if isinstance(rgb, torch.Tensor):
            copied.append(rgb)
        return to_host(rgb)

    monkeypatch.setattr(semantic, "_to_host", counting_to_host)
    cfg = load_config({**CFG, "embed": {**CFG["embed"], "model": clip_dir}})
    store = Store(tmp_path / ("tensor" if as_tensor else "host"))
    write = store.frames.write

    def counting_write(ref, rgb, quality):
        written.append(ref)
        write(ref, rgb, quality)

    store.frames.write = counting_write
    pipe = IndexPipeline(store, GateCascade(make_body("cpu"), cfg.gate), cfg, make_image_embedder(cfg.embed))
    try:
        state = store.sources.open("cam", "test:cam", "fp", "all")
        pipe.register(state.source_id, SourceReport("cam", "test:cam"), None)
        for rgb, t in zip(frames, times):
            decoded = (lambda x=rgb: torch.from_numpy(x.copy())) if as_tensor else (lambda x=rgb: x)
            pipe.put_frame(Frame("cam", float(t), None, None, gray_of(rgb), decoded), state.source_id)
        pipe.end_source(state.source_id)
        assert pipe.flush(60)
    finally:
        pipe.close()
    ms = store.moments.list("cam")
    vecs = store.vector_table.by_id("frame", [m.embedding_id for m in ms])
    moments = [(m.t_rel, vecs[m.embedding_id], hashlib.sha1(open(m.frame_path, "rb").read()).hexdigest())
               for m in ms]
    store.close()
    monkeypatch.undo()
    return moments, copied, written


@pytest.mark.parametrize("seed", list(np.random.SeedSequence().generate_state(2)))
def test_tensor_frames_take_the_device_route_and_index_like_host_frames(tmp_path, clip_dir, monkeypatch, seed):
    rng = np.random.default_rng(int(seed))
    n = int(rng.integers(24, 40))
    frames = scenes(rng, n)
    times = np.cumsum(rng.uniform(0.5, 2.0, n))
    host, host_copied, _ = run(tmp_path, clip_dir, frames, times, False, monkeypatch)
    dev, copied, written = run(tmp_path, clip_dir, frames, times, True, monkeypatch)
    assert not host_copied  # numpy frames never meet a tensor
    assert [t for t, _, _ in dev] == [t for t, _, _ in host], f"seed {seed}: other frames kept"
    for (_, e_dev, j_dev), (_, e_host, j_host) in zip(dev, host):
        np.testing.assert_allclose(e_dev, e_host, rtol=1e-4, atol=1e-5)
        assert j_dev == j_host  # the same pixels were written
    # every frame copied to the host was written (kept, or held at a commit), each copied once
    assert len(copied) == len(written) == len(set(written)) >= len(dev) > 0
    assert len(dev) < n, f"seed {seed}: the dedup kept everything; the scenes do not repeat"


def test_a_gpu_frame_with_a_host_only_embedder_is_copied_as_before(tmp_path):
    """An embedder without ``embed_tensor`` (the default descriptor) gets host arrays."""
    from vam_engine.index.device_path import is_device_frame
    from vam_engine.embed import DescriptorEmbedder

    t = torch.zeros((H, W, 3), dtype=torch.uint8)
    assert not is_device_frame(t, DescriptorEmbedder())
    assert not is_device_frame(t.numpy(), type("E", (), {"embed_tensor": None})())
    assert is_device_frame(t, type("E", (), {"embed_tensor": None})())
