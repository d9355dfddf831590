#include "algorithms/tree_builders/testing/builder_harness.h"

#include <ATen/ATen.h>

#include "framework/core/status_macros.h"
#include "framework/model/language_model.h"

namespace speclab {
namespace tree_builders {

absl::StatusOr<std::unique_ptr<TreeBuilder>> BuilderFromYaml(const std::string& yaml, const std::string& file) {
  ASSIGN_OR_RETURN(Options spec, Options::FromString(yaml, file));
  return TreeBuilderRegistry::Create(spec, "tree builder");
}

absl::StatusOr<DraftTree> BuildOnce(TreeBuilder& builder, Drafter& drafter, const BuildSettings& settings) {
  Options policy_spec = *Options::FromString("{type: fixed, gamma: " + std::to_string(settings.gamma) + "}", "policy");
  ASSIGN_OR_RETURN(std::unique_ptr<DraftLengthPolicy> policy, LengthPolicyRegistry::Create(policy_spec, "policy"));
  at::Generator generator = MakeGenerator(c10::Device(c10::kCPU), settings.seed);
  const std::vector<int32_t> context{3, settings.root_token};
  RETURN_IF_ERROR(drafter.BeginStep(context));
  // Where the drafter's tensors live, as the engine's target shares them.
  const std::vector<LanguageModel*> models = drafter.models();
  BuildRequest request{.root_token = settings.root_token, .sampling = settings.sampling, .policy = policy.get(),
                       .generator = &generator,
                       .device = models.empty() ? c10::Device(c10::kCPU) : models.front()->device()};
  ASSIGN_OR_RETURN(DraftTree draft, builder.Build(drafter, request));
  RETURN_IF_ERROR(ReadShape(draft));  // a device-chosen shape becomes a host tree, as the engine makes it
  return draft;
}

std::vector<int32_t> HostTokens(const DraftTree& draft) {
  at::Tensor t = draft.tokens.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int32_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

std::vector<int32_t> PathTokens(const DraftTree& draft, int node) {
  const std::vector<int32_t> tokens = HostTokens(draft);
  std::vector<int32_t> path;
  for (int i : draft.tree.PathTo(node)) path.push_back(tokens[i]);
  return path;
}

}  // namespace tree_builders
}  // namespace speclab
