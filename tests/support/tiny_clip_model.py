"""A tiny random-weight CLIP (or SigLIP) image-text model with a word-level tokenizer, built from
a config (no download): the embed tests' torch and ONNX bodies and the text search tests load it."""

_WORDS = ("a the of on with dog puppy cat photo spreadsheet car street person walking red blue green "
          "kitchen door open closed").split()


def save_tiny_clip(path, with_tokenizer=True, siglip=False):
    """A random-weight CLIP (projection 16) or SigLIP (dim 32) with a word-level tokenizer."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import CLIPConfig, CLIPModel, PreTrainedTokenizerFast, SiglipConfig, SiglipModel

    vocab = {"<pad>": 0, "<unk>": 1, "<bos>": 2, "<eos>": 3}
    for w in _WORDS:
        vocab[w] = len(vocab)
    text = dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=2, max_position_embeddings=16, bos_token_id=2, eos_token_id=3, pad_token_id=0)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                  image_size=32, patch_size=8)
    torch.manual_seed(0)
    if siglip:
        SiglipModel(SiglipConfig(text_config=text, vision_config=vision)).eval().save_pretrained(path)
    else:
        CLIPModel(CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)).eval().save_pretrained(path)
    if with_tokenizer:
        tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.post_processor = processors.TemplateProcessing(single="<bos> $A <eos>",
                                                           special_tokens=[("<bos>", 2), ("<eos>", 3)])
        PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
                                unk_token="<unk>").save_pretrained(path)
    return str(path)
