"""The device path (index/device_path.py): its keep decisions against the host pipeline's bodies
(numpy frames through the gates' CPU body, ``embed_images`` and ``push_batch``) on fresh random
frames, its outputs on the input's device, and, with torch's fake CUDA tensors on this CPU-only
torch, that nothing but the kept frames (and the small per-batch statistics and embeddings the
module doc lists) crosses to the host and that no tensor meets one of another device."""
from __future__ import annotations

import io
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support.tiny_clip_model import save_tiny_clip  # noqa: E402
from vam_engine.config import CommitConfig, EmbedConfig, GateConfig  # noqa: E402
from vam_engine.embed import make_image_embedder  # noqa: E402
from vam_engine.gate import GateCascade, GateStats, is_local_change, make_body  # noqa: E402
from vam_engine.index import DeviceFrameBatch, DevicePath, DevicePathError, OnlineCommitter  # noqa: E402

H, W = 48, 64


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    return make_image_embedder(EmbedConfig(body="torch", model=save_tiny_clip(tmp_path_factory.mktemp("clip")),
                                           batch_size=4))


def scene_frames(rng, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rgb N x H x W x 3, gray N x H x W, times) of a camera: a few scenes (coarse texture plus fine
    detail), each held for a random run of frames with noise, small shifts and some blurred frames."""
    out = []
    while len(out) < n:
        coarse = rng.integers(0, 256, (H // 8, W // 8, 3)).repeat(8, 0).repeat(8, 1).astype(np.float64)
        base = coarse * rng.uniform(0.3, 1.0) + rng.normal(0, rng.uniform(5, 40), (H, W, 3))
        for _ in range(int(rng.integers(1, 8))):
            f = np.roll(base, int(rng.integers(-3, 4)), axis=1) + rng.normal(0, rng.uniform(0.5, 12), (H, W, 3))
            if rng.random() < 0.2:  # defocused: a box blur
                k = 5
                pad = np.pad(f, ((k, k), (k, k), (0, 0)), mode="edge")
                f = sum(pad[k + dy:k + dy + H, k + dx:k + dx + W] for dy in range(-k, k + 1)
                        for dx in range(-k, k + 1)) / (2 * k + 1) ** 2
            out.append(np.clip(f, 0, 255).astype(np.uint8))
    rgb = np.stack(out[:n])
    x = rgb.astype(np.int32)
    gray = ((x[..., 0] * 4899 + x[..., 1] * 9617 + x[..., 2] * 1868 + 8192) >> 14).astype(np.uint8)
    times = np.cumsum(rng.uniform(0.5, 3.0, n))
    return rgb, gray, times


def split(rng, n: int) -> list[slice]:
    cuts, i = [], 0
    while i < n:
        j = min(n, i + int(rng.integers(1, 8)))
        cuts.append(slice(i, j))
        i = j
    return cuts


def host_reference(embedder, rgb, gray, times, parts, gcfg, ccfg, device="cpu"):
    """The host pipeline's bodies: the gates' body (CPU, or CUDA fed numpy) on numpy planes, the
    passed frames (held samples the view rule kept, in order) embedded by ``embed_images``,
    ``push_batch`` with the device's dedup body."""
    from vam_engine.index.dedup_bodies import make_body as dedup_body

    gates = GateCascade(make_body(device), gcfg)
    committer = OnlineCommitter(ccfg, body=dedup_body(device))
    records, decisions = [], []

    def push(passed):
        if not passed:
            return
        embs = embedder.embed_images(np.stack([rgb[i] for i, _ in passed]))
        keeps = [r.blurred or (ccfg.keep_local_changes and is_local_change(gcfg, r)) for _, r in passed]
        decisions.extend(committer.push_batch([times[i] for i, _ in passed], embs, [i for i, _ in passed], keeps))

    for sl in parts:
        idx = list(range(sl.start, sl.stop))
        run = gates.gate("cam", [gray[i] for i in idx], [times[i] for i in idx], idx)
        records += run.records
        before: dict = {}
        for r in run.released:
            before.setdefault(r.before, []).append(r)
        passed = []
        for j, (i, rec) in enumerate(zip(idx, run.records)):
            passed += [(r.key, r.record) for r in before.pop(j, ())]
            if rec.dropped_by is None:
                passed.append((i, rec))
        passed += [(r.key, r.record) for rs in before.values() for r in rs]
        push(passed)
    push([(r.key, r.record) for r in gates.end("cam")])
    decisions += committer.finish()
    return records, decisions


