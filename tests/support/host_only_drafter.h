// A drafter that forwards Drafter's methods to another and hides its device
// form (it is no DeviceDrafter): tests compare what a builder draws with and
// without it.
#ifndef SPECLAB_TESTS_SUPPORT_HOST_ONLY_DRAFTER_H_
#define SPECLAB_TESTS_SUPPORT_HOST_ONLY_DRAFTER_H_

#include <memory>
#include <utility>
#include <vector>

#include "framework/drafter.h"

namespace speclab::testing {

class HostOnlyDrafter final : public Drafter {
 public:
  explicit HostOnlyDrafter(std::unique_ptr<Drafter> inner) : inner_(std::move(inner)) {}
  DrafterKind kind() const override { return inner_->kind(); }
  TargetFeatureRequest target_features() const override { return inner_->target_features(); }
  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) override {
    return inner_->Reset(prompt, target);
  }
  absl::Status BeginStep(absl::Span<const int32_t> context) override { return inner_->BeginStep(context); }
  absl::StatusOr<at::Tensor> NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                             const at::Tensor& node_tokens) override {
    return inner_->NextTokenLogits(tree, nodes, node_tokens);
  }
  absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree& tree, int node, int max_tokens) override {
    return inner_->Continuation(tree, node, max_tokens);
  }
  absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path,
                       const TargetFeatures& target) override {
    return inner_->EndStep(tree, accepted_path, target);
  }
  std::vector<LanguageModel*> models() override { return inner_->models(); }

 private:
  std::unique_ptr<Drafter> inner_;
};

}  // namespace speclab::testing

#endif  // SPECLAB_TESTS_SUPPORT_HOST_ONLY_DRAFTER_H_
