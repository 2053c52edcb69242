#!/usr/bin/env python3
"""MLLM throughput through the engine's LocalQwenVL: prefill and decode tokens/s for batches of 1
and 8 requests (each 4 random 448x448 images + ~200 text tokens, greedy, 64 new tokens; best of
2), and the coarse->fine continuation: B = A + A's reply + a user turn with 2 more images, B's
prefill with A's prefix cached against cold (the cache cleared), with the same greedy tokens.

The model is a Qwen2-VL of a real size with random weights (no downloads; see save_qwen): 2b
(Qwen2-VL-2B dims) or 7b (Qwen2-VL-7B dims) on CUDA in bf16. Without ``--device cuda`` (or with
``--plumbing``) the tiny Qwen2-VL of vam_engine/synthetic/tiny_qwen.py runs on the CPU in fp32 through the same
code, in about 10-30 s.

    python benchmarks/bench_llm.py                         # tiny, CPU
    python benchmarks/bench_llm.py --device cuda           # 2b-sized, bf16, 1-2 minutes
    python benchmarks/bench_llm.py --device cuda --mllm-size 7b --device-budget 240
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from _common import add_device_args, fmt, free_memory, print_table, quiet_hf, require_cuda, run_part

from vam_engine.synthetic import tiny_qwen


# Dims of the real checkpoints (their config.json). Qwen2-VL-7B's LLM has the dims of
# Qwen2.5-VL-7B's (the model docs/gpu.md names); the vision towers differ (Qwen2.5-VL's uses window
# attention and a gated MLP), and LocalQwenVL is only verified on Qwen2-VL, so Qwen2-VL it is.
# The vocabulary keeps the real size (the embedding / lm_head bytes and the lm_head FLOPs of the
# real model); the tokenizer is the tiny one of vam_engine/synthetic/tiny_qwen.py and uses its first ids only.
# Qwen2-VL-2B ties lm_head to the input embedding; here it is untied: a tied random model only
# repeats its last input token (a row's product with itself dominates its logits). Same FLOPs and
# the same bytes read per decode step; the weights take 0.47 GB (151936 x 1536 bf16) more memory.
_QWEN_VISION = dict(depth=32, embed_dim=1280, num_heads=16, mlp_ratio=4, patch_size=14, spatial_merge_size=2,
                    temporal_patch_size=2)
QWEN_SIZES = {
    "2b": dict(label="Qwen2-VL-2B-sized",
               text=dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                         num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=False, rope_theta=1e6,
                         rms_norm_eps=1e-6),
               vision=dict(_QWEN_VISION, hidden_size=1536), sharpen=dict(lm=8.0)),
    "7b": dict(label="Qwen2-VL-7B-sized",
               text=dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                         num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False, rope_theta=1e6,
                         rms_norm_eps=1e-6),
               vision=dict(_QWEN_VISION, hidden_size=3584), sharpen=dict(lm=8.0)),
    # the dims and the weight sharpening of vam_engine/synthetic/tiny_qwen.py; vocab None: the tokenizer's size
    "tiny": dict(label="tiny Qwen2-VL",
                 text=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=None, tie_word_embeddings=False, rope_theta=1e4,
                           rms_norm_eps=1e-6),
                 vision=dict(depth=2, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2, patch_size=14,
                             spatial_merge_size=2, temporal_patch_size=2),
                 sharpen=dict(qk=10.0, vo=3.0, lm=8.0)),
}
# Qwen2-VL's own image processor bounds (so a 448x448 image is 32x32 patches, 256 image tokens)
_QWEN_PREPROCESSOR = {
    "image_processor_type": "Qwen2VLImageProcessor", "do_resize": True, "do_rescale": True,
    "rescale_factor": 1 / 255, "do_normalize": True, "do_convert_rgb": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
    "min_pixels": 56 * 56, "max_pixels": 28 * 28 * 16384, "patch_size": 14, "temporal_patch_size": 2,
    "merge_size": 2,
}


def _qwen_config(spec: dict, ids: dict, n_tok: int):
    """A Qwen2VLConfig of ``spec``'s dims with the tiny tokenizer's special ids. transformers 5
    takes a ``text_config`` with ``rope_parameters``; older versions take flat text kwargs with
    ``rope_scaling`` (and may silently ignore the other form), so each form is checked."""
    from transformers import Qwen2VLConfig

    t = dict(spec["text"])
    vocab = t.pop("vocab_size") or n_tok
    tie = t.pop("tie_word_embeddings")
    theta = t.pop("rope_theta")
    half = t["hidden_size"] // t["num_attention_heads"] // 2
    tq = half // 4  # Qwen2-VL's [16, 24, 24] for head_dim 128 (temporal, height, width)
    mrope = [tq, (half - tq) // 2, half - tq - (half - tq) // 2]
    special = dict(bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                   pad_token_id=ids["<|endoftext|>"])
    top = dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
               vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
               tie_word_embeddings=tie)
    want = (t["hidden_size"], t["num_hidden_layers"], vocab, mrope)

    def got(cfg):
        tc = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        rope = getattr(tc, "rope_parameters", None) or getattr(tc, "rope_scaling", None) or {}
        return (tc.hidden_size, tc.num_hidden_layers, tc.vocab_size, list(rope.get("mrope_section") or []))

    forms = {
        "text_config + rope_parameters": lambda: Qwen2VLConfig(
            text_config=dict(t, vocab_size=vocab, max_position_embeddings=32768, tie_word_embeddings=tie,
                             rope_parameters={"rope_type": "default", "rope_theta": theta, "mrope_section": mrope},
                             **special),
            vision_config=dict(spec["vision"]), **top),
        "flat + rope_scaling": lambda: Qwen2VLConfig(
            **t, vocab_size=vocab, max_position_embeddings=32768, rope_theta=theta,
            rope_scaling={"type": "mrope", "mrope_section": mrope}, vision_config=dict(spec["vision"]),
            **special, **top),
    }
    tried = []
    for form, make in forms.items():
        try:
            cfg = make()
        except Exception as e:  # noqa: BLE001 - the next form
            tried.append(f"{form}: {type(e).__name__}: {e}")
            continue
        if got(cfg) == want:
            return cfg
        tried.append(f"{form}: built {got(cfg)}, wanted {want}")
    raise RuntimeError("cannot build a Qwen2VLConfig in this transformers version: " + "; ".join(tried))


def save_qwen(path: Path, size: str, device: str, seed: int) -> dict:
    """A random-weight Qwen2VLForConditionalGeneration of ``size``, made on ``device``, saved in
    bfloat16 (float32 for the tiny one) to ``path`` with the tiny tokenizer, a generation config
    and Qwen2-VL's image processor bounds: a directory ``LocalQwenVL`` loads like a real one.

    Weights: the default init (std 0.02), then lm_head x8 (all sizes; the tiny one also sharpens
    attention like vam_engine/synthetic/tiny_qwen.py) so greedy picks do not hinge on rounding noise, and the
    lm_head rows of ids the tokenizer lacks and of the stop tokens zeroed: every other row's
    logit is then above them almost surely, so replies are text the tokenizer knows and each
    request decodes exactly max_tokens. Neither changes the FLOPs or the bytes."""
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen2VLForConditionalGeneration

    spec = QWEN_SIZES[size]
    t0 = time.perf_counter()
    tok_dir = path.parent / (path.name + "_tokenizer")
    try:
        tiny_qwen.build_tiny_qwen2_vl(tok_dir)  # the tokenizer is written first; only it is used
    except Exception:  # noqa: BLE001 - e.g. the tiny config's form in an older transformers
        if not (tok_dir / "tokenizer.json").exists():
            raise
    tok = PreTrainedTokenizerFast.from_pretrained(str(tok_dir))
    vocab = tok.get_vocab()
    n_tok = len(vocab)
    ids = {s: vocab[s] for s in tiny_qwen.SPECIAL_TOKENS}
    cfg = _qwen_config(spec, ids, n_tok)
    torch.manual_seed(seed)
    try:
        with torch.device(device):  # initialized where it is made: much faster for billions of weights
            model = Qwen2VLForConditionalGeneration(cfg)
    except Exception:  # noqa: BLE001 - the default device then
        model = Qwen2VLForConditionalGeneration(cfg)
    dtype = torch.float32 if size == "tiny" else torch.bfloat16
    model = model.to(dtype).eval()
    lm = getattr(model.model, "language_model", model.model)  # transformers 5 / older layouts
    visual = getattr(model.model, "visual", None) or getattr(model, "visual")
    sh = spec["sharpen"]
    stops = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    with torch.no_grad():
        for layer in lm.layers:
            for name, f in (("q_proj", sh.get("qk")), ("k_proj", sh.get("qk")), ("v_proj", sh.get("vo")),
                            ("o_proj", sh.get("vo"))):
                if f:
                    getattr(layer.self_attn, name).weight.mul_(f)
        w = model.lm_head.weight
        w.mul_(sh["lm"])
        w[n_tok:] = 0
        w[stops] = 0
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    build_s = time.perf_counter() - t0
    n_all = sum(p.numel() for p in model.parameters())  # tied weights are counted once
    n_vis = sum(p.numel() for p in visual.parameters())
    n_layers = sum(p.numel() for p in lm.layers.parameters())
    n_merger = sum(p.numel() for p in visual.merger.parameters()) if hasattr(visual, "merger") else 0
    tc = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    vc = cfg.vision_config
    t0 = time.perf_counter()
    model.save_pretrained(str(path))
    save_s = time.perf_counter() - t0
    del model
    for f in tok_dir.iterdir():  # the tokenizer's files (not the tiny model's)
        if f.is_file() and not (f.name in ("config.json", "generation_config.json", "preprocessor_config.json")
                                or f.name.startswith("model") or f.suffix in (".safetensors", ".bin")):
            shutil.copy2(f, path / f.name)
    (path / "generation_config.json").write_text(json.dumps({"eos_token_id": stops, "pad_token_id": stops[1]}))
    (path / "preprocessor_config.json").write_text(json.dumps(_QWEN_PREPROCESSOR, indent=1))
    nbytes = sum(f.stat().st_size for f in path.iterdir() if f.suffix == ".safetensors")
    return {"path": str(path), "label": spec["label"], "saved_dtype": str(dtype).replace("torch.", ""),
            "params_M": n_all / 1e6, "vision_params_M": n_vis / 1e6, "text_layer_params_M": n_layers / 1e6,
            "merger_params_M": n_merger / 1e6, "vocab_size": tc.vocab_size, "tokenizer_vocab": n_tok,
            "hidden_size": tc.hidden_size, "layers": tc.num_hidden_layers, "heads": tc.num_attention_heads,
            "kv_heads": tc.num_key_value_heads, "intermediate_size": tc.intermediate_size,
            "vision_depth": vc.depth, "vision_embed_dim": vc.embed_dim,
            "tie_word_embeddings": bool(getattr(cfg, "tie_word_embeddings", None)),
            "kv_bytes_per_token": 2 * tc.num_hidden_layers * tc.num_key_value_heads
            * (tc.hidden_size // tc.num_attention_heads) * (4 if size == "tiny" else 2),
            "build_s": build_s, "save_s": save_s, "save_GB": nbytes / 1e9, "save_GBps": nbytes / 1e9 / save_s}


def _prefill_gflops(info: dict, prompt_tokens: int, n_images: int, patches_per_image: int) -> float:
    """Forward GFLOPs (2 per multiply-add) of one prompt's prefill: the text layers' weights over
    every token plus causal attention (2 L^2 d per layer), lm_head for the last token only, and the
    vision tower over each image's patches (its blocks over the patches, full attention within the
    image, the merger over a quarter of them). Norms, rotary and softmax are left out."""
    L, d = prompt_tokens, info["hidden_size"]
    text = 2 * info["text_layer_params_M"] * 1e6 * L + 2 * L * L * d * info["layers"] + 2 * d * info["vocab_size"]
    blocks = (info["vision_params_M"] - info["merger_params_M"]) * 1e6
    p, e = patches_per_image, info["vision_embed_dim"]
    vision = n_images * (2 * blocks * p + 4 * p * p * e * info["vision_depth"]
                         + 2 * info["merger_params_M"] * 1e6 * p / 4)
    return (text + vision) / 1e9


class MllmBench:
    """The rows of one run: the model built, saved and loaded through LocalQwenVL, then the
    batches' prefill/decode rows and the coarse->fine continuation rows. Each measured
    configuration is a method; ``mllm_rows`` calls them in order."""

    N_IMAGES, IMAGE_PX, TEXT_TOKENS = 4, 448, 200  # per request

    def __init__(self, run, st, size: str, dev: str, dtype: str, reps: int):
        import torch

        self.run, self.st, self.a = run, st, run.args
        self.torch, self.gpu = torch, run.cuda
        self.size, self.dev, self.dtype, self.reps = size, dev, dtype, reps
        self.sync = torch.cuda.synchronize if self.gpu else None
        self.spec = QWEN_SIZES[size]
        self.batches = [int(b) for b in self.a.mllm_batches.split(",")]
        self.max_tokens = self.a.mllm_max_tokens
        self.mem = st.data["memory_GiB"] = {}
        self.runs, self.conts = [], []
        st.data["runs"], st.data["continuation"] = self.runs, self.conts  # filled in place: a watchdog save keeps them
        self.llm = self.info = None
        self.rng = np.random.default_rng([run.seed, 9])
        self.texts: dict = {}
        self.n_req = 0

    @classmethod
    def plan(cls, run, st) -> "MllmBench | None":
        """The model for this machine (the asked size on CUDA, the tiny one on the CPU); None,
        recorded as skipped, when the budget cannot build and load it."""
        a = run.args
        if run.cuda:
            size, dev, dtype, reps = a.mllm_size, "cuda", "bfloat16", 2
        else:
            size, dev, dtype, reps = "tiny", "cpu", "float32", 1
            st.skip("cuda", "no CUDA: the tiny Qwen2-VL on the CPU in float32 through the same code (plumbing only)"
                    + ("" if a.mllm_size == "tiny" else f"; --mllm-size {a.mllm_size} needs CUDA"))
        need = {"2b": 45.0, "7b": 120.0}.get(size, 10.0)  # build + save + load, guessed
        if run.left() < need:
            st.skip("mllm", f"out of time: {run.left():.0f} s left of the step's budget, building and loading a "
                            f"{size} model needs ~{need:.0f} s (raise --mllm-budget or run --steps mllm)")
            st.status, st.headline = "skipped", (f"skipped: out of time ({run.left():.0f} s left, {size} needs "
                                                 f"~{need:.0f} s)")
            return None
        b = cls(run, st, size, dev, dtype, reps)
        st.data.update(
            model=b.spec["label"], size=size, device=dev, dtype=dtype, batches=b.batches,
            request=f"system + {cls.N_IMAGES} random RGB {cls.IMAGE_PX}x{cls.IMAGE_PX} images + ~{cls.TEXT_TOKENS} "
                    f"text tokens, greedy, max_tokens {b.max_tokens}",
            weights="random (transformers Qwen2VLForConditionalGeneration from a config of the real dims; "
                    "real vocab size, the tiny tokenizer of vam_engine/synthetic/tiny_qwen.py uses its first ids; "
                    "lm_head untied and x8, its rows of unused ids and of the stop tokens zeroed: see save_qwen)",
            decode_tok_s="(sum over rows of completion_tokens - 1) / the longest decode_s: the tokens "
                         "made by decode steps (the first comes from the prefill's logits)",
            prefill_tok_s="sum of prompt_tokens / prefill_s (one prefill for the whole batch; it includes "
                          "the image preprocessing on the host)")
        return b

    # -- memory ------------------------------------------------------------------------------------
    def peak_reset(self) -> None:
        if self.gpu:
            self.sync()
            self.torch.cuda.reset_peak_memory_stats()

    def peak(self):
        return self.torch.cuda.max_memory_allocated() / 2 ** 30 if self.gpu else None

    # -- the model ---------------------------------------------------------------------------------
    def build_and_load(self) -> bool:
        """save_qwen, then LocalQwenVL on it; False (headline set) when either fails."""
        from vam_engine.llm.local_qwen import LocalQwenVL

        st = self.st
        self.info = st.guard("build + save", save_qwen, self.run.tmp / f"qwen2vl_{self.size}", self.size, self.dev,
                             self.run.seed)
        free_memory(self.torch, self.gpu)
        if self.info is None:
            st.headline = f"{self.spec['label']}: building the model failed"
            return False
        info = st.data["model_info"] = self.info
        print(f"  {info['label']}: {fmt(info['params_M'])} M params ({fmt(info['vision_params_M'])} M vision), "
              f"built in {info['build_s']:.1f} s, saved {fmt(info['save_GB'])} GB in {info['save_s']:.1f} s",
              flush=True)
        if self.gpu:
            self.mem["before_load"] = self.torch.cuda.memory_allocated() / 2 ** 30
            self.torch.cuda.reset_peak_memory_stats()

        def load():
            t0 = time.perf_counter()
            m = LocalQwenVL(info["path"], device=self.dev, dtype=self.dtype, max_batch=max(self.batches))
            if self.sync:
                self.sync()
            return m, time.perf_counter() - t0

        got = st.guard("load", load)
        if got is None:
            st.headline = f"{self.spec['label']}: LocalQwenVL could not load it"
            return False
        self.llm, st.data["load_s"] = got
        st.data["attn_implementation"] = self.llm.attn_implementation
        if self.gpu:
            self.mem["weights"] = self.torch.cuda.memory_allocated() / 2 ** 30
            self.mem["load_peak"] = self.peak()
        return True

    # -- requests ----------------------------------------------------------------------------------
    def prepare_prompts(self) -> None:
        """The corpus lines for the text, the system message, and how many tokens an image is."""
        from vam_engine.llm.base import Message, Sampling

        self.lines = [ln.strip() for ln in tiny_qwen.CORPUS.splitlines() if ln.strip()]
        self.base_len = len(self.llm.tokenize([Message("user", [""])]))
        self.system = Message("system", ["You are a helpful assistant that watches a video stream and answers "
                                         "questions about it."])
        self.greedy = Sampling(temperature=0.0, max_tokens=self.max_tokens)
        plain = len(self.llm.tokenize([Message("user", ["x"])]))
        with_image = len(self.llm.tokenize([Message("user", ["x"] + self.images(1))]))
        self.img_tokens = with_image - plain - 2  # minus vision start/end
        self.patches = self.img_tokens * 4  # merge_size 2: 2x2 patches per image token
        self.st.data.update(image_tokens=self.img_tokens, patches_per_image=self.patches)

    def text(self, i: int) -> str:
        """~TEXT_TOKENS tokens of corpus sentences, different for each i."""
        from vam_engine.llm.base import Message

        if i not in self.texts:
            s, k = f"Request {i}.", i
            while len(self.llm.tokenize([Message("user", [s])])) - self.base_len < self.TEXT_TOKENS:
                s += " " + self.lines[k % len(self.lines)]
                k += 1
            self.texts[i] = s
        return self.texts[i]

    def images(self, n: int) -> list:
        """Fresh pixels every time: no request hits another's cache entry."""
        from vam_engine.llm.base import Image

        px = self.IMAGE_PX
        return [Image(self.rng.integers(0, 256, (px, px, 3), dtype=np.uint8)) for _ in range(n)]

    def request(self, n_images: int):
        from vam_engine.llm.base import LLMRequest, Message

        self.n_req += 1
        # its own system text too: the body caches every message boundary, and a shared system
        # message would be a (small) hit, not the full prefill this part measures
        own = Message("system", [f"{self.system.content[0]} Request {self.n_req}."])
        return LLMRequest([own, Message("user", self.images(n_images) + [self.text(self.n_req)])], self.greedy)

    def warmup(self) -> None:
        """CUDA context, cuBLAS and SDPA kernels; not measured."""
        from vam_engine.llm.base import LLMRequest, Message, Sampling

        t0 = time.perf_counter()
        self.llm.generate([LLMRequest([self.system, Message("user", self.images(1) + ["Describe the image."])],
                                      Sampling(max_tokens=4))])
        self.st.data["warmup_s"] = time.perf_counter() - t0

    # -- prefill / decode tokens/s for batches of 1 and 8 ------------------------------------------
    def batch_run(self, b: int, rep: int) -> dict:
        """One generate call of b fresh requests: prefill and decode tokens/s, TFLOPS, GB/s."""
        info, llm = self.info, self.llm
        reqs = [self.request(self.N_IMAGES) for _ in range(b)]
        self.peak_reset()
        t0 = time.perf_counter()
        rs = llm.generate(reqs)
        wall = time.perf_counter() - t0
        steps = max(x.completion_tokens for x in rs) - 1
        decode_s = max(x.decode_s for x in rs)
        prefill_s = max(x.prefill_s for x in rs)  # one group: the same for every row
        r = {"batch": b, "rep": rep, "prompt_tokens": sum(x.prompt_tokens for x in rs),
             "completion_tokens": sum(x.completion_tokens for x in rs),
             "cached_tokens": sum(x.cached_tokens for x in rs),
             "finish": dict(Counter(x.finish_reason for x in rs)), "prefill_s": prefill_s,
             "decode_s": decode_s, "wall_s": wall, "peak_GiB": self.peak()}
        r["prefill_tok_s"] = r["prompt_tokens"] / prefill_s
        r["decode_tok_s"] = sum(x.completion_tokens - 1 for x in rs) / decode_s if decode_s > 0 else None
        r["ms_per_step"] = decode_s / steps * 1e3 if steps > 0 else None
        # each decode step reads the text layers' and lm_head's weights once (the floor of its time)
        step_bytes = (info["text_layer_params_M"] * 1e6 + info["vocab_size"] * info["hidden_size"]) \
            * (2 if self.dtype == "bfloat16" else 4)
        r["decode_weights_GBps"] = step_bytes / (r["ms_per_step"] / 1e3) / 1e9 if steps > 0 else None
        gfl = sum(_prefill_gflops(info, x.prompt_tokens, self.N_IMAGES, self.patches) for x in rs)
        r["prefill_TFLOPS"] = gfl / prefill_s / 1e3
        return r

    def batch_rows(self) -> None:
        """Best of ``reps`` by wall time per batch size; a table."""
        st, rows = self.st, []
        for b in self.batches:
            best = None
            for rep in range(self.reps):
                if self.run.left() < 8 + 2 * b:
                    st.skip(f"b{b} rep{rep}", f"out of time ({self.run.left():.0f} s left)")
                    continue
                r = st.guard(f"b{b} rep{rep}", self.batch_run, b, rep)
                if r is not None and (best is None or r["wall_s"] < best["wall_s"]):
                    best = r
            if best is None:
                continue
            self.runs.append(best)
            st.check(f"b{b}: no prefix-cache hit (fresh images)", best["cached_tokens"] == 0,
                     f"{best['cached_tokens']} cached tokens")
            rows.append([f"b{b}", best["prompt_tokens"], best["completion_tokens"], best["prefill_s"],
                         best["prefill_tok_s"], best["prefill_TFLOPS"], best["decode_s"], best["decode_tok_s"],
                         best["ms_per_step"], best["decode_weights_GBps"], best["peak_GiB"]])
        if rows:
            print(f"  {self.info['label']} {self.dtype} on {self.dev}, each request: {st.data['request']} "
                  f"({self.img_tokens} tokens per image); best of {self.reps} by wall time")
            print_table(["batch", "prompt tok", "gen tok", "prefill s", "prefill tok/s", "prefill TFLOPS",
                         "decode s", "decode tok/s", "ms/step", "weights GB/s", "peak GiB"], rows)
            print("  (prefill TFLOPS: estimated forward FLOPs over prefill_s; weights GB/s: the text layers' and "
                  "lm_head's bytes once per decode step)")
        self.mem["kv_cache_after_batches"] = self.llm.cache_info()["bytes"] / 2 ** 30

    # -- coarse -> fine: B = A + A's reply + a new user turn with 2 more images --------------------
    def continuation(self, rnd: int) -> dict:
        """B's prefill with A's prefix cached, then cold (the same LocalQwenVL, its prefix cache
        cleared: same weights, same warm kernels); the same greedy tokens both ways."""
        from vam_engine.llm.base import LLMRequest, Message

        llm, st = self.llm, self.st
        A = [self.system, Message("user", self.images(self.N_IMAGES) + [self.text(1000 + rnd)])]
        ra = llm.generate([LLMRequest(A, self.greedy)])[0]
        L_A = len(llm.tokenize(A))
        B = A + [Message("assistant", [ra.text]),
                 Message("user", self.images(2) + ["Look closer at these two frames: what changed since the "
                                                   "first four?"])]
        L_B = len(llm.tokenize(B))
        self.peak_reset()
        warm = llm.generate([LLMRequest(B, self.greedy)])[0]
        c = {"round": rnd, "A_prompt_tokens": L_A, "A_prefill_s": ra.prefill_s, "A_decode_s": ra.decode_s,
             "B_prompt_tokens": L_B, "warm_cached_tokens": warm.cached_tokens,
             "warm_prefill_s": warm.prefill_s, "warm_decode_s": warm.decode_s, "warm_peak_GiB": self.peak(),
             "cache_bytes": llm.cache_info()["bytes"], "cache_entries": llm.cache_info()["entries"]}
        self.peak_reset()
        llm.clear_prefix_cache()
        st.data["cold"] = "the same LocalQwenVL, prefix cache cleared"
        cold = llm.generate([LLMRequest(B, self.greedy)])[0]
        c.update(cold_cached_tokens=cold.cached_tokens, cold_prefill_s=cold.prefill_s,
                 cold_decode_s=cold.decode_s, cold_peak_GiB=self.peak(),
                 prefill_speedup=cold.prefill_s / warm.prefill_s if warm.prefill_s > 0 else None)
        same = warm.token_ids == cold.token_ids
        n_same = next((i for i, (x, y) in enumerate(zip(warm.token_ids, cold.token_ids)) if x != y),
                      min(len(warm.token_ids), len(cold.token_ids)))
        c.update(same_tokens=same, same_leading_tokens=n_same, completion_tokens=len(warm.token_ids))
        st.check(f"continuation {rnd}: B hits A's cached prefix", L_A <= warm.cached_tokens < L_B,
                 f"cached {warm.cached_tokens}, A's prompt {L_A}, B's prompt {L_B}")
        st.check(f"continuation {rnd}: the cold B is uncached", cold.cached_tokens == 0, f"cached {cold.cached_tokens}")
        st.check(f"continuation {rnd}: cached and cold B give the same greedy tokens", same,
                 f"first difference at token {n_same} of {len(warm.token_ids)}", soft=self.gpu)
        return c

    def continuation_rows(self) -> None:
        st, rows = self.st, []
        for rnd in range(self.reps):
            if self.run.left() < 12:
                st.skip(f"continuation round {rnd}", f"out of time ({self.run.left():.0f} s left)")
                continue
            c = st.guard(f"continuation round {rnd}", self.continuation, rnd)
            if c is None:
                continue
            self.conts.append(c)
            rows.append([f"{rnd} cached", c["B_prompt_tokens"], c["warm_cached_tokens"], c["warm_prefill_s"],
                         c["prefill_speedup"], f"{c['same_leading_tokens']}/{c['completion_tokens']}",
                         c["warm_peak_GiB"]])
            rows.append([f"{rnd} cold", c["B_prompt_tokens"], c["cold_cached_tokens"], c["cold_prefill_s"], 1.0, "-",
                         c["cold_peak_GiB"]])
        if rows:
            print(f"  coarse->fine: A = system + {self.N_IMAGES} images + ~{self.TEXT_TOKENS} tokens; B = A + A's "
                  f"reply + a user turn with 2 more images; B's prefill with A's prefix cached vs cold "
                  f"({st.data.get('cold')})")
            print_table(["round, B", "prompt tok", "cached tok", "prefill s", "x cold", "same tokens", "peak GiB"],
                        rows)

    # -- the end -----------------------------------------------------------------------------------
    def finish(self) -> None:
        """Memory figures, the model closed, the headline."""
        mem, llm = self.mem, self.llm
        mem["kv_cache_end"] = llm.cache_info()["bytes"] / 2 ** 30
        self.st.data["cache_info"] = llm.cache_info()
        if self.gpu:  # the highest of the measured peaks (loading, the batches, the continuations)
            mem["peak_overall"] = max([mem.get("load_peak") or 0.0] + [r["peak_GiB"] or 0.0 for r in self.runs]
                                      + [c[k] or 0.0 for c in self.conts for k in ("warm_peak_GiB", "cold_peak_GiB")])
        llm.close()
        self.llm = None
        free_memory(self.torch, self.gpu)
        parts = [f"{self.info['label']} {self.dtype} on {self.dev}"]
        for r in self.runs:
            parts.append(f"b{r['batch']} prefill {fmt(r['prefill_tok_s'])} tok/s, "
                         f"decode {fmt(r['decode_tok_s'])} tok/s")
        if self.conts:
            c = self.conts[-1]
            parts.append(f"continuation prefill {fmt(c['warm_prefill_s'])} s cached ({c['warm_cached_tokens']}/"
                         f"{c['B_prompt_tokens']} tok) vs {fmt(c['cold_prefill_s'])} s cold "
                         f"(x{fmt(c['prefill_speedup'])}), same tokens {'yes' if c['same_tokens'] else 'no'}")
        if self.gpu and "weights" in mem:
            parts.append(f"weights {mem['weights']:.1f} GiB, peak {mem['peak_overall']:.1f} GiB")
        self.st.headline = "; ".join(parts) + ("" if self.gpu else " (CPU plumbing run, no CUDA)")


def mllm_rows(run, st) -> None:
    quiet_hf()
    bench = MllmBench.plan(run, st)
    if bench is None or not bench.build_and_load():
        return
    bench.prepare_prompts()
    st.guard("warmup", bench.warmup)
    bench.batch_rows()
    bench.continuation_rows()
    bench.finish()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mllm-size", choices=sorted(QWEN_SIZES), default="2b",
                    help="Qwen2-VL dims of the random-weight model on CUDA (the CPU run is always tiny)")
    ap.add_argument("--mllm-batches", default="1,8", help="batch sizes (requests per generate call)")
    ap.add_argument("--mllm-max-tokens", type=int, default=64, help="tokens generated per request (greedy)")
    add_device_args(ap, default_budget=120.0)
    args = ap.parse_args(argv)
    require_cuda("bench_llm.py", args)
    if args.device == "cpu":
        args.plumbing = True  # the CPU table is the tiny model's run
    return run_part("bench_llm", "mllm", mllm_rows, args)


if __name__ == "__main__":
    sys.exit(main())