def device_run(path, rgb, gray, times, parts, device="cpu"):
    records, decisions, kept = [], [], []
    offset = {}
    for b, sl in enumerate(parts):
        offset[b] = sl.start
        batch = DeviceFrameBatch("cam", torch.from_numpy(gray[sl]).to(device), torch.from_numpy(rgb[sl]).to(device),
                                 tuple(times[sl]))
        res = path.run(batch)
        assert res.embeddings is None or res.embeddings.device == batch.device
        records += res.records
        decisions += res.decisions
        kept += res.kept
    res = path.finish("cam")
    decisions += res.decisions
    kept += res.kept
    return records, decisions, kept, offset


def draw(rng, embedder, gcfg, ccfg, device="cpu"):
    """A sequence whose host run has gate drops, dedup drops and several keeps (else a draw again):
    the comparison then covers every kind of decision."""
    for _ in range(30):
        rgb, gray, times = scene_frames(rng, int(rng.integers(25, 50)))
        parts = split(rng, len(times))
        recs, decs = host_reference(embedder, rgb, gray, times, parts, gcfg, ccfg, device)
        if any(r.dropped_by for r in recs) and any(not d.kept for d in decs) and sum(d.kept for d in decs) >= 3:
            return rgb, gray, times, parts, recs, decs
    raise AssertionError("no sequence with gate drops, dedup drops and keeps in 30 draws")


def check_against_host(embedder, window, device):
    from vam_engine.index.dedup_bodies import make_body as dedup_body

    rng = np.random.default_rng()
    gcfg = GateConfig()
    ccfg = CommitConfig(window=window, min_history=3)
    rgb, gray, times, parts, recs, decs = draw(rng, embedder, gcfg, ccfg, device)
    path = DevicePath(GateCascade(make_body(device), gcfg), embedder, ccfg, dedup_body(device), device=device,
                      output="rgb")
    got_recs, got_decs, kept, offset = device_run(path, rgb, gray, times, parts, device)
    assert got_recs == recs
    assert len(got_decs) == len(decs)
    for g, h in zip(got_decs, decs):
        assert (g.t, g.kept, g.reason, g.event_start) == (h.t, h.kept, h.reason, h.event_start)
        assert offset[g.key.batch] + g.key.index == h.key
        assert (g.distance is None) == (h.distance is None)
        if g.distance is not None:
            assert g.distance == pytest.approx(h.distance, abs=1e-5)
    kept_host = [h.key for h in decs if h.kept]
    assert [offset[k.batch] + k.index for k in kept] == kept_host
    for k, i in zip(kept, kept_host):  # the kept frames' pixels, exactly
        assert k.jpeg is None and np.array_equal(k.rgb, rgb[i])
        assert k.embedding.shape == (embedder.dim,) and abs(float(np.linalg.norm(k.embedding)) - 1) < 1e-5


@pytest.mark.parametrize("window", [8, 32])
def test_device_path_decides_as_the_host_pipeline(embedder, window):
    check_against_host(embedder, window, "cpu")


