"""Image embedding throughput on this CPU: images/s per body and batch size.

Rows:
- ``descriptor`` (descriptor-v1, numpy) on 640x360 and 1280x720 RGB frames; ratio: its bytes/s
  over a memcpy of the same frames (the bandwidth ceiling: how far the one full-frame pass is
  from reading the frame once);
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
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from _common import print_table, time_rounds, write_json  # noqa: E402

MODELS = {
    "tiny": dict(vision=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                             image_size=32, patch_size=8), projection_dim=16),
    "vit-b/16": dict(vision=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                 num_attention_heads=12, image_size=224, patch_size=16), projection_dim=512),
}


def make_frames(n: int, h: int, w: int, seed: int = 0) -> np.ndarray:
    """N RGB frames: a colour gradient, a blocky texture and noise, panning a few pixels a frame."""
    rng = np.random.default_rng(seed)
    pad = 4 * n
    hh, ww = h + pad, w + pad
    yy, xx = np.mgrid[0:hh, 0:ww].astype(np.float32)
    base = np.stack([60 + 120 * xx / ww, 40 + 150 * yy / hh, 200 - 100 * xx / ww], axis=-1)
    cells = rng.integers(0, 3, (hh // 16 + 1, ww // 16 + 1, 3)).repeat(16, 0).repeat(16, 1)[:hh, :ww]
    base += (cells.astype(np.float32) - 1) * 25
    out = np.empty((n, h, w, 3), np.uint8)
    for i in range(n):
        img = base[2 * i:2 * i + h, 4 * i:4 * i + w] + rng.normal(0, 3.0, (h, w, 3)).astype(np.float32)
        out[i] = np.clip(img, 0, 255).astype(np.uint8)
    return out


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


def main(argv=None) -> int:
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
    args = ap.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    batches = [int(b) for b in args.batches.split(",")]
    vitb_batches = [int(b) for b in (args.vitb_batches or ("1,8" if args.quick else args.batches)).split(",")]
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    mw, mh = (int(v) for v in args.model_input.split("x"))
    warnings.simplefilter("ignore")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from vam_engine.embed import DescriptorEmbedder
    from vam_engine.embed.models import preprocess

    rows, results = [], []
    t_start = time.perf_counter()

    def add(model, body, inp, batch, sec_per_call, n, ratio=None, ratio_is="", extra=None):
        ips = n / sec_per_call
        rows.append([model, body, inp, batch, ips, 1e3 / ips, ratio, ratio_is])
        results.append({"model": model, "body": body, "input": inp, "batch": batch, "images_per_s": ips,
                        "ms_per_image": 1e3 / ips, "ratio": ratio, "ratio_is": ratio_is, **(extra or {})})
        print(f"  {model:9s} {body:12s} {inp:9s} batch {batch:3d}: {ips:9.1f} images/s", flush=True)
        return ips

    # -- descriptor --------------------------------------------------------------------------
    print("descriptor", flush=True)
    for (w, h) in sizes:
        frames = make_frames(max(batches), h, w)
        copy_dst = np.empty_like(frames)
        for b in batches:
            e = DescriptorEmbedder(batch_size=b)
            x = frames[:b]
            t = time_rounds({"descriptor": lambda: e.embed_images(x),
                             "memcpy": lambda: np.copyto(copy_dst[:b], x)},
                            repeats=repeats, min_time=args.min_time)
            sec, cp = t["descriptor"]["median"], t["memcpy"]["median"]
            add("-", "descriptor", f"{w}x{h}", b, sec, b, ratio=cp / sec, ratio_is="of memcpy BW",
                extra={"memcpy_s": cp, "timing": t["descriptor"]})

    # -- model bodies -------------------------------------------------------------------------
    from vam_engine.config import EmbedConfig
    from vam_engine.embed import make_image_embedder

    kinds = ["tiny"] + ([] if args.no_vitb else ["vit-b/16"])
    with tempfile.TemporaryDirectory(prefix="bench_embed_") as tmp:
        for kind in kinds:
            slow = kind != "tiny"
            kb = vitb_batches if slow else batches
            print(kind, flush=True)
            t0 = time.perf_counter()
            path = build_clip(kind, Path(tmp) / kind.replace("/", ""))
            build_s = time.perf_counter() - t0
            frames = make_frames(max(kb), mh, mw, seed=1)
            bodies = {}
            t0 = time.perf_counter()
            bodies["torch"] = make_image_embedder(EmbedConfig(body="torch", model=path, batch_size=max(kb)))
            load_s = {"torch": time.perf_counter() - t0}
            if not args.no_onnx:
                t0 = time.perf_counter()
                bodies["onnxruntime"] = make_image_embedder(EmbedConfig(body="onnx", model=path, batch_size=max(kb),
                                                                        cache_dir=str(Path(tmp) / "cache")))
                load_s["onnxruntime (export + load)"] = time.perf_counter() - t0
            print(f"  built in {build_s:.1f} s, loaded: " + ", ".join(f"{k} {v:.1f} s" for k, v in load_s.items()),
                  flush=True)
            spec = bodies["torch"].source.spec
            inp = f"{mw}x{mh}"
            for b in kb:
                x = frames[:b]
                fns = {name: (lambda e=e: e.embed_images(x)) for name, e in bodies.items()}
                fns["preprocess"] = lambda: preprocess(x, spec, "cpu")
                if slow:  # one warm-up image each, then few timed calls
                    if b == kb[0]:
                        for e in bodies.values():
                            e.embed_images(frames[:1])
                    t = time_rounds(fns, warmup=0, repeats=args.slow_repeats or (1 if args.quick else 2))
                else:
                    t = time_rounds(fns, repeats=repeats, min_time=args.min_time)
                base = b / t["torch"]["median"]
                for name in bodies:
                    sec = t[name]["median"]
                    add(kind, name, inp, b, sec, b, ratio=(b / sec) / base, ratio_is="x torch",
                        extra={"timing": t[name], "load_s": load_s.get(name, load_s.get(name + " (export + load)"))})
                hw = spec.out_hw
                add(kind, "preprocess", f"{inp}->{hw[1]}x{hw[0]}", b, t["preprocess"]["median"], b,
                    ratio=(b / t["preprocess"]["median"]) / base, ratio_is="x torch", extra={"timing": t["preprocess"]})
            del bodies

    print()
    table = print_table(["model", "body", "input", "batch", "images/s", "ms/image", "ratio", "ratio is"], rows)
    import torch

    path = write_json(args.name, {
        "args": vars(args), "torch_threads": torch.get_num_threads(), "results": results, "table": table,
        "wall_s": time.perf_counter() - t_start,
    })
    print(f"\nwall {time.perf_counter() - t_start:.0f} s; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
