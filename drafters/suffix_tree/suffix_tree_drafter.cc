// `suffix_tree`: SuffixDecoding (docs/algorithms.md §4.7): speculation from
// suffix trees of the current prompt and generation, and of earlier
// generations, without a model. Gives tokens only: verify with greedy or
// point_mass; the `trie` builder takes its trees, `chain` its paths.
//
//   drafter: {type: suffix_tree, max_spec_factor: 1.0, min_token_prob: 0.1}
//   tree_builder: {type: trie, budget: 32, max_candidates: 32}
//
// Options: max_depth (64: the longest substring counted), max_spec_tokens
// (drafted tokens a step, 0: the builder's budget), max_spec_factor (1.0) and
// max_spec_offset (0.0) (a match of m tokens drafts at most factor * m +
// offset), min_token_prob (0.1), global_cache (true: earlier generations'
// outputs are searched too; a generation's output joins them when the next
// prompt starts). Each step speculates from the generation's own tree and
// from the global one and keeps the draft of larger score (ties: its own).
//
// Chains and tries have a device form (device_suffix_speculation.h) and run
// pipelined on CUDA; on the CPU pipelined steps ask the host tries.
#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "drafters/common/device_chain.h"
#include "drafters/suffix_tree/device_suffix_speculation.h"
#include "drafters/suffix_tree/pipelined_tries.h"
#include "drafters/suffix_tree/suffix_trie.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_drafter.h"
#include "framework/drafter.h"

namespace speclab {
namespace {

using suffix_decoding::DeviceSuffixSpeculation;
using suffix_decoding::Draft;
using suffix_decoding::DraftPaths;
using suffix_decoding::PipelinedTries;
using suffix_decoding::SpeculationLimits;
using suffix_decoding::SuffixTrie;
using suffix_decoding::TextChoice;

struct SuffixOptions {
  int max_depth = 64;
  int max_spec_tokens = 0;  // 0: the builder's budget
  SpeculationLimits limits;
  bool global_cache = true;
};

class SuffixTreeDrafter final : public Drafter, public DeviceDrafter {
 public:
  SuffixTreeDrafter(SuffixOptions o, c10::Device device)
      : o_(o), device_(device), tries_(o.max_depth, o.global_cache, device, "suffix_tree") {}

  DrafterKind kind() const override { return DrafterKind::kTokensOnly; }

  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures&) override {
    return tries_.Reset(prompt);
  }

  absl::Status BeginStep(absl::Span<const int32_t> context) override { return tries_.BeginStep(context); }

  absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree& tree, int node, int max_tokens) override {
    return Speculate(SequenceThrough(tries_.host().context(), tree, node), ChainLimits(max_tokens)).tokens;
  }

  absl::StatusOr<std::vector<std::vector<int32_t>>> Continuations(const TokenTree& tree, int node, int max_tokens,
                                                                  int max_candidates) override {
    return DraftPaths(
        Speculate(SequenceThrough(tries_.host().context(), tree, node), TreeLimits(max_tokens, max_candidates)));
  }

  absl::Status EndStep(const TokenTree&, absl::Span<const int>, const TargetFeatures&) override {
    return absl::OkStatus();
  }

  // Continuation() of the root's sequence as `length` tokens
  // (ToFixedLength): one speculation on CUDA, the host tries elsewhere.
  absl::StatusOr<at::Tensor> ContinuationAt(const DeviceRoot& root, int length) override {
    const SpeculationLimits limits = ChainLimits(length);
    if (DeviceSuffixSpeculation* device = tries_.device()) {
      ASSIGN_OR_RETURN(DeviceSuffixSpeculation::Chain chain, device->ChainOf(root, limits, TextChoice::kBetter, length));
      return chain.tokens;
    }
    ASSIGN_OR_RETURN(const std::vector<int32_t> sequence, tries_.LearnRoot(root));
    return ToDeviceChain(sequence.back(), Speculate(sequence, limits).tokens, length, device_);
  }