@pytest.mark.gpu
def test_device_path_on_cuda_decides_as_the_host_pipeline(tmp_path):
    """On a GPU: the path on CUDA tensors with the Triton gate and dedup bodies and the embedder
    in float32 on CUDA, against the same bodies fed host arrays (the host pipeline), and the
    device JPEG encoder when torchvision imports."""
    emb = make_image_embedder(EmbedConfig(body="torch", model=save_tiny_clip(tmp_path / "clip"), batch_size=4,
                                          dtype="float32"), device="cuda")
    check_against_host(emb, 32, "cuda")
    path = DevicePath(GateCascade(make_body("cuda"), GateConfig()), emb, device="cuda")
    rgb, gray, times = scene_frames(np.random.default_rng(), 12)
    res = path.run(DeviceFrameBatch("cam", torch.from_numpy(gray).cuda(), torch.from_numpy(rgb).cuda(), tuple(times)))
    kept = res.kept + path.finish("cam").kept
    assert kept and all(k.jpeg[:2] == b"\xff\xd8" for k in kept)
    assert res.embeddings is None or res.embeddings.is_cuda


def test_jpeg_output_is_the_kept_frame(embedder):
    from PIL import Image

    rng = np.random.default_rng()
    rgb, gray, times, parts, _, decs = draw(rng, embedder, GateConfig(), CommitConfig())
    path = DevicePath(GateCascade(make_body("cpu"), GateConfig()), embedder, CommitConfig(), jpeg_quality=95)
    assert path.jpeg_on == "host"  # CPU tensors: PIL
    _, _, kept, offset = device_run(path, rgb, gray, times, parts)
    assert len(kept) == sum(d.kept for d in decs)
    for k in kept:  # the bytes PIL makes of the kept frame's own pixels (so: that frame, whole)
        buf = io.BytesIO()
        Image.fromarray(rgb[offset[k.batch] + k.index]).save(buf, format="JPEG", quality=95)
        assert k.jpeg == buf.getvalue() and k.rgb is None


def test_embed_tensor_matches_embed_images(embedder):
    rng = np.random.default_rng()
    frames = rng.integers(0, 256, (int(rng.integers(1, 9)), 40, 56, 3), dtype=np.uint8)
    got = embedder.embed_tensor(torch.from_numpy(frames))
    assert got.device.type == "cpu" and got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), embedder.embed_images(frames), atol=2e-6)
    with pytest.raises(ValueError, match="uint8 N x H x W x 3"):
        embedder.embed_tensor(torch.from_numpy(frames).float())


def test_from_frames_stacks_the_decoders_planes():
    from vam_engine.ingest import Frame

    rng = np.random.default_rng()
    rgb, gray, times = scene_frames(rng, 5)
    frames = [Frame("cam", float(t), 1e9 + t, None, gray[i], (lambda i=i: rgb[i])) for i, t in enumerate(times)]
    b = DeviceFrameBatch.from_frames(frames)
    assert b.camera_id == "cam" and b.device.type == "cpu" and len(b) == 5
    assert np.array_equal(b.gray.numpy(), gray) and np.array_equal(b.rgb.numpy(), rgb)
    assert b.times == tuple(float(t) for t in times) and b.t_abs == tuple(1e9 + t for t in times)
    with pytest.raises(DevicePathError, match="several cameras"):
        DeviceFrameBatch.from_frames(frames[:2] + [Frame("other", 99.0, None, None, gray[0], lambda: rgb[0])])


def test_bad_batches_name_the_input(embedder):
    g = torch.zeros(3, H, W, dtype=torch.uint8)
    c = torch.zeros(3, H, W, 3, dtype=torch.uint8)
    with pytest.raises(DevicePathError, match="gray must be N x H x W uint8"):
        DeviceFrameBatch("cam", g.float(), c, (1.0, 2.0, 3.0))
    with pytest.raises(DevicePathError, match="does not match gray"):
        DeviceFrameBatch("cam", g, c[:, :, :-1], (1.0, 2.0, 3.0))
    with pytest.raises(DevicePathError, match="increase strictly"):
        DeviceFrameBatch("cam", g, c, (1.0, 3.0, 2.0))
    with pytest.raises(DevicePathError, match="2 times for 3 frames"):
        DeviceFrameBatch("cam", g, c, (1.0, 2.0))
    path = DevicePath(GateCascade(make_body("cpu"), GateConfig()), embedder, device="cuda")
    with pytest.raises(DevicePathError, match="is on cpu, the path on cuda"):
        path.run(DeviceFrameBatch("cam", g, c, (1.0, 2.0, 3.0)))
    with pytest.raises(DevicePathError, match="has no embed_tensor"):
        DevicePath(GateCascade(make_body("cpu"), GateConfig()), types.SimpleNamespace(name="onnx:x"))


