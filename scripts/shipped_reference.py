#!/usr/bin/env python3
"""Records HuggingFace transformers' logits for the shipped model pair.

Run on a machine with torch + transformers (the GPU machine); nothing is
downloaded. Writes tests/fixtures/shipped_reference/{target,drafter}.safetensors
with `input_ids` (int64 [1, T]) and `logits` (float32 [1, T, V]); the CPU test
tests/shipped_models_test.cc checks speclab's logits against them (fp32).
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "shipped_reference")


def main():
    os.makedirs(OUT, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    for name in ("target", "drafter"):
        folder = os.path.join(ROOT, "models", f"speclab-{name}")
        if not os.path.isdir(folder):
            print(f"skip {name}: {folder} missing", file=sys.stderr)
            continue
        model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32)
        model.eval()
        ids = torch.randint(3, model.config.vocab_size, (1, 48), generator=generator)
        with torch.no_grad():
            logits = model(input_ids=ids).logits.float()
        save_file({"input_ids": ids.contiguous(), "logits": logits.contiguous()},
                  os.path.join(OUT, f"{name}.safetensors"))
        print(f"{name}: logits {tuple(logits.shape)} saved")


if __name__ == "__main__":
    main()
