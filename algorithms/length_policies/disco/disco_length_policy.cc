// `disco`: DISCO's classifier stop (Mamou et al. 2024; docs/algorithms.md
// §3.11). After each drafted token a trained classifier (common/acceptance_head.h,
// `summary_index` features: the drafter's ten largest probabilities there, its
// entropy and the draft's index; fitted by `speclab train` with an
// `acceptance_head:` section on drafted continuations)
// scores whether the token will be accepted; drafting stops once the score is
// below `threshold`, that token kept; never more than `max` tokens.
//
//   length_policy: {type: disco, head: models/heads/disco.safetensors, threshold: 0.5, max: 8}
//
// The decision reads only the drafter's side of the step: lossless. With the
// chain builder and a distribution drafter. Step by step it reads each
// drafted token's row on the host; pipelined, its device form
// (disco_device.cc) stops a pipelined chain on the device.
#include <memory>
#include <utility>

#include "algorithms/length_policies/disco/disco_options.h"
#include "framework/core/length_policy.h"
#include "framework/core/status_macros.h"

namespace speclab::disco {
namespace {

class DiscoLengthPolicy final : public DraftLengthPolicy {
 public:
  explicit DiscoLengthPolicy(DiscoOptions options)
      : threshold_(options.threshold), max_(options.max), head_(std::move(options.head)) {}

  int MaxDraftLength() override { return max_; }
  bool wants_progress() const override { return true; }
  DraftRow draft_row() const override { return acceptance_head::RowOf(head_.head()); }
  int64_t draft_row_width() const override { return acceptance_head::RowWidth(head_.head()); }

  bool ContinueDrafting(const DraftProgress& progress) override { return !(head_.Predict(progress) < threshold_); }

 private:
  const double threshold_;
  const int max_;
  const acceptance_head::HeadOnDevice head_;
};

const bool kRegistered = LengthPolicyRegistry::Add({
    .name = "disco",
    .description = "DISCO: stop once a trained classifier on the drafter's top probabilities, entropy and the "
                   "draft's index scores the draft below a threshold",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> {
      ASSIGN_OR_RETURN(DiscoOptions o, ReadDiscoOptions(options));
      return std::unique_ptr<DraftLengthPolicy>(std::make_unique<DiscoLengthPolicy>(std::move(o)));
    },
});

}  // namespace
}  // namespace speclab::disco