# -- fake CUDA -------------------------------------------------------------------------------------

class _Crossings:
    """A TorchDispatchMode (made lazily: torch imports under the module's importorskip) that
    records every device-to-host copy and every read of a device scalar (``.item()``, ``.tolist()``,
    ``bool()``: ``aten._local_scalar_dense``)."""

    @staticmethod
    def make():
        from torch.utils._python_dispatch import TorchDispatchMode

        aten = torch.ops.aten

        class Crossings(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.d2h, self.scalars = [], []

            def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
                kwargs = kwargs or {}
                if func is aten._local_scalar_dense.default:
                    self.scalars.append(tuple(args[0].shape))
                out = func(*args, **kwargs)
                if func in (aten._to_copy.default, aten.copy_.default):
                    src, dst = (args[0], out) if func is aten._to_copy.default else (args[1], args[0])
                    if src.device.type == "cuda" and dst.device.type == "cpu":
                        self.d2h.append((tuple(src.shape), src.dtype))
                return out

        return Crossings()


class FakeCudaGateBody:
    """Stands in for the Triton gate body (which cannot launch on fake tensors): it reads the
    frames on their device and downloads what the Triton body downloads (per-frame statistics,
    thumbnails, histograms), then gives the cascade random statistics of those shapes."""

    name = "fake-cuda"

    def __init__(self, rng):
        self.rng = rng
        self.frames_seen = []

    def _download(self, frames, ref):
        assert frames.device.type == "cuda" and (ref is None or ref.device.type == "cuda")
        n = frames.shape[0]
        self.frames_seen.append(n)
        x = frames.float()
        diff = x.mean(dim=(1, 2)) if ref is None else (x - ref.float()).abs().mean(dim=(1, 2))
        diff.cpu()  # the scalars
        torch.empty((n, 64, 64), dtype=torch.float32, device=frames.device).cpu()  # thumbnails
        torch.empty((n, 64), dtype=torch.float32, device=frames.device).cpu()  # histograms
        return n

    def _values(self, n, has_ref):
        r = self.rng
        nan = np.full(n, np.nan)
        return dict(mad=r.uniform(0, 60, n) if has_ref else nan, ssim=r.uniform(0.5, 1, n) if has_ref else nan,
                    hist_corr=r.uniform(0.5, 1, n) if has_ref else nan,
                    tile_mad=r.uniform(0, 60, n) if has_ref else nan, tiles_changed=r.integers(0, 4, n))

    def stats(self, frames, ref, ref_thumb=None, ref_hist=None, tiles=None):
        n = self._download(frames, ref)
        return GateStats(lap_var=self.rng.uniform(0, 400, n), thumb=self.rng.uniform(0, 255, (n, 64, 64)).astype(
            np.float32), hist=self.rng.integers(1, 50, (n, 64)).astype(np.float32), n_tiles=6,
            **self._values(n, ref is not None))

    def compare(self, frames, thumbs, hists, ref, ref_thumb, ref_hist, tiles=None):
        from vam_engine.gate import GateComparison

        n = self._download(frames, ref)
        return GateComparison(**self._values(n, True))


def fake_embedder(weight):
    """``TorchImageEmbedder.embed_tensor`` itself (with ``embed.models.preprocess``) over a linear
    "tower" whose weight is given: the real code path, on fake CUDA tensors."""
    from vam_engine.embed.models import PreprocessSpec
    from vam_engine.embed.torch_body import TorchImageEmbedder

    e = types.SimpleNamespace(name="fake", device=torch.device("cuda"), dtype=torch.float32, batch_size=4, dim=8,
                              source=types.SimpleNamespace(spec=PreprocessSpec("shortest_edge", (16, 16), (16, 16),
                                                                               (0.5, 0.5, 0.5), (0.25, 0.25, 0.25))))
    e.run_image = lambda x: x.reshape(x.shape[0], -1) @ weight.t()
    e.embed_tensor = types.MethodType(TorchImageEmbedder.embed_tensor, e)
    return e


def fake_host(rng):
    """The path's host copy on fake tensors: the copy is made (and recorded), then random values of
    its shape stand for its bytes (fake tensors have none)."""
    def host(x):
        y = x.cpu()
        if y.dtype == torch.float32:
            rows = rng.normal(size=tuple(y.shape))
            rows[:, 0] += 4.0  # similar rows: the dedup drops some
            return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
        return rng.integers(0, 256, tuple(y.shape), dtype=np.uint8)
    return host


def test_fake_cuda_only_kept_frames_cross_to_the_host():
    from torch._subclasses.fake_tensor import FakeTensorMode

    rng = np.random.default_rng()
    body = FakeCudaGateBody(rng)
    n_frames, kept, results, embedded = 0, [], [], 0
    with FakeTensorMode(allow_non_fake_inputs=True), _Crossings.make() as rec:
        weight = torch.empty((8, 3 * 16 * 16), dtype=torch.float32, device="cuda")
        path = DevicePath(GateCascade(body, GateConfig()), fake_embedder(weight), CommitConfig(), device="cuda",
                          host=fake_host(rng))
        t = 0.0
        for _ in range(int(rng.integers(4, 8))):
            n = int(rng.integers(2, 9))
            times = tuple(t + np.cumsum(rng.uniform(0.5, 2, n)))
            t = times[-1]
            gray = torch.empty((n, H, W), dtype=torch.uint8, device="cuda")
            rgb = torch.empty((n, H, W, 3), dtype=torch.uint8, device="cuda")
            res = path.run(DeviceFrameBatch("cam", gray, rgb, times))
            n_frames += n
            results.append(res)
        results.append(path.finish("cam"))
    for res in results:
        kept += res.kept
        if res.embeddings is not None:
            embedded += res.embeddings.shape[0]
            assert res.embeddings.device.type == "cuda"
    assert rec.scalars == []  # no .item() / .tolist() / bool() of a device tensor
    assert body.frames_seen  # the gates read the frames on the device
    frames_down = [s for s, d in rec.d2h if d == torch.uint8]
    assert all(s[1:] == (H, W, 3) for s in frames_down)  # RGB of kept frames only: never a gray plane
    assert sum(s[0] for s in frames_down) == len(kept)  # each kept frame once, no dropped one
    assert 0 < len(kept) < n_frames
    embs_down = [s for s, d in rec.d2h if d == torch.float32 and len(s) == 2 and s[1] == 8]
    assert sum(s[0] for s in embs_down) == embedded  # the passed frames' rows, once
    stats_down = [s for s, d in rec.d2h if d == torch.float32 and s not in embs_down]
    assert all(s[1:] in ((), (64, 64), (64,)) for s in stats_down)  # per-frame statistics only
    assert all(k.jpeg[:2] == b"\xff\xd8" for k in kept)  # encoded on the host (no torchvision here)


def test_fake_cuda_catches_a_tensor_on_another_device():
    """The check's negative control: an embedder weight left on the CPU meets the CUDA frames."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch._subclasses.fake_tensor import FakeTensorDeviceMismatchError as Mismatch  # noqa: N814

    rng = np.random.default_rng()
    weight = torch.zeros((8, 3 * 16 * 16), dtype=torch.float32)
    with FakeTensorMode(allow_non_fake_inputs=True):
        path = DevicePath(GateCascade(FakeCudaGateBody(rng), GateConfig()), fake_embedder(weight), device="cuda",
                          host=fake_host(rng))
        gray = torch.empty((3, H, W), dtype=torch.uint8, device="cuda")
        rgb = torch.empty((3, H, W, 3), dtype=torch.uint8, device="cuda")
        with pytest.raises(Mismatch):
            path.run(DeviceFrameBatch("cam", gray, rgb, (1.0, 2.0, 3.0)))