  // Continuations() of the root's sequence, likewise.
  absl::StatusOr<DeviceContinuations> ContinuationsAt(const DeviceRoot& root, int max_tokens,
                                                      int max_candidates) override {
    const SpeculationLimits limits = TreeLimits(max_tokens, max_candidates);
    if (DeviceSuffixSpeculation* device = tries_.device()) {
      return device->Candidates(root, limits, TextChoice::kBetter, max_candidates, max_tokens);
    }
    ASSIGN_OR_RETURN(const std::vector<int32_t> sequence, tries_.LearnRoot(root));
    return ToDeviceContinuations(DraftPaths(Speculate(sequence, limits)), max_candidates, max_tokens,
                                 sequence.back(), device_);
  }

 private:
  int CapTokens(int asked) const { return o_.max_spec_tokens > 0 ? std::min(asked, o_.max_spec_tokens) : asked; }

  SpeculationLimits ChainLimits(int max_tokens) const {
    SpeculationLimits limits = o_.limits;
    limits.tree = false;
    limits.max_tokens = limits.max_path = CapTokens(max_tokens);
    return limits;
  }

  SpeculationLimits TreeLimits(int max_tokens, int max_candidates) const {
    SpeculationLimits limits = o_.limits;
    limits.max_tokens = CapTokens(max_candidates);
    limits.max_path = max_tokens;
    return limits;
  }

  Draft Speculate(absl::Span<const int32_t> sequence, const SpeculationLimits& limits) const {
    const auto& tries = tries_.host();
    Draft own = tries.generation().Speculate(sequence, limits);
    if (!o_.global_cache) return own;
    Draft earlier = tries.earlier().Speculate(sequence, limits, &tries.earlier_cursor());
    return own.score >= earlier.score ? own : earlier;
  }

  SuffixOptions o_;
  c10::Device device_;
  PipelinedTries tries_;
};

absl::StatusOr<std::unique_ptr<Drafter>> Create(Options& options, const DrafterEnvironment& env) {
  SuffixOptions o;
  ASSIGN_OR_RETURN(int64_t depth, options.GetIntIn("max_depth", o.max_depth, 1, 1024));
  o.max_depth = static_cast<int>(depth);
  ASSIGN_OR_RETURN(int64_t spec_tokens, options.GetInt("max_spec_tokens", 0));
  if (spec_tokens < 0 || spec_tokens > 4096)
    return options.Error("max_spec_tokens", "expected an integer in [0, 4096] (0: the builder's budget)");
  o.max_spec_tokens = static_cast<int>(spec_tokens);
  ASSIGN_OR_RETURN(o.limits.max_spec_factor, options.GetDouble("max_spec_factor", o.limits.max_spec_factor));
  if (!(o.limits.max_spec_factor >= 0 && o.limits.max_spec_factor <= 1e6))
    return options.Error("max_spec_factor", "expected a number in [0, 1e6]");
  ASSIGN_OR_RETURN(o.limits.max_spec_offset, options.GetDouble("max_spec_offset", o.limits.max_spec_offset));
  if (!(o.limits.max_spec_offset >= -1e6 && o.limits.max_spec_offset <= 1e6))
    return options.Error("max_spec_offset", "expected a number in [-1e6, 1e6]");
  ASSIGN_OR_RETURN(o.limits.min_token_prob, options.GetDouble("min_token_prob", o.limits.min_token_prob));
  if (!(o.limits.min_token_prob >= 0 && o.limits.min_token_prob <= 1))
    return options.Error("min_token_prob", "expected a probability in [0, 1]");
  ASSIGN_OR_RETURN(o.global_cache, options.GetBool("global_cache", o.global_cache));
  return std::unique_ptr<Drafter>(std::make_unique<SuffixTreeDrafter>(o, env.device));
}

const bool kRegistered = DrafterRegistry::Add({
    .name = "suffix_tree",
    .description = "SuffixDecoding: frequency-scored speculation from suffix trees of the prompt, the generation "
                   "and earlier generations, sized by the match length; gives tokens only (trie builder for trees); chains "
                   "and tries pipelined on the device",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab
