#!/usr/bin/env python3
r"""Times HuggingFace transformers on speclab's weights and prompt token ids.

Two modes, on the same prompts and with the same budget of new tokens:
  autoregressive  target.generate(...)
  assisted        target.generate(..., assistant_model=drafter), transformers'
                  speculative decoding, with a fixed draft length K (like gamma)

The prompts file is JSONL, one {"task": ..., "id": ..., "ids": [int, ...]} a
line, ids already starting with BOS. No tokenizer is loaded. Example:

  python3 scripts/hf_bench.py --target models/speclab-target \
      --drafter models/speclab-drafter --prompts out/prompts_ids.jsonl \
      --temperatures 0,1 --out out/hf_bench.json

Prints a Markdown table; --out gets the same rows as JSON with a "meta" dict.
"""
import argparse
import json
import sys
import time
from collections import OrderedDict


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True, help="HF Llama folder of the target model")
    p.add_argument("--drafter", required=True, help="HF Llama folder of the draft model")
    p.add_argument("--prompts", required=True, help="JSONL with task, id, ids")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--temperatures", default="0,1", help="comma list; 0 is greedy")
    p.add_argument("--eos", type=int, default=None, help="EOS id (default: target config's; -1: never stop)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16", help="torch dtype name of the weights on the device")
    p.add_argument("--warmup", type=int, default=2, help="prompts generated untimed first, per mode and temperature")
    p.add_argument("--assistant-tokens", type=int, default=5, help="fixed draft length K of assisted generation")
    p.add_argument("--out", default=None, help="JSON results file")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        args.temperatures = [float(t) for t in args.temperatures.split(",") if t.strip()]
    except ValueError:
        p.error(f"--temperatures: not a comma list of numbers: {args.temperatures!r}")
    if not args.temperatures or any(t < 0 for t in args.temperatures):
        p.error("--temperatures: need at least one value, none negative")
    return args


def load_prompts(path):
    """Reads the JSONL prompts; any malformed line stops the run naming file:line."""
    prompts = []
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        sys.exit(f"error: cannot open prompts file: {e}")
    with f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"error: {where}: not valid JSON ({e.msg}, column {e.colno})")
            if not isinstance(obj, dict):
                sys.exit(f"error: {where}: expected a JSON object, got {type(obj).__name__}")
            ids = obj.get("ids")
            if not isinstance(ids, list) or not ids or not all(type(i) is int and i >= 0 for i in ids):
                sys.exit(f"error: {where}: \"ids\" must be a non-empty list of non-negative ints")
            prompts.append({"task": str(obj.get("task", "unknown")), "id": str(obj.get("id", f"line{n}")), "ids": ids})
    if not prompts:
        sys.exit(f"error: {path}: no prompts")
    return prompts


def load_model(cls, path, dtype, device):
    # transformers >= 4.56 names the argument dtype; older ones only know torch_dtype.
    try:
        model = cls.from_pretrained(path, dtype=dtype)
    except TypeError:
        model = cls.from_pretrained(path, torch_dtype=dtype)
    return model.to(device).eval()


def configure_drafter(drafter, k):
    """Fixes the draft length at k: no heuristic schedule, no confidence cut-off."""
    gc = drafter.generation_config
    for name, value in (("num_assistant_tokens", k), ("num_assistant_tokens_schedule", "constant"),
                        ("assistant_confidence_threshold", 0.0)):
        try:
            setattr(gc, name, value)
        except Exception as e:  # an older/newer GenerationConfig may reject a name
            print(f"warning: drafter generation_config.{name}: {e}", file=sys.stderr, flush=True)


