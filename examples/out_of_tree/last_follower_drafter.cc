// `last_follower`: after each token, proposes the token that followed it the
// last time it appeared in the context (a one-token n-gram cache). Token-only:
// verify with point_mass or greedy.
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "framework/drafter.h"

namespace speclab_example {
namespace {

using speclab::Drafter;
using speclab::DrafterKind;

class LastFollowerDrafter final : public Drafter {
 public:
  DrafterKind kind() const override { return DrafterKind::kTokensOnly; }

  absl::Status Reset(absl::Span<const int32_t>, const speclab::TargetFeatures&) override {
    next_.clear();
    return absl::OkStatus();
  }

  absl::Status BeginStep(absl::Span<const int32_t> context) override {
    for (size_t i = 1; i < context.size(); ++i) next_[context[i - 1]] = context[i];
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<int32_t>> Continuation(const speclab::TokenTree& tree, int node,
                                                    int max_tokens) override {
    std::vector<int32_t> out;
    for (int32_t token = tree.token(node); static_cast<int>(out.size()) < max_tokens;) {
      auto it = next_.find(token);
      if (it == next_.end()) break;
      out.push_back(token = it->second);
    }
    return out;
  }

  absl::Status EndStep(const speclab::TokenTree&, absl::Span<const int>, const speclab::TargetFeatures&) override {
    return absl::OkStatus();
  }

 private:
  absl::flat_hash_map<int32_t, int32_t> next_;
};

const bool kRegistered = speclab::DrafterRegistry::Add(
    {.name = "last_follower",
     .description = "the token that last followed each token in the context (out-of-tree example); tokens only",
     .lossless = "-",
     .create = [](speclab::Options&,
                  const speclab::DrafterEnvironment&) -> absl::StatusOr<std::unique_ptr<Drafter>> {
       return std::unique_ptr<Drafter>(std::make_unique<LastFollowerDrafter>());
     }});

}  // namespace
}  // namespace speclab_example
