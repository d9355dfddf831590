// `merge`: several token-only drafters in one method, their candidates
// merged into one tree (SpecInfer's and MCSD's merged trees, for drafters
// that give tokens; docs/algorithms.md §4.8).
//
//   drafter:
//     type: merge
//     drafters: [{type: prompt_lookup}, {type: suffix_tree}, {type: retrieval, datastore: results/train.splds}]
//     order: priority
//   tree_builder: {type: trie, budget: 32, max_candidates: 24}
//
// Options: drafters (a list of drafter specs, each token-only), order
// (`priority`: every candidate of the first drafter, then the second's, ...,
// as Hierarchy Drafting queries its databases from the most local down;
// `interleave`: the drafters' first candidates, then their second, ...).
// Duplicate candidates count once. With the `chain` builder, the first
// drafter in order that proposes anything drafts the step. Every step goes
// to every drafter (Reset, BeginStep, EndStep), so each keeps its own state.
// The merged tree is deterministic: verify with greedy or point_mass.
#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/drafter.h"

namespace speclab {
namespace {

class MergeDrafter final : public Drafter {
 public:
  MergeDrafter(std::vector<std::unique_ptr<Drafter>> drafters, bool interleave)
      : drafters_(std::move(drafters)), interleave_(interleave) {}

  DrafterKind kind() const override { return DrafterKind::kTokensOnly; }

  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) override {
    for (auto& d : drafters_) RETURN_IF_ERROR(d->Reset(prompt, target));
    return absl::OkStatus();
  }
  absl::Status BeginStep(absl::Span<const int32_t> context) override {
    for (auto& d : drafters_) RETURN_IF_ERROR(d->BeginStep(context));
    return absl::OkStatus();
  }
  absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path,
                       const TargetFeatures& target) override {
    for (auto& d : drafters_) RETURN_IF_ERROR(d->EndStep(tree, accepted_path, target));
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree& tree, int node, int max_tokens) override {
    for (auto& d : drafters_) {
      ASSIGN_OR_RETURN(std::vector<int32_t> tokens, d->Continuation(tree, node, max_tokens));
      if (!tokens.empty()) return tokens;
    }
    return std::vector<int32_t>{};
  }

  absl::StatusOr<std::vector<std::vector<int32_t>>> Continuations(const TokenTree& tree, int node, int max_tokens,
                                                                  int max_candidates) override {
    std::vector<std::vector<std::vector<int32_t>>> each;
    for (auto& d : drafters_) {
      ASSIGN_OR_RETURN(auto candidates, d->Continuations(tree, node, max_tokens, max_candidates));
      each.push_back(std::move(candidates));
    }
    std::vector<std::vector<int32_t>> merged;
    auto add = [&](const std::vector<int32_t>& candidate) {
      if (static_cast<int>(merged.size()) < max_candidates && !candidate.empty() &&
          std::find(merged.begin(), merged.end(), candidate) == merged.end())
        merged.push_back(candidate);
    };
    if (interleave_) {
      for (size_t rank = 0;; ++rank) {
        bool any = false;
        for (const auto& candidates : each) {
          if (rank >= candidates.size()) continue;
          any = true;
          add(candidates[rank]);
        }
        if (!any) break;
      }
    } else {
      for (const auto& candidates : each)
        for (const auto& candidate : candidates) add(candidate);
    }
    return merged;
  }

  // Each drafter's riders (lookahead's window) ride in the one forward.
  absl::StatusOr<RiderTokens> Riders() override { return riders_.Gather(Parts()); }
  absl::Status RidersScored(const at::Tensor& logits) override { return riders_.Scatter(Parts(), logits); }

  std::vector<LanguageModel*> models() override {
    std::vector<LanguageModel*> out;
    for (auto& d : drafters_)
      for (LanguageModel* m : d->models()) out.push_back(m);
    return out;
  }

 private:
  std::vector<Drafter*> Parts() const {
    std::vector<Drafter*> parts;
    for (const auto& d : drafters_) parts.push_back(d.get());
    return parts;
  }

  std::vector<std::unique_ptr<Drafter>> drafters_;
  bool interleave_;
  RiderParts riders_;
};

absl::StatusOr<std::unique_ptr<Drafter>> Create(Options& options, const DrafterEnvironment& env) {
  ASSIGN_OR_RETURN(std::vector<Options> specs, options.GetMapList("drafters"));
  if (specs.empty()) return options.Error("drafters", "expected at least one drafter");
  ASSIGN_OR_RETURN(std::string order, options.GetString("order", "priority"));
  if (order != "priority" && order != "interleave")
    return options.Error("order", absl::StrCat("expected priority or interleave, got '", order, "'"));
  std::vector<std::unique_ptr<Drafter>> drafters;
  for (size_t i = 0; i < specs.size(); ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<Drafter> drafter, DrafterRegistry::Create(specs[i], "drafter", env));
    if (drafter->kind() != DrafterKind::kTokensOnly)
      return specs[i].Error("type", "merge takes token-only drafters (their candidate continuations form the tree); "
                                    "this one gives next-token logits");
    drafters.push_back(std::move(drafter));
  }
  return std::unique_ptr<Drafter>(std::make_unique<MergeDrafter>(std::move(drafters), order == "interleave"));
}

const bool kRegistered = DrafterRegistry::Add({
    .name = "merge",
    .description = "several token-only drafters in one method: their candidates merged into one tree (trie "
                   "builder), in priority or interleaved order; gives tokens only",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab
