"""Image embedding throughput on this CPU: images/s per body and batch size.

Rows:
- ``descriptor`` (descriptor-v1: numpy with the native area resize ``_C.box_sums``) on 640x360
  and 1280x720 RGB frames, and the same with the resize on its numpy reference
  (``DescriptorEmbedder(box_sums=box_sums_reference)``, the baseline row); ratio: bytes/s over a
  memcpy of the same frames (the bandwidth ceiling: how far the one full-frame pass is from
  reading the frame once);
- ``torch`` (transformers CLIP, eager, fp32) and ``onnxruntime`` (the cached ONNX export, CPU
  provider) for two random-weight CLIP models built from configs (no downloads): ``tiny``
  (32x32 input, hidden 32, 2 layers) and ``vit-b/16`` (the ViT-B/16 vision tower: 224x224,
  hidden 768, 12 layers, projection 512; a minimal text tower); frames are 640x360, so every
  figure includes preprocessing (resize + crop + normalize); ratio: images/s over torch's at the
  same batch size;
- ``preprocess`` (our torch CPU resize/crop/normalize alone) per model input size: the ceiling for
  a model body on these frames.

Random weights run at the speed of trained ones. Nothing asserts on a time.

    python benchmarks/bench_embed.py             # default (~1.5-2 min on 2 cores)
    python benchmarks/bench_embed.py --quick     # smoke run: no batch 32 for ViT-B/16, 1 round
    python benchmarks/bench_embed.py --no-vitb   # descriptor and tiny model only (~20 s)
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from _common import (add_device_args, fmt, free_memory, host_timed, print_table, quiet_hf, require_cuda, run_part,
                     time_rounds, write_json)

from vam_engine.synthetic import rgb_frames

MODELS = {
    "tiny": dict(vision=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                             image_size=32, patch_size=8), projection_dim=16),
    "vit-b/16": dict(vision=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                 num_attention_heads=12, image_size=224, patch_size=16), projection_dim=512),
}


def make_frames(n: int, h: int, w: int, seed: int = 0) -> np.ndarray:
    """N RGB frames of distinct camera-like scenes (vam_engine.synthetic.rgb_frames)."""
    return rgb_frames(np.random.default_rng(seed), n, h, w)


def build_clip(kind: str, path: Path) -> str:
    import torch
    from transformers import CLIPConfig, CLIPModel

    spec = MODELS[kind]
    text = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                max_position_embeddings=16, bos_token_id=0, eos_token_id=1, pad_token_id=2)
    torch.manual_seed(0)
    CLIPModel(CLIPConfig(text_config=text, vision_config=spec["vision"],
                         projection_dim=spec["projection_dim"])).eval().save_pretrained(path)
    return str(path)



# -- --device cuda rows ----------------------------------------------------------------------------------
# vision towers of the real sizes (the FLOPs and bytes of the trained models); a small text tower
CLIP_SIZES = {
    "ViT-B/16": dict(vision=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                 num_attention_heads=12, patch_size=16, image_size=224), projection_dim=512),
    "ViT-L/14": dict(vision=dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24,
                                 num_attention_heads=16, patch_size=14, image_size=224), projection_dim=768),
}
CLIP_TINY = {"tiny": dict(vision=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=2, patch_size=8, image_size=32), projection_dim=16)}
_CLIP_TEXT = dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                  max_position_embeddings=77, bos_token_id=0, eos_token_id=1, pad_token_id=2)


def vit_gflops(vision: dict) -> float:
    """Forward GFLOPs (2 per multiply-add) of one image through a ViT: patch embedding, each
    block's qkv/out projections and MLP, and its two attention products."""
    h, i, layers = vision["hidden_size"], vision["intermediate_size"], vision["num_hidden_layers"]
    p, s = vision["patch_size"], vision["image_size"]
    g = (s // p) ** 2
    tok = g + 1
    block = 2 * tok * (4 * h * h + 2 * h * i) + 4 * tok * tok * h
    return (2 * g * 3 * p * p * h + layers * block) / 1e9


def save_clip(path: Path, spec: dict, device: str, seed: int) -> dict:
    """A random-weight transformers CLIPModel of ``spec``'s vision size, saved to ``path`` (fp16
    weights when made on CUDA: half the bytes to write and read; each load casts to its dtype)."""
    import torch
    from transformers import CLIPConfig, CLIPModel

    t0 = time.perf_counter()
    cfg = CLIPConfig(text_config=_CLIP_TEXT, vision_config=spec["vision"], projection_dim=spec["projection_dim"])
    torch.manual_seed(seed)
    try:
        with torch.device(device):  # initialized where it is made: seconds faster for ViT-L on a GPU
            model = CLIPModel(cfg)
    except Exception:  # noqa: BLE001 - the default device then
        model = CLIPModel(cfg)
    model = model.eval()
    if str(device).startswith("cuda"):
        model = model.half()
    vparams = sum(p.numel() for p in model.vision_model.parameters()) + model.visual_projection.weight.numel()
    model.save_pretrained(path)
    del model
    if str(device).startswith("cuda"):
        torch.cuda.empty_cache()
    return {"path": str(path), "vision_params_M": vparams / 1e6, "gflops_per_image": vit_gflops(spec["vision"]),
            "build_s": time.perf_counter() - t0}


def _cos(a: np.ndarray, b: np.ndarray, ref: np.ndarray) -> dict:
    """Cosines of the rows of a and b (unit rows), plain and centred on ref's mean row (random
    weights can map all images close together: the centred cosine shows the error against the
    spread between images)."""
    cos = np.einsum("ij,ij->i", a, b)
    mu = ref.mean(0, keepdims=True)
    ac, bc = a - mu, b - mu
    cc = np.einsum("ij,ij->i", ac, bc) / np.maximum(np.linalg.norm(ac, axis=1) * np.linalg.norm(bc, axis=1), 1e-30)
    return {"min_cos": float(cos.min()), "mean_cos": float(cos.mean()), "min_centred_cos": float(cc.min())}


class EmbedderBench:
    """The --device cuda rows: per CLIP size and dtype, the eager embedder (fp32 the baseline and
    reference), then CUDA graphs (compile=True) while the budget lasts. Each measured
    configuration is a method; ``embedder_rows`` calls them in order."""

    def __init__(self, run, st):
        import torch

        a = run.args
        self.run, self.st, self.torch, self.gpu = run, st, torch, run.cuda
        if self.gpu:
            self.models, self.dev, self.dtypes = CLIP_SIZES, "cuda", ["float32", "float16", "bfloat16"]
            self.batches = [int(b) for b in a.embed_batches.split(",")]
            n_corr, self.reps = 16, 5
        else:
            st.skip("cuda", "no CUDA: the tiny CLIP on the CPU through the same code (plumbing only)")
            self.models, self.dev, self.dtypes, self.batches, n_corr, self.reps = \
                CLIP_TINY, "cpu", ["float32", "float16"], [2], 4, 2
        self.sync = torch.cuda.synchronize if self.gpu else None
        self.fh, self.fw = 360, 640  # 640x360 RGB in: every end-to-end figure includes the resize / crop / normalize
        self.frames = rgb_frames(np.random.default_rng([run.seed, 3]), max(max(self.batches), n_corr), self.fh, self.fw)
        self.corr = self.frames[:n_corr]
        st.data.update(device=self.dev, frame=f"{self.fw}x{self.fh}", batches=self.batches,
                       correctness_images=n_corr,
                       weights="random (transformers CLIPModel from a CLIPConfig of the real vision sizes)")
        self.runs, self.info, self.outs = [], {}, {}
        st.data["models"], st.data["runs"] = self.info, self.runs  # filled in place: a watchdog save keeps them
        st.data["float32_matmul_precision"] = torch.get_float32_matmul_precision()

    def embedder(self, path: str, dtype: str, batch: int, compile: bool):
        from vam_engine.config import EmbedConfig
        from vam_engine.embed import make_image_embedder

        return make_image_embedder(EmbedConfig(body="torch", model=path, dtype=dtype, batch_size=batch),
                                   device=self.dev, compile=compile)

    def measure(self, emb, name: str, dtype: str, graphs: bool, bs: list, extra: dict | None = None) -> None:
        """Rows of one embedder per batch size: end to end, the model alone, preprocessing alone."""
        from vam_engine.embed.models import preprocess

        spec, reps, sync = emb.source.spec, self.reps, self.sync
        for b in bs:
            if self.run.left() < 3:
                self.st.skip(f"{name} {dtype} graphs={graphs} b{b}", "out of time")
                continue
            fb = self.frames[:b]
            r = {"model": name, "dtype": dtype, "graphs": graphs, **(extra or {}), "batch": b}
            t = host_timed(lambda: emb.embed_images(fb), sync, warmup=3 if graphs else 2, repeats=reps)
            r.update(e2e_ms=t * 1e3, e2e_img_s=b / t)
            x = preprocess(fb, spec, emb.device, emb.dtype)
            with self.torch.inference_mode():  # the model alone, on preprocessed input already on the device
                t = host_timed(lambda: emb.run_image(x), sync, warmup=3 if graphs else 2, repeats=reps,
                               iters=3 if self.gpu else 1)
            r.update(model_ms=t * 1e3, model_img_s=b / t,
                     model_TFLOPS=b / t * self.info[name]["gflops_per_image"] / 1e3)
            del x
            t = host_timed(lambda: preprocess(fb, spec, emb.device, emb.dtype), sync, warmup=1, repeats=3)
            r.update(preprocess_ms=t * 1e3, preprocess_img_s=b / t)
            self.runs.append(r)

    # -- eager: fp32 (baseline and reference), fp16, bf16 ------------------------------------------
    def eager(self, name: str, path: str, dtype: str) -> None:
        t0 = time.perf_counter()
        emb = self.embedder(path, dtype, max(self.batches), compile=False)
        load_s = time.perf_counter() - t0
        self.info[name].setdefault("dim", emb.dim)
        if emb.attn_implementation:
            self.info[name]["attn_implementation"] = emb.attn_implementation
        self.outs[name][dtype] = emb.embed_images(self.corr)
        self.measure(emb, name, dtype, False, self.batches, {"load_s": load_s})

    def eager_rows(self, name: str, spec: dict) -> None:
        """Build the model, every dtype's eager rows, then the dtypes' cosines against fp32."""
        st = self.st
        if self.run.left() < 20:
            st.skip(name, f"out of time ({self.run.left():.0f} s left of the step's budget)")
            return
        path = self.run.tmp / ("clip_" + re.sub(r"\W+", "_", name))
        got = st.guard(f"{name}: build", save_clip, path, spec, self.dev, self.run.seed)
        if got is None:
            return
        self.info[name], self.outs[name] = got, {}
        for dtype in self.dtypes:
            if self.run.left() < 8:
                st.skip(f"{name} {dtype}", "out of time")
                continue
            st.guard(f"{name} {dtype} eager", self.eager, name, str(path), dtype)
            free_memory(self.torch, self.gpu)
        ref = self.outs[name].get("float32")
        for dtype, thr, soft in (("float16", 0.99, False), ("bfloat16", 0.98, True)):
            if ref is None or dtype not in self.outs[name]:
                continue
            c = _cos(self.outs[name][dtype], ref, ref)
            st.data.setdefault("correctness", {})[f"{name} {dtype} vs float32"] = c
            st.check(f"{name} {dtype} vs float32 cosine", c["min_cos"] >= thr, f"min {c['min_cos']:.5f} < {thr}",
                     soft=soft)
        if ref is not None and len(ref) > 1:
            g = ref @ ref.T
            st.data.setdefault("correctness", {})[f"{name} spread"] = {
                "mean_cos_between_images": float((g.sum() - np.trace(g)) / (len(g) * (len(g) - 1)))}

    # -- CUDA graphs: torch.compile(mode="reduce-overhead"), one static batch per embedder ---------
    def compiled(self, name: str, dtype: str, b: int) -> None:
        st = self.st
        t0 = time.perf_counter()
        emb = self.embedder(self.info[name]["path"], dtype, b, compile=True)
        load_s = time.perf_counter() - t0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            out = emb.embed_images(self.corr)  # the first call compiles
            self.sync()
            compile_s = time.perf_counter() - t0
        fell_back = not emb.compiled
        why = [str(w.message)[:300] for w in caught if "compile" in str(w.message)]
        st.check(f"{name} {dtype} b{b} compiled", not fell_back, why[:1] or "fell back to eager")
        self.compile_est[name] = compile_s
        if name == "ViT-B/16" and not self.vit_l_measured:
            self.compile_est["ViT-L/14"] = 2 * compile_s  # twice the layers, a third more width
        self.vit_l_measured |= name == "ViT-L/14"
        eager_out = self.outs[name].get(dtype)
        if eager_out is not None:
            c = _cos(out, eager_out, self.outs[name].get("float32", eager_out))
            st.data.setdefault("correctness", {})[f"{name} {dtype} graphs b{b} vs eager"] = c
            st.check(f"{name} {dtype} b{b} graphs vs eager cosine", c["min_cos"] >= 0.99,
                     f"min {c['min_cos']:.5f} < 0.99", soft=True)
        if not fell_back:
            self.measure(emb, name, dtype, True, [b], {"load_s": load_s, "compile_s": compile_s})

    def graph_rows(self) -> None:
        st, batches = self.st, self.batches
        plan = [("ViT-B/16", "float16", max(batches)), ("ViT-B/16", "float16", min(batches)),
                ("ViT-L/14", "float16", max(batches)), ("ViT-B/16", "bfloat16", max(batches)),
                ("ViT-L/14", "float16", min(batches)), ("ViT-B/16", "bfloat16", min(batches)),
                ("ViT-L/14", "bfloat16", max(batches)), ("ViT-L/14", "bfloat16", min(batches))]
        plan = list(dict.fromkeys(p for p in plan if p[0] in self.info))
        self.compile_est = {"ViT-B/16": 60.0, "ViT-L/14": 120.0}  # compile seconds guessed until one is measured
        self.vit_l_measured = False
        for name, dtype, b in plan:
            est = self.compile_est[name]
            if self.run.left() < est + 10:
                st.skip(f"{name} {dtype} graphs b{b}", f"out of time: {self.run.left():.0f} s left, compile needs "
                                                       f"~{est:.0f} s")
                continue
            st.guard(f"{name} {dtype} graphs b{b}", self.compiled, name, dtype, b)
            try:
                self.torch._dynamo.reset()  # drop the graphs (and their memory pool) before the next one
            except Exception:  # noqa: BLE001
                pass
            free_memory(self.torch, self.gpu)

    # -- the tables and the headline ---------------------------------------------------------------
    def report(self) -> None:
        st, rows = self.st, []
        by = {(r["model"], r["dtype"], r["graphs"], r["batch"]): r for r in self.runs}
        for r in self.runs:
            r32 = by.get((r["model"], "float32", False, r["batch"]))
            eag = by.get((r["model"], r["dtype"], False, r["batch"]))
            r["e2e_x_fp32"] = r["e2e_img_s"] / r32["e2e_img_s"] if r32 else None
            r["e2e_x_eager"] = r["e2e_img_s"] / eag["e2e_img_s"] if (eag and r["graphs"]) else None
            rows.append([r["model"], r["dtype"], "yes" if r["graphs"] else "no", r["batch"], r["e2e_img_s"],
                         r.get("model_img_s"), r.get("model_TFLOPS"), r["preprocess_img_s"], r["e2e_x_fp32"],
                         r["e2e_x_eager"], r.get("compile_s", r.get("load_s"))])
        if rows:
            print(f"  images/s on {self.dev}: e2e = embed_images on {self.fw}x{self.fh} RGB (upload, resize, crop, "
                  f"normalize, model, back to the host); model = the image tower alone; x fp32 / x eager: e2e ratios")
            print_table(["model", "dtype", "graphs", "batch", "e2e img/s", "model img/s", "TFLOPS", "preproc img/s",
                         "x fp32", "x eager", "load/compile s"], rows)
        cr = st.data.get("correctness", {})
        if cr:
            print_table(["pair", "min cos", "mean cos", "min centred cos"],
                        [[kk] + [f"{v[q]:.5f}" for q in ("min_cos", "mean_cos", "min_centred_cos")]
                         for kk, v in cr.items() if "min_cos" in v])
        parts, bmax = [], max(self.batches)
        for name in self.info:
            e = by.get((name, "float16", False, bmax)) or by.get((name, "float32", False, bmax))
            if not e:
                continue
            text = f"{name} {e['dtype']} b{bmax}: {fmt(e['e2e_img_s'])} img/s e2e, {fmt(e.get('model_img_s'))} model"
            gph = by.get((name, "float16", True, bmax))
            if gph:
                text += f", graphs {fmt(gph['e2e_img_s'])} e2e / {fmt(gph.get('model_img_s'))} model"
            c = cr.get(f"{name} float16 vs float32")
            if c:
                text += f", fp16 vs fp32 min cos {c['min_cos']:.4f}"
            parts.append(text)
        st.headline = "; ".join(parts) + ("" if self.gpu else " (CPU plumbing run, no CUDA)")


def embedder_rows(run, st) -> None:
    quiet_hf()
    bench = EmbedderBench(run, st)
    for name, spec in bench.models.items():
        bench.eager_rows(name, spec)
    if bench.gpu:
        bench.graph_rows()
    else:
        st.skip("graphs", "no CUDA: CUDA graphs (compile=True) apply on CUDA only")
    bench.report()


def cuda_main(args) -> int:
    """ViT-B/16- and ViT-L/14-sized CLIP vision towers (random weights, real sizes) through
    make_image_embedder(body="torch") on CUDA: images/s at batch 32 and 128 in fp32 (baseline),
    fp16 and bf16, end to end on 640x360 RGB frames, the model alone and the preprocessing alone;
    then compile=True (CUDA graphs) while the budget has room; fp16/bf16 vs fp32 cosines.
    --plumbing: a tiny CLIP on the CPU, fp32 and fp16, batch 2."""
    return run_part("bench_embed", "embedder", embedder_rows, args)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="1,8,32", help="batch sizes (default 1,8,32)")
    ap.add_argument("--vitb-batches", default=None,
                    help="batch sizes for ViT-B/16 (default: --batches; 1,8 with --quick)")
    ap.add_argument("--sizes", default="640x360,1280x720", help="WxH frame sizes for the descriptor")
    ap.add_argument("--model-input", default="640x360", help="WxH of the frames given to the model bodies")
    ap.add_argument("--repeats", type=int, default=None, help="timed rounds for fast rows (default 3; 1 with --quick)")
    ap.add_argument("--slow-repeats", type=int, default=None,
                    help="timed calls per ViT-B/16 row (default 2; 1 with --quick)")
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds per sample at least, fast rows")
    ap.add_argument("--no-vitb", action="store_true", help="skip the ViT-B/16 rows (the slow part)")
    ap.add_argument("--no-onnx", action="store_true", help="skip the onnxruntime rows")
    ap.add_argument("--quick", action="store_true", help="smoke run")
    ap.add_argument("--name", default="bench_embed", help="results file name (benchmarks/results/<name>.json)")
    ap.add_argument("--embed-batches", default="32,128", help="--device cuda: batch sizes")
    add_device_args(ap, default_budget=150.0)
    return ap.parse_args(argv)


