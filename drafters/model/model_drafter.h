// ModelDrafter: an independent small LM that shares the target's vocabulary
// (shared/ALGORITHMS.md §4.1). It keeps its own KV cache in step with the
// committed context and feeds tree nodes as tentative slots, so a step costs
// one drafter forward per tree level and no recomputation after acceptance.
#ifndef SPECLAB_DRAFTERS_MODEL_MODEL_DRAFTER_H_
#define SPECLAB_DRAFTERS_MODEL_MODEL_DRAFTER_H_

#include <memory>
#include <vector>

#include "framework/drafter.h"
#include "framework/model/language_model.h"

namespace speclab {

class ModelDrafter final : public Drafter {
 public:
  explicit ModelDrafter(std::unique_ptr<LanguageModel> model);

  DrafterKind kind() const override { return DrafterKind::kDistributions; }
  absl::Status Reset(absl::Span<const int32_t> prompt) override;
  absl::Status BeginStep(absl::Span<const int32_t> context) override;
  absl::StatusOr<at::Tensor> NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                             const at::Tensor& node_tokens) override;
  absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path) override;

  LanguageModel& model() { return *model_; }

 private:
  std::unique_ptr<LanguageModel> model_;
  std::vector<int32_t> cached_;        // tokens committed in the model's cache
  std::vector<int32_t> context_;       // this step's committed context (root last)
  std::vector<int32_t> pending_;       // context tokens not yet in the cache (root excluded)
  int64_t pending_slots_ = 0;          // pending tokens already fed as tentative slots
  std::vector<int64_t> node_slot_;     // tentative slot of each tree node, -1 if not fed
  std::vector<at::Tensor> node_logits_;  // logits row of each fed node
};

}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_MODEL_MODEL_DRAFTER_H_
