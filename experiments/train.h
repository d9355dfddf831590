// `speclab train TRAIN.yaml`: trains a Llama-architecture language model (or,
// for a YAML with `acceptance_head:`, a length policy's acceptance head:
// experiments/train_acceptance_head.h; with `eagle_head:`, `medusa_head:` or `hydra_head:`,
// a draft head: experiments/train_draft_head.h).
//
// Config (every mapping is checked for unknown keys, errors name FILE:LINE):
//
//   model:        ModelConfig fields of a new model: hidden_size,
//                 intermediate_size, num_hidden_layers, num_attention_heads,
//                 num_key_value_heads, head_dim (default hidden/heads),
//                 vocab_size (default: the tokenizer's), max_position_embeddings,
//                 rope_theta, tie_word_embeddings, rms_norm_eps.
//   data:         tokenizer, train, valid, test (optional) text files, seq_len.
//                 Documents end with a line "<|endoftext|>"; each one becomes
//                 BOS, its ids (newlines included), EOS.
//                 The ids are cached in OUTPUT/cache/SPLIT.bin (int16, or int32
//                 for vocabularies over 32767), reused while the cache is newer
//                 than the text and the tokenizer.
//   training:     device (auto|cpu|cuda), dtype (auto|float32|bfloat16),
//                 batch_size, steps, lr, min_lr, warmup_steps, weight_decay,
//                 beta1, beta2, eps, grad_clip (0: off), eval_every (0: only at
//                 the end), eval_batches, checkpoint_every (0: only at the end),
//                 log_every, seed, run_steps / time_limit_s (stop early with a
//                 checkpoint; a later run with `resume` continues),
//                 flat_parameters (default true; false keeps the model's own
//                 tensors and updates them one by one: slower, same result), and
//                 distill: {teacher: HF folder, alpha}: loss =
//                 alpha * KL(teacher || student) + (1 - alpha) * CE, temperature 1.
//   output:       HF folder written at the end: config.json, model.safetensors
//                 (save_dtype: bfloat16 | float32), tokenizer.model,
//                 training_log.json / .csv, train_config.yaml (resolved config).
//   resume:       continue from OUTPUT/checkpoint/ when present (weights, AdamW
//                 moments, step; the batch sampler is a pure function of
//                 (seed, step), so the step is the whole random state).
//
// Batches: the token streams live on the device; each step draws batch_size
// window offsets on the host (mt19937_64 seeded from (seed, step)), copies them
// through pinned memory without blocking, and gathers the windows on the
// device. The loop syncs with the device only every log_every steps.
//
// Optimisation: AdamW over flat fp32 buffers (decoupled weight decay on the
// matrices of attention, MLP and an untied lm_head; none on norms, biases and
// embeddings), betas (0.9, 0.95) by default, bias correction, gradient clipping
// by global norm, linear warm-up then cosine decay to min_lr. The models'
// parameters (and gradients) are re-pointed at slices of those buffers, so a
// step is a dozen kernels. With dtype bfloat16 the optimizer keeps fp32 master
// weights and moments; forward/backward run on a bf16 working copy (bf16
// gradients, upcast for the update) refreshed from the master after every step.
// Losses (log-softmax, CE, KL) are computed in fp32. Checkpoints and the saved
// model come from the fp32 master.
#ifndef SPECLAB_EXPERIMENTS_TRAIN_H_
#define SPECLAB_EXPERIMENTS_TRAIN_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace speclab {

// Runs the training described by the YAML file at `config_path`, with
// command-line overrides "a.b.c=VALUE" applied on top.
absl::Status RunTraining(const std::string& config_path, const std::vector<std::string>& overrides);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_TRAIN_H_