# -- the CPU table -------------------------------------------------------------------------------------
class Rows:
    """The CPU table's rows and their JSON records."""

    def __init__(self):
        self.rows, self.results = [], []

    def add(self, model, body, inp, batch, sec_per_call, n, ratio=None, ratio_is="", extra=None) -> float:
        ips = n / sec_per_call
        self.rows.append([model, body, inp, batch, ips, 1e3 / ips, ratio, ratio_is])
        self.results.append({"model": model, "body": body, "input": inp, "batch": batch, "images_per_s": ips,
                             "ms_per_image": 1e3 / ips, "ratio": ratio, "ratio_is": ratio_is, **(extra or {})})
        print(f"  {model:9s} {body:12s} {inp:9s} batch {batch:3d}: {ips:9.1f} images/s", flush=True)
        return ips


def descriptor_rows(out: Rows, w: int, h: int, batches: list, repeats: int, min_time: float) -> None:
    """descriptor-v1 with the native area resize and with its numpy reference, against a memcpy
    of the same frames, per batch size."""
    from vam_engine.embed import DescriptorEmbedder
    from vam_engine.embed.descriptor import box_sums_reference

    frames = make_frames(max(batches), h, w)
    copy_dst = np.empty_like(frames)
    for b in batches:
        native, numpy_resize = DescriptorEmbedder(batch_size=b), DescriptorEmbedder(batch_size=b,
                                                                                      box_sums=box_sums_reference)
        x = frames[:b]
        t = time_rounds({"descriptor": lambda: native.embed_images(x),
                         "descriptor_numpy_resize": lambda: numpy_resize.embed_images(x),
                         "memcpy": lambda: np.copyto(copy_dst[:b], x)},
                        repeats=repeats, min_time=min_time)
        sec, cp = t["descriptor"]["median"], t["memcpy"]["median"]
        out.add("-", "descriptor", f"{w}x{h}", b, sec, b, ratio=cp / sec, ratio_is="of memcpy BW",
                extra={"memcpy_s": cp, "timing": t["descriptor"]})
        sec_np = t["descriptor_numpy_resize"]["median"]
        out.add("-", "descriptor (numpy area resize)", f"{w}x{h}", b, sec_np, b, ratio=cp / sec_np,
                ratio_is="of memcpy BW", extra={"memcpy_s": cp, "timing": t["descriptor_numpy_resize"],
                                                "native_speedup": sec_np / sec})


