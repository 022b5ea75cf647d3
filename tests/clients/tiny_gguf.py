"""Writes a tiny llama-architecture GGUF with random weights, for llama-server.

Usage: tiny_gguf.py OUT_PATH
About 0.5 MB: 2 layers, embedding 64, 4 heads, FFN 128, context 256, F32
tensors from a fixed seed, and a GPT-2 byte-level tokenizer (256 byte tokens,
a few merges, ChatML special tokens and template). What it generates is noise;
it exists so that a real llama-server loads a model and answers the API.
"""

import sys

import gguf
import numpy as np

SEED = 7
CONTEXT = 256
EMBEDDING = 64
LAYERS = 2
HEADS = 4
FFN = 128

# Enough merges that the BPE tokenizer has work to do; each one's result is a token.
MERGES = [
    ("Ġ", "t"), ("h", "e"), ("Ġ", "a"), ("i", "n"), ("e", "r"), ("o", "n"),
    ("Ġt", "he"), ("r", "e"), ("Ġ", "s"), ("a", "t"), ("o", "r"), ("e", "n"),
    ("Ġ", "w"), ("i", "s"), ("Ġ", "o"), ("e", "s"), ("Ġ", "c"), ("Ġ", "h"),
    ("l", "l"), ("H", "e"), ("He", "ll"), ("Hell", "o"), ("Ġ", "i"), ("a", "n"),
]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def byte_tokens() -> list[str]:
    """GPT-2's byte-to-unicode mapping: one printable character per byte."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def main() -> None:
    (out,) = sys.argv[1:]
    tokens = byte_tokens() + [a + b for a, b in MERGES]
    types = [gguf.TokenType.NORMAL] * len(tokens)
    tokens += SPECIALS
    types += [gguf.TokenType.CONTROL] * len(SPECIALS)
    vocab = len(tokens)

    writer = gguf.GGUFWriter(out, "llama")
    writer.add_name("switchyard-tiny")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(EMBEDDING)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(EMBEDDING // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([f"{a} {b}" for a, b in MERGES])
    endoftext = tokens.index("<|endoftext|>")
    writer.add_bos_token_id(endoftext)
    writer.add_eos_token_id(endoftext)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    rng = np.random.default_rng(SEED)

    def weights(*shape: int) -> np.ndarray:
        # numpy's (rows, columns) is (outputs, inputs); the writer reverses it for GGML.
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    writer.add_tensor("token_embd.weight", weights(vocab, EMBEDDING))
    for i in range(LAYERS):
        block = f"blk.{i}"
        writer.add_tensor(f"{block}.attn_norm.weight", ones(EMBEDDING))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{block}.{name}.weight", weights(EMBEDDING, EMBEDDING))
        writer.add_tensor(f"{block}.ffn_norm.weight", ones(EMBEDDING))
        writer.add_tensor(f"{block}.ffn_gate.weight", weights(FFN, EMBEDDING))
        writer.add_tensor(f"{block}.ffn_up.weight", weights(FFN, EMBEDDING))
        writer.add_tensor(f"{block}.ffn_down.weight", weights(EMBEDDING, FFN))
    writer.add_tensor("output_norm.weight", ones(EMBEDDING))
    writer.add_tensor("output.weight", weights(vocab, EMBEDDING))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
