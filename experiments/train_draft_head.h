// `speclab train HEAD.yaml` where the YAML holds `eagle_head:`,
// `medusa_head:` or `hydra_head:`: fits a draft head that reads the frozen
// target's final-norm features, on speclab's corpus.
//
// Config (unknown keys refused, errors name FILE and key):
//   eagle_head:  target (HF folder), layers (1), feature_noise (0.2: the
//                half-width of the uniform noise added to the input features,
//                EAGLE's augmentation against its own prediction errors),
//                token_weight (0.1: the weight of the token loss).
//   medusa_head: target, heads (4), layers (1: ResBlocks a head), decay (0.8:
//                head k's loss weighs decay^k, Medusa-1's).
//   hydra_head:  target, heads (4), layers (1, at least 1), decay (0.8).
//   data:        tokenizer, train, valid (corpus text files), seq_len (128).
//   training:    device (auto | cpu | cuda), batch_size (8 windows), steps
//                (300), lr (1e-3, linear warm-up over warmup_steps (50) then
//                cosine to lr / 10), grad_clip (0.5, global norm; 0 off),
//                seed (1), log_every (20), eval_windows (32),
//                checkpoint_every (100 steps; 0: only when stopping early),
//                run_steps (0; n: stop after n steps with a checkpoint).
//   resume:      (true) continue from OUTPUT.checkpoint.safetensors when
//                present.
//   output:      the head's .safetensors file (bfloat16); OUTPUT.log.json
//                beside it holds the training and held-out numbers.
//
// Checkpoints: every checkpoint_every steps, and when the run stops early
// (run_steps, or Ctrl-C after the current step: Cancelled),
// OUTPUT.checkpoint.safetensors holds the head's parameters, Adam's moments,
// the step, the batch and noise generators' states and the log so far
// (float32, written atomically). The next run (resume: true) picks it up and
// ends with the head an uninterrupted run would have written, bit for bit on
// one machine. A finished run removes its checkpoint. Each logged step's line
// gives the run's rate and the time left.
//
// A batch: windows x of the corpus and the target's features F of every
// position (no gradient), and the target's law after each. Adam (0.9, 0.95).
//
// EAGLE (drafters/eagle/eagle_head.h; EAGLE-1's recipe): the head predicts F_p
// from (x_p, F_{p-1} + noise), p >= 1, through its causal forward. Loss:
// SmoothL1(f^, F) averaged over the hidden units, plus token_weight times the
// cross-entropy of the head's readout against the target's law at F (soft
// labels).
//
// Medusa (drafters/medusa/medusa_drafter.h; Medusa-1's recipe): head k reads
// F_t and predicts the corpus token x_{t+2+k}; loss sum_k decay^k CE. Its
// ResBlocks start as the identity (A = 0, b = 0) and read out through the
// target's LM head, which stays frozen and is not saved (speclab's variant:
// Medusa-1 also tunes a copy of the LM head per head).
//
// Hydra (drafters/hydra/hydra_drafter.h): head k reads F_t and the
// embeddings of the corpus tokens x_{t+1} .. x_{t+1+k} (teacher forcing) and
// is distilled from the target's law of x_{t+2+k} (soft cross-entropy, Hydra++'s
// objective); loss sum_k decay^k CE. Each head starts as Medusa's initial
// head (the target's LM head on F_t: P = [I 0 ... 0], everything else zero)
// and reads out through the target's frozen LM head.
//
// Held out (valid), per draft depth d (EAGLE: d = 1..4, the head fed its own
// predictions d - 1 times, every position's input then the head's, a slightly
// harder setting than drafting; Medusa: head d - 1): the share of positions
// where the head's argmax is the target's greedy token there, the mean
// sum_v min(p, q) (rejection sampling's acceptance at T = 1) and, for Medusa
// and Hydra, the top-1 accuracy against the corpus.
#ifndef SPECLAB_EXPERIMENTS_TRAIN_DRAFT_HEAD_H_
#define SPECLAB_EXPERIMENTS_TRAIN_DRAFT_HEAD_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace speclab {

// True if the YAML file at `config_path` holds `eagle_head:`, `medusa_head:` or `hydra_head:`.
bool IsDraftHeadConfig(const std::string& config_path);

// A checkpoint of another head's shapes is an error naming the file and
// tensor. Ctrl-C: Cancelled, after the checkpoint is written.
absl::Status RunDraftHeadTraining(const std::string& config_path, const std::vector<std::string>& overrides);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_TRAIN_DRAFT_HEAD_H_