def model_bodies(args, path: str, batch: int, tmp: Path) -> tuple[dict, dict]:
    """The torch body and (unless --no-onnx) the onnxruntime body of one model; their load seconds."""
    from vam_engine.config import EmbedConfig
    from vam_engine.embed import make_image_embedder

    t0 = time.perf_counter()
    bodies = {"torch": make_image_embedder(EmbedConfig(body="torch", model=path, batch_size=batch))}
    load_s = {"torch": time.perf_counter() - t0}
    if not args.no_onnx:
        t0 = time.perf_counter()
        bodies["onnxruntime"] = make_image_embedder(EmbedConfig(body="onnx", model=path, batch_size=batch,
                                                                cache_dir=str(tmp / "cache")))
        load_s["onnxruntime (export + load)"] = time.perf_counter() - t0
    return bodies, load_s


def model_rows(out: Rows, args, kind: str, batches: list, tmp: Path, repeats: int) -> None:
    """One random-weight CLIP: torch and onnxruntime end to end on the model input frames, and our
    preprocessing alone, per batch size; ratios against torch."""
    from vam_engine.embed.models import preprocess

    slow = kind != "tiny"
    mw, mh = (int(v) for v in args.model_input.split("x"))
    print(kind, flush=True)
    t0 = time.perf_counter()
    path = build_clip(kind, tmp / kind.replace("/", ""))
    build_s = time.perf_counter() - t0
    frames = make_frames(max(batches), mh, mw, seed=1)
    bodies, load_s = model_bodies(args, path, max(batches), tmp)
    print(f"  built in {build_s:.1f} s, loaded: " + ", ".join(f"{k} {v:.1f} s" for k, v in load_s.items()), flush=True)
    spec, inp = bodies["torch"].source.spec, f"{mw}x{mh}"
    for b in batches:
        x = frames[:b]
        fns = {name: (lambda e=e: e.embed_images(x)) for name, e in bodies.items()}
        fns["preprocess"] = lambda: preprocess(x, spec, "cpu")
        if slow:  # one warm-up image each, then few timed calls
            if b == batches[0]:
                for e in bodies.values():
                    e.embed_images(frames[:1])
            t = time_rounds(fns, warmup=0, repeats=args.slow_repeats or (1 if args.quick else 2))
        else:
            t = time_rounds(fns, repeats=repeats, min_time=args.min_time)
        base = b / t["torch"]["median"]
        for name in bodies:
            sec = t[name]["median"]
            out.add(kind, name, inp, b, sec, b, ratio=(b / sec) / base, ratio_is="x torch",
                    extra={"timing": t[name], "load_s": load_s.get(name, load_s.get(name + " (export + load)"))})
        hw = spec.out_hw
        out.add(kind, "preprocess", f"{inp}->{hw[1]}x{hw[0]}", b, t["preprocess"]["median"], b,
                ratio=(b / t["preprocess"]["median"]) / base, ratio_is="x torch", extra={"timing": t["preprocess"]})


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.device == "cuda":
        require_cuda("bench_embed.py", args)
        return cuda_main(args)
    repeats = args.repeats or (1 if args.quick else 3)
    batches = [int(b) for b in args.batches.split(",")]
    vitb_batches = [int(b) for b in (args.vitb_batches or ("1,8" if args.quick else args.batches)).split(",")]
    warnings.simplefilter("ignore")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Rows()
    t_start = time.perf_counter()
    print("descriptor", flush=True)
    for w, h in (tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")):
        descriptor_rows(out, w, h, batches, repeats, args.min_time)
    with tempfile.TemporaryDirectory(prefix="bench_embed_") as tmp:
        for kind in ["tiny"] + ([] if args.no_vitb else ["vit-b/16"]):
            model_rows(out, args, kind, vitb_batches if kind != "tiny" else batches, Path(tmp), repeats)
    print()
    table = print_table(["model", "body", "input", "batch", "images/s", "ms/image", "ratio", "ratio is"], out.rows)
    import torch

    path = write_json(args.name, {"args": vars(args), "torch_threads": torch.get_num_threads(),
                                  "results": out.results, "table": table, "wall_s": time.perf_counter() - t_start})
    print(f"\nwall {time.perf_counter() - t_start:.0f} s; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
