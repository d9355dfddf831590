// `layer_skip`: self-speculative drafting (docs/algorithms.md §4.5): the target's own
// layers drafting for it. `exit_layer: E` runs the first E decoder layers
// and then the target's final norm and LM head (LayerSkip's early exit);
// `layers: [i, j, ...]` runs the listed ones in order (Draft & Verify's
// skipped layers). The drafter is a ModelDrafter over LlamaModel::ShareLayers:
// the target's tensors read in place, a KV cache of its own, and the model
// drafter's device forms (chains and levels as CUDA graphs).
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "drafters/model/model_drafter.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/drafter.h"
#include "framework/model/llama_model.h"

namespace speclab {
namespace {

absl::StatusOr<std::vector<int>> ChosenLayers(Options& options, int64_t target_layers) {
  const bool exit = options.Has("exit_layer"), listed = options.Has("layers");
  if (exit == listed) return options.Error("type", "give exactly one of exit_layer: E or layers: [i, j, ...]");
  std::vector<int> layers;
  if (exit) {
    ASSIGN_OR_RETURN(int64_t e, options.GetInt("exit_layer"));
    if (e < 1 || e > target_layers)
      return options.Error("exit_layer", absl::StrCat("expected an integer in [1, ", target_layers,
                                                      "] (the target has ", target_layers, " layers)"));
    for (int i = 0; i < e; ++i) layers.push_back(i);
    return layers;
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> list, options.GetIntList("layers"));
  if (list.empty()) return options.Error("layers", "expected at least one layer");
  for (int64_t i : list) {
    if (i < 0 || i >= target_layers)
      return options.Error("layers", absl::StrCat("layer ", i, " is outside the target's [0, ", target_layers, ")"));
    layers.push_back(static_cast<int>(i));
  }
  return layers;
}

const bool kRegistered = DrafterRegistry::Add({
    .name = "layer_skip",
    .description = "the target's own layers (early exit or skipped layers; LayerSkip, Draft & Verify); gives q rows",
    .lossless = "-",
    .create = [](Options& options, const DrafterEnvironment& env) -> absl::StatusOr<std::unique_ptr<Drafter>> {
      const auto* target = dynamic_cast<const LlamaModel*>(env.target);
      if (target == nullptr) return options.Error("type", "layer_skip drafts with a LlamaModel target's layers");
      ASSIGN_OR_RETURN(std::vector<int> layers, ChosenLayers(options, target->config().num_hidden_layers));
      ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model, LlamaModel::ShareLayers(*target, layers, env.kv_capacity));
      return std::unique_ptr<Drafter>(std::make_unique<ModelDrafter>(std::move(model)));
    },
});

}  // namespace
}  // namespace speclab
