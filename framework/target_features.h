// TargetFeatures: what a drafter reads of the target, beyond tokens.
//
// EAGLE-style drafters and Medusa heads predict from the target's hidden
// states. A drafter declares the ones it reads (Drafter::target_features());
// the engine keeps them in the target's own forwards (the prefill and each
// step's verification: no second forward) and hands them over in order, so
// that over a generation the drafter sees every committed token's states
// exactly once:
//   - Drafter::Reset gets the prompt's tokens but the last (the first root),
//     which the prefill fed;
//   - Drafter::EndStep gets the accepted path's nodes, root first: the
//     verification forward fed them. The extra token's states come with the
//     next step's path, as its root.
// Pipelined steps, which draft a step before the host has read the last,
// hand a drafter's device form the same rows on the device instead
// (DeviceRoot::target and path_length, framework/device/device_drafter.h).
#ifndef SPECLAB_FRAMEWORK_TARGET_FEATURES_H_
#define SPECLAB_FRAMEWORK_TARGET_FEATURES_H_

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/model/language_model.h"

namespace speclab {

struct TargetFeatureRequest {
  // Hidden states by transformers' `output_hidden_states` index (0 the
  // embeddings, i the output of decoder layer i, num_hidden_layers or -1 the
  // final norm's output, which the LM head reads). EAGLE-1 and Medusa read
  // {-1}; EAGLE-3 fuses a low, a middle and a high layer.
  std::vector<int> hidden_layers;

  bool empty() const { return hidden_layers.empty(); }
};

struct TargetFeatures {
  // One tensor per requested layer, in request order: [tokens, hidden] in the
  // target's dtype on its device. Empty when nothing was requested.
  std::vector<at::Tensor> hidden;
};

// The last-layer feature of the last token the target verified, kept the
// way drafters that read only it keep it (Medusa's and Hydra's heads): the
// last prefill row at Reset (none for a one-token prompt), the last path row
// at EndStep. Errors name `drafter`.
class LastFeature {
 public:
  explicit LastFeature(std::string drafter) : drafter_(std::move(drafter)) {}

  absl::Status FromPrefill(const TargetFeatures& target);
  absl::Status FromPath(const TargetFeatures& target, size_t path_length);
  // [1, hidden]; undefined before any feature.
  const at::Tensor& row() const { return row_; }

 private:
  std::string drafter_;
  at::Tensor row_;
};

// The requested hidden states of `target`'s last forward: rows `rows` of
// each ([k] int64 on the device), or all of them (undefined); copies, since
// the next forward overwrites the model's.
absl::StatusOr<TargetFeatures> GatherFeatures(const LanguageModel& target, const TargetFeatureRequest& request,
                                              const at::Tensor& rows);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_TARGET_FEATURES_H_
