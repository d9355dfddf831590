// The `kangaroo` drafter: Kangaroo's shallow sub-network of the target and
// its adapter (kangaroo_adapter.h) drafting as a small model does. Its
// second early exit, drafting no further once the draft's top probability
// falls under a threshold, is the `confidence` length policy:
//
//   drafter: {type: kangaroo, path: models/heads/kangaroo.safetensors}
//   length_policy: {type: confidence, threshold: 0.6, max: 6}
#include <memory>
#include <string>

#include "drafters/kangaroo/kangaroo_adapter.h"
#include "drafters/model/model_drafter.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/drafter.h"

namespace speclab {
namespace {

absl::StatusOr<std::unique_ptr<Drafter>> Create(Options& options, const DrafterEnvironment& env) {
  const auto* target = dynamic_cast<const LlamaModel*>(env.target);
  if (target == nullptr) return options.Error("type", "kangaroo drafts with a LlamaModel target's first layers");
  ASSIGN_OR_RETURN(std::string path, options.GetString("path", ""));
  absl::StatusOr<std::unique_ptr<LlamaModel>> model;
  if (!path.empty()) {
    if (options.Has("exit_layer"))
      return options.Error("exit_layer", "places an untrained adapter; a checkpoint (path) has its own");
    model = LoadKangarooModel(options.ResolvePath(path), *target, env.kv_capacity);
    if (!model.ok()) return options.Error("path", std::string(model.status().message()));
  } else {
    ASSIGN_OR_RETURN(const int64_t exit_layer, options.GetInt("exit_layer"));
    model = NewKangarooModel(*target, exit_layer, env.kv_capacity, env.seed);
    if (!model.ok()) return options.Error("exit_layer", std::string(model.status().message()));
  }
  return std::unique_ptr<Drafter>(std::make_unique<ModelDrafter>(*std::move(model)));
}

const bool kRegistered = DrafterRegistry::Add({
    .name = "kangaroo",
    .description = "Kangaroo: the target's first layers and a trained attention adapter, read out by its LM head "
                   "(Liu et al. 2024); with the confidence policy, its double early exit; gives q rows",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab
