// `speclab train HEAD.yaml` where the YAML holds `acceptance_head:`: fits the
// acceptance head the `predicted_acceptance` (SpecDec++) and `disco` length
// policies stop on (algorithms/length_policies/common/acceptance_head.h).
//
// Config (unknown keys refused, errors name FILE and key):
//   acceptance_head: features (hidden | log_probs | summary | summary_index),
//                    hidden (32), target, drafter (HF folders of one
//                    vocabulary), temperature (1): the labels' sampling
//                    temperature; rollout (0; summary_index needs >= 1);
//                    reject_weight (1): the loss's weight on rejections.
//   data:            tokenizer, train, valid (corpus text files), seq_len (128).
//   training:        device (auto | cpu | cuda), batch_size (8 windows),
//                    steps (300), lr (1e-3), seed (1), log_every (20),
//                    eval_windows (32).
//   output:          the head's .safetensors file; OUTPUT.log.json beside it
//                    holds the training and held-out losses.
//
// Data: windows of the corpus through both models (frozen, fp32 on the
// training device). With rollout 0 they are teacher-forced, and every
// position t is a draft. With rollout K, each window's first seq_len - K
// tokens are a context from which the drafter drafts K tokens itself (drawn
// from its q_T at T > 0, its argmax at T = 0), as it does in a step; those K
// drafts, at indices 1..K, are the examples, each in the context of the
// drafts before it: the context a length policy sees, and the one in which
// the index means something. For each example the drafter's own final hidden
// state (hidden) or log-probability row (the others) gives the features, and the label is the chance that
// the target accepts a token drafted there, given the drafts before it were
// accepted: at temperature T > 0, sum_v min(p_T(v), q_T(v)) (rejection
// sampling's acceptance of a draft from q_T); at T = 0, 1 if the drafter's
// argmax is the target's. Loss: binary cross-entropy with those soft
// labels, the reject class weighted by reject_weight (SpecDec++'s recipe sets
// 6; acceptance_head::AcceptanceLoss); Adam. The held-out set (valid) reports
// that loss, the mean label and the mean prediction, and the Brier score.
//
// SpecDec++ trains on the target's own responses and DISCO on oracle draft
// lengths: the corpus stands in for the responses here, and rollouts label
// every draft where DISCO's oracle stops at the first rejection (see
// docs/algorithms.md §3.4, §3.11).
#ifndef SPECLAB_EXPERIMENTS_TRAIN_ACCEPTANCE_HEAD_H_
#define SPECLAB_EXPERIMENTS_TRAIN_ACCEPTANCE_HEAD_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace speclab {

// True if the YAML file at `config_path` holds an `acceptance_head:` mapping.
bool IsAcceptanceHeadConfig(const std::string& config_path);

absl::Status RunAcceptanceHeadTraining(const std::string& config_path, const std::vector<std::string>& overrides);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_TRAIN_ACCEPTANCE_HEAD_H_
