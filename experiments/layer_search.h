// `speclab layer-search`: which of the target's layers a self-speculative
// drafter (drafters/layer_skip, `layers: [...]`) should keep, searched
// on held-out text (SWIFT's and Draft & Verify's layer search; docs/algorithms.md §4.5).
//
//   speclab layer-search --target models/speclab-target --text data/corpus/valid.txt --out results/layers.yaml
//     [--windows 8] [--seq-len 128] [--temperature 1] [--max-gamma 8] [--device auto] [--seed 1]
//
// Each candidate layer set is scored on windows of the text, teacher-forced:
// its acceptance α, the mean over positions of the chance that rejection
// sampling accepts a token it drafts there, Σ_v min(p_T(v), q_T(v)) (at T = 0
// the share of positions where its argmax is the target's); its cost c, its
// weights' multiply-adds a token over the target's (LayerSetCost: the LM head
// included, which every drafter of shared layers pays); and the chain speedup that
// (α, c) predict at the best draft length (framework/core/speculation_theory.h).
// The search is greedy backward elimination: from every layer, drop at each
// round the layer whose removal keeps α highest, down to one layer; the set of
// the best predicted speedup along that path is the answer. The YAML written
// holds it as a drafter spec (or says that no set beats autoregressive
// decoding), then every round's set and scores.
#ifndef SPECLAB_EXPERIMENTS_LAYER_SEARCH_H_
#define SPECLAB_EXPERIMENTS_LAYER_SEARCH_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/model/llama_model.h"

namespace speclab {

struct LayerSetScore {
  std::vector<int> layers;  // kept, in order
  double acceptance = 0;    // α
  double cost = 0;          // c: LayerSetCost
  int gamma = 0;            // the best draft length (0: none beats autoregressive decoding)
  double speedup = 1;       // predicted at that length (1 at gamma 0)
};

struct LayerSearchOptions {
  double temperature = 1.0;
  int max_gamma = 8;
};

struct LayerSearchResult {
  std::vector<LayerSetScore> path;  // every layer, then one fewer each round
  LayerSetScore best;               // the largest predicted speedup on the path
};

// A drafter's cost as a share of the target's forward: the weights' multiply-
// adds a token, kept_layers decoder layers (attention projections and MLP)
// plus the LM head, over the target's layers plus the LM head.
double LayerSetCost(const ModelConfig& config, int64_t kept_layers);

// windows [b, s] int64 token ids on the target's device.
absl::StatusOr<LayerSearchResult> SearchLayers(const LlamaModel& target, const at::Tensor& windows,
                                               const LayerSearchOptions& options);

struct LayerSearchFlags {
  std::string target, text, out, device = "auto";
  int64_t windows = 8, seq_len = 128, max_gamma = 8;
  double temperature = 1.0;
  uint64_t seed = 1;
};

absl::StatusOr<LayerSearchFlags> ParseLayerSearchFlags(const std::vector<std::string>& args);

absl::Status RunLayerSearch(const LayerSearchFlags& flags);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_LAYER_SEARCH_H_