def main():
    args = parse_args()
    prompts = load_prompts(args.prompts)
    # Imported late so that argument and prompt-file errors show without torch installed.
    import torch
    import transformers
    from transformers import LlamaForCausalLM

    dtype = getattr(torch, args.dtype, None)
    if not isinstance(dtype, torch.dtype):
        sys.exit(f"error: --dtype {args.dtype!r} is not a torch dtype")
    device = torch.device(args.device)
    on_cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if on_cuda else (lambda: None)
    card = torch.cuda.get_device_name(device) if on_cuda else args.device

    target = load_model(LlamaForCausalLM, args.target, dtype, device)
    drafter = load_model(LlamaForCausalLM, args.drafter, dtype, device)
    configure_drafter(drafter, args.assistant_tokens)

    eos = args.eos
    if eos is None:
        eos = target.config.eos_token_id
        eos = eos[0] if isinstance(eos, (list, tuple)) else eos
        eos = -1 if eos is None else eos
    eos_id = None if eos < 0 else eos
    if eos_id is None:
        # A None passed to generate() may be read as "unset" and fall back to the model's default EOS,
        # so clear it at the source too (the assistant copies the target's EOS).
        for m in (target, drafter):
            m.generation_config.eos_token_id = None
    pad_id = eos_id if eos_id is not None else 0

    limit = getattr(target.config, "max_position_embeddings", None)
    longest = max(len(p["ids"]) for p in prompts)
    if limit and longest + args.max_new_tokens > limit:
        print(f"warning: longest prompt ({longest}) + {args.max_new_tokens} new tokens exceeds "
              f"max_position_embeddings ({limit})", file=sys.stderr, flush=True)

    header = (f"transformers {transformers.__version__}, torch {torch.__version__}, {card}, "
              f"{args.dtype}, attn {getattr(target.config, '_attn_implementation', '?')}, "
              f"max_new_tokens {args.max_new_tokens}, eos {eos}, K {args.assistant_tokens}")
    print(f"# {header}", flush=True)
    print(f"# {len(prompts)} prompts from {args.prompts}", flush=True)

    def generate(ids, temperature, assisted, seed):
        kwargs = dict(attention_mask=torch.ones_like(ids), max_new_tokens=args.max_new_tokens,
                      eos_token_id=eos_id, pad_token_id=pad_id)
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
            torch.manual_seed(seed)  # seeds the CUDA generators as well
        else:
            kwargs.update(do_sample=False)
        if assisted:
            kwargs["assistant_model"] = drafter
        sync()
        start = time.perf_counter()
        out = target.generate(ids, **kwargs)
        sync()
        return out.shape[-1] - ids.shape[-1], time.perf_counter() - start

    inputs = [torch.tensor([p["ids"]], dtype=torch.long, device=device) for p in prompts]
    rows, per_prompt = [], []
    with torch.inference_mode():
        for mode in ("autoregressive", "assisted"):
            for temp in args.temperatures:
                assisted = mode == "assisted"
                results = []  # (prompt index, new tokens, seconds)
                try:
                    for i in range(min(args.warmup, len(inputs))):
                        generate(inputs[i], temp, assisted, args.seed + i)
                    for i, ids in enumerate(inputs):
                        tokens, secs = generate(ids, temp, assisted, args.seed + i)
                        results.append((i, tokens, secs))
                        if eos_id is None and tokens != args.max_new_tokens:
                            print(f"warning: {mode} t={temp} {prompts[i]['id']}: {tokens} new tokens "
                                  f"with EOS disabled", file=sys.stderr, flush=True)
                except Exception as e:  # one failing configuration must not lose the others
                    msg = f"{type(e).__name__}: {e}"
                    print(f"error: {mode} t={temp}: {msg}", file=sys.stderr, flush=True)
                    rows.append({"mode": mode, "task": "all", "temperature": temp, "error": msg})
                    continue
                for i, tokens, secs in results:
                    per_prompt.append({"mode": mode, "temperature": temp, "task": prompts[i]["task"],
                                       "id": prompts[i]["id"], "prompt_tokens": len(prompts[i]["ids"]),
                                       "new_tokens": tokens, "seconds": secs})
                groups = OrderedDict()
                for r in results:
                    groups.setdefault(prompts[r[0]]["task"], []).append(r)
                groups["all"] = results
                for task, rs in groups.items():
                    tokens = sum(r[1] for r in rs)
                    secs = sum(r[2] for r in rs)
                    rows.append({"mode": mode, "task": task, "temperature": temp, "prompts": len(rs),
                                 "new_tokens": tokens, "seconds": secs,
                                 "tokens_per_s": tokens / secs if secs > 0 else 0.0,
                                 "mean_prompt_tokens_per_s": sum(r[1] / r[2] for r in rs if r[2] > 0) / len(rs)})
                done = rows[-1]
                print(f"# {mode} t={temp}: {done['new_tokens']} tokens in {done['seconds']:.3f} s, "
                      f"{done['tokens_per_s']:.1f} tokens/s", flush=True)

    print(f"\n{header}\n", flush=True)
    print("| mode | task | temperature | prompts | new tokens | seconds | tokens/s | mean tokens/s per prompt |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if "error" in r:
            print(f"| {r['mode']} | {r['task']} | {r['temperature']:g} | error: {r['error'][:80]} | | | | |")
        else:
            print(f"| {r['mode']} | {r['task']} | {r['temperature']:g} | {r['prompts']} | {r['new_tokens']} | "
                  f"{r['seconds']:.3f} | {r['tokens_per_s']:.1f} | {r['mean_prompt_tokens_per_s']:.1f} |")
    sys.stdout.flush()

    if args.out:
        meta = {"torch": torch.__version__, "transformers": transformers.__version__, "device": card,
                "dtype": args.dtype, "attn_implementation": getattr(target.config, "_attn_implementation", None),
                "eos": eos, "args": vars(args)}
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "rows": rows, "per_prompt": per_prompt}, f, indent=1)
        print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
