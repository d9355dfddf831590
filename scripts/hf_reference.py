#!/usr/bin/env python3
"""Writes the HuggingFace parity fixtures of framework/model/hf_parity_test.cc.

For each variant below it builds a tiny randomly initialised transformers model
(hidden 64, 2 layers, vocab 256; nothing is downloaded), saves it as an HF
folder (config.json + model.safetensors, weights in bfloat16 to keep the
fixture small) and writes reference.safetensors with float32 logits computed by
transformers from exactly those (bf16-rounded) weights in float32:

  prompt          I64 [T]      the prompt, fed as one causal chain
  prefill_logits  F32 [T, V]   logits of every prompt token
  prefill_hidden  F32 [L+1, T, H]  the prefill's hidden states (output_hidden_states:
                               the embeddings, each layer's output, the final norm's)
  decode_tokens   I64 [D]      tokens fed one at a time after the prompt,
  decode_logits   F32 [D, V]   with past_key_values (HF's own KV cache)
  tree_tokens     I64 [N]      a token tree fed after the prompt, in
  tree_parents    I64 [N]      topological order (root's parent -1),
  tree_logits     F32 [N, V]   and each node's logits from a full causal
                               forward of prompt + the root-to-node path

Usage (on a machine with torch and transformers, CPU is enough):
  python3 scripts/hf_reference.py --out tests/fixtures/hf_parity
"""
import argparse
import json
import os
import shutil

import torch
import transformers
from safetensors.torch import save_file
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

TRANSFORMERS_MAJOR = int(transformers.__version__.split(".")[0])

COMMON = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=64,  # = hidden: keeps every fixture folder under 200 KB
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    rms_norm_eps=1e-6,
    bos_token_id=1,
    eos_token_id=2,
)

# name: (config class, model class, config overrides, rope theta, rope scaling or None)
VARIANTS = {
    "llama3_untied": (LlamaConfig, LlamaForCausalLM, dict(tie_word_embeddings=False), 500000.0,
                      # original_max_position_embeddings small enough that the
                      # head's wavelengths fall in all three llama3 regimes.
                      dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                           original_max_position_embeddings=32)),
    "llama_linear_tied": (LlamaConfig, LlamaForCausalLM, dict(tie_word_embeddings=True), 10000.0,
                          dict(rope_type="linear", factor=2.0)),
    # Llama's attention_bias puts biases on q, k, v and o.
    "llama_bias_mha_tied": (LlamaConfig, LlamaForCausalLM,
                            dict(tie_word_embeddings=True, attention_bias=True, num_key_value_heads=4), 10000.0, None),
    "qwen2_tied": (Qwen2Config, Qwen2ForCausalLM, dict(tie_word_embeddings=True, use_sliding_window=False),
                   1000000.0, None),
    # A window shorter than the prompt, so sliding-window attention matters.
    "mistral_window": (MistralConfig, MistralForCausalLM, dict(tie_word_embeddings=False, sliding_window=8),
                       10000.0, None),
}

PROMPT_LEN = 12
DECODE_LEN = 6
TREE_SIZE = 10


def make_config(config_cls, overrides, theta, scaling):
    kwargs = dict(COMMON)
    kwargs.update(overrides)
    if TRANSFORMERS_MAJOR >= 5:
        rope = {"rope_type": "default", "rope_theta": theta}
        if scaling:
            rope.update(scaling)
        kwargs["rope_parameters"] = rope
    else:
        kwargs["rope_theta"] = theta
        kwargs["rope_scaling"] = scaling
    return config_cls(**kwargs)


def randomize(model, generator):
    """Weights large enough that attention is far from uniform, so RoPE and
    masking errors show in the logits; random norms and biases too. Weights are
    rounded to bfloat16 (the stored precision) and kept in float32."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                values = 1.0 + 0.2 * torch.randn(p.shape, generator=generator)
            elif name.endswith(".bias"):
                values = 0.2 * torch.randn(p.shape, generator=generator)
            elif "embed_tokens" in name:
                values = torch.randn(p.shape, generator=generator)
            else:
                values = 0.15 * torch.randn(p.shape, generator=generator)
            p.copy_(values.to(torch.bfloat16).to(torch.float32))


def random_tree(generator, vocab):
    parents, tokens = [-1], [int(torch.randint(vocab, (1,), generator=generator))]
    while len(tokens) < TREE_SIZE:
        parents.append(int(torch.randint(len(tokens), (1,), generator=generator)))
        tokens.append(int(torch.randint(vocab, (1,), generator=generator)))
    return parents, tokens


def path_to(parents, node):
    path = []
    while node >= 0:
        path.append(node)
        node = parents[node]
    return path[::-1]


@torch.no_grad()
def references(model, generator, vocab):
    prompt = torch.randint(vocab, (PROMPT_LEN,), generator=generator)
    out = model(prompt[None], use_cache=True, output_hidden_states=True)
    prefill = out.logits[0].float()
    hidden = torch.stack([h[0].float() for h in out.hidden_states])
    past = out.past_key_values

    decode_tokens = torch.randint(vocab, (DECODE_LEN,), generator=generator)
    decode = []
    for tok in decode_tokens:
        out = model(tok.view(1, 1), past_key_values=past, use_cache=True)
        past = out.past_key_values
        decode.append(out.logits[0, -1].float())

    parents, tokens = random_tree(generator, vocab)
    tree = []
    for node in range(len(tokens)):
        path = torch.tensor([tokens[i] for i in path_to(parents, node)])
        ids = torch.cat([prompt, path])[None]
        tree.append(model(ids, use_cache=False).logits[0, -1].float())

    return {
        "prompt": prompt.to(torch.int64),
        "prefill_logits": prefill.contiguous(),
        "prefill_hidden": hidden.contiguous(),
        "decode_tokens": decode_tokens.to(torch.int64),
        "decode_logits": torch.stack(decode).contiguous(),
        "tree_tokens": torch.tensor(tokens, dtype=torch.int64),
        "tree_parents": torch.tensor(parents, dtype=torch.int64),
        "tree_logits": torch.stack(tree).contiguous(),
    }


def save_model(model, folder):
    bf16 = model.to(torch.bfloat16)
    try:
        bf16.save_pretrained(folder, safe_serialization=True)
    except TypeError:  # transformers versions without the argument always write safetensors
        bf16.save_pretrained(folder)
    model.to(torch.float32)
    for extra in os.listdir(folder):  # only config.json and the weights are fixtures
        if extra not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(folder, extra))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="tests/fixtures/hf_parity")
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    summary = {}
    for index, (name, (config_cls, model_cls, overrides, theta, scaling)) in enumerate(VARIANTS.items()):
        generator = torch.Generator().manual_seed(args.seed + index)
        config = make_config(config_cls, overrides, theta, scaling)
        # Eager attention: the plainest reference (masks applied as written).
        model = model_cls._from_config(config, attn_implementation="eager").eval()
        randomize(model, generator)
        folder = os.path.join(args.out, name)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        refs = references(model, generator, config.vocab_size)
        save_model(model, folder)
        save_file(refs, os.path.join(folder, "reference.safetensors"),
                  metadata={"transformers": transformers.__version__, "torch": torch.__version__})
        size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
        summary[name] = {"bytes": size, "files": sorted(os.listdir(folder))}
        print(f"{name}: {size / 1024:.0f} KB, transformers {transformers.__version__}", flush=True)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
