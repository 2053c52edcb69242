"""A tiny random-weight Qwen2-VL checkpoint built on the spot, so tests and benchmarks can run the
local MLLM body without downloading anything.

``build_tiny_qwen2_vl(path)`` writes a model directory that ``LocalQwenVL`` loads like a real one:
config + weights (Qwen2VLForConditionalGeneration), a byte-level BPE tokenizer trained here on a
small built-in corpus with Qwen's special tokens, a Qwen2-style chat template, and a
``preprocessor_config.json`` whose pixel bounds make a 56x56 image 4 image tokens. Everything is
seeded: two builds give the same files.
"""
from __future__ import annotations

import json
import os

# Qwen2's special tokens, in Qwen's order (the ids differ: here they come first in the vocab).
SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>",
    "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>", "<|box_end|>",
    "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
]

# A Qwen2-VL-style chat template (system/user/assistant turns; image and video parts become
# vision placeholders). LocalQwenVL renders prompts itself; the template is here so the directory
# also works with ordinary tokenizer.apply_chat_template callers.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% else %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Training text for the tokenizer: enough varied English that merges cover common words.
CORPUS = """\
You are a helpful assistant that watches a video stream and answers questions about it.
Describe the image. What is happening in the frame? A person walks across the street.
The red car stops at the light, then turns left. Two dogs play in the park near a tree.
At t=12.5s a man opens the door; at t=14.0s he leaves the room with a blue bag.
Summarize the clip in one sentence. List the objects you can see: chair, table, cup, laptop.
Is there anyone in the kitchen? Yes, a woman is cooking dinner and the radio is on.
The camera pans to the right and shows a parking lot with seven cars and one bicycle.
Answer with a JSON object: {"answer": "yes", "confidence": 0.9, "time": 3.5}.
Nothing changed since the last frame. The scene is quiet and the lights are off.
What did the person hold in their hand? They held a phone and looked at the screen.
"""


def build_tiny_qwen2_vl(path) -> str:
    """Write a tiny random Qwen2-VL model directory to ``path`` (created if missing) and return
    it as a string. Deterministic: fixed seed, fixed corpus."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (PreTrainedTokenizerFast, Qwen2VLConfig,
                              Qwen2VLForConditionalGeneration)

    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)

    # --- tokenizer: byte-level BPE, like Qwen's (every byte is a token, so any text encodes) ---
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=420, min_frequency=2, special_tokens=SPECIAL_TOKENS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS.splitlines() * 4, trainer=trainer)
    vocab_size = tok.get_vocab_size()
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        unk_token=None, bos_token=None, additional_special_tokens=SPECIAL_TOKENS[1:])
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)

    # --- model: 2 text layers of width 64, a 2-block vision tower of width 32 ---
    head_dim = 64 // 4
    config = Qwen2VLConfig(
        text_config=dict(
            vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                             "mrope_section": [2, 3, 3]},  # sums to head_dim / 2
            bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
            pad_token_id=ids["<|endoftext|>"], tie_word_embeddings=False),
        vision_config=dict(
            depth=2, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2, patch_size=14,
            spatial_merge_size=2, temporal_patch_size=2, in_channels=3),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    assert sum(config.text_config.rope_parameters["mrope_section"]) == head_dim // 2
    torch.manual_seed(0)
    model = Qwen2VLForConditionalGeneration(config)
    with torch.no_grad():
        # The default init (std 0.02) gives near-uniform attention, so the model would barely
        # notice wrong positions or a corrupted KV cache, and near-uniform logits, so greedy
        # picks would hinge on float noise. Sharpen attention (q, k) and strengthen its output
        # (v, o) so tests of positions and cached prefixes can fail; widen the logits.
        for layer in model.model.language_model.layers:
            layer.self_attn.q_proj.weight.mul_(10.0)
            layer.self_attn.k_proj.weight.mul_(10.0)
            layer.self_attn.v_proj.weight.mul_(3.0)
            layer.self_attn.o_proj.weight.mul_(3.0)
        model.lm_head.weight.mul_(8.0)
    model.eval()
    model.save_pretrained(path)
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
                   "pad_token_id": ids["<|endoftext|>"]}, f)

    # --- image preprocessing: 28x28-pixel units; 56x56 -> a 4x4 patch grid -> 4 tokens ---
    with open(os.path.join(path, "preprocessor_config.json"), "w") as f:
        json.dump({
            "image_processor_type": "Qwen2VLImageProcessor",
            "do_resize": True, "do_rescale": True, "rescale_factor": 1 / 255,
            "do_normalize": True, "do_convert_rgb": True,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711],
            "min_pixels": 56 * 56, "max_pixels": 112 * 112,
            "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
        }, f, indent=1)
    return path


if __name__ == "__main__":  # a model directory for trying the local body without weights:
    # python -m vam_engine.synthetic.tiny_qwen DIR
    import sys

    print(build_tiny_qwen2_vl(sys.argv[1] if len(sys.argv) > 1 else "tiny-qwen2-vl"))
