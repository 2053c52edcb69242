"""``LocalQwenVL``: a Qwen-VL model run in-process with transformers, batched, with a
content-addressed prefix KV cache.

What is exercised by the tests: Qwen2-VL (``Qwen2VLForConditionalGeneration``) on CPU with SDPA,
through a tiny random-weight checkpoint (vam_engine/synthetic/tiny_qwen.py). Qwen2.5-VL and Qwen3-VL load
through ``AutoModelForImageTextToText`` and go through the same code (same chat format, same
``get_rope_index`` / ``image_grid_thw`` / ``cache`` interfaces in this transformers version,
Qwen3-VL's deepstack features follow the image tokens of the uncached part), but no test runs
them: treat them as expected to work, not as verified. Video inputs are not used: a ``Clip`` is
sent as its frames, each an image preceded by ``t=<time>s``. Models with sliding-window
attention layers run without the prefix cache (a cropped sliding window cannot be extended).

How a batch runs:

* Each request is rendered to token ids in Qwen's chat format (``<|im_start|>role\\n ...
  <|im_end|>\\n``, then ``<|im_start|>assistant\\n``). Each piece (turn header, text part, image,
  turn end) is tokenized on its own, so a prompt that extends another (same messages plus more)
  has the other's ids as an exact prefix. No default system prompt is added. Each image becomes
  ``<|vision_start|>`` + ``grid_t*grid_h*grid_w // merge_size**2`` ``<|image_pad|>`` +
  ``<|vision_end|>``; message text is tokenized with special tokens split, so text cannot
  inject turn markers or image placeholders.
* Requests whose prompt has no cached prefix are prefilled together (left padding + attention
  mask), ``max_batch`` at a time, then decoded together; a row that stops leaves the batch.
  Requests with a cached prefix run one at a time (the cached KV has a different length per
  request; correctness first); see "Batching and the cache" below for which do.
* Decoding is greedy at temperature 0, else temperature / top-p sampling with a per-request
  ``torch.Generator`` (seeded by ``Sampling.seed``), so a seeded request samples the same tokens
  whether it runs alone or in a batch. A request stops at ``<|im_end|>`` / eos
  (finish_reason "stop") or after ``max_tokens`` (finish_reason "length"). Vision placeholder
  tokens are never sampled (they would have no pixels behind them). ``Sampling.json_object`` is
  ignored (no constrained decoding here).

The prefix cache (``llm.prefix_cache``): after a request, its KV is kept under several marks
(every message boundary, the prompt's end, the generated end, the prefix it reused), so a later
request starts from the longest prefix it shares with an earlier one at such a mark; see that
module for the addressing, the M-RoPE offsets and the eviction.

Batching and the cache: within one ``generate`` call, a request runs alone from its cached
prefix when the call has only it, when the prefix is a whole earlier prompt (or prompt +
reply), or when it is a message boundary covering at least half its prompt; otherwise (a short
shared head such as a system prompt) it is prefilled in the batch of uncached requests, since
batched decoding is worth more than the few tokens saved.

Public API: ``generate`` (the ``LLM`` contract; responses are ``QwenResponse``, which add the
generated ``token_ids``), ``tokenize(messages)`` (the prompt ids ``generate`` would feed),
``cache_info()`` and ``close()``. One lock serializes ``generate``, ``tokenize`` and ``close``, so
an instance can be shared between threads; within a call, uncached requests run first (batched),
then cached ones.

Timings: ``prefill_s`` is the time from the start of the request's group (image preprocessing
included) to its first logits, shared by all rows of a batch; ``decode_s`` the time from there
to the request's last token; ``total_s`` the time from the start of the ``generate`` call to the
request's last token (so it includes waiting for earlier groups of the same call).
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .base import Clip, Image, LLMError, LLMRequest, LLMResponse, Message, Sampling
from .prefix_cache import Entry, Mark, PrefixCache, Prompt, prefix_key, prefix_keys

_IM_START, _IM_END, _ENDOFTEXT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"


@dataclass
class QwenResponse(LLMResponse):
    """An ``LLMResponse`` that also carries the generated token ids (the stop token included),
    for callers that need to know exactly what the model produced (tests, benchmarks)."""
    token_ids: tuple = ()


@dataclass(eq=False)
class _Work:
    """One request on its way through prefill and decode."""
    index: int               # position in the generate() call
    prompt: Prompt
    sampling: Sampling
    positions: object = None  # torch.LongTensor (3, L): M-RoPE positions of the prompt
    rope_delta: int = 0
    cached: int = 0           # prompt tokens served from the prefix cache
    hit_key: bytes | None = None
    hit_mark: Mark | None = None
    pad: int = 0              # left padding of this row in its batch
    next_pos: int = 0         # M-RoPE position of the next token fed
    prompt_logits: object = None
    generator: object = None
    gen: list = field(default_factory=list)
    finish: str = ""
    prefill_s: float = 0.0
    prefill_end: float = 0.0  # perf_counter() when the first logits were ready
    done_at: float = 0.0      # perf_counter() when the last token was picked


class LocalQwenVL:
    """A Qwen-VL checkpoint directory run with transformers (see the module docstring)."""

    def __init__(self, model_path, *, device: str = "cpu", dtype="auto",
                 kv_cache_bytes: int = 2 << 30, max_batch: int = 8):
        import torch
        from transformers import AutoConfig, AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer

        self.name = f"local:{model_path}"
        path = os.fspath(model_path)
        if not os.path.isdir(path):
            raise LLMError(self.name, f"model directory {path!r} does not exist "
                                      "(only local paths are loaded)")
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise LLMError(self.name, f"{path!r} has no config.json: not a model directory")
        if max_batch < 1:
            raise LLMError(self.name, f"max_batch must be >= 1, got {max_batch}")
        if kv_cache_bytes < 0:
            raise LLMError(self.name, f"kv_cache_bytes must be >= 0, got {kv_cache_bytes}")

        self._torch = torch
        self._device = torch.device(device)
        on_cuda = self._device.type == "cuda"
        if dtype == "auto":
            self._dtype = torch.bfloat16 if on_cuda else torch.float32
        elif isinstance(dtype, str):
            if not isinstance(getattr(torch, dtype, None), torch.dtype):
                raise LLMError(self.name, f"dtype {dtype!r} is not a torch dtype name")
            self._dtype = getattr(torch, dtype)
        else:
            self._dtype = dtype
        # flash-attn needs CUDA and a 16-bit dtype; SDPA works everywhere else.
        use_flash = (on_cuda and importlib.util.find_spec("flash_attn") is not None
                     and self._dtype in (torch.float16, torch.bfloat16))
        self.attn_implementation = "flash_attention_2" if use_flash else "sdpa"

        try:
            config = AutoConfig.from_pretrained(path, local_files_only=True)
            self._tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
            # The PIL image processor: the default (fast) one needs torchvision.
            self._improc = AutoImageProcessor.from_pretrained(path, local_files_only=True, backend="pil")
            self._model = AutoModelForImageTextToText.from_pretrained(
                path, local_files_only=True, dtype=self._dtype,
                attn_implementation=self.attn_implementation).to(self._device).eval()
        except (OSError, ValueError, KeyError) as e:
            raise LLMError(self.name, f"cannot load the model from {path!r}: {e}") from e
        if not hasattr(getattr(self._model, "model", None), "get_rope_index"):
            raise LLMError(self.name, f"{type(self._model).__name__} is not a Qwen-VL model "
                                      "(no get_rope_index for M-RoPE positions)")

        self._config = config
        self._special_tokens(config, path)
        ip = self._improc
        self._patch = int(ip.patch_size)
        self._merge = int(ip.merge_size)
        self._min_pixels = int(ip.size.shortest_edge)
        self._max_pixels = int(ip.size.longest_edge)

        # transformers renamed `past_key_values` to `cache`; pass whichever this version takes.
        params = inspect.signature(self._model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

        text_config = config.get_text_config()
        sliding = "sliding_attention" in (getattr(text_config, "layer_types", None) or [])
        self._cache = PrefixCache(0 if sliding else int(kv_cache_bytes))
        self.max_batch = int(max_batch)
        self._lock = threading.Lock()

    def _special_tokens(self, config, path: str) -> None:
        """The ids of Qwen's vision and chat tokens, the stop ids and the ids never sampled."""
        vocab = self._tok.get_vocab()

        def token_id(attr, text):
            tid = getattr(config, attr, None)
            return tid if tid is not None else vocab.get(text)

        self._image_pad = token_id("image_token_id", "<|image_pad|>")
        self._vision_start = token_id("vision_start_token_id", "<|vision_start|>")
        self._vision_end = token_id("vision_end_token_id", "<|vision_end|>")
        if None in (self._image_pad, self._vision_start, self._vision_end) or _IM_START not in vocab:
            raise LLMError(self.name, f"{path!r}: the tokenizer lacks Qwen's chat or vision tokens")
        self._pad_id = (self._tok.pad_token_id if self._tok.pad_token_id is not None
                        else vocab.get(_ENDOFTEXT, 0))
        self._stop_ids = {vocab[t] for t in (_IM_END, _ENDOFTEXT) if t in vocab}
        for eos in (self._tok.eos_token_id, getattr(self._model.generation_config, "eos_token_id", None)):
            self._stop_ids.update(eos if isinstance(eos, (list, tuple)) else ([] if eos is None else [eos]))
        # Never sample vision placeholders: an <|image_pad|> without pixels breaks the next prompt.
        self._banned = sorted({vocab[t] for t in ("<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
                                                   "<|image_pad|>", "<|video_pad|>") if t in vocab}
                              | {self._image_pad, self._vision_start, self._vision_end})

    # ---- public ----------------------------------------------------------------------------

    def generate(self, requests: Sequence[LLMRequest]) -> list[LLMResponse]:
        with self._lock:
            if self._model is None:
                raise LLMError(self.name, "generate() after close()")
            t0 = time.perf_counter()
            works = [self._prepare(i, r) for i, r in enumerate(requests)]  # all checked before any compute
            found = [self._worth_alone(w.prompt, len(works)) for w in works]
            misses = [w for w, f in zip(works, found) if not f]
            hits = [w for w, f in zip(works, found) if f]
            try:
                with self._torch.inference_mode():
                    for start in range(0, len(misses), self.max_batch):
                        self._run(misses[start:start + self.max_batch], None)
                    for w in hits:  # one at a time; look up again (an entry may have gone or grown)
                        self._run([w], self._lookup(w.prompt))
            except self._torch.cuda.OutOfMemoryError as e:
                raise LLMError(self.name, f"out of GPU memory: {e}", retryable=True) from e
            return [self._response(w, t0) for w in works]

    def _worth_alone(self, p: Prompt, n_requests: int) -> bool:
        """Whether ``p`` runs alone from its longest cached prefix rather than in the batch of
        uncached prompts: always when it is alone anyway or the prefix is a whole earlier prompt
        (or prompt + reply); a message boundary only when it covers at least half the prompt
        (batched decoding is worth more than skipping a short shared head such as a system
        prompt)."""
        hit = self._lookup(p, touch=False)
        if hit is None:
            return False
        length, key, _, mark = hit
        if n_requests == 1 or mark.logits is not None or 2 * length >= len(p.ids):
            self._cache.touch(key)
            return True
        return False

    def tokenize(self, messages: Sequence[Message]) -> list:
        """The prompt token ids ``generate`` would feed for these messages (generation prompt
        included)."""
        with self._lock:  # the tokenizer's split-special-tokens switch is shared state
            return list(self._render(messages, "messages").ids)

    def render(self, messages: Sequence[Message]) -> Prompt:
        """The prompt ``generate`` would feed for these messages: token ids, and each image's
        token span and content digest (what the prefix cache compares)."""
        with self._lock:
            return self._render(messages, "messages")

    def clear_prefix_cache(self) -> None:
        """Drop every cached prefix, the model kept: the next requests prefill from the start."""
        with self._lock:
            self._cache.clear()

    def cache_info(self) -> dict:
        """The prefix cache's state: entries, addressable prefixes (marks), bytes and budget."""
        return {"entries": len(self._cache), "marks": self._cache.marks,
                "bytes": self._cache.nbytes, "budget": self._cache.budget}

    def close(self) -> None:
        with self._lock:
            self._cache.clear()
            if self._model is not None:
                self._model = None
                if self._device.type == "cuda":
                    self._torch.cuda.empty_cache()

    # ---- rendering -------------------------------------------------------------------------

    def _prepare(self, index: int, req: LLMRequest) -> _Work:
        where = f"request {index}" + (f" ({req.tag})" if req.tag else "")
        s = req.sampling
        if not req.messages:
            raise LLMError(self.name, f"{where}: no messages")
        if s.max_tokens < 1:
            raise LLMError(self.name, f"{where}: max_tokens must be >= 1, got {s.max_tokens}")
        if s.temperature < 0:
            raise LLMError(self.name, f"{where}: temperature must be >= 0, got {s.temperature}")
        if not 0 < s.top_p <= 1:
            raise LLMError(self.name, f"{where}: top_p must be in (0, 1], got {s.top_p}")
        return _Work(index=index, prompt=self._render(req.messages, where), sampling=s)

    def _text_ids(self, text: str, *, content: bool) -> list:
        # Message text is tokenized with special tokens split: a user cannot close a turn or
        # add an image placeholder by typing its marker.
        return self._tok.encode(text, add_special_tokens=False, split_special_tokens=content)

    def _render(self, messages: Sequence[Message], where: str) -> Prompt:
        p = Prompt(ids=[])
        for mi, m in enumerate(messages):
            if not isinstance(m, Message):
                raise LLMError(self.name, f"{where}: message {mi} is a {type(m).__name__}, not a Message")
            p.ids += self._text_ids(f"{_IM_START}{m.role}\n", content=False)
            for pi, part in enumerate(m.content):
                if isinstance(part, str):
                    p.ids += self._text_ids(part, content=True)
                elif isinstance(part, Image):
                    self._add_image(p, part, f"{where}: message {mi} part {pi}")
                elif isinstance(part, Clip):
                    for fi, (frame, t) in enumerate(zip(part.frames, part.times)):
                        p.ids += self._text_ids(f"t={float(t):.2f}s", content=True)
                        self._add_image(p, frame, f"{where}: message {mi} part {pi} frame {fi}")
                else:
                    raise LLMError(self.name, f"{where}: message {mi} part {pi} is a "
                                              f"{type(part).__name__}, not str, Image or Clip")
            p.ids += self._text_ids(f"{_IM_END}\n", content=False)
            p.bounds.append(len(p.ids))
        p.ids += self._text_ids(f"{_IM_START}assistant\n", content=False)
        return p

    def _add_image(self, p: Prompt, image, where: str):
        try:
            arr = image.array() if isinstance(image, Image) else None
        except (OSError, ValueError) as e:
            raise LLMError(self.name, f"{where}: cannot read image {image.data!r}: {e}") from e
        if not (isinstance(arr, np.ndarray) and arr.ndim == 3 and arr.shape[2] == 3
                and arr.dtype == np.uint8):
            got = (f"{arr.dtype} array of shape {arr.shape}" if isinstance(arr, np.ndarray)
                   else type(image).__name__)
            raise LLMError(self.name, f"{where}: an image must be an H x W x 3 uint8 array, got {got}")
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize
        try:
            h, w = smart_resize(arr.shape[0], arr.shape[1], factor=self._patch * self._merge,
                                min_pixels=self._min_pixels, max_pixels=self._max_pixels)
        except ValueError as e:  # e.g. an aspect ratio over 200
            raise LLMError(self.name, f"{where}: image of shape {arr.shape} cannot be used: {e}") from e
        grid = (1, h // self._patch, w // self._patch)  # one still image = one temporal patch
        n = grid[0] * grid[1] * grid[2] // self._merge ** 2
        p.ids.append(self._vision_start)
        p.spans.append((len(p.ids), len(p.ids) + n))
        p.ids += [self._image_pad] * n
        p.ids.append(self._vision_end)
        p.arrays.append(arr)
        # Digest of the array we read (Image.digest() hashes pixels, so a path and the same
        # array hash alike; hashing `arr` avoids reading a file twice).
        p.digests.append(Image(arr).digest())
        p.grids.append(grid)

    # ---- prefix cache ----------------------------------------------------------------------
    def _lookup(self, p: Prompt, touch: bool = True):
        """(length, key, entry, mark) of the longest cached prefix of ``p``, or None. ``touch``:
        the hit counts as a use of its entry (LRU)."""
        if not self._cache.budget:
            return None
        L = len(p.ids)
        lengths = [n for n in self._cache.lengths() if n <= L and not any(s < n < e for s, e in p.spans)]
        keys = prefix_keys(p, lengths)
        for length in lengths:  # longest first
            key = keys[length]
            found = self._cache.get(key)
            if found is None or (length == L and found[1].logits is None):
                continue  # a boundary mark has no next-token logits: it cannot serve an exact repeat
            if touch:
                self._cache.touch(key)
            return (length, key) + found
        return None

    def _store(self, w: _Work, kv: list, final_logits):
        """Keep a finished row's KV (prompt + generated tokens but the last) under its marks:
        the reused prefix, the prompt end, the generated end and every message boundary."""
        if not self._cache.budget:
            return
        p = w.prompt
        L = len(p.ids)
        fed = L + len(w.gen) - 1
        marks = {}
        if w.hit_mark is not None and w.cached < L:
            marks[w.hit_key] = w.hit_mark  # the reused prefix now also lives in this entry
        marks[prefix_key(p, L)] = Mark(L, w.rope_delta, w.prompt_logits)
        if fed > L:
            marks[prefix_key(p, fed, w.gen)] = Mark(fed, w.rope_delta, final_logits.clone())
        bounds = [b for b in p.bounds if 0 < b < L and not any(s < b < e for s, e in p.spans)]
        if bounds:
            if w.positions is None:  # an exact repeat ran no prefill: no positions computed yet
                w.positions, _ = self._positions(p)
            for b, key in prefix_keys(p, bounds).items():
                # the rope delta at the boundary: the position of the token after it, minus its offset
                marks.setdefault(key, Mark(b, int(w.positions[0, b]) - b, None))
        self._cache.put(kv, marks)

    # ---- running ---------------------------------------------------------------------------

    def _positions(self, p: Prompt):
        """M-RoPE positions (3, L) of the whole prompt and its rope delta."""
        torch = self._torch
        ids = torch.tensor([p.ids], dtype=torch.long)
        types = (ids == self._image_pad).int()
        grid = torch.tensor(p.grids, dtype=torch.long) if p.grids else None
        pos, delta = self._model.model.get_rope_index(input_ids=ids, mm_token_type_ids=types,
                                                      image_grid_thw=grid)
        return pos[:, 0, :].long(), int(delta.reshape(-1)[0])

    def _pixels(self, arrays: list, grids: list):
        torch = self._torch
        out = self._improc(images=arrays, return_tensors="pt")
        got = [tuple(int(x) for x in g) for g in out["image_grid_thw"]]
        if got != [tuple(g) for g in grids]:
            raise LLMError(self.name, f"the image processor gave patch grids {got}, the prompt "
                                      f"was built for {grids} (unsupported processor settings)")
        return (out["pixel_values"].to(self._device),
                torch.tensor(grids, dtype=torch.long, device=self._device))

    def _forward(self, ids, attn, pos, cache, pixels=None, grids=None):
        kwargs = {self._cache_kw: cache}
        if pixels is not None:
            kwargs.update(pixel_values=pixels, image_grid_thw=grids,
                          mm_token_type_ids=(ids == self._image_pad).int())
        out = self._model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True,
                          logits_to_keep=1, **kwargs)
        return out.logits[:, -1, :]

    def _run(self, works: list, hit):
        """Prefill then decode ``works`` together. ``hit`` (only with one work) is the cached
        prefix to start from: (length, key, entry, mark)."""
        t_start = time.perf_counter()
        for w in works:
            if w.sampling.temperature > 0:
                w.generator = self._torch.Generator(device=self._device)
                if w.sampling.seed is None:
                    w.generator.seed()
                else:
                    w.generator.manual_seed(int(w.sampling.seed))
        if hit is None:
            cache, attn, logits = self._prefill_batch(works)
        else:
            (w,) = works
            cache, attn, logits = self._prefill_from(w, *hit)
        t_prefill = time.perf_counter()
        for r, w in enumerate(works):
            w.prompt_logits = logits[r].clone()
            w.next_pos = len(w.prompt.ids) + w.rope_delta
            w.prefill_s, w.prefill_end = t_prefill - t_start, t_prefill
        self._decode(works, cache, attn, logits)

    def _prefill_batch(self, works: list):
        """Prefill uncached prompts together, left-padded to the longest."""
        from transformers import DynamicCache
        torch = self._torch
        Lmax = max(len(w.prompt.ids) for w in works)
        ids = torch.full((len(works), Lmax), self._pad_id, dtype=torch.long)
        attn = torch.zeros(len(works), Lmax, dtype=torch.long)
        pos = torch.zeros(3, len(works), Lmax, dtype=torch.long)  # padding's positions: unused
        arrays, grids = [], []
        for r, w in enumerate(works):
            w.pad = Lmax - len(w.prompt.ids)
            ids[r, w.pad:] = torch.tensor(w.prompt.ids)
            attn[r, w.pad:] = 1
            w.positions, w.rope_delta = self._positions(w.prompt)
            pos[:, r, w.pad:] = w.positions
            arrays += w.prompt.arrays  # row by row, in order: the model fills image tokens so
            grids += w.prompt.grids
        pixels, grid_t = self._pixels(arrays, grids) if arrays else (None, None)
        cache = DynamicCache(config=self._model.config)
        attn = attn.to(self._device)
        logits = self._forward(ids.to(self._device), attn, pos.to(self._device), cache, pixels, grid_t)
        return cache, attn, logits

    def _prefill_from(self, w: _Work, length: int, key: bytes, entry: Entry, mark: Mark):
        """Start from a copy of the first ``length`` cached tokens and prefill the rest."""
        from transformers import DynamicCache
        torch = self._torch
        L = len(w.prompt.ids)
        w.cached, w.hit_key, w.hit_mark = length, key, mark
        # DynamicCache copies these views (its layers concatenate into new tensors); should a
        # transformers version keep a view instead, clone, so the cached entry is never written.
        views = [(k[:, :, :length], v[:, :, :length]) for k, v in entry.kv]
        cache = DynamicCache(ddp_cache_data=views, config=self._model.config)
        if any(layer.keys.data_ptr() == k.data_ptr() for layer, (k, _) in zip(cache.layers, views)):
            cache = DynamicCache(ddp_cache_data=[(k.clone(), v.clone()) for k, v in views],
                                 config=self._model.config)
        attn = torch.ones(1, L, dtype=torch.long, device=self._device)
        if length == L:
            # An exact repeat: the mark holds the next-token logits and the prefix's rope delta.
            w.rope_delta = mark.rope_delta
            return cache, attn, mark.logits[None]
        # Positions over the whole prompt (all images' grids), fed from `length` on. The
        # prefix's keys were rotated with the same positions: check that at the seam.
        pos, w.rope_delta = self._positions(w.prompt)
        w.positions = pos
        if int(pos[0, length]) != length + mark.rope_delta:
            raise LLMError(self.name, f"cached prefix of {length} tokens ends at M-RoPE position "
                                      f"{length + mark.rope_delta - 1}, the prompt continues at "
                                      f"{int(pos[0, length])} (a bug)")
        new = [i for i, (start, _) in enumerate(w.prompt.spans) if start >= length]
        pixels, grids = None, None
        if new:  # pixels only for the images in the uncached part
            pixels, grids = self._pixels([w.prompt.arrays[i] for i in new], [w.prompt.grids[i] for i in new])
        ids = torch.tensor([w.prompt.ids[length:]], dtype=torch.long, device=self._device)
        logits = self._forward(ids, attn, pos[:, None, length:].to(self._device), cache, pixels, grids)
        return cache, attn, logits

    def _pick(self, logits, w: _Work) -> int:
        torch = self._torch
        logits = logits.float().clone()
        logits[self._banned] = float("-inf")
        s = w.sampling
        if s.temperature <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / s.temperature, dim=-1)
        if s.top_p < 1:
            sorted_p, order = torch.sort(probs, descending=True)
            # keep the smallest head whose mass reaches top_p (the top token always stays)
            drop = torch.cumsum(sorted_p, dim=-1) - sorted_p >= s.top_p
            sorted_p[drop] = 0
            return int(order[torch.multinomial(sorted_p, 1, generator=w.generator)])
        return int(torch.multinomial(probs, 1, generator=w.generator))

    def _decode(self, works: list, cache, attn, logits):
        torch = self._torch
        dev = self._device
        active = list(works)  # batch rows, in cache order
        while True:
            keep, toks = [], []
            for r, w in enumerate(active):
                tok = self._pick(logits[r], w)
                w.gen.append(tok)
                if tok in self._stop_ids:
                    w.finish = "stop"
                elif len(w.gen) >= w.sampling.max_tokens:
                    w.finish = "length"
                if w.finish:
                    w.done_at = time.perf_counter()
                    if self._cache.budget:
                        # the row's KV: prompt (without left padding) + generated tokens fed so far
                        kv = [(layer.keys[r:r + 1, :, w.pad:].clone(),
                               layer.values[r:r + 1, :, w.pad:].clone()) for layer in cache.layers]
                        assert kv[0][0].shape[2] == len(w.prompt.ids) + len(w.gen) - 1
                        self._store(w, kv, logits[r])
                else:
                    keep.append(r)
                    toks.append(tok)
            if not keep:
                return
            if len(keep) < len(active):  # finished rows leave the batch
                idx = torch.tensor(keep, dtype=torch.long, device=dev)
                cache.batch_select_indices(idx)
                attn = attn[idx]
                active = [active[r] for r in keep]
            ids = torch.tensor(toks, dtype=torch.long, device=dev)[:, None]
            attn = torch.cat([attn, torch.ones(len(active), 1, dtype=attn.dtype, device=dev)], dim=1)
            pos = torch.tensor([w.next_pos for w in active], dtype=torch.long, device=dev)
            pos = pos.view(1, -1, 1).expand(3, -1, 1)
            logits = self._forward(ids, attn, pos, cache)
            for w in active:
                w.next_pos += 1

    def _response(self, w: _Work, t0: float) -> LLMResponse:
        text_ids = w.gen[:-1] if w.finish == "stop" else w.gen
        return QwenResponse(
            text=self._tok.decode(text_ids, skip_special_tokens=True),
            prompt_tokens=len(w.prompt.ids), completion_tokens=len(w.gen), cached_tokens=w.cached,
            prefill_s=w.prefill_s, decode_s=w.done_at - w.prefill_end, total_s=w.done_at - t0,
            finish_reason=w.finish, token_ids=tuple(w.gen))
