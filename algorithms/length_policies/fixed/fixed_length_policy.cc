// `fixed`: the same draft length gamma every step (docs/algorithms.md §3.1).
#include "framework/core/length_policy.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace {

class FixedLengthPolicy final : public DraftLengthPolicy {
 public:
  explicit FixedLengthPolicy(int gamma) : gamma_(gamma) {}
  int MaxDraftLength() override { return gamma_; }
  bool length_is_fixed() const override { return true; }

 private:
  int gamma_;
};

const bool kRegistered = LengthPolicyRegistry::Add({
    .name = "fixed",
    .description = "constant draft length gamma (Leviathan et al.)",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> {
      ASSIGN_OR_RETURN(int64_t gamma, options.GetIntIn("gamma", 4, 1, 64));
      return std::unique_ptr<DraftLengthPolicy>(std::make_unique<FixedLengthPolicy>(static_cast<int>(gamma)));
    },
});

}  // namespace
}  // namespace speclab
