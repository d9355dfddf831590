// The `eagle3` drafter: EAGLE's head reading a fusion of a low, a middle and
// a high layer of the target (EAGLE-3; docs/algorithms.md §4.14). The head
// and its drafting, host and device forms, are EAGLE's (drafters/eagle/);
// what differs is the features it reads and how `speclab train` fits it
// (the training-time test, configs/train/eagle3_head.yaml).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "drafters/eagle/eagle_drafter.h"
#include "drafters/eagle/eagle_head.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/drafter.h"

namespace speclab {
namespace {

absl::StatusOr<std::unique_ptr<Drafter>> CreateEagle3(Options& options, const DrafterEnvironment& env) {
  const auto* target = dynamic_cast<const LlamaModel*>(env.target);
  if (target == nullptr) return options.Error("type", "eagle3 reads a LlamaModel target's hidden states");
  ASSIGN_OR_RETURN(std::string path, options.GetString("path", ""));
  if (!path.empty()) {
    for (const char* key : {"layers", "feature_layers"})
      if (options.Has(key)) return options.Error(key, "shapes an untrained head; a checkpoint (path) has its own");
    absl::StatusOr<EagleHead> head = LoadEagleHead(options.ResolvePath(path), *target, env.kv_capacity);
    if (!head.ok()) return options.Error("path", std::string(head.status().message()));
    if (!head->fuses()) return options.Error("path", "holds an EAGLE-1 head (it reads one layer): type eagle");
    return std::unique_ptr<Drafter>(std::make_unique<EagleDrafter>(*target, *std::move(head)));
  }
  ASSIGN_OR_RETURN(int64_t layers, options.GetIntIn("layers", 1, 1, 64));
  std::vector<int> feature_layers;
  if (options.Has("feature_layers")) {
    ASSIGN_OR_RETURN(std::vector<int64_t> listed, options.GetIntList("feature_layers"));
    if (listed.size() < 2) return options.Error("feature_layers", "expected two or more layers to fuse");
    feature_layers.assign(listed.begin(), listed.end());
  } else {
    absl::StatusOr<std::vector<int>> chosen = Eagle3FeatureLayers(target->config().num_hidden_layers);
    if (!chosen.ok()) return options.Error("feature_layers", std::string(chosen.status().message()));
    feature_layers = *std::move(chosen);
  }
  absl::StatusOr<EagleHead> head = NewEagleHead(*target, layers, env.kv_capacity, env.seed, feature_layers);
  if (!head.ok()) return options.Error("feature_layers", std::string(head.status().message()));
  return std::unique_ptr<Drafter>(std::make_unique<EagleDrafter>(*target, *std::move(head)));
}

const bool kRegistered = DrafterRegistry::Add({
    .name = "eagle3",
    .description = "EAGLE-3's draft head on a fusion of low, middle and high target layers, trained on its own "
                   "predictions (Li et al. 2025); gives q rows",
    .lossless = "-",
    .create = CreateEagle3,
});

}  // namespace
}  // namespace speclab
